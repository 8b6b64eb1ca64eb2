"""A new project from a team's own documents (``rag-contract init``)."""

"""Adapting the embedder to the corpus: training pairs from the corpus's own structure and the
committed questions (``pairs``, no torch), the fine-tuning itself (``training``) and the export to
the serving runtime (``export``), both needing the optional ``train`` extra (torch), which no
serving path imports."""

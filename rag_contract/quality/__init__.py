"""What the build holds: the retrieval and answer reports, the abstention curve, recorded drafts, the gate."""

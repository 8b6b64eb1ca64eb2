"""The content-addressed index: the frozen Index and its files, freshness against the corpus, cutover."""

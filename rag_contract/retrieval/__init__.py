"""Ranking an acquired Index against a question: dense, lexical (BM25) and hybrid fusion."""

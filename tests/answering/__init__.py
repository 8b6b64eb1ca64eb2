"""Answering: states and the deadline, grounding, the paid drafter and embedder, spend."""

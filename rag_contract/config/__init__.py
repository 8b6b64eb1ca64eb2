"""Committed configuration: the thresholds file, the question set, and the one YAML reader both use."""

"""The corpus and its configuration: the RFC texts, sections, thresholds and question files."""

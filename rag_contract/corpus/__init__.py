"""The corpus on disk: manifest and hash verification, RFC text to sections, sections to chunks."""

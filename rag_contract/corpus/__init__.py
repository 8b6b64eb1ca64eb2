"""The corpus on disk: manifest and hash verification, each format (RFC text, Markdown, HTML) to
nested sections, sections to chunks and sentences."""

"""HTML parsing and decoding of response bodies for parsing."""

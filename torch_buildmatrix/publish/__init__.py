"""The publish stage: the compatibility table, its Markdown and HTML renderings and the wheel index."""

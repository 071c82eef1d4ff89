"""The spec language's front end: reading, pre-checks, parsing into the AST of `ast.py`."""

from alphac.syntax.parse import parse_file, parse_text, read_source

__all__ = ["parse_file", "parse_text", "read_source"]

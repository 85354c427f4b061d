"""ropelint: find and fix rotary-position-embedding code that silently loses precision."""

__version__ = "0.1.0"

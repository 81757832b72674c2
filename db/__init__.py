"""The trial store."""

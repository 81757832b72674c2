"""tunesearch: a W4A16 kernel autotuner."""
__version__ = "0.1.0"

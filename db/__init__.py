"""The trial store (SQLAlchemy 2.x; SQLite by default, any SQLAlchemy URL)."""
from .models import GPU, SCHEMA_VERSION, Baseline, Sweep, Trial
from .store import DEFAULT_URL, Key, Store, StoreError, resolve_url

__all__ = ["DEFAULT_URL", "GPU", "SCHEMA_VERSION", "Baseline", "Key", "Store", "StoreError", "Sweep",
           "Trial", "resolve_url"]

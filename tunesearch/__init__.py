"""tunesearch: a W4A16 kernel autotuner (Triton variants, Optuna search, SQL store, dispatch)."""
__version__ = "0.1.0"


def load_dispatch(path=None, **kwargs):
    """Load a dispatch table; see tunesearch.dispatch.load_dispatch."""
    from .dispatch import load_dispatch as _load

    return _load(path, **kwargs)


__all__ = ["__version__", "load_dispatch"]

"""The backends by name: ``get_backend(name)`` builds each once, importing its module on first use
(threads calling it at once all get the same object).

The backend modules are plug-ins loaded by name (``importlib``), so that the
protocol in ``_base`` can pickle a backend as ``get_backend(name)`` while each
backend module builds on ``_base``: the static imports stay one way.
"""

import importlib

__all__ = ["get_backend"]

_BACKENDS = {}

#: backend name -> its package under ``lodtensor.backend`` (each exposes ``make_backend()``)
_FACTORIES = {"numpy": "numpy", "cupy": "cupy", "torch": "torch"}

_HINTS = {
    "cupy": "install the GPU extra: pip install 'lodtensor[cuda]' (needs an NVIDIA GPU)",
    "torch": "install the torch extra: pip install 'lodtensor[torch]'",
}


def get_backend(name):
    """Return the backend called ``name`` (``"numpy"``, ``"cupy"`` or ``"torch"``).

    >>> get_backend("numpy").name
    'numpy'
    >>> get_backend("jax")
    Traceback (most recent call last):
    ...
    ValueError: get_backend(): name must be one of 'numpy', 'cupy', 'torch', got 'jax'
    """
    backend = _BACKENDS.get(name)
    if backend is not None:
        return backend
    if name not in _FACTORIES:
        raise ValueError(
            f"get_backend(): name must be one of 'numpy', 'cupy', 'torch', got {name!r}"
        )
    module = importlib.import_module(f"{__package__}.{_FACTORIES[name]}")
    try:
        backend = module.make_backend()
    except ImportError as err:
        if name not in _HINTS:
            raise
        raise ImportError(f"the {name!r} backend needs {name}: {_HINTS[name]}") from err
    # threads meeting here on first use each built one: all of them get the one kept (identity checks
    # such as ``backend_of(w) is not be`` must hold, and each backend's caches must be shared)
    return _BACKENDS.setdefault(name, backend)

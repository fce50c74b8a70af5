"""The torch backend (CPU and CUDA, autograd): the declared contract implemented with torch.

Importing this package does not import torch; :func:`make_backend` does (through
``get_backend("torch")``). ``_backend`` holds :class:`TorchBackend`,
``_arrays`` its array functions, ``_cpu`` the autograd Functions whose forward
passes run the NumPy backend's kernels on a CPU tensor's memory, ``_cuda``
those that run the project's CUDA kernels on a CUDA tensor's memory. Every
tuned threshold is in ``_tuning``.
"""

__all__ = ["make_backend"]


def make_backend():
    """The torch backend (imports torch)."""
    from ._backend import TorchBackend  # noqa: PLC0415 - torch is imported on first use only

    return TorchBackend()


def __getattr__(name):
    """Names of the backend module (``torch_dtype``...), imported with torch on first use."""
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    return getattr(importlib.import_module(f"{__name__}._backend"), name)  # imports torch

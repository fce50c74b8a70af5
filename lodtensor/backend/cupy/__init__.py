"""The CuPy backend (NVIDIA GPUs): the declared contract implemented with CuPy and CUDA C.

Importing this package does not import cupy; :func:`make_backend` does (through
``get_backend("cupy")``). ``cuda/`` holds the CUDA C sources (``*.cu``), their
instantiation table and the offline checker (``python -m
lodtensor.backend.cupy.cuda.check``); the torch backend launches the same
kernels on CUDA tensors. ``_backend`` holds :class:`CupyBackend`, ``_arrays``
its array functions. Every tuned threshold is in ``_tuning``.
"""

__all__ = ["make_backend"]


def make_backend():
    """The CuPy backend (imports cupy)."""
    from ._backend import CupyBackend  # noqa: PLC0415 - cupy is imported on first use only

    return CupyBackend()

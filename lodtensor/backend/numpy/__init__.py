"""The NumPy backend (CPU): the reference implementation, always available.

``_backend`` holds :class:`NumpyBackend`, the declared contract
(``lodtensor.backend._contract``) implemented with NumPy; its helpers are the
array functions (``_arrays``), the segment-reduction routes (``_routes``,
``_chunks``, ``_pieces``, ``_compiled`` with the C kernels ``_csegment.c`` and
``_cpointwise.c``), the buffer pool (``_pool``), threaded ufuncs (``_ufunc``),
special functions (``_special``) and the BLAS binding (``_blas``). Every tuned
threshold is in ``_tuning``.
"""

__all__ = ["make_backend"]


def make_backend():
    """The NumPy backend."""
    from ._backend import NumpyBackend  # noqa: PLC0415 - built on first use, as every backend

    return NumpyBackend()

"""The routes of the NumPy backend's segment reductions (sum, max, min), as one decision table.

Every route computes the same values; they differ in how they read memory. The
first route of :data:`ROUTES` whose test holds serves the call; the thresholds are
in ``_tuning``. ``choose`` is what ``NumpyBackend`` calls, and what a test or a
benchmark asks to see which route a workload takes.

>>> import numpy as np
>>> offsets = np.array([0, 3, 3, 7])
>>> choose(np.add, np.ones((7, 1)), offsets), choose(np.maximum, np.ones((0, 4)), np.array([0, 0]))
('reduceat', 'empty')
>>> [route.name for route in ROUTES]
['empty', 'compiled', 'csr', 'reduceat', 'pieces', 'chunks', 'blocks']
"""

import collections
import math

import numpy as np

from . import _tuning
from ._chunks import identity_of
from ._compiled import compiled_fits, compiled_kernels
from ._pieces import pieces_fits
from ._util import _cached_plan

__all__ = ["ROUTES", "Facts", "choose", "scipy_sparse"]

_SPARSE = None  # scipy.sparse once imported; False when it is not installed


def scipy_sparse():
    """scipy.sparse, imported on first use; None when SciPy is not installed."""
    global _SPARSE  # noqa: PLW0603 - a lazily filled module cache
    if _SPARSE is None:
        try:
            import scipy.sparse as sparse  # noqa: PLC0415 - optional accelerator

            _SPARSE = sparse
        except ImportError:
            _SPARSE = False
    return _SPARSE or None


class Facts(collections.namedtuple("Facts", "ufunc data offsets rows row_size sequences nonempty")):
    """What the routes decide on, computed once per call."""

    @classmethod
    def of(cls, ufunc, data, offsets, owner=None):
        # cached for ``owner`` where given (a torch tensor's ``.numpy()`` is a new array every call: a miss each time)
        nonempty = _cached_plan(offsets, ("nonempty",), lambda o: int(np.count_nonzero(np.diff(o))), owner)
        return cls(ufunc, data, offsets, int(data.shape[0]), math.prod(data.shape[1:]), int(offsets.size) - 1,
                   nonempty)


def _narrow(f):
    """reduceat's ground: one column, or a few columns of long sequences (measured crossovers)."""
    return f.row_size == 1 or (
        f.row_size < _tuning.REDUCEAT_COLUMNS and f.rows >= _tuning.REDUCEAT_LENGTH * f.nonempty
    )


def _chunkable(f):
    """The chunk kernel needs the ufunc's identity for the dtype (ints and floats)."""
    return identity_of(f.ufunc, f.data.dtype) is not None


def _csr(f):
    """Sums of rows of CSR_ROW values or more by SciPy's CSR product, where SciPy is installed and no
    compiled kernel serves the dtype (the kernel reads the data once too, without building a matrix)."""
    return (
        f.ufunc is np.add
        and f.row_size >= _tuning.CSR_ROW
        and f.data.dtype.kind in "iufc"
        and not (compiled_kernels() and f.data.dtype.kind in "iuf")
        and scipy_sparse() is not None
    )


Route = collections.namedtuple("Route", "name why test")

#: The routes in order of preference: the first whose test holds serves.
ROUTES = (
    Route("empty", "no row, no value or no non-empty sequence: every result is the fill value",
          lambda f: f.rows == 0 or f.nonempty == 0 or f.row_size == 0),
    Route("compiled", "the compiled kernel: one read, SIMD along the row, threads from 16 MiB",
          lambda f: compiled_fits(f.ufunc, f.data, f.offsets)),
    Route("csr", "sums as one CSR x dense product (SciPy), a single pass over the data", _csr),
    Route("reduceat", "ufunc.reduceat: one column, or few columns of long sequences",
          lambda f: _narrow(f) or (f.row_size < _tuning.WIDE_ROW and not _chunkable(f))),
    Route("pieces", "float sums of 32-64-byte rows by blocks of rows and one stacked product",
          lambda f: pieces_fits(f.ufunc, f.data)),
    Route("chunks", "ints and floats: chunks of rows in data order, padded per length class", _chunkable),
    Route("blocks", "anything else (bool, complex max...): sorted blocks of rows", lambda f: True),
)


def choose(ufunc, data, offsets, owner=None):
    """The name of the route that reduces ``data`` over ``offsets`` with ``ufunc`` (``owner``: the object
    ``offsets`` views, if any, which keys the cached facts)."""
    facts = Facts.of(ufunc, data, offsets, owner)
    return next(route.name for route in ROUTES if route.test(facts))

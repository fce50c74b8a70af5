"""NumPy's ufunc protocol for LoDTensor: ``np.exp(t)`` and ``t * 2`` keep the lod.

Operands must share one lod (the same object, or equal offsets); the ufunc runs
on the flat data through the backend (torch data stays torch). Reductions and
other ufunc methods return plain arrays.
"""

from numpy.lib.mixins import NDArrayOperatorsMixin

from .backend import backend_of
from .errors import LoDError

__all__ = ["UfuncMixin"]


class UfuncMixin(NDArrayOperatorsMixin):
    """Operators and ``__array_ufunc__`` for a class with ``_data``, ``_lod`` and ``_new``."""

    __slots__ = ()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        lod = None
        args = []
        for x in inputs:
            if isinstance(x, UfuncMixin):
                lod = x._merge_lod(lod, ufunc)
                args.append(x._require_data(ufunc.__name__))
            else:
                args.append(x)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(
                o._require_data(ufunc.__name__) if isinstance(o, UfuncMixin) else o for o in out
            )
        be = backend_of(*args, *kwargs.get("out", ()))
        result = be.apply_ufunc(ufunc, method, *args, **kwargs)
        if method != "__call__":
            return result
        if out is not None:
            return out[0] if len(out) == 1 else out
        if isinstance(result, tuple):
            return tuple(self._wrap_result(r, lod) for r in result)
        return self._wrap_result(result, lod)

    def _merge_lod(self, lod, ufunc):
        self._check_fits()
        mine = self._lod
        if lod is None or lod is mine:
            return mine
        if lod != mine:
            raise LoDError(
                f"{ufunc.__name__}: operands have different lods, {lod!r} and {mine!r}; "
                f"elementwise ops need the same lod"
            )
        return lod

    def _wrap_result(self, result, lod):
        if getattr(result, "ndim", 0) >= 1 and lod is not None and lod.fits(result.shape[0]):
            return self._new(result, lod)
        return result

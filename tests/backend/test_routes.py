"""The NumPy segment reductions' decision table (``backend/numpy/_routes.py``): each route is
reached by the workload it is for, and every route gives the reference values."""

import numpy as np
import pytest

from lodtensor.backend import get_backend, set_compiled_kernels
from lodtensor.backend.numpy import _compiled, _routes
from lodtensor.lod import lengths_to_offsets

_LONG = lengths_to_offsets([40, 0, 25, 70])
_SHORT = lengths_to_offsets([3, 0, 2, 1] * 20)
# route -> (ufunc, data, offsets, needs the compiled kernel on)
CASES = {
    "empty": (np.add, np.ones((0, 3)), np.array([0, 0, 0]), None),
    "compiled": (np.add, np.ones((135, 16), np.float32), _LONG, True),
    "csr": (np.add, np.ones((135, 16), np.complex64), _LONG, None),
    "reduceat": (np.maximum, np.arange(135.0).reshape(135, 1), _LONG, False),
    "pieces": (np.add, np.ones((135, 16), np.float32), _LONG, False),
    "chunks": (np.maximum, np.arange(120.0 * 16).reshape(120, 16), _SHORT, False),
    "blocks": (np.maximum, (np.arange(120 * 16) % 3 == 0).reshape(120, 16), _SHORT, False),
}


@pytest.mark.parametrize("route", [r.name for r in _routes.ROUTES])
def test_each_route_serves_its_workload_with_the_reference_values(route, monkeypatch):
    ufunc, data, offsets, compiled = CASES[route]
    if compiled and _compiled._kernel is None:
        pytest.skip("the compiled kernel was not built")
    if route == "csr":
        pytest.importorskip("scipy")
    else:
        monkeypatch.setattr(_routes, "_SPARSE", False)  # as without SciPy: the CSR route is off
    saved = set_compiled_kernels(bool(compiled)) if compiled is not None else None
    try:
        assert _routes.choose(ufunc, data, offsets) == route
        got = get_backend("numpy")._reduceat(ufunc, data, offsets, 0)
    finally:
        if saved is not None:
            set_compiled_kernels(saved)
    want = np.stack([ufunc.reduce(data[a:b], axis=0) if b > a else np.zeros(data.shape[1:], data.dtype)
                     for a, b in zip(offsets[:-1], offsets[1:])]) if offsets.size > 1 else data[:0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_table_is_documented_in_order():
    names = [r.name for r in _routes.ROUTES]
    assert names[0] == "empty" and names[-1] == "blocks" and len(set(names)) == len(names)
    assert all(r.why for r in _routes.ROUTES)

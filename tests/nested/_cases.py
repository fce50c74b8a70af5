"""Random ragged inputs for the nested tests: components of rank 1-3, ragged in chosen dims."""

import warnings

import numpy as np

DTYPES = ["float32", "float64"]

# (rank, ragged component dims): 1-d, 2-d LoD case, 2-d ragged last, 2-d both, 3-d images.
SHAPES = [
    (1, (0,)),
    (2, (0,)),
    (2, (1,)),
    (2, (0, 1)),
    (3, (0,)),
    (3, (1, 2)),
    (3, (0, 2)),
]


def shape_id(case):
    rank, ragged = case
    return f"rank{rank}-ragged{''.join(map(str, ragged))}"


def ragged_arrays(seed, rank, ragged, dtype="float32", n=None, empty=True, low=0):
    """A list of NumPy components; ``empty`` lets ragged dims be 0 (zero-length components)."""
    g = np.random.default_rng(seed)
    n = int(g.integers(1, 5)) if n is None else n
    fixed = g.integers(1, 4, size=rank)
    out = []
    for i in range(n):
        shape = []
        for d in range(rank):
            if d in ragged:
                lo = 0 if (empty and i % 3 == 1) else max(low, 1)
                shape.append(int(g.integers(lo, 5)))
            else:
                shape.append(int(fixed[d]))
        if n > 1 and all(d in ragged for d in range(rank)) and i == n - 1:
            shape = [s + 1 for s in shape]  # make sure the ragged dims really differ
        out.append(g.standard_normal(shape).astype(dtype))
    if n > 1:  # force raggedness: the last component one longer in every ragged dim
        last = list(out[-1].shape)
        for d in ragged:
            if all(a.shape[d] == last[d] for a in out[:-1]):
                last[d] += 1
        out[-1] = g.standard_normal(last).astype(dtype)
    return out


def assert_components(ours, expected, dtype="float32", exact=False):
    """Compare a list of arrays (ours) with a list of arrays or tensors (expected)."""
    assert len(ours) == len(expected)
    for a, b in zip(ours, expected):
        a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
        b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        if exact or a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            tol = 2e-5 if str(dtype) == "float32" else 1e-10
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def run_call(call):
    """``(result, None)`` or ``(None, error)``: which calls raise is part of what the differential tests compare."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(), None
        except Exception as err:  # noqa: BLE001 - reported to the caller
            return None, err


def typed_arrays(seed, dtype, lengths=(2, 0, 3), width=3):
    """Components of shape (n, width) for each n in ``lengths``: bool, small int64 or floats of ``dtype``."""
    g = np.random.default_rng(seed)
    out = []
    for n in lengths:
        if dtype == "bool":
            out.append(g.random((n, width)) > 0.5)
        elif dtype == "int64":
            out.append(g.integers(-3, 4, size=(n, width)).astype(np.int64))
        else:
            out.append(g.uniform(-1.5, 1.5, size=(n, width)).astype(dtype))
    return out

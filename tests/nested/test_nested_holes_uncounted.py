"""A nested tensor with holes over values that count no writes (NumPy arrays, torch's inference tensors; CuPy's
run the same code) is a view of them too, against torch 2.13 over the same numbers: a write into the values
from outside, through ``values()``, a component or a view shows in every read, and an in-place op on the tensor
or a view keeps every write made before it (the buffer is gathered again, in place, on each read:
``lodtensor/nested/_holes.py``, ``_regather``)."""

import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402

START, LENGTH = [0, 1, 2], [2, 3, 1]


def _base(lib):
    numbers = np.random.default_rng(5).standard_normal((3, 4, 2))
    if lib == "numpy":
        return numbers.copy()
    with torch.inference_mode(lib == "inference"):
        return torch.from_numpy(numbers.copy())


def _narrow(lib, base):
    if lib == "torch":
        return torch.nested.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout=torch.jagged)
    return ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")


def _add(array, value):
    array += value  # (NumPy arrays and torch tensors alike)


# writes into the values after the tensor was made, spelled for NumPy arrays and torch tensors alike
WRITES = {
    "base item": lambda nt, base: base.__setitem__((1, 2), 7.0),
    "base scaled": lambda nt, base: base.__imul__(-2),
    "base slice": lambda nt, base: _add(base[:, 1:3], 1),
    "values() item": lambda nt, base: nt.values().__setitem__(3, 5.0),
    "unbind() component": lambda nt, base: _add(nt.unbind()[1], 1),
    "unbind() item": lambda nt, base: nt.unbind()[0].__setitem__((1, 0), -3.0),
    "nt[i] filled": lambda nt, base: nt[2].__setitem__(Ellipsis, 9.0),
    "transposed component": lambda nt, base: _add(nt.transpose(1, 2)[1], 4),
    "unflatten add_": lambda nt, base: nt.unflatten(-1, (2, 1)).add_(1),
    "nt add_": lambda nt, base: nt.add_(1),
    "nt mul_ twice": lambda nt, base: (nt.mul_(2), base.__setitem__((0, 0), 11.0), nt.mul_(3)),
}

READS = {
    "components": lambda nt: nt,
    "mul": lambda nt: nt * 1,
    "sum ragged dim": lambda nt: nt.sum(dim=1),
    "sum row dim": lambda nt: nt.sum(dim=-1),
    "padded": lambda nt: nt.contiguous().to_padded_tensor(0.0),
    "softmax": lambda nt: nt.softmax(-1),
    "transpose": lambda nt: nt.transpose(1, 2),
    "unflatten": lambda nt: nt.unflatten(-1, (1, 2)),
    "matmul": lambda nt: nt @ _like(nt.values(), [[2.0, 1.0], [0.0, 3.0]]),
}
TORCH_REFUSES = {"sum ragged dim", "slice"}  # (over a non-contiguous tensor with holes: torch reads a copy)


def _like(values, rows):
    return np.array(rows) if isinstance(values, np.ndarray) else torch.tensor(rows, dtype=values.dtype)


def _host(x):
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _parts(out):
    """The components of a nested result (a dense one: itself), on the host."""
    return [_host(p) for p in out.unbind()] if getattr(out, "is_nested", False) else [_host(out)]


def _run(lib, write, read):
    base = _base("torch" if lib == "torch" else lib)
    with torch.inference_mode() if lib == "inference" else contextlib.nullcontext():
        nt = _narrow(lib, base)
        read_ = (lambda x: READS[read](x.contiguous())) if lib == "torch" and read in TORCH_REFUSES else READS[read]
        _parts(read_(nt))  # (read once before the write: what is gathered then must not be kept)
        WRITES[write](nt, base)
        return _parts(read_(nt)), _host(base)


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("lib", ["numpy", "inference"])
def test_a_write_into_uncounted_values_shows_in_every_read_as_torch(lib, write, read):
    (ours, our_base), (theirs, their_base) = _run(lib, write, read), _run("torch", write, read)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(our_base, their_base)  # (every row torch writes, the holes too)


VIEWS = {"transpose": lambda nt: nt.transpose(1, 2), "unflatten": lambda nt: nt.unflatten(-1, (2, 1)),
         "unsqueeze": lambda nt: nt.unsqueeze(-1), "slice": lambda nt: nt[1:], "detach": lambda nt: nt.detach()}


@pytest.mark.parametrize("view", list(VIEWS))
def test_views_taken_before_a_write_into_numpy_values_see_it(view):
    """Ours taken before the writes, torch's after them (torch slices no jagged tensor on dim 0: its
    components 1: then)."""
    got = {}
    for lib in ("numpy", "torch"):
        base = _base(lib)
        nt = _narrow(lib, base)
        taken = VIEWS[view](nt) if lib == "numpy" else None
        base[0, 1] = 50.0
        _add(base[2], 1.0)
        if lib == "numpy":
            got[lib] = _parts(taken)
        else:
            got[lib] = _parts(nt)[1:] if view == "slice" else _parts(VIEWS[view](nt))
    assert len(got["numpy"]) == len(got["torch"])
    for a, b in zip(got["numpy"], got["torch"]):
        np.testing.assert_array_equal(a, b)


def test_an_in_place_op_keeps_a_write_made_through_a_component_before_it():
    base = _base("numpy")
    nt = _narrow("numpy", base)
    nt.unbind()[1][...] = 100.0
    np.testing.assert_array_equal((nt * 1).unbind()[1], np.full((3, 2), 100.0))
    nt.add_(1)
    np.testing.assert_array_equal(nt.unbind()[1], np.full((3, 2), 101.0))
    np.testing.assert_array_equal(base[1, 1:4], np.full((3, 2), 101.0))


def test_reads_keep_the_buffer_and_its_metadata_without_gathering():
    """Each read of a tensor over NumPy values gathers them again into the same array (a buffer read before an
    in-place op is the one written back); dtype, device and the autograd state gather nothing."""
    nt = _narrow("numpy", _base("numpy"))
    buf = nt._buf
    counted = []
    regather = type(nt)._regather
    type(nt)._regather = lambda self: (counted.append(1), regather(self))
    try:
        nt.dtype, nt.device, nt.requires_grad, nt.is_leaf, nt.grad_fn, nt.backend, repr(nt)
        assert not counted
        nt.sum(dim=1)
        assert counted
    finally:
        type(nt)._regather = regather
    assert nt._buf is buf


def test_every_backend_sees_a_write_from_outside(backend):
    """The same on every backend (CuPy's arrays count no writes: ``make test-cupy-emulated`` runs it over the
    emulated kernels): a write into the values after the tensor was made shows in a reduction over the ragged
    dim, in ``to_padded_tensor`` and in an in-place op, which keeps it."""
    numbers = np.random.default_rng(9).standard_normal((3, 4, 2))
    values = backend.array(numbers.copy())
    nt = ln.narrow(values, 1, np.array(START), np.array(LENGTH), layout="jagged")
    nt.sum(dim=1)
    values[1, 2] = backend.array(np.array([7.0, 8.0]))
    numbers[1, 2] = [7.0, 8.0]
    want = [numbers[i, s:s + n] for i, (s, n) in enumerate(zip(START, LENGTH))]
    np.testing.assert_allclose(backend.numpy(nt.sum(dim=1)), np.stack([w.sum(axis=0) for w in want]))
    padded = backend.numpy(nt.to_padded_tensor(0.0))
    for i, w in enumerate(want):
        np.testing.assert_allclose(padded[i, :len(w)], w)
    nt.mul_(2)  # (every row of the values, the holes too, as torch's)
    np.testing.assert_allclose(backend.numpy(values), 2 * numbers)
    np.testing.assert_allclose(backend.numpy(nt.to_padded_tensor(0.0))[1, :3], 2 * want[1])

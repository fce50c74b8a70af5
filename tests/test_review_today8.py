"""Second reading of the views of regular dims (lodtensor/nested/_views.py and callers), each case against
torch 2.13's jagged layout or the dense equivalent per component.

- ``view()`` of a window whose dims cannot be merged without a copy returned a silent copy (a later write
  reached nothing); torch raises "view size is not compatible with input tensor's size and stride".
- narrow / select / slices / chunk / split of a nested tensor with holes (offsets and lengths) returned
  views of the compacted copy ``_buf`` (writes reached nothing, yet ``is_contiguous()`` and the docs said a
  view); torch refuses these ops on such a tensor, and yesterday they copied: they copy again.
"""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LIBS = ["torch", "numpy"]


def _comps(lengths=(2, 3), tail=(3, 4), seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(n, *tail, generator=g, dtype=torch.float64) for n in lengths]


def _ours(comps, lib):
    return ln.nested_tensor([c.clone() if lib == "torch" else c.numpy().copy() for c in comps])


def _theirs(comps):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([c.clone() for c in comps], layout=torch.jagged)


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("lib", LIBS)
def test_view_of_a_window_that_needs_a_copy_raises_as_torch(lib):
    comps = _comps()
    with pytest.raises(RuntimeError, match="view size is not compatible") as theirs:
        _theirs(comps).narrow(3, 0, 2).view(2, -1, 6)
    nt = _ours(comps, lib)
    before = _np(nt.values()).copy()
    with pytest.raises(RuntimeError, match="view size is not compatible") as ours:
        nt.narrow(3, 0, 2).view(2, -1, 6)
    assert "reshape" in str(ours.value) and "reshape" in str(theirs.value)
    np.testing.assert_array_equal(_np(nt.values()), before)


@pytest.mark.parametrize("lib", LIBS)
def test_view_of_a_window_that_can_stay_one_still_shares_memory(lib):
    """The views torch makes (split a dim, merge dims contiguous in memory) stay views: writes reach the base."""
    comps = _comps()
    for view in (lambda x: x.narrow(3, 0, 2).view(2, -1, 3, 2, 1), lambda x: x.narrow(2, 0, 2).view(2, -1, 8)):
        theirs, nt = _theirs(comps), _ours(comps, lib)
        view(theirs).values().zero_()
        view(nt).fill_(0)
        np.testing.assert_array_equal(_np(nt.values()), _np(theirs.values()))


def _holey(lib):
    values = np.arange(24.0).reshape(6, 4)
    data = torch.from_numpy(values.copy()) if lib == "torch" else values.copy()
    offsets, lengths = np.array([0, 2, 6]), np.array([1, 3])
    if lib == "torch":
        offsets, lengths = torch.from_numpy(offsets), torch.from_numpy(lengths)
    return ln.nested_tensor_from_jagged(data, offsets, lengths=lengths), data


HOLES_OPS = {
    "narrow": lambda x: x.narrow(2, 1, 2),
    "select": lambda x: x.select(2, 0),
    "int index": lambda x: x[..., -1],
    "slice": lambda x: x[..., 1:3],
    "chunk": lambda x: x.chunk(2, -1)[1],
    "split": lambda x: x.split(2, -1)[0],
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("name", HOLES_OPS)
def test_ops_on_a_tensor_with_holes_copy_rather_than_view_a_copy(lib, name):
    """torch refuses these ops on a nested tensor with holes ("expected self to be a contiguous jagged layout
    NestedTensor"); ours gives the components' values as a copy that says so (contiguous, no window), never
    a "view" over the compacted buffer that a write through it would silently miss."""
    vals = torch.arange(24.0).reshape(6, 4)
    theirs = torch.nested.nested_tensor_from_jagged(vals, torch.tensor([0, 2, 6]), lengths=torch.tensor([1, 3]))
    with pytest.raises((ValueError, RuntimeError)):
        HOLES_OPS[name](theirs)
    nt, data = _holey(lib)
    out = HOLES_OPS[name](nt)
    want = [HOLES_OPS[name](ln.nested_tensor([c])).unbind()[0] for c in nt.unbind()]
    for got, exp in zip(out.unbind(), want):
        np.testing.assert_array_equal(_np(got), _np(exp))
    assert out._src is None and out.is_contiguous()  # a copy, and it says so


VIEWS = {
    "window": lambda x: x.narrow(2, 1, 3),
    "step slice": lambda x: x[..., ::2],
    "transposed": lambda x: x.transpose(1, 2),
    "transposed window": lambda x: x.narrow(2, 1, 3).transpose(1, 2),
}


@pytest.mark.parametrize("name", VIEWS)
def test_to_without_a_change_returns_the_view_itself_as_torch(name):
    """torch's ``to()`` / ``cpu()`` / ``float()`` return self when nothing changes, so a write into the result
    reaches the base; ours returned a detached copy of a view (a transposed view since its materialised buffer
    is no longer cached: ``_convert`` compared one materialisation with another)."""
    comps = [c.float() for c in _comps((2, 3), (6,))]
    theirs = VIEWS[name](_theirs(comps))
    nt = _ours(comps, "torch")
    view = VIEWS[name](nt)
    for call in (lambda v: v.to(v.dtype), lambda v: v.to("cpu"), lambda v: v.cpu(), lambda v: v.float()):
        assert call(theirs) is theirs
        assert call(view) is view
    view.float().fill_(7.0)
    assert all(bool((c == 7).any()) for c in nt.unbind())
    assert VIEWS[name](nt).to(torch.float32, copy=True) is not view
    double = view.double()
    for a, b in zip(double.unbind(), view.unbind()):
        np.testing.assert_array_equal(_np(a), _np(b).astype(np.float64))

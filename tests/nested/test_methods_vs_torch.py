"""torch's smaller Tensor methods that its jagged layout answers, against torch 2.13: swapaxes, swapdims, movedim,
moveaxis, mT, adjoint, diff, isreal, real/imag, cfloat/cdouble, is_complex/is_signed/is_conj/is_neg/is_inference,
get_device, itemsize, nbytes and new_tensor (NestedTensor had none of them)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402

from ._cases import run_call  # noqa: E402


def _parts(dtype="float64"):
    g = np.random.default_rng(5)
    shapes = [(2, 3, 4), (1, 3, 4), (3, 3, 4)]
    if np.dtype(dtype).kind == "c":
        return [(g.standard_normal(s) + 1j * g.standard_normal(s)).astype(dtype) for s in shapes]
    if dtype == "bool":
        return [g.random(s) > 0.5 for s in shapes]
    return [g.integers(-5, 6, s).astype(dtype) for s in shapes]


def _jagged(parts):
    return torch.nested.nested_tensor([torch.from_numpy(p.copy()) for p in parts], layout=torch.jagged)


def _ours(parts, lib):
    copies = [p.copy() for p in parts]
    return ln.nested_tensor([torch.from_numpy(p) for p in copies] if lib == "torch" else copies)


def _lists(nt):
    return [np.asarray(c.detach().resolve_conj() if hasattr(c, "detach") else c) for c in nt.unbind()]


def _agree(theirs_call, ours_call):
    theirs, their_err = run_call(theirs_call)
    ours, our_err = run_call(ours_call)
    assert (their_err is None) == (our_err is None), (their_err, our_err)
    if their_err is None:
        got, want = _lists(ours), _lists(theirs)
        assert [g.shape for g in got] == [w.shape for w in want]
        assert [g.dtype for g in got] == [w.dtype for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w)


CALLS = {
    "swapaxes": lambda x: x.swapaxes(1, 3),
    "swapdims": lambda x: torch.swapdims(x, 3, 2),
    "movedim": lambda x: x.movedim(1, 3),
    "movedim_list": lambda x: torch.movedim(x, (1, 3), (3, 2)),
    "moveaxis": lambda x: x.moveaxis(-1, 1),
    "movedim_batch": lambda x: x.movedim(0, 1),
    "mT": lambda x: x.mT,
    "adjoint": lambda x: x.adjoint(),
    "diff": lambda x: x.diff(),
    "diff_n2_dim2": lambda x: torch.diff(x, n=2, dim=2),
    "diff_ragged": lambda x: x.diff(dim=1),
    "isreal": torch.isreal,
}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float64", "int64", "complex64", "bool"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_methods_as_torch_jagged(name, dtype, lib):
    parts = _parts(dtype)
    call = CALLS[name]
    if lib == "numpy" and name in ("swapdims", "movedim_list", "diff_n2_dim2", "isreal"):  # (torch functions:
        fn = {"swapdims": lambda x: ln.swapdims(x, 3, 2), "movedim_list": lambda x: ln.movedim(x, (1, 3), (3, 2)),
              "diff_n2_dim2": lambda x: ln.diff(x, n=2, dim=2), "isreal": ln.isreal}[name]  # lodtensor's on NumPy)
    else:
        fn = call
    if name in ("adjoint", "isreal") and dtype == "complex64":  # (torch's jagged layout lacks aten._conj and
        ours = _lists(fn(_ours(parts, lib)))  # view_as_real: dense torch per component is the reference)
        want = [getattr(torch, name)(torch.from_numpy(p)).resolve_conj().numpy() for p in parts]
        assert [o.dtype for o in ours] == [w.dtype for w in want]
        assert all(np.array_equal(o, w) for o, w in zip(ours, want))
        return
    _agree(lambda: call(_jagged(parts)), lambda: fn(_ours(parts, lib)))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_diff_prepend_append_as_dense_torch_per_component(lib):
    parts, before, after = _parts(), _parts("float64"), _parts("int64")
    before = [b[..., :1].astype(np.float64) for b in before]
    after = [a[..., :2].astype(np.float64) for a in after]
    ours = ln.diff(_ours(parts, lib), dim=-1, prepend=_ours(before, lib), append=_ours(after, lib))
    want = [torch.diff(torch.from_numpy(p), dim=-1, prepend=torch.from_numpy(b), append=torch.from_numpy(a)).numpy()
            for p, b, a in zip(parts, before, after)]
    assert [g.tolist() for g in _lists(ours)] == [w.tolist() for w in want]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "complex128", "bool"])
def test_questions_and_sizes_as_torch_jagged(dtype, lib):
    parts = _parts(dtype)
    theirs, ours = _jagged(parts), _ours(parts, lib)
    for name in ("is_complex", "is_signed", "is_conj", "is_neg", "is_inference", "get_device"):
        assert getattr(ours, name)() == getattr(theirs, name)(), name
    assert (ours.itemsize, ours.nbytes) == (theirs.itemsize, theirs.nbytes)
    for cast in ("cfloat", "cdouble"):
        assert str(getattr(ours, cast)().dtype).replace("torch.", "") == str(getattr(theirs, cast)().dtype).replace(
            "torch.", "")
    got = ours.new_tensor([1, 2, 3])
    want = theirs.new_tensor([1, 2, 3])
    assert np.asarray(got).tolist() == want.tolist() and str(got.dtype).replace("torch.", "") == str(
        want.dtype).replace("torch.", "")


def test_torch_only_answers():
    ours = _ours(_parts("float32"), "torch")
    assert ours.conj().is_conj() is False  # (real data: conj is the data itself, as torch's)
    assert ln.nested_tensor([torch.ones(2, dtype=torch.complex64)]).conj().is_conj() is True
    with torch.inference_mode():
        assert _ours(_parts("float32"), "torch").is_inference()
    t = ours.new_tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.dtype == torch.float32


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_real_and_imag_are_views_as_dense_torchs(lib):
    """torch's jagged layout refuses ``real``/``imag`` of complex data (no view_as_real); dense torch per
    component is the reference: views whose writes reach the data. Real data: ``real`` is the tensor itself,
    ``imag`` refused, as torch's."""
    parts = _parts("complex128")
    ours = _ours(parts, lib)
    for name in ("real", "imag"):
        got = [np.asarray(c) for c in getattr(ours, name).unbind()]
        want = [getattr(torch, name)(torch.from_numpy(p)).numpy() for p in parts]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    ours.imag.fill_(0.0)
    ln.real(ours)[0, 0] = 7.0
    first = np.asarray(ours.unbind()[0])
    assert (first[0].real == 7.0).all() and (first[1:].real == parts[0][1:].real).all()
    assert all((np.asarray(c).imag == 0).all() for c in ours.unbind())
    real = _ours(_parts("float32"), lib)
    assert real.real is real and torch.real(_jagged(_parts("float32"))).dtype == torch.float32
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        real.imag  # noqa: B018 - the property is the call

"""A second reading of nested tensors with holes over values that count no writes (NumPy arrays, torch's inference
tensors, CuPy's): the tensor is a view of its ``values``, its gathered buffer gathered again, in place, on each
read (``lodtensor/nested/_holes.py``, ``_regather``). Against torch 2.13 over the same numbers (torch data as the
oracle; where torch refuses an op on a tensor with holes, torch's op on ``nt.contiguous()`` read at the same
moment), else against the tensor's own reads. ``xfail(strict=True)`` tests are findings that hold today."""

import contextlib
import copy
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import lodtensor.nested as ln  # noqa: E402

START, LENGTH = [0, 1, 2], [2, 3, 1]


def _base(lib):
    numbers = np.arange(24.0).reshape(3, 4, 2) / 4
    if lib == "numpy":
        return numbers
    with torch.inference_mode(lib == "inference"):
        return torch.from_numpy(numbers)


def _narrow(lib, base):
    if lib == "torch":
        return torch.nested.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout=torch.jagged)
    return ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")


def _torch(nt):
    return not isinstance(nt, ln.NestedTensor)


def _c(nt):
    """torch's tensor with holes made contiguous (its ops over the ragged dim refuse holes), ours as it is."""
    return nt.contiguous() if _torch(nt) else nt


def _w(nt, rows):
    """``rows`` as a dense array of ``nt``'s library (float64)."""
    return torch.tensor(rows, dtype=torch.float64) if _torch(nt) or _torch_data(nt) else np.array(rows)


def _linear(nt, *args):
    return (F.linear if _torch(nt) or _torch_data(nt) else ln.linear)(_c(nt), *args)


def _torch_data(nt):
    return isinstance(nt.values(), torch.Tensor)


def _host(x):
    if getattr(x, "is_nested", False):
        return [_host(p) for p in x.unbind()]
    if isinstance(x, (list, tuple)):
        return [_host(p) for p in x]
    if isinstance(x, torch.Tensor):
        return x.detach().clone().numpy()
    return np.array(x)


def _equal(ours, theirs):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _equal(a, b)
    else:
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def _write(nt, base):
    base[1, 2] = 100.0  # (a row of component 1)
    base[0, 0] = -3.0  # (a row of component 0)
    base[2, 3] = 77.0  # (a hole)


# -- (1) views taken before a write from outside see it; copies taken before do not --------------------------

VIEWS = {
    "transpose": lambda nt: nt.transpose(1, 2),
    "transpose twice": lambda nt: nt.transpose(1, 2).transpose(1, 2),
    "unflatten": lambda nt: nt.unflatten(-1, (2, 1)),
    "heads": lambda nt: nt.unflatten(-1, (2, 1)).transpose(1, 2),
    "view": lambda nt: nt.view(3, -1, 1, 2),
    "view same shape": lambda nt: nt.view(3, -1, 2),
    "unsqueeze": lambda nt: nt.unsqueeze(-1),
    "detach": lambda nt: nt.detach(),
    "values()": lambda nt: nt.values(),
    "transposed values()": lambda nt: nt.transpose(1, 2).values(),
    "copy.copy": copy.copy,
    "unbind()": lambda nt: list(nt.unbind()),
    "nt[1]": lambda nt: nt[1],
    "transposed nt[1]": lambda nt: nt.transpose(1, 2)[1],
    "to(same dtype)": lambda nt: nt.to(torch.float64 if _torch(nt) else np.float64),
    "double()": lambda nt: nt.double(),
    "expand_as": lambda nt: nt.expand_as(nt),
}


def _numpy_as_torch(before, after):
    """``after(nt, taken)`` (on the host) equal over NumPy and torch values, ``taken = before(nt)`` made before
    a write into them (:func:`_write`)."""
    got = {}
    for lib in ("numpy", "torch"):
        base = _base(lib)
        nt = _narrow(lib, base)
        taken = before(nt)
        _write(nt, base)
        got[lib] = _host(after(nt, taken))
    _equal(got["numpy"], got["torch"])


@pytest.mark.parametrize("view", list(VIEWS))
def test_a_view_taken_before_a_write_into_numpy_values_sees_it_as_torch(view):
    # (and a read before the write: what is gathered then must not be kept)
    _numpy_as_torch(lambda nt: (VIEWS[view](nt), _host(nt.sum(-1)))[0], lambda nt, taken: taken)


COPIES = {
    "clone": lambda nt: nt.clone(),
    "contiguous": lambda nt: nt.contiguous(),
    "deepcopy": copy.deepcopy,
    "pickle": lambda nt: pickle.loads(pickle.dumps(nt)) if not _torch(nt) else nt.clone(),
    "reshape": lambda nt: nt.reshape(3, -1, 2, 1),
    "to float32": lambda nt: nt.to(torch.float32 if _torch(nt) else np.float32),
    "mul": lambda nt: nt * 2,
    "sum ragged dim": lambda nt: _c(nt).sum(1),
    "sum row dim": lambda nt: nt.sum(-1),
    "amax ragged dim": lambda nt: _c(nt).amax(1),
    "max ragged dim indices": lambda nt: _c(nt).max(1).indices,
    "softmax ragged dim": lambda nt: _c(nt).softmax(1),
    "softmax row dim": lambda nt: nt.softmax(-1),
    "layer_norm": lambda nt: F.layer_norm(nt, (2,)),
    "to_padded_tensor": lambda nt: _c(nt).to_padded_tensor(0.0),
    "select row dim": lambda nt: _c(nt).select(2, 0),
    "chunk row dim": lambda nt: list(_c(nt).chunk(2, -1)),
    "narrow row dim": lambda nt: _c(nt).narrow(-1, 0, 1),
    "matmul": lambda nt: nt @ _w(nt, [[1.0, 2.0], [3.0, 4.0]]),
    "linear": lambda nt: _linear(nt, _w(nt, [[1.0, 2.0], [3.0, 4.0]])),
    "cat row dim": lambda nt: torch.cat([_c(nt), _c(nt) * 2], -1),
    "where": lambda nt: torch.where(nt > 1, nt, -nt),
    "transposed contiguous": lambda nt: nt.transpose(1, 2).contiguous() if not _torch(nt) else
    nt.contiguous().transpose(1, 2),
}


@pytest.mark.parametrize("op", list(COPIES))
def test_a_result_taken_before_a_write_into_numpy_values_does_not_change(op):
    """A result without holes (or a copy with them) never changes after a write into the values, also once the
    tensor read them again (its buffer gathered again in place must be shared by no result)."""
    got = {}
    for lib in ("numpy", "torch"):
        base = _base(lib)
        nt = _narrow(lib, base)
        taken = COPIES[op](nt)
        before = _host(taken)
        _write(nt, base)
        _host(_c(nt).sum(1)), _host(_c(nt).to_padded_tensor(0.0)), nt.add_(0)  # (reads and a write of the tensor)
        _equal(_host(taken), before)
        got[lib] = before
    _equal(got["numpy"], got["torch"])


# -- (2) layouts without holes are copies, not the buffer gathered again on each read --------------------------

LAYOUTS = {
    "to_lod_tensor": lambda nt: nt.to_lod_tensor().data,
    "Layout.LoD": lambda nt: nt.to(ln.Layout.LoD).data,
    "to_packed": lambda nt: nt.to_packed()[0],
    "Layout.Packed": lambda nt: nt.to(ln.Layout.Packed)[0],
    "as_nested_tensor strided": lambda nt: ln.as_nested_tensor(nt, layout="strided"),
}


@pytest.mark.parametrize("lib", ["numpy", "torch-data"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_another_layout_of_a_tensor_with_holes_is_a_copy(lib, layout):
    """(The LoD, Packed and strided layouts shared the gathered buffer, which an in-place op of the tensor writes
    and, over NumPy values, each read gathers again in place: they changed with the values, but only once the
    tensor read them. torch's ``contiguous()`` and its refusal to convert layouts: a copy.)"""
    base = _base("numpy" if lib == "numpy" else "torch")
    nt = _narrow("ours", base)
    out = LAYOUTS[layout](nt)
    before = _host(out)
    nt.add_(1)  # (into the buffer gathered before, with torch data too)
    _write(nt, base)
    _host(nt.sum(1))
    nt.add_(1)
    _equal(_host(out), before)
    want = [np.asarray(_base("numpy"))[i, s:s + n] for i, (s, n) in enumerate(zip(START, LENGTH))]
    flat = np.concatenate([np.asarray(p).reshape(-1) for p in _host(out)]) if isinstance(before, list) else before
    np.testing.assert_array_equal(flat.reshape(-1), np.concatenate([w.reshape(-1) for w in want]))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_another_layout_of_a_window_view_reads_its_window(layout):
    """A view of part of a regular dim (a window of the input's rows, no buffer of its own) converts as before:
    the check for a tensor with holes' buffer must not ask a window view for one (it raised AttributeError)."""
    nt = ln.nested_tensor([np.arange(6.0).reshape(2, 3), np.arange(3.0).reshape(1, 3)], layout="jagged")
    out = _host(LAYOUTS[layout](nt[..., 1:3]))
    flat = np.concatenate([np.asarray(p).reshape(-1) for p in out]) if isinstance(out, list) else out.reshape(-1)
    np.testing.assert_array_equal(flat, [1.0, 2.0, 4.0, 5.0, 1.0, 2.0])


# -- (3) in-place ops after a write from outside keep it, and write what torch's write ---------------------

OUTSIDE = {
    "base items": _write,
    "base scaled": lambda nt, base: base.__imul__(-2),
    "values() item": lambda nt, base: nt.values().__setitem__(5, 50.0),
    "component": lambda nt, base: nt.unbind()[1].__setitem__(Ellipsis, 7.0),
}

IN_PLACE = {
    "add_": lambda nt: nt.add_(1),
    "mul_ twice": lambda nt: (nt.mul_(2), nt.mul_(-1)),
    "copy_ of itself doubled": lambda nt: nt.copy_(nt * 2),
    "fill_": lambda nt: nt.fill_(3.0),
    "clamp_": lambda nt: nt.clamp_(min=1.0),
    "sub_ then relu inplace": lambda nt: (nt.sub_(2), F.relu(nt, inplace=True)),
    "add_ of itself": lambda nt: nt.add_(nt),
    "transposed mul_": lambda nt: nt.transpose(1, 2).mul_(2),
    "unflatten add_": lambda nt: nt.unflatten(-1, (2, 1)).add_(1),
    "transposed component add_": lambda nt: nt.transpose(1, 2)[1].add_(1) if _torch(nt) else
    nt.transpose(1, 2)[1].__iadd__(1),
}


@pytest.mark.parametrize("op", list(IN_PLACE))
@pytest.mark.parametrize("outside", list(OUTSIDE))
def test_an_in_place_op_after_a_write_from_outside_keeps_it_as_torch(outside, op):
    got = {}
    for lib in ("numpy", "torch"):
        base = _base(lib)
        nt = _narrow(lib, base)
        _host(_c(nt).sum(1))  # (a read before: the buffer gathered then)
        OUTSIDE[outside](nt, base)
        IN_PLACE[op](nt)
        got[lib] = (_host(nt), _host(_c(nt).sum(1)), _host(base))
    for ours, theirs in zip(got["numpy"], got["torch"]):
        _equal(ours, theirs)


# -- (4) torch's inference tensors: made under inference mode, read outside it -----------------------------------

OUTSIDE_READS = {
    "sum ragged dim": lambda nt: _c(nt).sum(1),
    "mean ragged dim": lambda nt: _c(nt).mean(1),
    "max ragged dim": lambda nt: _c(nt).max(1).values,
    "softmax ragged dim": lambda nt: _c(nt).softmax(1),
    "to_padded_tensor": lambda nt: _c(nt).to_padded_tensor(0.0),
    "contiguous": lambda nt: nt.contiguous(),
    "linear": lambda nt: _linear(nt, _w(nt, np.eye(2))),
    "cat row dim": lambda nt: torch.cat([_c(nt), _c(nt)], -1),
    "select row dim": lambda nt: _c(nt).select(2, 1),
    "unflatten": lambda nt: nt.unflatten(-1, (2, 1)),
    "transposed sum row dim": lambda nt: nt.transpose(1, 2).sum(-1) if not _torch(nt) else
    nt.contiguous().transpose(1, 2).sum(-1),
    "components": lambda nt: nt,
    "mul": lambda nt: nt * 2,
}


@pytest.mark.parametrize("read", list(OUTSIDE_READS))
def test_a_tensor_made_under_inference_mode_is_read_outside_it_as_torch(read):
    """(Each read gathered the values again into the buffer in place: the buffer made under inference mode is
    an inference tensor, which takes no in-place write outside it: "Inplace update to inference tensor outside
    InferenceMode is not allowed" from every read of the data.)"""
    got = {}
    for lib in ("ours", "torch"):
        with torch.inference_mode():
            base = _base("inference")
            nt = _narrow(lib, base)
        _host(OUTSIDE_READS[read](nt))
        with torch.inference_mode():
            _write(nt, base)
        got[lib] = _host(OUTSIDE_READS[read](nt))
    _equal(got["ours"], got["torch"])


def test_in_place_ops_of_a_tensor_made_under_inference_mode_after_reads_outside_it():
    """Outside inference mode an in-place op is refused with torch's error, the values untouched (torch's own
    writes every row, then raises: not the oracle there); back inside, in-place ops write every row of the values
    (a write from outside kept), as torch's."""
    got = {}
    for lib in ("ours", "torch"):
        with torch.inference_mode():
            base = _base("inference")
            nt = _narrow(lib, base)
        _host(_c(nt).sum(1))
        if lib == "ours":
            with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
                nt.add_(1)
            np.testing.assert_array_equal(base.numpy(), _base("numpy"))
        with torch.inference_mode():
            _write(nt, base)
            nt.mul_(2)
            _host(_c(nt).sum(1))
            nt.add_(1)
        got[lib] = (_host(nt), _host(_c(nt).sum(1)), _host(base))
    for ours, theirs in zip(got["ours"], got["torch"]):
        _equal(ours, theirs)


@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
def test_inference_values_written_then_read(inside):
    """Inference values made outside the tensor, the tensor made (and read) inside or outside inference mode,
    against dense NumPy math over the values as written (torch's jagged tensor over inference values, made
    outside inference mode, cannot be transposed: "Cannot set version_counter for inference tensor")."""
    base = _base("inference")
    with torch.inference_mode() if inside else contextlib.nullcontext():
        nt = _narrow("ours", base)
        _host(nt.to_padded_tensor(0.0))
    with torch.inference_mode():
        _write(nt, base)
    dense = base.numpy()
    parts = [dense[i, s:s + n] for i, (s, n) in enumerate(zip(START, LENGTH))]
    with torch.inference_mode() if inside else contextlib.nullcontext():
        padded, transposed, low = _host(nt.to_padded_tensor(0.0)), _host(nt.transpose(1, 2)), _host(nt.amin(1))
    for i, part in enumerate(parts):
        np.testing.assert_array_equal(padded[i, :len(part)], part)
        np.testing.assert_array_equal(transposed[i], part.T)
        np.testing.assert_array_equal(low[i], part.min(0))


# -- (5) reads after a write from outside, against torch's over nt.contiguous() read after it --------------------

READS = {
    "sum ragged dim keepdim": lambda nt: _c(nt).sum(1, keepdim=True),
    "amin ragged dim": lambda nt: _c(nt).amin(1),
    "min ragged dim values": lambda nt: _c(nt).min(1).values,
    "argmax row dim": lambda nt: nt.argmax(-1),
    "log_softmax row dim": lambda nt: F.log_softmax(nt, -1),
    "linear with bias": lambda nt: _linear(nt, _w(nt, [[1.0, 2.0], [3.0, 4.0]]), _w(nt, [1.0, -1.0])),
    "to_padded_tensor -1": lambda nt: _c(nt).to_padded_tensor(-1.0),
    "unflatten sum ragged dim": lambda nt: _c(nt).unflatten(-1, (2, 1)).sum(1),
    "gelu": F.gelu,
    "pow": lambda nt: nt ** 2,
    "eq with its detach": lambda nt: nt == nt.detach(),
    "np.sin": lambda nt: np.sin(nt) if not _torch(nt) else torch.sin(nt),
    "np.maximum": lambda nt: np.maximum(nt, 1.0) if not _torch(nt) else torch.clamp(nt, min=1.0),
    "clone sum ragged dim": lambda nt: nt.clone().sum(1) if not _torch(nt) else nt.contiguous().sum(1),
    "to float32 sum ragged dim": lambda nt: nt.to(np.float32).sum(1) if not _torch(nt) else
    nt.to(torch.float32).contiguous().sum(1),
}


@pytest.mark.parametrize("read", list(READS))
def test_a_read_after_a_write_into_numpy_values_as_torch(read):
    _numpy_as_torch(lambda nt: _host(READS[read](nt)), lambda nt, taken: READS[read](nt))


def test_a_buffer_read_before_an_in_place_op_is_the_one_written():
    """The buffer read before an in-place op (``_buf``) holds what the op wrote, and a write from outside after
    the op shows in it on the next read, the same array (gathered again in place)."""
    base = _base("numpy")
    nt = _narrow("numpy", base)
    buf = nt._buf
    base[1, 2] = 100.0
    nt.add_(1)
    assert nt._buf is buf
    np.testing.assert_array_equal(buf.reshape(-1, 2)[3], [101.0, 101.0])
    base[1, 2] = -1.0
    np.testing.assert_array_equal(nt._buf.reshape(-1, 2)[3], [-1.0, -1.0])
    assert nt._buf is buf


# -- (6) every backend (CuPy's emulated: LT_CUPY_EMULATED=1) -------------------------------------------------------

def test_every_backend_views_before_and_layouts_after_a_write(backend):
    numbers = np.random.default_rng(3).standard_normal((3, 4, 2))
    values = backend.array(numbers.copy())
    nt = ln.narrow(values, 1, np.array(START), np.array(LENGTH), layout="jagged")
    heads, lod = nt.unflatten(-1, (2, 1)).transpose(1, 2), nt.to_lod_tensor()
    nt.sum(dim=1)
    values[1, 2] = backend.array(np.array([7.0, 8.0]))
    numbers[1, 2] = [7.0, 8.0]
    want = [numbers[i, s:s + n] for i, (s, n) in enumerate(zip(START, LENGTH))]
    for got, w in zip(heads.unbind(), want):
        np.testing.assert_allclose(backend.numpy(got), w.reshape(-1, 2, 1).transpose(1, 0, 2))
    heads.mul_(2)
    np.testing.assert_allclose(backend.numpy(values), 2 * numbers)
    np.testing.assert_allclose(backend.numpy(nt.sum(dim=1)), 2 * np.stack([w.sum(axis=0) for w in want]))
    original = np.random.default_rng(3).standard_normal((3, 4, 2))  # (the LoD layout: a copy made before)
    np.testing.assert_allclose(backend.numpy(lod.data), np.concatenate(
        [original[i, s:s + n] for i, (s, n) in enumerate(zip(START, LENGTH))]))


# -- (7) torch data over memory that NumPy writes (fixed: _holes.twinned; test_nested_holes_twinned.py) ------------

def test_to_torch_of_numpy_holes_sees_a_write_into_the_numpy_base():
    base = _base("numpy")
    theirs = _narrow("torch", torch.from_numpy(base))
    ours = _narrow("numpy", base).to_torch()
    _host(ours.sum(1))
    base[1, 2] = 100.0
    _equal(_host(ours.sum(1)), _host(theirs.contiguous().sum(1)))


def test_a_write_through_the_numpy_twin_shows_in_the_torch_tensor():
    base = _base("torch")
    nt = _narrow("ours", base)
    twin = nt.numpy()
    _host(nt.sum(1))
    twin.add_(1)
    np.testing.assert_array_equal(_host(nt.sum(1)), np.stack([p.sum(0) for p in _host(nt)]))

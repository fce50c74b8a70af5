"""Bugs found by a hunt over extreme shapes and dtypes across the public API.

Each test failed before its fix; the expected behaviour is real NumPy's or torch's on the same input.
Huge row counts use rows of no element (``(2**31 + 7, 0)``) or broadcast views, so they cost no memory.
"""

import os

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.sequence as ls

torch = pytest.importorskip("torch")

_WIDE_UNSIGNED = [getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)]


# -- torch uint16/32/64 data: rows move as torch's own indexing and pad_sequence move them ----------------
@pytest.mark.parametrize("dtype", _WIDE_UNSIGNED, ids=str)
def test_torch_wide_unsigned_rows_pad_gather_and_scatter(dtype):
    """torch has no index_select / index_copy / index_put for uint16/32/64 (its ``x[idx]`` and
    ``pad_sequence`` take them): to_padded, sequence_pad/unpad, first_step, t[[...]], sequence_enumerate
    and sequence_scatter raised NotImplementedError ("index_copy_cpu" not implemented for 'UInt16')."""
    top = int(torch.iinfo(dtype).max) if dtype != torch.uint64 else 2**64 - 1
    values = [top, 1, 2, 3, top - 1]
    x = torch.tensor(values, dtype=dtype)
    t = lt.LoDTensor(x, [[0, 2, 5]])
    want = torch.nn.utils.rnn.pad_sequence([x[:2], x[2:]], batch_first=True, padding_value=7)
    padded, lengths = t.to_padded(pad_value=7)
    assert padded.dtype == dtype and padded.tolist() == want.tolist()
    padded2, length = ls.sequence_pad(t, torch.tensor(7, dtype=dtype))
    assert padded2.dtype == dtype and padded2.tolist() == want.tolist()
    back = ls.sequence_unpad(lt.LoDTensor(padded2), length)
    assert back.data.dtype == dtype and back.data.reshape(-1).tolist() == values and back.lod() == [[0, 2, 5]]
    assert t.to_padded_all(pad_value=7)[0].tolist() == want.tolist()
    assert ls.sequence_first_step(t).data.tolist() == [x[0].item(), x[2].item()]
    assert ls.sequence_last_step(t).data.tolist() == [x[1].item(), x[4].item()]
    assert t[[1, 0]].data.tolist() == x[torch.tensor([2, 3, 4, 0, 1])].tolist()
    windows = ls.sequence_enumerate(t, 2)
    assert windows.data.dtype == dtype
    assert windows.data.tolist() == [[top, 1], [1, 0], [2, 3], [3, top - 1], [top - 1, 0]]
    out = ls.sequence_scatter(lt.LoDTensor(torch.zeros(2, 3, dtype=dtype)),
                              lt.LoDTensor(torch.tensor([[0], [2]]), [[0, 1, 2]]),
                              lt.LoDTensor(torch.tensor([[top], [5]], dtype=dtype), [[0, 1, 2]]))
    assert out.dtype == dtype and out.tolist() == [[top, 0, 0], [0, 0, 5]]


@pytest.mark.parametrize("dtype", _WIDE_UNSIGNED, ids=str)
def test_sequence_mask_of_torch_wide_unsigned_lengths(dtype):
    """``arange < lengths`` raised torch's "Promotion for uint16, uint32, uint64 types is not supported"."""
    lengths = torch.tensor([0, 3, 1], dtype=dtype)
    want = ls.sequence_mask(lengths.to(torch.int64), maxlen=4)
    got = ls.sequence_mask(lengths, maxlen=4)
    assert got.dtype == torch.int64 and got.tolist() == want.tolist() == [[0, 0, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0]]
    assert ls.sequence_mask(lengths).tolist() == ls.sequence_mask(lengths.to(torch.int64)).tolist()
    if dtype == torch.uint64:  # a length past int64 is longer than any maxlen, not a negative one
        huge = ls.sequence_mask(torch.tensor([2**64 - 1, 1], dtype=dtype), maxlen=3)
        assert huge.tolist() == [[1, 1, 1], [1, 0, 0]]
        assert ls.sequence_mask(np.array([2**64 - 1, 1], np.uint64), maxlen=3).tolist() == huge.tolist()


# -- a few rows of huge strided data: gather only those rows ------------------------------------------
def test_first_and_last_step_of_a_huge_broadcast_array_read_only_their_rows():
    """The NumPy gather made the whole data C-contiguous first: a first_step of a broadcast view of 2**40
    rows asked for 12 TiB (MemoryError); NumPy's own ``data[[0, 2]]`` reads two rows."""
    rows = 2**40
    data = np.broadcast_to(np.arange(3, dtype=np.float32), (rows, 3))
    t = lt.LoDTensor(data, [[0, 2, rows]])
    assert ls.sequence_first_step(t).data.tolist() == data[[0, 2]].tolist()
    assert ls.sequence_last_step(t).data.tolist() == data[[1, rows - 1]].tolist()
    assert ls.sequence_pool(t, "first").data.shape == (2, 3)


@pytest.mark.parametrize("layout", ["every_other", "reversed", "fortran"])
def test_gathers_of_strided_data_equal_numpy(layout):
    base = np.arange(400 * 6, dtype=np.float64).reshape(400, 6)
    data = {"every_other": np.repeat(base, 2, axis=0)[::2], "reversed": base[::-1],
            "fortran": np.asfortranarray(base)}[layout]
    assert not data.flags.c_contiguous
    lod = [[0, 1, 150, 150, 400]]
    t = lt.LoDTensor(data, lod)
    first = ls.sequence_first_step(t).data
    assert first[[0, 1, 3]].tolist() == data[[0, 1, 150]].tolist() and first[2].tolist() == [0.0] * 6
    last = ls.sequence_last_step(t).data
    assert last[[0, 1, 3]].tolist() == data[[0, 149, 399]].tolist()
    sliced = ls.sequence_slice(t, np.array([[0], [5], [0], [10]]), np.array([[1], [2], [0], [3]]))
    assert sliced.data.tolist() == data[[0, 6, 7, 160, 161, 162]].tolist() and sliced.lod() == [[0, 1, 3, 3, 6]]
    want = np.concatenate([data[:1], data[1:150][::-1], data[150:][::-1]])
    assert ls.sequence_reverse(t).data.tolist() == want.tolist()


# -- rows of no element: (N, 0, 3) -----------------------------------------------------------------------
@pytest.mark.parametrize("row", [(0,), (0, 3), (3, 0)], ids=str)
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_to_padded_all_of_rows_without_elements(row, library):
    """``out.reshape((-1,) + row)`` with a row of no element: "cannot reshape array of size 0 into shape
    (0,3)" (torch: "the unspecified dimension size -1 can be any value and is ambiguous")."""
    data = np.zeros((5,) + row, np.float32)
    if library == "torch":
        data = torch.from_numpy(data)
    t = lt.LoDTensor(data, [[0, 2, 2, 5]])
    padded, masks = t.to_padded_all(pad_value=1.0)
    want = torch.nested.to_padded_tensor(
        torch.nested.nested_tensor([torch.zeros((n,) + row) for n in (2, 0, 3)], layout=torch.jagged), 1.0)
    assert tuple(padded.shape) == tuple(want.shape) == (3, 3) + row
    assert np.asarray(masks[0]).tolist() == [[True, True, False], [False] * 3, [True] * 3]
    assert lt.from_padded_all(padded, masks).lod() == t.lod()
    two = lt.LoDTensor(data, [[0, 1, 3], [0, 2, 2, 5]])
    assert tuple(two.to_padded_all()[0].shape) == (2, 2, 3) + row


def test_pad_backward_with_rows_without_elements():
    """PadCPU's backward reshaped the gradient with -1: ambiguous for rows of no element (torch's
    pad_sequence gives the (5, 0, 3) gradient)."""
    x = torch.zeros(5, 0, 3, requires_grad=True)
    t = lt.LoDTensor(x, [[0, 2, 2, 5]])
    padded, _ = t.to_padded()
    padded.sum().backward()
    ref = torch.zeros(5, 0, 3, requires_grad=True)
    torch.nn.utils.rnn.pad_sequence([ref[:2], ref[2:2], ref[2:]], batch_first=True).sum().backward()
    assert x.grad.shape == ref.grad.shape == (5, 0, 3)
    y = torch.zeros(5, 0, 3, requires_grad=True)
    out = ls.sequence_unpad(*ls.sequence_pad(lt.LoDTensor(y, [[0, 2, 2, 5]]), 0.0))
    out.data.sum().backward()
    assert y.grad.shape == (5, 0, 3) and out.lod() == [[0, 2, 2, 5]]


# -- -0.0 as a pad value ----------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [1, 3, 64])
def test_a_negative_zero_pad_value_pads_negative_zeros(width):
    """The NumPy kernels took any pad value equal to 0 for a zero fill (``np.zeros``): -0.0 came out +0.0.
    NumPy's ``np.pad(..., constant_values=-0.0)`` and torch's ``pad_sequence(padding_value=-0.0)`` keep the sign."""
    data = np.ones((5, width), np.float32)
    t = lt.LoDTensor(data, [[0, 2, 2, 5]])
    want = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(data[a:b]) for a, b in ((0, 2), (2, 2), (2, 5))],
                                           batch_first=True, padding_value=-0.0).numpy()
    assert np.signbit(np.pad(np.ones(1), (0, 1), constant_values=-0.0))[1]
    for got in (t.to_padded(pad_value=-0.0)[0], ls.sequence_pad(t, np.float32(-0.0))[0].data,
                t.to_padded_all(pad_value=-0.0)[0], t.to_torch().to_padded(pad_value=-0.0)[0].numpy()):
        got = np.asarray(got)
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    assert np.signbit(np.asarray(t.to_padded(pad_value=-0.0, maxlen=4)[0])[0, 2:]).all()
    complex_pad = lt.LoDTensor(data.astype(np.complex64), [[0, 2, 2, 5]]).to_padded(pad_value=complex(0.0, -0.0))[0]
    assert np.signbit(complex_pad[1].imag).all() and not np.signbit(complex_pad[1].real).any()
    assert not np.signbit(np.asarray(t.to_padded(pad_value=0.0)[0])).any()  # +0.0 stays +0.0


# -- save/load of 2**31 rows or more ------------------------------------------------------------------
def test_save_and_load_past_two_to_the_31_rows(tmp_path):
    """Arrow's IPC writer refuses arrays of 2**31 rows or more unless told the format's int64 lengths may
    be used (``allow_64bit``): lt.save raised ArrowCapacityError for a tensor to_arrow() converts."""
    pytest.importorskip("pyarrow")
    rows = 2**31 + 7
    for row in ((0,), (0, 2)):
        t = lt.LoDTensor(np.zeros((rows,) + row, np.int8), [[0, 1, 2**31 + 3, rows]])
        path = os.path.join(tmp_path, "big.arrow")
        lt.save(path, t)
        for mmap in (True, False):
            back = lt.load(path, mmap=mmap)
            assert back.lod() == [[0, 1, 2**31 + 3, rows]] and back.shape() == [rows, *row] and back.dtype == np.int8
    small = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    lt.save(os.path.join(tmp_path, "small.arrow"), small)
    again = lt.load(os.path.join(tmp_path, "small.arrow"))
    assert again.lod() == small.lod() and again.data.tolist() == small.data.tolist()


# -- interpreter exit ------------------------------------------------------------------------------------
def test_no_exception_at_interpreter_exit_from_cached_plans():
    """A plan cache entry's weakref callback read the module global ``_PLANS``, which interpreter exit may
    have set to None before the LoD holding the plan went: "Exception ignored in: <function _cached_plan.
    <locals>.<lambda>> ... AttributeError: 'NoneType' object has no attribute 'pop'" on stderr, seen after a
    sum pool of big-endian float32 data (a route with a cached plan) with torch imported."""
    import subprocess
    import sys

    script = (
        "import numpy as np, torch\n"
        "import lodtensor as lt, lodtensor.sequence as ls\n"
        "t = lt.LoDTensor(np.ones((200, 8), '>f4'), [[0, 3, 3, 40, 41, 200]])\n"
        "out = ls.sequence_pool(t, 'sum')\n"
        "assert out.data[:, 0].tolist() == [3.0, 0.0, 37.0, 1.0, 159.0]\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert "Exception ignored" not in run.stderr, run.stderr


# -- a maxlen no array can hold ---------------------------------------------------------------------------
@pytest.mark.parametrize("maxlen", [2**62, 2**64 - 1, np.uint64(2**64 - 1)], ids=["2**62", "2**64-1", "uint64"])
def test_a_maxlen_past_any_array_names_maxlen(maxlen):
    """to_padded / sequence_pad with a huge maxlen raised NumPy's "Maximum allowed dimension exceeded" or
    OverflowError "Python int too large to convert to C long" (from the pad plan's arithmetic), naming nothing."""
    t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    with pytest.raises(ValueError, match=f"maxlen={int(maxlen)} makes the padded result .* larger than any array"):
        t.to_padded(maxlen=maxlen)
    with pytest.raises(ValueError, match=r"sequence_pad\(\): maxlen=.* larger than any array"):
        ls.sequence_pad(t, 0.0, maxlen=maxlen)
    with pytest.raises(ValueError, match="larger than any array"):
        t.to_torch().to_padded(maxlen=maxlen)
    with pytest.raises(ValueError, match="larger than any array"):
        lt.LoDTensor(np.zeros((5, 0)), [[0, 2, 5]]).to_padded(maxlen=maxlen)
    assert t.to_padded(maxlen=4)[0].tolist() == [[0.0, 1.0, 0.0, 0.0], [2.0, 3.0, 4.0, 0.0]]
    assert lt.LoDTensor(np.zeros((5, 0)), [[0, 2, 5]]).to_padded(maxlen=2**40)[0].shape == (2, 2**40, 0)

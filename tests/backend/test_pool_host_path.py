"""The host path of the GPU pool and softmax ops (issue #24): what is skipped per call and what is cached.

A kernel Function of the torch-CUDA route runs its ``forward`` as a plain call where autograd would
record nothing (``_cuda._untracked_forward``), and takes torch's ``apply`` wherever a gradient, a
forward-mode tangent or a torch.func transform needs it. The kernel lookup (``_launch._kernel``), the
launch's scalar arguments (on the cached ``Layout``) and the Place of a device (``place_of``) are made
once: each cache here must follow everything its answer depends on, so that none serves a stale entry.
The data fast paths (the data itself where it already is the kernels' ``[rows, width]``) must give
what the general path gives for data that is not (non-contiguous, 3-D rows, float16).
"""

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.backend.cupy import _launch, _tuning  # noqa: E402
from lodtensor.backend.cupy import cuda as _kernels  # noqa: E402
from lodtensor.backend.torch import _cuda  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")

LENGTHS = [3, 0, 40, 1, 0, 7, 300]
OFFSETS = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
OPS = {
    "sum": lambda t: S.sequence_pool(t, "sum"),
    "average": lambda t: S.sequence_pool(t, "average", pad_value=-1.0),
    "max": lambda t: S.sequence_pool(t, "max", pad_value=-2.0),
    "softmax": S.sequence_softmax,
}


def _data(width=6, requires_grad=False):
    g = torch.Generator().manual_seed(width)
    return torch.randn((int(OFFSETS[-1]), width), generator=g, dtype=torch.float64).requires_grad_(requires_grad)


def _numpy(op, data):
    return OPS[op](lt.LoDTensor(data.detach().numpy(), [OFFSETS])).data


def _counting_setup(monkeypatch):
    """Count the calls of both kernel Functions' ``setup_context`` (torch's ``apply`` calls it)."""
    calls = []
    for cls in (_cuda.SegmentReduce, _cuda.SegmentSoftmax):
        original = cls.setup_context

        def counted(ctx, inputs, output, original=original):
            calls.append(1)
            return original(ctx, inputs, output)

        monkeypatch.setattr(cls, "setup_context", staticmethod(counted))
    return calls


@pytest.mark.parametrize("op", sorted(OPS))
def test_untracked_calls_skip_autograd_and_match_numpy(route, monkeypatch, op):
    calls = _counting_setup(monkeypatch)
    data = _data()
    out = OPS[op](lt.LoDTensor(data, [OFFSETS])).data
    assert out.grad_fn is None and not out.requires_grad
    assert not calls  # no autograd context made: the forward ran as a plain call
    np.testing.assert_allclose(out.numpy(), _numpy(op, data), rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # a tensor that needs a gradient, with grad mode off: nothing to record either
        out = OPS[op](lt.LoDTensor(_data(requires_grad=True), [OFFSETS])).data
    assert out.grad_fn is None and not calls


@pytest.mark.parametrize("op", sorted(OPS))
def test_gradients_tangents_and_vmap_still_take_the_function(route, monkeypatch, op):
    calls = _counting_setup(monkeypatch)
    data = _data(requires_grad=True)
    out = OPS[op](lt.LoDTensor(data, [OFFSETS])).data
    assert out.grad_fn is not None and calls
    weight = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).reshape(out.shape)
    (out * weight).sum().backward()
    ref = data.detach().clone().requires_grad_()  # the same op on the CPU path (torch's own ops)
    monkeypatch.setattr(_cuda, "_EMULATED", False)
    want = OPS[op](lt.LoDTensor(ref, [OFFSETS])).data
    (want * weight).sum().backward()
    monkeypatch.setattr(_cuda, "_EMULATED", True)
    np.testing.assert_allclose(data.grad.numpy(), ref.grad.numpy(), rtol=1e-10, atol=1e-12)

    import torch.autograd.forward_ad as fwad  # noqa: PLC0415

    plain = _data()
    with fwad.dual_level():  # a dual tensor: its tangent through the Function's jvp
        tangent = fwad.unpack_dual(OPS[op](lt.LoDTensor(fwad.make_dual(plain, torch.ones_like(plain)),
                                                        [OFFSETS])).data).tangent
    assert tangent is not None

    batch = torch.stack([plain, 2 * plain])  # vmap over the data: the Function's vmap rule
    got = torch.func.vmap(lambda d: OPS[op](lt.LoDTensor(d, [OFFSETS])).data)(batch)
    for i in range(2):
        np.testing.assert_allclose(got[i].numpy(), _numpy(op, batch[i]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["transposed", "3-d rows", "float16", "float32", "big-endian"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_data_not_in_the_kernels_layout_gives_the_same(route, emulated, case, op):
    """The fast paths hand the data itself to the kernels only where it already is contiguous
    ``[rows, width]`` of their dtype: the other data goes through the conversions, on both routes."""
    base = _data(width=12).detach()
    if case == "transposed":
        data = base.t().contiguous().t()  # the same values, column-major
        assert not data.is_contiguous()
    elif case == "3-d rows":
        data = base.reshape(-1, 3, 4)
    elif case == "big-endian":
        data = base
    else:
        data = base.to(getattr(torch, case))
    want = _numpy(op, data.to(torch.float64) if case == "float16" else data)
    tol = 2e-3 if case == "float16" else 1e-5 if case == "float32" else 1e-12
    if case == "transposed":  # (the stub copies what it is given into C order: transposed there)
        on_stub = emulated.array(data.numpy().T).T
        assert not on_stub.flags.c_contiguous
    elif case == "big-endian":  # named "float64" as the native dtype is (torch has no such dtype)
        on_stub = emulated.array(data.numpy().astype(">f8"))
        assert on_stub.dtype.name == "float64" and not on_stub.dtype.isnative
    else:
        on_stub = emulated.array(data.numpy())
    for x in (data, on_stub):  # torch-CUDA route, then CuPy on its stub
        emulated.stub.launches.clear()
        got = OPS[op](lt.LoDTensor(x, [OFFSETS])).data
        assert emulated.stub.launches  # the kernels ran
        got = got.numpy() if isinstance(got, torch.Tensor) else emulated.numpy(got)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_the_kernel_lookup_follows_the_device_and_the_instantiation(emulated, monkeypatch):
    import cupy  # noqa: PLC0415 - the stub the fixture installed

    def on(device, **kw):
        monkeypatch.setattr(cupy.cuda, "Device", lambda index=None: type("D", (), {"id": device})())
        return _launch._kernel(cupy, "segment", "reduce", **kw)

    first = on(0, op="sum", dtype="float32", pack=4)
    assert on(0, op="sum", dtype="float32", pack=4) is first  # found once
    assert on(1, op="sum", dtype="float32", pack=4) is not first  # another device: its own function
    want = {
        ("sum", "float32", 4): _kernels.kernel_name("reduce", op="sum", dtype="float32", pack=4),
        ("max", "float32", 4): _kernels.kernel_name("reduce", op="max", dtype="float32", pack=4),
        ("sum", "float64", 2): _kernels.kernel_name("reduce", op="sum", dtype="float64", pack=2),
        ("sum", "float32", 1): _kernels.kernel_name("reduce", op="sum", dtype="float32", pack=1),
    }
    for (op, dtype, pack), name in want.items():
        assert on(0, op=op, dtype=dtype, pack=pack).name == name


def _reduce_args(stub, rows, n):
    """The scalar arguments of the piece kernel's launch for ``rows`` x 128 float32 in ``n`` sequences."""
    x = stub.asarray(np.zeros((rows, 128), np.float32))
    offsets = stub.asarray(np.linspace(0, rows, n + 1).astype(np.int64))
    stub.launches.clear()
    stub.execute = None  # the launches recorded, not run (the arguments are what is checked)
    _launch.segment_reduce(stub, "sum", x, offsets, n, 0, stub.empty)
    (args,) = [a for name, _, _, a in stub.launches if name.startswith("lt_segment_reduce<")]
    return args[5:]  # n, width, log2cw, chunk, fill, by_block, tiles_first


@pytest.mark.parametrize("setting", ["sizes", "CHUNK_STEPS", "TILES_FIRST", "REDUCE_BLOCK_STEPS"])
def test_the_launch_arguments_follow_the_sizes_and_settings(emulated, monkeypatch, setting):
    """The scalar arguments kept on the cached Layout are NumPy scalars of the kernels' types and the
    values of these sizes and settings: a Layout kept past a change would pass the old ones."""
    stub = emulated.stub
    monkeypatch.setattr(_tuning, "REDUCE_BLOCK_STEPS", 0)  # the base: every sequence by the piece kernel
    rows, n = 40000, 64
    base = _reduce_args(stub, rows, n)
    types = [np.int64, np.int64, np.int32, np.int64, np.float32, np.int32, np.int32]
    assert [type(a) for a in base] == types
    lay = _launch.layout(stub.asarray(np.zeros((rows, 128), np.float32)), n)
    assert [int(a) for a in base] == [n, 128, lay.log2cw, lay.chunk, 0, 0, int(lay.tiles_first)]
    if setting == "sizes":
        changed, expect = _reduce_args(stub, rows, n + 1), {0: n + 1}
    elif setting == "CHUNK_STEPS":
        monkeypatch.setattr(_kernels, "CHUNK_STEPS", _kernels.CHUNK_STEPS * 2)
        changed, expect = _reduce_args(stub, rows, n), {3: 2 * lay.chunk}
    elif setting == "TILES_FIRST":
        monkeypatch.setattr(_tuning, "TILES_FIRST", not _tuning.TILES_FIRST)
        changed, expect = _reduce_args(stub, rows, n), {6: int(not lay.tiles_first)}
    else:  # not in the Layout's key: read per call (the one-piece sequences then go one per block)
        monkeypatch.setattr(_tuning, "REDUCE_BLOCK_STEPS", 1)
        changed, expect = _reduce_args(stub, rows, n), {5: 1}
    for i, value in enumerate(base):
        assert int(changed[i]) == expect.get(i, int(value)), (setting, i)
        assert type(changed[i]) is types[i]


def test_the_place_of_a_device_follows_the_device():
    from lodtensor.place import CUDAPlace, DevicePlace, place_of  # noqa: PLC0415

    class Backend:  # a backend whose arrays name their own device
        @staticmethod
        def device_of(array):
            return array

    for device, want in [("cuda:0", CUDAPlace(0)), ("cuda:1", CUDAPlace(1)), ("cuda:0", CUDAPlace(0)),
                         ("meta", DevicePlace("meta")), ("cpu", lt.CPUPlace())]:
        got = place_of(device, Backend)
        assert got == want and type(got) is type(want)
        assert place_of(device, Backend) is got  # found once per device


def test_the_index_is_the_offsets_themselves_only_where_they_are_contiguous_int64(emulated):
    be = emulated.be
    offsets = emulated.array(np.arange(12, dtype=np.int64))
    assert be._index(offsets) is offsets  # a LoD's device offsets: no conversion
    for other in (offsets[::2], emulated.array(np.arange(6, dtype=np.int32)), np.arange(6), [0, 2, 4]):
        got = be._index(other)
        assert got.dtype == np.int64 and got.flags.c_contiguous
        np.testing.assert_array_equal(emulated.numpy(got), np.asarray(other).astype(np.int64))


def test_the_kernel_dtypes_follow_the_op(route):
    """The torch route's (compute, accumulator) dtypes are kept per op and dtype: the mean of int32 rows
    accumulates in float64 where their sum stays int32 (an entry kept per dtype alone would mix them)."""
    be = lt.get_backend("torch")
    data = torch.arange(int(OFFSETS[-1]) * 3, dtype=torch.int32).reshape(-1, 3) % 7
    offsets = torch.from_numpy(OFFSETS.copy())
    lengths = np.maximum(np.diff(OFFSETS), 1)[:, None]
    sums = np.add.reduceat(data.numpy().astype(np.int64), OFFSETS[:-1].clip(max=len(data) - 1))
    sums[np.diff(OFFSETS) == 0] = 0
    for _ in range(2):  # each op after the other, twice
        total = be.segment_sum(data, offsets)
        mean = be.segment_mean(data, offsets)
        assert total.dtype == torch.int32 and mean.dtype == torch.float64
        np.testing.assert_array_equal(total.numpy(), sums)
        np.testing.assert_allclose(mean.numpy(), sums / lengths, rtol=1e-12)
    assert {("sum", torch.int32), ("mean", torch.int32)} <= set(_cuda._KERNEL_DTYPES)

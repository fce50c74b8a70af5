"""Host data never meets device data outside ``Backend.from_host``: checked without a GPU.

The torch backend runs every op below on tensors on torch's ``meta`` device, a
device with no memory: it takes the same code paths as CUDA (the CPU-only
kernels check for ``cpu``), and under :class:`StrictDevices` any torch call
that mixes a host tensor with a device tensor raises as CUDA would (torch
itself lets a CPU index reach a meta tensor; CUDA does not). Reading values back
(``.item()``, ``bool(t)``, NumPy conversion) raises on ``meta`` too, so the test
also finds device-to-host synchronisations in forward paths. Shapes and dtypes
must equal those of the same op on CPU data.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.overrides import TorchFunctionMode  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as seq  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


class StrictDevices(TorchFunctionMode):
    """Raise when one torch call takes tensors of two devices (CPU 0-d scalars excepted, as CUDA allows)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {t.device.type for t in _tensors((args, kwargs)) if t.dim() > 0 or t.device.type != "cpu"}
        if len(devices) > 1:
            raise RuntimeError(f"Expected all tensors to be on the same device, but {func} got {sorted(devices)}")
        return func(*args, **kwargs)


def _data(rows, width, dtype=torch.float32, device="cpu"):
    gen = torch.Generator().manual_seed(rows * 31 + width)
    if dtype.is_floating_point:
        host = torch.randn((rows, width), generator=gen, dtype=dtype)
    else:
        host = torch.randint(0, 9, (rows, width), generator=gen, dtype=dtype)
    return host.to(device)


LOD = [[0, 2, 3], [0, 3, 3, 7]]  # two levels, an empty sequence at the last


def _tensor(device, width=4, dtype=torch.float32, lod=LOD):
    return lt.LoDTensor(_data(lod[-1][-1], width, dtype, device), lod)


def _masked_fill_by_own_mask(nt):
    return nt.masked_fill(nt < 0, 0.0).values()


# name -> op(tensor builder) returning arrays or LoDTensors; each runs on CPU and on meta
def _pool(kind):
    return lambda mk: seq.sequence_pool(mk(), kind)


OPS = {
    **{f"pool_{kind}": _pool(kind) for kind in ("sum", "average", "sqrt", "max", "min", "first", "last")},
    "pool_int_sum": lambda mk: seq.sequence_pool(mk(dtype=torch.int64), "sum"),
    "pool_int_average": lambda mk: seq.sequence_pool(mk(dtype=torch.int64), "average"),
    "softmax": lambda mk: seq.sequence_softmax(mk(width=1)),
    "softmax_half": lambda mk: seq.sequence_softmax(mk(width=1, dtype=torch.float16)),
    "pad": lambda mk: seq.sequence_pad(mk(), 0.0),
    # the lengths are host metadata (they make the LoD): a device length tensor is read back once
    "unpad": lambda mk: seq.sequence_unpad(seq.sequence_pad(mk(), 0.0)[0], np.array([3, 0, 4])),
    "to_padded": lambda mk: mk().to_padded(),
    "to_padded_all": lambda mk: mk().to_padded_all(),
    "enumerate": lambda mk: seq.sequence_enumerate(mk(width=1, dtype=torch.int64), 3),
    "reverse": lambda mk: seq.sequence_reverse(mk()),
    "expand_as": lambda mk: seq.sequence_expand_as(lt.LoDTensor(mk().data[:4], [[0, 1, 2, 3, 4]]),
                                                   lt.LoDTensor(mk().data, [[0, 2, 3, 3, 7]])),
    "concat": lambda mk: seq.sequence_concat([mk(), mk()]),
    "first_step": lambda mk: seq.sequence_first_step(mk()),
    "last_step": lambda mk: seq.sequence_last_step(mk()),
    "index": lambda mk: mk()[1],
    "reshape": lambda mk: seq.sequence_reshape(mk(), 2),
    # a nested mask made on the device (found on an H100: its dtype was asked of a host copy)
    "nested_masked_fill": lambda mk: _masked_fill_by_own_mask(mk().to_nested()),
    "nested_masked_fill_scalar": lambda mk: mk().to_nested().masked_fill(True, 1.0).values(),
}


def _host(*shape, seed=0):
    """A host parameter (NumPy): the layers put it on the data's device."""
    return np.random.RandomState(seed).uniform(-0.5, 0.5, size=shape)


def _labels(high):
    """Host ids over LOD's rows (labels are checked on the host: a device label is read back once)."""
    return lt.LoDTensor(np.arange(7).reshape(7, 1) % high, LOD)


def _trained(layer, width):
    """``layer`` forward and backward on data that requires grad: the input's gradient."""

    def op(mk):
        data = mk(width=width).data.detach().requires_grad_()
        out = layer(lt.LoDTensor(data, LOD))
        (out[0] if isinstance(out, tuple) else out).data.sum().backward()
        return data.grad

    return op


# lodtensor.nn's layers (#23 item 3): the time plans, context rows, label paths and NumPy
# parameters reach the data through the backend, never as host tensors
OPS.update({
    "nn_fc": lambda mk: F.fc(mk(), _host(4, 3), _host(3), act="tanh"),
    "nn_embedding": lambda mk: F.embedding(lt.LoDTensor(np.arange(7).reshape(7, 1) % 5, LOD),
                                           mk(width=3).data[:5], padding_idx=0),
    "nn_sequence_conv": lambda mk: F.sequence_conv(mk(), _host(12, 2), _host(2), act="relu"),
    "nn_sequence_conv_padding": lambda mk: F.sequence_conv(mk(), _host(12, 2), padding_trainable=True,
                                                           padding_data=_host(2, 4)),
    "nn_row_conv": lambda mk: F.row_conv(mk(), _host(3, 4)),
    "nn_lstm": lambda mk: F.dynamic_lstm(mk(width=8), _host(2, 8), _host(1, 14), _host(3, 2), _host(3, 2)),
    "nn_lstm_reverse": lambda mk: F.dynamic_lstm(mk(width=8), _host(2, 8), _host(1, 8), use_peepholes=False,
                                                 is_reverse=True),
    "nn_lstm_backward": _trained(lambda x: F.dynamic_lstm(x, _host(2, 8), _host(1, 14), _host(3, 2)), 8),
    "nn_gru": lambda mk: F.dynamic_gru(mk(width=6), _host(2, 6), _host(1, 6), _host(3, 2), origin_mode=True),
    "nn_gru_backward": _trained(lambda x: F.dynamic_gru(x, _host(2, 6), _host(1, 6), is_reverse=True), 6),
    "nn_crf": lambda mk: F.linear_chain_crf(mk(width=3), _labels(3), _host(5, 3)),
    "nn_crf_decoding": lambda mk: F.crf_decoding(mk(width=3), _host(5, 3), label=_labels(3)),
})


def _results(out):
    if isinstance(out, lt.LoDTensor):
        return [(tuple(out.data.shape), out.data.dtype, out.lod())]
    if isinstance(out, (tuple, list)):
        return [r for item in out for r in _results(item)]
    return [(tuple(out.shape), out.dtype, None)]


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_run_on_a_device_without_host_data(name):
    op = OPS[name]
    want = _results(op(lambda **kw: _tensor("cpu", **kw)))
    with StrictDevices():
        got = op(lambda **kw: _tensor("meta", **kw))
    assert _results(got) == want
    for item in got if isinstance(got, (tuple, list)) else [got]:
        data = item.data if isinstance(item, lt.LoDTensor) else item
        if isinstance(data, torch.Tensor):
            assert data.device.type == "meta", name


def test_strict_mode_catches_host_data_meeting_device_data():
    """The check itself: what CUDA refuses, it refuses."""
    data = torch.empty((4, 2), device="meta")
    with StrictDevices(), pytest.raises(RuntimeError, match="same device"):
        data.index_select(0, torch.tensor([0, 1]))  # torch alone lets this pass on meta
    with StrictDevices(), pytest.raises(RuntimeError, match="same device"):
        data * torch.ones(4, 1)
    with StrictDevices():
        data * torch.tensor(2.0)  # a 0-d CPU scalar is allowed, as on CUDA
    with pytest.raises((RuntimeError, TypeError)):
        np.asarray(data)  # no host copy of device data

"""torch CUDA tensors on the project's CUDA kernels, as autograd Functions.

Segment sum, mean, max and min, segment softmax, pad and unpad of CUDA tensors run the
kernels of ``backend/cupy/cuda/*.cu`` (launched by ``backend/cupy/_launch.py``) on torch's
own memory: the tensors are viewed by CuPy through ``__cuda_array_interface__`` (no copy),
outputs come from torch's caching allocator, and the launches go on torch's current stream
of the tensor's device. Nothing is read back to the host: sizes come from shapes and the
LoD's host offsets. Every backward pass is a kernel too (an ``index_select`` by segment ids made on the device
when needed, a segment sum, pad or unpad: op code never asks the LoD for host ids here).

Where CuPy is not installed, under ``torch.compile``/torch.func transforms, or for dtypes the
kernels lack (bfloat16, complex), the torch backend keeps its torch ops. ``_EMULATED``
(tests only) sends CPU tensors down this route with the kernels emulated on the CPU
behind a cupy stub (``tests/backend/cuda_emu.py``), so the host code here runs without a GPU.
"""

import contextlib
import inspect
import math
import sys
import weakref

import numpy as np
import torch
from torch.autograd import forward_ad as _forward_ad

from .._placement import is_frozen
from ..cupy import _launch, _tuning
from ..cupy import cuda as _kernels
from . import _jvp, _launching
from ._rows import segment_ids
from ._vmap import legacy_batched, rows_rule, wrapped

__all__ = ["fits", "SegmentReduce", "SegmentSoftmax", "Pad", "Unpad"]

_CUPY = None  # cupy once imported; False when it is not installed
_EMULATED = False
_NAMES = {
    torch.float16: "float16", torch.float32: "float32", torch.float64: "float64", torch.int8: "int8",
    torch.uint8: "uint8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64", torch.bool: "bool",
}


def _cupy():
    global _CUPY  # noqa: PLW0603 - a lazily filled module cache
    if _EMULATED:
        return sys.modules.get("cupy")
    if _CUPY is None:
        try:
            import cupy  # noqa: PLC0415 - optional: the GPU extra

            _CUPY = cupy
        except Exception:  # noqa: BLE001 - an unusable CuPy (no driver, wrong CUDA) is no CuPy
            _CUPY = False
    return _CUPY or None


def fits(x, *, words=False):
    """Whether tensor ``x`` takes the kernels: a CUDA tensor (a CPU one when emulated) of a dtype they
    compute (``words``: any dtype of 1-8 bytes, for pad/unpad's plain copies), outside tracing."""
    if not (x.device.type == "cuda" or (_EMULATED and x.device.type == "cpu")):
        return False
    if type(x) is not torch.Tensor or x.is_nested or x.layout != torch.strided or legacy_batched(x):
        return False  # (a legacy vmap batch has no memory for a kernel; torch.func's take the vmap rules)
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    supported = x.element_size() in _kernels.WORDS and not x.is_complex() if words else x.dtype in _NAMES
    return supported and x.dim() >= 1 and _cupy() is not None


def _native(dtype):
    return _kernels.compute_dtype(_NAMES[dtype])


# (id(offsets), id(cupy module), device) -> (weak reference of a frozen offsets tensor, its CuPy view)
_OFFSET_VIEWS = {}
_NO_CONTEXT = contextlib.nullcontext()  # (reentrant and stateless: one serves every emulated launch)
_TORCH_DTYPES = {}  # NumPy dtype or its name -> the torch dtype (filled by single stores: no lock)
_NUMPY_DTYPES = {}  # torch dtype -> the NumPy dtype
_KERNEL_DTYPES = {}  # (op, torch dtype) -> (compute dtype, accumulator dtype), torch's


def _torch_dtype(dtype):
    """The torch dtype of NumPy ``dtype`` (or its name), found once per dtype (an empty NumPy array
    through ``torch.from_numpy``: microseconds a call, four calls an op)."""
    found = _TORCH_DTYPES.get(dtype)
    if found is None:
        found = _TORCH_DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype
    return found


def _kernel_dtypes(op, dtype):
    """(the kernels' compute dtype, the accumulator dtype of ``op`` in it) for torch ``dtype``, as torch dtypes:
    found once per (op, dtype) (four lookups and two dtype conversions a call otherwise)."""
    found = _KERNEL_DTYPES.get((op, dtype))
    if found is None:
        native = _native(dtype)
        found = _KERNEL_DTYPES[(op, dtype)] = (_torch_dtype(native), _torch_dtype(_kernels.accumulator(op, native)))
    return found


def _numpy_dtype(dtype):
    """The NumPy dtype of torch ``dtype`` (its name's last part), found once per dtype."""
    found = _NUMPY_DTYPES.get(dtype)
    if found is None:
        found = _NUMPY_DTYPES[dtype] = np.dtype(str(dtype).rsplit(".", 1)[-1])
    return found


class _Device:
    """The kernels' context for tensors on ``device``: its CUDA device current, torch's current stream
    as CuPy's, and an allocator of torch tensors viewed by CuPy (``tensor(view)`` gives the tensor back)."""

    def __init__(self, device):
        self.xp = _cupy()
        self.device = device
        self._made = {}
        self._result = None

    def result(self, shape, dtype):
        """Make the next :meth:`alloc` (the op's output: a kernel's ``[rows, width]`` array of words or
        values) a view of a fresh tensor of ``shape`` and ``dtype``, which :meth:`tensor` then gives
        back as it is: a Function that returned a reshape or a ``view(dtype)`` of its output would
        return a view, which autograd forbids writing in place (``segment_mean``'s own ``div_``)."""
        self._result = (tuple(map(int, shape)), dtype)
        return self

    def alloc(self, shape, dtype):
        shape = tuple(map(int, shape))
        if self._result is not None:
            full, full_dtype = self._result
            self._result = None
            t = torch.empty(full, dtype=full_dtype, device=self.device)
            kind = _torch_dtype(dtype)
            # (the tensor itself where the kernel's array is its shape and dtype: the same memory, shape
            # and strides as the views would give, two views fewer a call)
            view = self.view(t if full == shape and kind == full_dtype else t.view(kind).view(shape))
        else:
            t = torch.empty(shape, dtype=_torch_dtype(dtype), device=self.device)
            view = self.view(t)
        self._made[id(view)] = t
        return view

    def view(self, t):
        """A CuPy view of tensor ``t``'s memory: no copy, and no synchronisation (``cupy.asarray`` of a
        tensor would synchronise torch's stream through ``__cuda_array_interface__``)."""
        t = t.detach()
        xp = self.xp
        if self.device.type != "cuda":  # emulated: the stub views a CPU tensor's memory
            return xp.asarray(t)
        dtype = _numpy_dtype(t.dtype)
        size = t.element_size()
        memory = xp.cuda.MemoryPointer(xp.cuda.UnownedMemory(t.data_ptr(), t.numel() * size, t, self.device.index), 0)
        if t.is_contiguous():  # (CuPy makes C strides itself: no strides tuple to build and check)
            return xp.ndarray(tuple(t.shape), dtype=dtype, memptr=memory)
        return xp.ndarray(tuple(t.shape), dtype=dtype, memptr=memory, strides=tuple(s * size for s in t.stride()))

    def offsets(self, offsets):
        """:meth:`view` of the offsets tensor ``offsets``, made once for a LoD's frozen device copy
        (``_placement.is_frozen``: never written, its memory fixed) and kept while it lives, as its
        plan is (``_launch.plan``): a view costs microseconds of host time per launch on a device."""
        if not is_frozen(offsets):
            return self.view(offsets.contiguous())
        key = (id(offsets), id(self.xp), self.device)
        hit = _OFFSET_VIEWS.get(key)
        if hit is not None and hit[0]() is offsets:
            return hit[1]
        view = self.view(offsets.contiguous())  # (holds offsets' memory, not offsets: the entry goes with it)
        _OFFSET_VIEWS[key] = (weakref.ref(offsets, lambda _ref, key=key, views=_OFFSET_VIEWS: views.pop(key, None)),
                              view)
        return view

    def tensor(self, view):
        return self._made[id(view)]

    def launching(self):
        """The context the kernels launch in: the device current and torch's stream CuPy's (emulated: none)."""
        if self.device.type != "cuda":  # emulated
            return _NO_CONTEXT
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return _launching.Launch(self.xp.cuda, index, _launching.stream_of(self.xp.cuda, index))


def _reduce(op, data, offsets, empty):
    """``op`` over each sequence of ``data``'s rows (the kernels' result dtypes, cast as the contract says)."""
    n = offsets.numel() - 1
    row_shape = tuple(data.shape[1:])
    rows, width = int(data.shape[0]), math.prod(row_shape)
    result = data.dtype if op != "mean" or data.is_floating_point() else torch.float64
    if n <= 0 or width == 0:
        return torch.full((max(n, 0),) + row_shape, empty, dtype=result, device=data.device)
    native, acc = _kernel_dtypes(op, data.dtype)
    dev = _Device(data.device).result((n,) + row_shape, acc)
    x = _rows(data, native, rows, width)
    with dev.launching():
        out = _launch.segment_reduce(dev.xp, op, dev.view(x), dev.offsets(offsets), n, empty, dev.alloc,
                                     owner=offsets)  # (a LoD's frozen copy keeps its plan: _launch.plan)
    return _as(dev.tensor(out), result)


def _rows(data, dtype, rows, width):
    """``data`` as the kernels' contiguous ``[rows, width]`` of ``dtype``: itself where it already is one
    (the chain ``detach().to().contiguous().reshape()`` made two new tensor objects of the same memory, shape
    and strides, and parsed the arguments of four calls; :meth:`_Device.view` detaches)."""
    x = data if data.dtype == dtype else data.detach().to(dtype)
    if not x.is_contiguous():
        x = x.contiguous()
    return x if x.dim() == 2 else x.reshape(rows, width)


def _as(t, dtype):
    """``t.to(dtype)``, with no call where it has that dtype already."""
    return t if t.dtype == dtype else t.to(dtype)


def _ids(ids, offsets, rows):
    if ids is not None:
        return ids
    return segment_ids(offsets, rows)


def _extreme_grad(data, out, grad, offsets):
    """Segment max's or min's gradient by the fused kernels (``_launch.segment_extreme_grad``: the rows
    read twice, written once, where the unfused ops make about 8 passes), in float32 or float64."""
    n = offsets.numel() - 1
    rows, width = int(data.shape[0]), math.prod(data.shape[1:])
    compute = torch.float64 if data.dtype == torch.float64 else torch.float32
    dev = _Device(data.device)
    x = data.detach().to(compute).contiguous().reshape(rows, width)
    m = out.detach().to(compute).contiguous().reshape(n, width)
    g = grad.to(compute).contiguous().reshape(n, width)
    with dev.launching():
        res = _launch.segment_extreme_grad(dev.xp, dev.view(x), dev.view(m), dev.view(g),
                                           dev.offsets(offsets), n, dev.alloc, owner=offsets)
    return dev.tensor(res).reshape(data.shape).to(grad.dtype)


def _untracked_forward(cls):
    """Give kernel Function ``cls`` (``rows_rule``'s) an ``apply`` that runs its ``forward`` as a plain call
    where autograd would record nothing: the data needs no gradient (or grad mode is off), no torch.func
    transform is active (vmap's rule, grad's and jvp's wrappers take the Function) and no forward-AD dual
    level is open (a dual tensor's tangent takes its ``jvp``). ``Function.apply`` there still made a context,
    ran ``setup_context`` and wrapped the outputs: 12-15 us of host time a call, as much as the rest of
    the op's Python. The result is the same tensor ``apply`` returns then (fresh memory, no ``grad_fn``)."""
    recorded = getattr(cls.apply, "__func__", None)  # (fast_apply's, or torch's Python classmethod)
    transforms = getattr(torch._C, "_are_functorch_transforms_active", None)
    functorch_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    if recorded is None or transforms is None or functorch_wrapped is None:  # (a torch without them: apply)
        return cls
    forward = cls.forward
    arity = len(inspect.signature(forward).parameters)
    grad_mode = torch.is_grad_enabled

    def apply(klass, *args, **kwargs):
        data = args[0] if args else None
        if (kwargs or klass is not cls or len(args) != arity or type(data) is not torch.Tensor
                or (data.requires_grad and grad_mode()) or transforms()
                or getattr(_forward_ad, "_current_level", 0) >= 0 or functorch_wrapped(data)):
            return recorded(klass, *args, **kwargs)
        return forward(*args)

    cls.apply = classmethod(apply)
    return cls


@_untracked_forward
@rows_rule
class SegmentReduce(torch.autograd.Function):
    """Segment sum/mean/max/min by the kernels; backward by ``index_select`` over the segment ids
    (max/min: the gradient shared among the rows equal to the result, as ``scatter_reduce`` does, by
    the fused kernels where ``_tuning.FUSED_EXTREME_GRAD`` and no graph of the backward is wanted)."""

    @staticmethod
    def forward(data, offsets, ids, op, empty):
        return _reduce(op, data, offsets, empty)

    @staticmethod
    def setup_context(ctx, inputs, output):
        data, offsets, ids, op, _ = inputs
        ctx.op, ctx.rows = op, int(data.shape[0])
        extreme = op in ("max", "min")  # their gradient goes to the rows equal to the result
        _jvp.save(ctx, data if extreme else None, offsets, ids, output if extreme else None)

    @staticmethod
    def jvp(ctx, tangent, *_):
        data, offsets, out = ctx.saved_tensors[0], ctx.saved_tensors[1], ctx.saved_tensors[3]
        if ctx.op == "sum":
            return _jvp.segment_sum(tangent, offsets)
        if ctx.op == "mean":
            return _jvp.segment_mean(tangent, offsets)
        return _jvp.segment_extreme(tangent, data, out, offsets)

    @staticmethod
    def backward(ctx, grad):
        data, offsets, ids, out = ctx.saved_tensors
        if (ctx.op in ("max", "min") and _tuning.FUSED_EXTREME_GRAD and not torch.is_grad_enabled()
                and fits(grad) and not wrapped(grad) and data.is_floating_point() and ctx.rows and offsets.numel() > 1):
            return _extreme_grad(data, out, grad, offsets), None, None, None, None
        ids = _ids(ids, offsets, ctx.rows)
        shape = (-1,) + (1,) * (grad.dim() - 1)
        if ctx.op == "sum":
            return grad.index_select(0, ids), None, None, None, None
        if ctx.op == "mean":
            lengths = (offsets[1:] - offsets[:-1]).clamp(min=1).reshape(shape).to(grad.dtype)
            return (grad / lengths).index_select(0, ids), None, None, None, None
        hit = (data == out.index_select(0, ids)).to(grad.dtype)
        count = torch.zeros_like(grad).index_add(0, ids, hit).clamp(min=1)  # out of place: vmap batches it
        return hit * (grad / count).index_select(0, ids), None, None, None, None


def _softmax_grad(grad, y, offsets):
    """``y * (grad - segsum(grad * y))`` by the fused kernels (``_launch.segment_softmax_grad``: 2 reads
    and 1 write of the data's size where the unfused ops make 7 and 4), in float32 or float64."""
    n = offsets.numel() - 1
    rows, width = int(y.shape[0]), math.prod(y.shape[1:])
    compute = torch.float64 if y.dtype == torch.float64 else torch.float32
    dev = _Device(y.device)
    g = grad.to(compute).contiguous().reshape(rows, width)
    yc = y.detach().to(compute).contiguous().reshape(rows, width)
    with dev.launching():
        out = _launch.segment_softmax_grad(dev.xp, dev.view(g), dev.view(yc), dev.offsets(offsets), n,
                                           dev.alloc, owner=offsets)
    return dev.tensor(out).reshape(y.shape).to(y.dtype)


@_untracked_forward
@rows_rule
class SegmentSoftmax(_jvp.SoftmaxRule, torch.autograd.Function):
    """Softmax over each sequence's rows by the kernels; backward ``y * (g - segsum(g * y))``, fused
    (one kernel route, as the forward's: ``_softmax_grad``) where ``_tuning.FUSED_SOFTMAX_GRAD``."""

    @staticmethod
    def forward(data, offsets, ids):
        n = offsets.numel() - 1
        rows, width = int(data.shape[0]), math.prod(data.shape[1:])
        result = data.dtype if data.is_floating_point() else torch.float32
        if rows == 0 or width == 0 or n <= 0:
            return data.detach().to(result).clone()
        native, acc = _kernel_dtypes("softmax", data.dtype)
        dev = _Device(data.device).result(data.shape, acc)
        x = _rows(data, native, rows, width)
        with dev.launching():
            out = _launch.segment_softmax(dev.xp, dev.view(x), dev.offsets(offsets), n, dev.alloc,
                                          owner=offsets)
        return _as(dev.tensor(out), result)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, offsets, ids = inputs
        _jvp.save(ctx, output, offsets, ids)

    @staticmethod
    def backward(ctx, grad):
        y, offsets, ids = ctx.saved_tensors
        rows = int(y.shape[0])
        if rows == 0:
            return grad, None, None
        # A graph of the backward (create_graph: a gradient penalty, a Hessian) or torch.func's wrapped
        # gradients (no memory for a kernel): torch's own differentiable ops. Else the kernels.
        graph = torch.is_grad_enabled() or wrapped(grad)
        if _tuning.FUSED_SOFTMAX_GRAD and not graph and fits(grad) and y.numel() and offsets.numel() > 1:
            return _softmax_grad(grad, y, offsets), None, None
        gy = grad * y
        ids = _ids(ids, offsets, rows)
        if graph:
            total = gy.new_zeros((offsets.numel() - 1,) + tuple(gy.shape[1:])).index_add(0, ids, gy)
        else:
            total = _reduce("sum", gy, offsets, 0)
        return y * (grad - total.index_select(0, ids)), None, None


def _words(x):
    return _torch_dtype(f"u{x.element_size()}")


def _pad(data, offsets, maxlen, pad_value):
    n = offsets.numel() - 1
    row_shape = tuple(data.shape[1:])
    width = math.prod(row_shape)
    out = torch.empty((n, int(maxlen)) + row_shape, dtype=data.dtype, device=data.device)
    if n <= 0 or width == 0 or maxlen == 0:
        return out.fill_(pad_value) if out.numel() else out
    fill = torch.full(row_shape, pad_value, dtype=data.dtype, device=data.device).reshape(width)
    word = _words(data)
    dev = _Device(data.device)
    x = data.detach().contiguous().reshape(-1, width).view(word)
    with dev.launching():
        _launch.pad(dev.xp, dev.view(x), dev.offsets(offsets), n, int(maxlen), dev.view(fill.view(word)),
                    dev.view(out.view(n, int(maxlen), width).view(word)))
    return out


def _unpad(padded, offsets, total):
    n, maxlen = int(padded.shape[0]), int(padded.shape[1])
    row_shape = tuple(padded.shape[2:])
    width = math.prod(row_shape)
    if total == 0 or width == 0:
        return torch.empty((total,) + row_shape, dtype=padded.dtype, device=padded.device)
    word = _words(padded)
    dev = _Device(padded.device).result((total,) + row_shape, padded.dtype)
    flat = padded.detach().contiguous().reshape(n, maxlen, width).view(word)
    with dev.launching():
        out = _launch.unpad(dev.xp, dev.view(flat), dev.offsets(offsets), n, total, dev.alloc, owner=offsets)
    return dev.tensor(out)


@rows_rule
class Pad(_jvp.PadRule, torch.autograd.Function):
    """Rows into ``(sequences, maxlen, *row)`` by the pad kernel (a host scalar pad value); backward: unpad."""

    @staticmethod
    def forward(data, offsets, maxlen, pad_value):
        return _pad(data, offsets, maxlen, pad_value)

    @staticmethod
    def backward(ctx, grad):
        (offsets,) = ctx.saved_tensors
        if legacy_batched(grad):  # is_grads_batched's gradients: no memory for the kernel, torch's ops
            return _jvp.unpad(grad, offsets, ctx.rows), None, None, None
        return Unpad.apply(grad, offsets, ctx.rows), None, None, None


@rows_rule(lead=2)
class Unpad(_jvp.UnpadRule, torch.autograd.Function):
    """``(sequences, L, *row)`` back to rows by the unpad kernel; backward: pad with zeros."""

    @staticmethod
    def forward(padded, offsets, total):
        return _unpad(padded, offsets, int(total))

    @staticmethod
    def setup_context(ctx, inputs, output):
        padded, offsets, total = inputs
        _jvp.save(ctx, offsets)
        ctx.maxlen, ctx.rows = int(padded.shape[1]), int(total)

    @staticmethod
    def backward(ctx, grad):
        (offsets,) = ctx.saved_tensors
        if legacy_batched(grad):  # is_grads_batched's gradients: no memory for the kernel, torch's ops
            return _jvp.pad(grad, offsets, ctx.maxlen), None, None
        return Pad.apply(grad, offsets, ctx.maxlen, 0), None, None

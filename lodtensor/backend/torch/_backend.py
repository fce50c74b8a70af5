"""torch kernels (CPU or CUDA), built from differentiable ops so autograd flows through.

Offsets may arrive as host NumPy arrays; they are moved once to the data's
device. On CPU some kernels run NumPy (or MKL SpMM) forward passes with torch
backward passes: those ``autograd.Function``s live in ``_torch_cpu``.
"""


import math

import numpy as np
import torch
import torch.autograd.forward_ad as _forward_ad

from ...errors import ShapeError
from .._contract import Backend
from .._placement import frozen_fact
from ..numpy._compiled import compiled_kernels, compiled_pointwise
from ..numpy._util import truncation
from . import _cuda, _tuning
from ._arrays import TorchArrayKernels, torch_dtype
from ._cpu import PadCPU, ReluCPU, SegmentExtreme, SegmentSoftmax, SegmentSumSpMM, UnpadCPU
from ._rows import pad_index, segment_ids
from ._ufunc import apply_ufunc
from ._vmap import legacy_batched, wrapped

__all__ = ["TorchBackend", "make_backend"]

# torch dtypes NumPy lacks, and the NumPy-known dtype that holds each exactly.
_NO_NUMPY_DTYPE = {
    getattr(torch, name): torch.float32
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)
}


def _identity(dtype, reduce):
    """The value that never wins a max (``reduce="max"``) or min of ``dtype``; None for bool."""
    if dtype.is_floating_point:
        return float("-inf") if reduce == "max" else float("inf")
    if dtype == torch.bool or dtype.is_complex:
        return None
    info = torch.iinfo(dtype)
    return info.min if reduce == "max" else info.max


# -- CPU shortcuts ------------------------------------------------------------------------------
# The CPU-only kernels of _torch_cpu (NumPy forward passes, MKL SpMM) can be switched off, which runs
# the device-generic torch code that CUDA uses on CPU: the tests do so to cover that code without a GPU.
_CPU_SHORTCUTS = True


def _shortcuts(x):
    """Whether the CPU shortcuts may serve tensor ``x``: switched on, and ``x`` has memory of its own (a
    legacy vmap batch, as a backward under ``autograd.grad(..., is_grads_batched=True)`` gets, has none;
    torch.func's wrappers reach the Functions' vmap rules instead)."""
    return _CPU_SHORTCUTS and not legacy_batched(x)


_HALF = (torch.float16, torch.bfloat16)
#: unsigned dtypes torch's scatter kernels lack (scatter_add, scatter_reduce amax/amin): done in int64
_WIDE_UNSIGNED = tuple(getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n))
_SIGN = -(2**63)  # uint64 xor 2**63, read as int64, orders as the unsigned values do
#: torch lacks index_select / index_copy / index_put for these (x[idx] and pad_sequence take them):
#: rows move as the signed integers of the same width, the same bits
_SIGNED_VIEW = {getattr(torch, "uint" + b): getattr(torch, "int" + b) for b in ("16", "32", "64")
                if hasattr(torch, "uint" + b)}


def _bits(x):
    """``x`` viewed as the signed integers of its width where torch has no row-moving kernels for its
    unsigned dtype; else ``x`` itself."""
    signed = _SIGNED_VIEW.get(x.dtype)
    return x if signed is None else x.view(signed)
_NUMPY_ORDERED = (torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
                  torch.int32, torch.int64)


def _numpy_moves(x, pad_value):
    """Whether the NumPy row-moving kernels can serve tensor ``x`` (CPU, a NumPy dtype)."""
    return (
        _shortcuts(x)
        and x.device.type == "cpu"
        and x.dtype in _NUMPY_ORDERED + (torch.bool, torch.complex64, torch.complex128)
        and x.dim() >= 1
        # a pad value that wants its own gradient takes the torch path, which gives it one
        and (
            not isinstance(pad_value, torch.Tensor)
            or (pad_value.device.type == "cpu" and not pad_value.requires_grad)
        )
    )


_SPMM_DTYPES = (torch.float32, torch.float64)
_COMPILED_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)


def _compiled_fits(data):
    """Whether the NumPy backend's compiled kernel reduces ``data`` (CPU rows of 32 bytes or more:
    one read, 0.8x of ``index_add_`` / ``scatter_reduce`` at width 256, measured)."""
    return (
        _shortcuts(data)
        and compiled_kernels()
        and data.device.type == "cpu"
        and data.dtype in _COMPILED_DTYPES
        and data.dim() >= 2
        and data.numel() * data.element_size() >= _tuning.COMPILED_MIN_ROW_BYTES * data.shape[0] > 0
    )




def _relu_fits(x):
    """Whether ``ReluCPU`` (the compiled relu, torch's bits) serves ``torch.relu(x)``: a plain
    contiguous CPU float tensor of ``_tuning.RELU_CPU_MIN_BYTES`` or more, outside torch.func transforms
    (their wrapped tensors have no memory to read), tracing and compiling (a NumPy call would not
    be recorded)."""
    return (
        _shortcuts(x)
        and type(x) is torch.Tensor
        and x.device.type == "cpu"
        and x.dtype in _SPMM_DTYPES
        and x.numel() * x.element_size() >= _tuning.RELU_CPU_MIN_BYTES
        and x.layout == torch.strided
        and not x.is_nested
        and x.is_contiguous()
        and not x.is_neg()
        and not _functorch_wrapped(x)
        and not torch.jit.is_tracing()
        and not torch.compiler.is_compiling()
        and compiled_pointwise("relu_torch", 0) is not None
    )


def _host_offsets(offsets):
    """Whether ``offsets`` can be read on the host for free: a plain CPU tensor (not one of torch.func's
    wrapped tensors, which have no memory to read)."""
    return offsets.device.type == "cpu" and type(offsets) is torch.Tensor and not _functorch_wrapped(offsets)


def _functorch_wrapped(x):
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return True if wrapped is None else wrapped(x)


def _spmm_fits(data, n):
    rows = data.shape[0]
    if n > 0 and data.dtype in _SPMM_DTYPES and _compiled_fits(data):
        return True  # SegmentSumSpMM's forward runs the compiled kernel
    return (
        _shortcuts(data)
        and data.device.type == "cpu"
        and data.dtype in _SPMM_DTYPES
        and data.dim() >= 2
        and rows > 0
        and n > 0
        and _tuning.SPMM_MIN_ROW * rows <= data.numel() <= _tuning.SPMM_MAX_ROW_BYTES // data.element_size() * rows
        and torch.backends.mkl.is_available()
    )


class TorchBackend(TorchArrayKernels, Backend):  # TorchArrayKernels: the functions beyond the kernel set
    name = "torch"
    xp = torch

    # -- arrays and transfer -----------------------------------------------------------------
    def asarray(self, obj, dtype=None, *, copy=False, device=None):
        dtype = torch_dtype(dtype)
        if isinstance(obj, torch.Tensor):
            out = obj.to(device=device or obj.device, dtype=dtype or obj.dtype)
            return out.clone() if copy and out is obj else out
        copied = False
        if isinstance(obj, np.ndarray):
            if not obj.dtype.isnative:  # torch refuses the other byte order: the values in native order
                obj, copied = obj.astype(obj.dtype.newbyteorder("=")), True
            elif not obj.flags.writeable or any(s < 0 for s in obj.strides):
                obj, copied = obj.copy(), True  # torch warns on read-only memory and refuses negative strides
        out = torch.as_tensor(obj, dtype=dtype, device=device)
        return out.clone() if copy and not copied else out

    def to_numpy(self, x):
        x = x.detach().cpu()
        if x.is_conj() or x.is_neg():  # a lazy conjugate or negative view: its values (NumPy cannot see the bit)
            x = x.resolve_conj().resolve_neg()
        if x.dtype in _NO_NUMPY_DTYPE:  # NumPy has no bfloat16 (nor the float8s): widen exactly
            x = x.to(_NO_NUMPY_DTYPE[x.dtype])
        return x.numpy()

    def device_of(self, x):
        return str(x.device) if x.device.type != "cpu" else "cpu"

    def to_device(self, x, device, *, copy=False):
        out = x.to(device)
        return out.clone() if copy and out is x else out

    def is_c_contiguous(self, x):
        return x.is_contiguous()

    def _index(self, offsets, like):
        if isinstance(offsets, torch.Tensor) and offsets.device == like.device:
            return offsets
        return self.asarray(offsets, dtype=torch.int64, device=like.device)

    # -- index helpers -----------------------------------------------------------------------
    def segment_ids(self, offsets, *, total=None):
        offsets = self._index(offsets, offsets if isinstance(offsets, torch.Tensor) else torch.empty(0))
        return segment_ids(offsets, total)

    def repeat_interleave(self, values, repeats, *, total=None):
        repeats = self._index(repeats, values)
        return torch.repeat_interleave(values, repeats, dim=0, output_size=total)

    def cumsum(self, x, *, exclusive=False):
        out = torch.cumsum(x, dim=0)
        if exclusive:
            out = torch.cat([torch.zeros_like(out[:1]), out[:-1]])
        return out

    def gather(self, data, index):
        if data.dtype in _SIGNED_VIEW:
            return _bits(data).index_select(0, self._index(index, data)).view(data.dtype)
        return data.index_select(0, self._index(index, data))

    def scatter(self, out, index, values):
        if out.dtype in _SIGNED_VIEW:
            _bits(out)[self._index(index, out)] = _bits(values.to(out.dtype))
        else:
            out[self._index(index, out)] = values
        return out

    def scatter_add(self, out, index, values):
        if out.dtype in _WIDE_UNSIGNED:  # in int64: the same bits modulo 2**64, as segment_sum
            wide = out.view(torch.int64) if out.dtype == torch.uint64 else out.to(torch.int64)
            values = values.to(out.dtype)
            values = values.view(torch.int64) if out.dtype == torch.uint64 else values.to(torch.int64)
            got = wide.index_add(0, self._index(index, out), values)
            return got.view(torch.uint64) if out.dtype == torch.uint64 else got.to(out.dtype)
        return out.index_add(0, self._index(index, out), values.to(out.dtype))

    def divide_rows(self, x, divisor):
        return x / divisor.reshape((-1,) + (1,) * (x.dim() - 1))  # out of place: autograd may track x

    def fill_rows(self, x, mask, value):
        shape = (-1,) + (1,) * (x.dim() - 1)
        mask = (mask if isinstance(mask, torch.Tensor) else self.from_host(mask, like=x)).reshape(shape)
        if x.dtype in _WIDE_UNSIGNED:  # torch has no masked_fill for them
            return torch.where(mask, torch.tensor(_host_scalar(value, x.dtype), dtype=x.dtype, device=x.device), x)
        return x.masked_fill(mask, _host_scalar(value, x.dtype))  # a host scalar, passed by value: no copy

    def concat(self, arrays):
        return torch.cat(list(arrays), dim=0)

    def astype(self, x, dtype):
        return x.to(torch_dtype(dtype))

    def arange(self, n, *, like=None):
        return torch.arange(n, dtype=torch.int64, device=None if like is None else like.device)

    # -- segment reductions ------------------------------------------------------------------
    def wants_segment_ids(self, like):
        # CPU: the LoD's cached host ids (torch's repeat_interleave there costs more than NumPy's);
        # the CUDA kernels need none, and elsewhere on a device they are a device op, when needed
        return like.device.type == "cpu" and not _cuda.fits(like)

    def wants_host_plan(self, like):
        # CPU pad and unpad run the NumPy kernels, which take the LoD's cached plan; the CUDA kernels don't
        return like.device.type == "cpu" and not _cuda.fits(like, words=True)

    def _segment(self, data, offsets, reduce, empty, ids=None):
        """Max or min per segment; empty segments get ``empty``.

        On CPU, for rows of at most ``_tuning.NUMPY_EXTREME_MAX_ROW_BYTES``, the forward
        pass is the NumPy backend's blocked kernel on the tensor's own memory (zero
        copy), up to 2x faster than ``scatter_reduce`` there (measured, torch 2.13,
        2 cores); :class:`SegmentExtreme` gives it ``scatter_reduce``'s gradient.
        Elsewhere (wider rows, CUDA, bfloat16): ``scatter_reduce``
        into a tensor pre-filled with the reduction's identity (``-inf`` for
        max), ``include_self=True``, about 10% faster than leaving the fill out;
        up to 10x faster than ``torch.segment_reduce`` on wide rows, and it
        covers integer dtypes, which ``segment_reduce`` lacks. Empty segments
        are then set to ``empty`` out of place, since the backward pass of
        ``scatter_reduce`` reads its result.
        """
        offsets = self._index(offsets, data)
        if data.dtype in _WIDE_UNSIGNED:  # in int64 (uint64: sign bit flipped, so the order holds), as torch lacks them
            if data.dtype != torch.uint64:
                return self._segment(data.to(torch.int64), offsets, reduce, empty, ids).to(data.dtype)
            out = self._segment(data.view(torch.int64) ^ _SIGN, offsets, reduce, int(empty) + _SIGN, ids)
            return (out ^ _SIGN).view(torch.uint64)
        if _cuda.fits(data):  # CUDA: the project's kernel (zero-copy, torch's stream)
            return _cuda.SegmentReduce.apply(data, offsets, ids, reduce, empty)
        if (
            _shortcuts(data)
            and data.device.type == "cpu"
            and data.dtype in _NUMPY_ORDERED
            and (data.numel() <= _tuning.NUMPY_EXTREME_MAX_ROW_BYTES // data.element_size() * max(data.shape[0], 1)
                 or _compiled_fits(data))  # any width in the compiled kernel
        ):
            return SegmentExtreme.apply(data, offsets, ids, reduce, empty)
        lengths = offsets[1:] - offsets[:-1]
        shape = (-1,) + (1,) * (data.dim() - 1)
        if ids is None:
            ids = self.segment_ids(offsets, total=data.shape[0])
        ids = ids.reshape(shape).expand_as(data)
        op = "amax" if reduce == "max" else "amin"
        out_shape = (lengths.numel(),) + tuple(data.shape[1:])
        identity = _identity(data.dtype, reduce)
        if identity is None:  # bool and other dtypes without an order identity
            out = torch.full(out_shape, empty, dtype=data.dtype, device=data.device)
            return out.scatter_reduce(0, ids, data, reduce=op, include_self=False)
        if data.is_floating_point() and _differentiated(data):
            # scatter_reduce's derivatives count the pre-filled value among the ties: a segment whose
            # extreme is the identity itself (all -inf, for max) would give its rows 1/(k+1) each, not 1/k.
            # A NaN fill equals nothing, and include_self=False leaves it out of the values
            identity, include = float("nan"), False
        else:
            include = True
        out = torch.full(out_shape, identity, dtype=data.dtype, device=data.device)
        out = out.scatter_reduce(0, ids, data, reduce=op, include_self=include)
        hollow = lengths == 0
        if data.device.type != "cpu" or bool(hollow.any()):  # no device sync just to skip a cheap fill
            out = out.masked_fill(hollow.reshape(shape), empty)
        return out

    def segment_sum(self, data, offsets, *, ids=None):
        offsets = self._index(offsets, data)
        if data.dtype in _WIDE_UNSIGNED:  # in int64: the same bits modulo 2**64 (torch lacks their scatter_add)
            wide = data.view(torch.int64) if data.dtype == torch.uint64 else data.to(torch.int64)
            out = self.segment_sum(wide, offsets, ids=ids)
            return out.view(torch.uint64) if data.dtype == torch.uint64 else out.to(data.dtype)
        if _cuda.fits(data):  # (float16 in float32 there)
            return _cuda.SegmentReduce.apply(data, offsets, ids, "sum", 0)
        if data.dtype in _HALF:  # float16/bfloat16 add up in float32, as torch.sum does
            return self.segment_sum(data.to(torch.float32), offsets, ids=ids).to(data.dtype)
        n = offsets.numel() - 1
        if _spmm_fits(data, n):
            flat = SegmentSumSpMM.apply(data.reshape(data.shape[0], -1), offsets, ids)
            return flat.reshape((n,) + tuple(data.shape[1:]))
        if ids is None:
            ids = self.segment_ids(offsets, total=data.shape[0])
        out = torch.zeros((n,) + tuple(data.shape[1:]), dtype=data.dtype, device=data.device)
        if wrapped(data):  # under vmap: out of place (vmap cannot add a batch into an unbatched tensor)
            return out.index_add(0, ids, data)
        return out.index_add_(0, ids, data)  # in place on a fresh tensor: autograd still records it

    def segment_mean(self, data, offsets, *, empty=0, ids=None):
        offsets = self._index(offsets, data)
        if _cuda.fits(data):
            return _cuda.SegmentReduce.apply(data, offsets, ids, "mean", empty)
        lengths = offsets[1:] - offsets[:-1]
        result = data.dtype if data.is_floating_point() or data.is_complex() else torch.float64
        if not data.is_floating_point() and not data.is_complex():  # the float64 mean: no wrap-around
            data = data.to(torch.float64)
        elif data.dtype in _HALF:  # float16/bfloat16: sums and lengths in float32
            data = data.to(torch.float32)
        total = self.segment_sum(data, offsets, ids=ids)
        shape = (-1,) + (1,) * (data.dim() - 1)
        out = total.div_(lengths.clamp(min=1).reshape(shape).to(total.dtype))  # total is ours: in place
        if empty != 0:
            out = torch.where((lengths == 0).reshape(shape), torch.full_like(out, empty), out)
        return out.to(result)

    def segment_max(self, data, offsets, *, empty, ids=None):
        return self._segment(data, offsets, "max", empty, ids)

    def segment_min(self, data, offsets, *, empty, ids=None):
        return self._segment(data, offsets, "min", empty, ids)

    def segment_softmax(self, data, offsets, *, ids=None):
        offsets = self._index(offsets, data)
        if not data.is_floating_point() and not data.is_complex():  # integers and bools as float, the dtype
            data = data.to(torch.float64 if data.element_size() >= 4 else torch.float32)  # NumPy's and CuPy's
        n_rows = data.shape[0]
        if n_rows == 0:
            return data.clone()
        if _cuda.fits(data) and data.is_floating_point():
            return _cuda.SegmentSoftmax.apply(data, offsets, ids)
        if _shortcuts(data) and data.device.type == "cpu" and data.dtype in (torch.float32, torch.float64):
            return SegmentSoftmax.apply(data, offsets, ids, self)
        if ids is None:
            ids = self.segment_ids(offsets, total=n_rows)
        peak = self._segment(data.detach(), offsets, "max", 0, ids)
        shifted = data - peak.index_select(0, ids)  # index_select: 5x faster than peak[ids] on CPU
        if torch.is_grad_enabled() and data.requires_grad:
            shifted = torch.exp(shifted)
            return shifted / self.segment_sum(shifted, offsets, ids=ids).index_select(0, ids)
        shifted.exp_()  # no graph to keep: reuse the one temporary
        return shifted.div_(self.segment_sum(shifted, offsets, ids=ids).index_select(0, ids))

    # -- dense <-> flat ----------------------------------------------------------------------
    def place_rows(self, data, index, shape, pad_value, *, out=None):
        row = tuple(data.shape[1:])
        full = tuple(shape) + row
        count = math.prod(shape)  # not -1: rows of no element leave it ambiguous
        if out is None:
            if isinstance(pad_value, torch.Tensor) or np.ndim(pad_value):  # a row (or a tensor) of pad values
                fill = _pad_tensor(pad_value, data)
                out = fill.expand(full).clone()  # no value read back: a device pad value stays there
            else:  # a host scalar: one fill kernel, nothing copied to the device first
                out = torch.full(full, _host_scalar(pad_value, data.dtype), dtype=data.dtype, device=data.device)
            if data.shape[0]:
                # in place on the fresh result (one write of the output, not two); autograd records
                # it on this non-leaf tensor as it does any in-place op
                _bits(out).view((count,) + row).index_copy_(0, self._index(index, data), _bits(data))
            elif data.requires_grad and torch.is_grad_enabled():
                # no rows (every sequence empty): join the result to data's graph all the same, so a
                # backward pass gives data its (0, ...) gradient rather than failing on a result
                # without one. Out of place (vmap has no rule for index_copy_), adding -0.0 (the sum of
                # no rows, negated): x + -0.0 is x for every x, -0.0 and NaN included
                out = out + data.sum(0).neg()
            return out
        with torch.no_grad():
            if isinstance(pad_value, torch.Tensor) or np.ndim(pad_value):
                out[...] = _pad_tensor(pad_value, out)
            else:
                out.fill_(_host_scalar(pad_value, out.dtype))
            if data.shape[0]:
                _bits(out).view((count,) + row).index_copy_(0, self._index(index, data), _bits(data))
        return out

    def pad(self, data, offsets, maxlen, pad_value, *, out=None, plan=None):
        offsets = self._index(offsets, data)
        longest = frozen_fact(offsets, "longest")  # a LoD's offsets know their longest sequence: no pass over them
        fits = longest is not None and longest <= maxlen
        cut = truncation(offsets.numpy(), maxlen) if not fits and _host_offsets(offsets) else None  # host: no sync
        if cut is not None:  # a sequence longer than maxlen keeps its first maxlen rows (as the CUDA kernel);
            # by index_select, so the dropped rows get a zero gradient
            data, offsets, plan = data.index_select(0, torch.from_numpy(cut[0])), torch.from_numpy(cut[1]), None
        if out is None and _cuda.fits(data, words=True) and not isinstance(pad_value, torch.Tensor) \
                and np.ndim(pad_value) == 0:
            return _cuda.Pad.apply(data, offsets, int(maxlen), _host_scalar(pad_value, data.dtype))
        if out is None and _numpy_moves(data, pad_value):
            # the NumPy kernel on the tensor's memory (threaded ``put``, tails only filled):
            # 1.6x faster than a fill + ``index_copy`` here; :class:`PadCPU` keeps the gradient
            return PadCPU.apply(data, offsets, maxlen, pad_value, plan)
        index = pad_index(offsets, maxlen, data.shape[0])
        return self.place_rows(data, index, (offsets.numel() - 1, maxlen), pad_value, out=out)

    def unpad(self, padded, offsets, *, plan=None, total=None):
        offsets = self._index(offsets, padded)
        if _numpy_moves(padded, 0):
            return UnpadCPU.apply(padded, offsets, plan)
        n, maxlen = padded.shape[:2]
        if _host_offsets(offsets) and truncation(offsets.numpy(), maxlen) is not None:
            longest = int((offsets[1:] - offsets[:-1]).max())
            raise ShapeError(f"unpad: padded holds {maxlen} rows per sequence (padded.shape[1]), fewer than "
                             f"the longest sequence of offsets ({longest} rows); expected padded.shape[1] >= {longest}")
        if total is None:
            total = int(plan[0].size) if plan is not None else int(offsets[-1])  # the one device read
        if _cuda.fits(padded, words=True) and padded.dim() >= 2:
            return _cuda.Unpad.apply(padded, offsets, total)
        index = pad_index(offsets, maxlen, total)
        return self.gather(padded.reshape((n * maxlen,) + tuple(padded.shape[2:])), index)

    # -- elementwise -------------------------------------------------------------------------
    def relu(self, x):
        return ReluCPU.apply(x) if _relu_fits(x) else torch.relu(x)

    def pointwise(self, np_name, torch_name, *args, **kwargs):
        if torch_name == "relu" and len(args) == 1 and not kwargs and _relu_fits(args[0]):
            return ReluCPU.apply(args[0])
        return super().pointwise(np_name, torch_name, *args, **kwargs)

    def apply_ufunc(self, ufunc, method, *args, **kwargs):
        """Run a NumPy ufunc call with the torch function of the same meaning (see ``_ufunc``)."""
        return apply_ufunc(ufunc, method, *args, **kwargs)


def _differentiated(x):
    """Whether autograd (backward or forward mode) or a torch.func transform may differentiate through ``x``."""
    return (x.requires_grad and torch.is_grad_enabled()) or wrapped(x) or _forward_ad._current_level >= 0


def _host_scalar(value, dtype):
    """A host number (Python, NumPy scalar or 0-d array) as the Python number ``dtype`` holds for it,
    rounded as a cast rounds (torch's fill functions refuse a float32 max that arrives as a slightly
    larger float64, where a cast rounds it to the max; past the range: inf). On the host: no device
    read."""
    value = value.item() if hasattr(value, "item") else value
    if dtype == torch.uint64 and isinstance(value, float):  # torch.tensor(0.0, dtype=uint64) raises
        value = int(value) if math.isfinite(value) else value  # (a cast truncates, as for the other ints)
    return torch.tensor(value, dtype=dtype).item()


def _pad_tensor(pad_value, like):
    """A pad value (tensor, or host array of a row's shape) as a tensor on ``like``'s device and dtype."""
    if isinstance(pad_value, torch.Tensor):
        return pad_value.to(device=like.device, dtype=like.dtype)
    return torch.from_numpy(np.array(pad_value)).to(device=like.device, dtype=like.dtype)


def make_backend():
    return TorchBackend()

"""Array functions of the torch backend beyond the core kernel set (see ``_arrays.py``).

Every one is built from differentiable torch ops, so autograd flows through.
"""

import operator
import weakref

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling

from .._contract import ACTIVATIONS
from . import _ctc, _recurrent

__all__ = ["TorchArrayKernels", "torch_dtype"]

_RESOLVED = {}  # dotted torch name -> function
_UNCOUNTED = {}  # id(storage) -> a weakref to it, for storages another library writes too (``uncount``)
_PYOPS = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "true_divide": operator.truediv,
    "power": operator.pow,
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
}


# torch's kind of a dtype, by its flags (``is_floating_point``/``is_complex``/``is_signed``)
_UNSIGNED = {torch.uint8, *(getattr(torch, f"uint{n}") for n in (16, 32, 64) if hasattr(torch, f"uint{n}"))}
_SIGNED = {torch.int8, torch.int16, torch.int32, torch.int64}


def torch_dtype(dtype):
    """A torch dtype from a torch dtype, NumPy dtype or name."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    try:  # NumPy's meaning first ("float" is float64 on every backend)
        return torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype
    except TypeError:
        named = getattr(torch, dtype.removeprefix("torch."), None) if isinstance(dtype, str) else None
        if isinstance(named, torch.dtype):  # torch's own names NumPy lacks: "bfloat16", "float8_e4m3fn"
            return named
        raise


def _activations():
    F_ = F
    out = {
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "relu": torch.relu,
        "identity": lambda x: x,
        "linear": lambda x: x,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "leaky_relu": lambda x: F_.leaky_relu(x, 0.02),
        "elu": F_.elu,
        "softsign": F_.softsign,
    }
    assert set(out) == set(ACTIVATIONS)
    return out


_ACT = _activations()
_ACT_INPLACE = {
    "sigmoid": torch.Tensor.sigmoid_,
    "tanh": torch.Tensor.tanh_,
    "relu": torch.Tensor.relu_,
    "identity": lambda x: x,
    "linear": lambda x: x,
}


class TorchArrayKernels:
    """The torch versions (CPU or CUDA; differentiable: autograd flows through every one)."""

    follows_torch_promotion = True
    records_autograd = True
    torch = torch
    F = F
    _identity_affine = {}  # (width, dtype) -> (ones, zeros) for layer_norm on CPU

    def empty(self, shape, dtype, like):
        return self.torch.empty(shape, dtype=dtype, device=like.device)

    def zeros(self, shape, dtype, like):
        return self.torch.zeros(shape, dtype=dtype, device=like.device)

    def full(self, shape, value, dtype, like):
        return self.torch.full(shape, value, dtype=dtype, device=like.device)

    def randn(self, shape, dtype, like):
        return self.torch.randn(shape, dtype=dtype, device=like.device)

    def rand(self, shape, dtype, like):
        return self.torch.rand(shape, dtype=dtype, device=like.device)

    def keep_mask(self, shape, p, like):
        return self.torch.rand(shape, device=like.device) >= p

    def from_host(self, a, *, like, dtype=None):
        a = np.asarray(a)
        if not a.flags.writeable:
            a = a.copy()  # torch warns on read-only memory; host-derived arrays are small
        out = torch.from_numpy(a) if a.dtype.kind != "O" else torch.as_tensor(a.tolist())
        if like.device.type == "cuda" and out.numel():
            # through page-locked memory, asynchronously: a copy from pageable memory would make the host
            # wait for the device (torch's pinned allocator keeps the staging block until the copy is done)
            out = out.pin_memory().to(device=like.device, non_blocking=True)
        return out.to(device=like.device, dtype=torch_dtype(dtype) or out.dtype)

    def dtype_kind(self, dtype):
        if not isinstance(dtype, torch.dtype):
            return np.dtype(dtype).kind
        if dtype.is_complex:
            return "c"
        if dtype.is_floating_point:
            return "f"
        if dtype == torch.bool:
            return "b"
        if dtype in _SIGNED:
            return "i"
        # quantized (qint8), bit (bits8) and sub-byte (uint1, int4) dtypes: numbers no op computes with
        return "u" if dtype in _UNSIGNED else "V"

    def as_dtype(self, dtype):
        return dtype if isinstance(dtype, torch.dtype) else torch_dtype(dtype)

    def flat(self, x):
        return x.reshape(-1)

    def concat_flat(self, arrays, dtype=None):
        if not arrays:
            return self.torch.empty(0, dtype=dtype or self.torch.float32)
        if dtype is not None:
            arrays = [a.to(dtype) for a in arrays]
        return self.torch.cat(arrays)

    def clone(self, x):
        return x.clone()

    def detach(self, x):
        return x.detach()

    def requires_grad(self, x):
        return x.requires_grad

    def version(self, x):
        if x.is_inference():  # (made under torch.inference_mode: no counter)
            return None
        if _UNCOUNTED and self.uncount(x):  # (memory NumPy/CuPy write too: a count that misses theirs)
            return None
        try:
            return x._version
        except RuntimeError:  # (a tensor that keeps none: functorch's wrappers)
            return None

    def uncount(self, x, other=None):
        if other is None:  # (the query: whether x's storage is one marked)
            storage = _storage(x) if _UNCOUNTED else None
            held = None if storage is None else _UNCOUNTED.get(id(storage))
            return held is not None and held() is storage
        face = getattr(other, "__cuda_array_interface__", None) if x.is_cuda else getattr(
            other, "__array_interface__", None)
        storage = _storage(x)
        if face is None or storage is None or not storage.nbytes():
            return False
        start = storage.data_ptr()
        if not start <= int(face["data"][0]) < start + storage.nbytes():
            return False
        key = id(storage)  # (dropped with the storage, before its id can name another)
        _UNCOUNTED[key] = weakref.ref(storage, lambda _, key=key: _UNCOUNTED.pop(key, None))
        return True

    def split_rows(self, x, offsets):
        lengths = [b - a for a, b in zip(offsets, offsets[1:])]
        return list(x.split(lengths))

    def swapaxes(self, x, a, b):
        return x.transpose(a, b).contiguous()

    def swapaxes_view(self, x, a, b):
        return x.transpose(a, b)

    def expand(self, x, shape):
        return x.expand(shape)

    def concat_axis(self, arrays, axis):
        return self.torch.cat(arrays, dim=axis)

    def contiguous(self, x):
        return x.contiguous()

    def take(self, x, index, axis):
        return x.select(axis, index).contiguous()

    def where(self, mask, a, b):
        return self.torch.where(mask, a, b)  # a Python scalar is weak: torch's promotion, as NumPy's

    def pointwise(self, np_name, torch_name, *args, **kwargs):
        """The pointwise table's function ``torch_name`` (a dotted path from ``torch``:
        ``'exp'``, ``'nn.functional.gelu'``, ``'special.xlogy'``)."""
        fn = _RESOLVED.get(torch_name)
        if fn is None:
            fn = _RESOLVED[torch_name] = operator.attrgetter(torch_name)(torch)
        if len(args) > 1 and not isinstance(args[0], torch.Tensor):  # 2 - t: torch wants a tensor first;
            other = args[1]  # a 0-d tensor promotes as the Python number does, in the floating dtype of the
            # other operand when it has one (0.3 - t of float64 reads 0.3, not 0.3 rounded to float32)
            real = isinstance(args[0], (bool, int, float, np.bool_, np.integer, np.floating))
            floating = isinstance(other, torch.Tensor) and other.is_floating_point()
            args = (torch.tensor(args[0], dtype=other.dtype if real and floating else None,
                                 device=other.device if isinstance(other, torch.Tensor) else None), *args[1:])
        return fn(*args, **kwargs)

    def binary(self, name, a, b, *, dtype):
        return _PYOPS[name](a, b)

    def dropout(self, x, p, inplace):
        return self.F.dropout(x, p, training=True, inplace=inplace)

    def relu(self, x):
        return self.torch.relu(x)

    def gelu(self, x, approximate):
        return self.F.gelu(x, approximate=approximate)

    def silu(self, x):
        return self.F.silu(x)

    def sgn(self, x):
        return self.torch.sgn(x)

    def softmax(self, x, axis, out=None):
        res = self.torch.softmax(x, axis)
        return res if out is None else out.copy_(res)

    def normalize_sum(self, x, axis, out=None):
        res = x / x.sum(axis, keepdim=True)
        return res if out is None else out.copy_(res)

    def log_softmax(self, x, axis, out=None):
        res = self.torch.log_softmax(x, axis)
        return res if out is None else out.copy_(res)

    def rms_norm(self, x, eps, weight):
        return self.F.rms_norm(x, (x.shape[1],), weight, eps)

    def embedding(self, index, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
        return self.F.embedding(index, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)

    def attention(self, q, k, v, mask, is_causal, scale, dropout_p):
        return self.F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )

    def matmul(self, a, b):
        return self.torch.matmul(a, b)

    def addmm(self, c, a, b, *, out=None):
        if out is None:
            return self.torch.addmm(c, a, b)
        if out is c:
            return out.addmm_(a, b)  # accumulated by BLAS (beta=1): no product buffer
        return self.torch.addmm(c, a, b, out=out)

    def logsumexp(self, x, axis):
        return self.torch.logsumexp(x, dim=axis)

    def lstm(self, x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes):
        return _recurrent.lstm(x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes)

    def gru(self, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode):
        return _recurrent.gru(x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode)

    def ctc_loss(self, logits, input_offsets, labels, label_offsets, blank, blank_labels=None):
        """``torch.nn.functional.ctc_loss`` of the sequences, padded time-major by one gather whose index is
        made on ``logits``' device from the per-sequence starts and lengths; device ``labels`` are its
        targets as they are (host ones copied there), the lengths host tensors (torch reads them there).
        Labels holding the blank: Paddle's recursion in torch ops (``_ctc.py``)."""
        return _ctc.ctc_loss(self, logits, input_offsets, labels, label_offsets, blank, blank_labels)

    def activation(self, name, x):
        return _ACT[name](x)

    def activation_(self, name, x):
        fn = _ACT_INPLACE.get(name)
        return None if fn is None else fn(x)

    def renorm_rows(self, rows, max_norm, p):
        norms = rows.norm(p=p, dim=1)
        scale = self.torch.where(norms > max_norm, max_norm / (norms + 1e-7), self.torch.ones_like(norms))
        return rows * scale[:, None]

    def linear(self, x, weight, bias):
        return self.F.linear(x, weight, bias)

    def reduce(self, x, kind, axis, keepdim):
        fn = getattr(self.torch, kind)
        if axis is None:
            return fn(x)
        return fn(x, dim=axis, keepdim=keepdim)

    def extreme_with_index(self, x, kind, axis, keepdim):
        values, index = (self.torch.max if kind == "max" else self.torch.min)(x, dim=axis, keepdim=keepdim)
        return values, index

    def segment_extreme_with_index(self, rows, offsets, kind):
        """None: on torch, one ``max(dim=1)`` over a padded copy is faster than two segment passes."""
        return None

    def layer_norm(self, x, eps, weight, bias):
        # torch's CPU kernel runs ~8% faster with an affine pair than without (torch 2.13):
        # a missing weight or bias becomes a constant one (ones, zeros), which changes no value
        if x.device.type == "cpu" and (weight is None or bias is None):
            key = (x.shape[1], x.dtype)
            pair = self._identity_affine.get(key)
            if pair is None:
                pair = self._identity_affine[key] = (
                    self.xp.ones(x.shape[1], dtype=x.dtype),
                    self.xp.zeros(x.shape[1], dtype=x.dtype),
                )
            weight = pair[0] if weight is None else weight
            bias = pair[1] if bias is None else bias
        return self.F.layer_norm(x, (x.shape[1],), weight, bias, eps)


def _storage(x):
    """``x``'s storage (one Python object for all tensors over it), None for a tensor that has none to give."""
    try:
        return x.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None

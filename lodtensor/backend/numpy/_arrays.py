"""Array functions of the NumPy and CuPy backends beyond the core kernel set.

Nested-tensor ops (and any op written once against a backend) call these as
methods of the backend: allocation that follows a buffer's device, the
pointwise table's functions by name, matmul/linear/layer_norm, reductions over
an axis, attention. :class:`ArrayKernels` is mixed into ``NumpyBackend``;
:class:`CupyArrayKernels` into ``CupyBackend`` (the NumPy code written against
``xp``, with CuPy's own random numbers and without host threads). The torch
versions live in ``_arrays_torch.py``.
"""

import numpy as np

from . import _blas, _pool, _recurrent, _special, _tuning, _ufunc
from ._activations import IN_PLACE, OUT_OF_PLACE
from ._util import broadcast_row
from ._xp_special import XP_FORMULAS

__all__ = ["ArrayKernels"]

_NUMPY_REDUCE = {"amax": "max", "amin": "min"}

_VECDOT = hasattr(np, "vecdot")  # NumPy >= 2.0: row-wise dot products as one gufunc call


def _into(res, out):
    """``res``, or ``out`` with ``res`` written into it when ``out`` is given."""
    if out is None:
        return res
    out[...] = res
    return out


def _rowwise(x, out, axis):
    """Whether a softmax of NumPy ``x`` into ``out`` along ``axis`` runs in row blocks: the last
    axis, both C-contiguous (their rows line up), and large enough for blocking to pay."""
    return (axis in (-1, x.ndim - 1) and x.ndim >= 2 and x.size >= _tuning.ROWWISE_MIN and x.flags.c_contiguous
            and out.flags.c_contiguous)


def _softmax_rows(x, out, axis=-1):
    """``out = softmax(x)`` along ``axis`` (NumPy; no temporaries beyond the reduced arrays)."""
    np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    total = np.add.reduce(out, axis=axis, keepdims=True)
    np.reciprocal(total, out=total)  # one reciprocal per row, then a multiply (as torch)
    np.multiply(out, total, out=out)


def _log_softmax_rows(x, out, tmp, axis=-1):
    """``out = log_softmax(x)`` along ``axis`` (NumPy; ``tmp`` scratch shaped like ``x``)."""
    np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=out)
    np.exp(out, out=tmp)
    total = np.add.reduce(tmp, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        np.log(total, out=total)
    np.subtract(out, total, out=out)


class ArrayKernels:
    """The array functions of the NumPy backend (CuPy's too, by duck typing on ``xp``)."""

    #: False: binary ops compute torch's result dtype themselves (``promote``); torch needs nothing
    follows_torch_promotion = False

    # -- allocation ----------------------------------------------------------------------------
    def empty(self, shape, dtype, like):
        return self.xp.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype, like):
        return self.xp.zeros(shape, dtype=dtype)

    def full(self, shape, value, dtype, like):
        return self.xp.full(shape, value, dtype=dtype)

    def randn(self, shape, dtype, like):
        return np.random.standard_normal(shape).astype(dtype, copy=False)

    def rand(self, shape, dtype, like):
        """Uniform ``[0, 1)`` values (the library's global random state)."""
        return self.xp.random.random_sample(shape).astype(dtype, copy=False)

    def keep_mask(self, shape, p, like):
        """Boolean mask, True with probability ``1 - p`` (NumPy's global random state)."""
        return np.random.random_sample(shape) >= p

    # -- conversion ----------------------------------------------------------------------------
    def from_host(self, a, *, like, dtype=None):
        return self.xp.asarray(a, dtype=dtype)

    def dtype_kind(self, dtype):
        return np.dtype(dtype).kind

    def as_dtype(self, dtype):
        from .. import dtype_name  # noqa: PLC0415 - the package imports this module

        try:
            return np.dtype(dtype_name(dtype))
        except TypeError:
            raise TypeError(f"{dtype} has no NumPy equivalent; use torch data for it") from None

    def flat(self, x):
        return x.reshape(-1)

    def concat_flat(self, arrays, dtype=None):
        if not arrays:
            return self.xp.empty(0, dtype=dtype or np.float32)
        if dtype is None:
            return self.xp.concatenate(arrays)
        return self.xp.concatenate(arrays, dtype=dtype, casting="unsafe")  # torch casts to the first's dtype

    def clone(self, x):
        return x.copy()

    def detach(self, x):
        return x

    def requires_grad(self, x):
        return False

    def version(self, x):
        return None

    def uncount(self, x, other=None):
        return False

    def split_rows(self, x, offsets):
        """Views ``x[offsets[i]:offsets[i + 1]]`` (``offsets`` a Python list)."""
        return [x[a:b] for a, b in zip(offsets, offsets[1:])]

    def swapaxes(self, x, a, b):
        return self.xp.ascontiguousarray(self.xp.swapaxes(x, a, b))

    def swapaxes_view(self, x, a, b):
        return x.swapaxes(a, b)  # the method: np.swapaxes adds a dispatch layer per component

    def expand(self, x, shape):
        """``x`` broadcast to ``shape`` (a view)."""
        return self.xp.broadcast_to(x, shape)

    def concat_axis(self, arrays, axis):
        """``arrays`` joined along ``axis``."""
        return self.xp.concatenate(arrays, axis=axis)

    def contiguous(self, x):
        return self.xp.ascontiguousarray(x)

    def take(self, x, index, axis):
        return self.xp.ascontiguousarray(self.xp.take(x, index, axis=axis))

    def where(self, mask, a, b):
        return self.xp.where(mask, a, b)

    # -- math ----------------------------------------------------------------------------------
    def pointwise(self, np_name, torch_name, *args, **kwargs):
        """The pointwise table's function ``np_name``: a formula of ``_xp_special.XP_FORMULAS`` (written
        against ``xp``), NumPy's ufunc, or the version in ``_special.NUMPY_EXTRA`` where NumPy has none
        (erf, sigmoid, leaky_relu...).
        ``torch_name`` is the torch spelling (used by the torch backend)."""
        formula = XP_FORMULAS.get(np_name)  # written against xp: CuPy's arrays run it too
        if formula is not None:
            with np.errstate(all="ignore"):
                return formula(self.xp, self._special_function, *args, **kwargs)
        fn = _special.NUMPY_EXTRA.get(np_name) or getattr(self.xp, np_name)
        with np.errstate(all="ignore"):  # log(-1) is nan, quietly, as in torch
            if isinstance(fn, np.ufunc):  # large NumPy outputs: split over threads, from the buffer pool
                out = _ufunc.threaded_ufunc(fn, args, kwargs)
                if out is not None:
                    return out
            return fn(*args, **kwargs)

    def _special_function(self, name):
        """scipy.special's function ``name`` for this library's arrays (SciPy's: an optional extra)."""
        return _special._scipy(name)

    def binary(self, name, a, b, *, dtype):
        """The ufunc ``name`` (``'add'``, ``'less'``...) on arrays or scalars, with result ``dtype``."""
        return getattr(self.xp, name)(a, b, dtype=dtype)

    def dropout(self, x, p, inplace):
        keep = self.keep_mask(tuple(x.shape), p, x)
        scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        out = x if inplace else self.xp.empty(x.shape, dtype=x.dtype)
        self.xp.multiply(x, keep, out=out)
        out *= scale
        return out

    def relu(self, x):
        return _special.relu(x) if x.dtype.kind == "f" else np.maximum(x, 0).astype(x.dtype, copy=False)

    def gelu(self, x, approximate):
        return _special.gelu(x, approximate)

    def silu(self, x):
        return _special.silu(x)

    def sgn(self, x):
        return XP_FORMULAS["sgn"](self.xp, self._special_function, x)

    def softmax(self, x, axis, out=None):
        """Softmax of ``x`` along ``axis``; written into ``out`` (``x``'s shape and dtype) when given.

        On NumPy: one reduction, shift, exp, one sum and a multiply by the
        reciprocal of each sum (as torch), with no temporaries beyond the two
        reduced arrays: the per-component path of images calls this once per
        component, so it stays lean.
        """
        if not x.shape[axis]:
            return x.copy() if out is None else out
        if out is None:
            out = _pool.empty(x.shape, x.dtype)
        if _rowwise(x, out, axis):  # over the last axis of a large array: cache-sized row blocks, threaded
            _special.map_blocks(_softmax_rows, x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1]))
            return out
        _softmax_rows(x, out, axis)
        return out

    def normalize_sum(self, x, axis, out=None):
        """``x / x.sum(axis)`` (softmax's last step on values already exponentiated); into ``out`` when given."""
        total = x.sum(axis=axis, keepdims=True)
        with np.errstate(divide="ignore"):  # an empty slice sums to 0: its inf multiplies nothing
            np.reciprocal(total, out=total)  # one reciprocal per slice, then a multiply (as softmax)
        return np.multiply(x, total, out=out)

    def log_softmax(self, x, axis, out=None):
        """Log-softmax of ``x`` along ``axis``; written into ``out`` when given."""
        if not x.shape[axis]:
            return x.copy() if out is None else out
        if out is None:
            out = _pool.empty(x.shape, x.dtype)
        if _rowwise(x, out, axis):
            _special.map_blocks(_log_softmax_rows, x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1]),
                                scratch=1)
        else:
            _log_softmax_rows(x, out, np.empty(x.shape, dtype=x.dtype), axis)
        return out

    def rms_norm(self, x, eps, weight):
        """Rows of the 2-d ``x`` over their root mean square (``weight`` flat or None)."""
        ms = self.xp.einsum("ij,ij->i", x, x)
        ms /= x.dtype.type(max(x.shape[1], 1))
        ms += x.dtype.type(eps)
        out = x / self.xp.sqrt(ms)[:, None]
        if weight is not None:
            out *= weight
        return out

    def embedding(self, index, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
        """Rows ``weight[index]`` (``max_norm`` rescales the rows looked up; ``weight`` is not written)."""
        rows = weight[index]
        return rows if max_norm is None else self.renorm_rows(rows, max_norm, norm_type)

    def attention(self, q, k, v, mask, is_causal, scale, dropout_p):
        """Scaled dot-product attention of dense blocks ``(..., L, E)`` (torch's math, one pass)."""
        xp = self.xp
        scale = 1.0 / float(np.sqrt(q.shape[-1])) if scale is None else float(scale)
        scores = xp.matmul(q, xp.swapaxes(k, -1, -2))
        scores *= scores.dtype.type(scale)
        lq, lk = scores.shape[-2:]
        if is_causal:
            scores = xp.where(xp.tril(xp.ones((lq, lk), dtype=bool)), scores, -np.inf)
        if mask is not None:
            scores = xp.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
        with np.errstate(invalid="ignore"):
            p = self.softmax(scores.astype(q.dtype, copy=False), -1) if lk else scores
        if dropout_p:
            keep = self.keep_mask(p.shape, dropout_p, p)
            p = p * keep * p.dtype.type(0.0 if dropout_p == 1 else 1.0 / (1.0 - dropout_p))
        return xp.matmul(p, v)

    def matmul(self, a, b):
        return self.xp.matmul(a, b)

    def addmm(self, c, a, b, *, out=None):
        if out is None:
            return c + self.xp.matmul(a, b)
        if out is c:  # out += a @ b, through one product buffer
            return self.xp.add(out, self.xp.matmul(a, b), out=out)
        self.xp.matmul(a, b, out=out)
        out += c
        return out

    def logsumexp(self, x, axis):
        xp = self.xp
        top = xp.max(x, axis=axis, keepdims=True)
        top = xp.where(xp.isfinite(top), top, 0)
        with np.errstate(divide="ignore"):
            return xp.squeeze(top, axis) + xp.log(xp.sum(xp.exp(x - top), axis=axis))

    def lstm(self, x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes):
        return _recurrent.lstm(self.xp, x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes)

    def gru(self, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode):
        return _recurrent.gru(self.xp, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode)

    def ctc_loss(self, logits, input_offsets, labels, label_offsets, blank, blank_labels=None):
        return _recurrent.ctc_loss(self.xp, logits, input_offsets, labels, label_offsets, blank)

    def activation(self, name, x):
        return OUT_OF_PLACE[name](self.xp, x)

    def activation_(self, name, x):
        fn = IN_PLACE.get(name)
        return None if fn is None else fn(self.xp, x)

    def reduce(self, x, kind, axis, keepdim):
        """``kind`` ('sum', 'mean', 'amax', 'amin', 'prod', 'any', 'all', 'argmax', 'argmin') of ``x``
        over ``axis`` (None: everything)."""
        if kind == "mean":  # the mean of nothing is nan, as in torch (and no NumPy warning)
            wide = x.dtype.kind == "f" and x.dtype.itemsize < 4  # float16: the sum and count in float32
            total = x.sum(axis=axis, keepdims=keepdim, dtype=np.float32 if wide else None)
            count = x.size if axis is None else x.shape[axis]
            with np.errstate(invalid="ignore", divide="ignore"):
                out = total / total.dtype.type(count) if count else total * total.dtype.type(np.nan)
            return out.astype(x.dtype, copy=False) if wide else out
        if kind in ("argmax", "argmin") and axis is None:
            return getattr(x, kind)()
        if kind == "prod" and x.dtype.kind in "biu":
            return x.prod(axis=axis, keepdims=keepdim, dtype=np.int64)  # torch: integer products are int64
        return getattr(x, _NUMPY_REDUCE.get(kind, kind))(axis=axis, keepdims=keepdim)

    def extreme_with_index(self, x, kind, axis, keepdim):
        """``(values, indices)`` of the first ``kind`` ('max' or 'min') along ``axis``, from one argmax pass."""
        index = (x.argmax if kind == "max" else x.argmin)(axis=axis, keepdims=True)
        values = self.xp.take_along_axis(x, index, axis=axis)
        if not keepdim:
            index, values = index.squeeze(axis), values.squeeze(axis)
        return values, index

    def segment_extreme_with_index(self, rows, offsets, kind):
        """``(values, indices)`` of the first ``kind`` ('max' or 'min') over the rows of each sequence.

        ``rows`` is ``(total, *row)``, ``offsets`` host int64 bounds with no empty
        sequence. The values are one segment reduction (no padding); the indices
        the smallest position in its sequence where a row equals its value (NaN
        matching NaN, as argmax), found over cache-sized blocks of rows into a
        small-int key array that one more segment reduction takes the minimum of.
        (NumPy's argmax over the middle axis of a padded copy copies the copy
        again; the device backends return None: the caller pads and takes one argmax.)
        """
        values = self._reduceat(np.maximum if kind == "max" else np.minimum, rows, offsets, 0)
        lengths = np.diff(offsets)
        total = rows.shape[0]
        maxlen = int(lengths.max(initial=0))  # offsets [0]: no sequence, empty results
        key_type = np.int16 if maxlen < 2**15 else np.int32 if maxlen < 2**31 else np.int64
        ids = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
        position = (np.arange(total, dtype=np.int64) - offsets[ids]).astype(key_type)
        position = position.reshape((total,) + (1,) * (rows.ndim - 1))
        nans = rows.dtype.kind in "fc" and bool(np.isnan(values).any())
        keys = np.empty(rows.shape, dtype=key_type)
        step = max(1, _tuning.SEGMENT_BLOCK // max(1, rows.size // max(total, 1)))
        same = np.empty((min(step, total),) + rows.shape[1:], dtype=bool)
        for a in range(0, total, step):  # a loop over blocks of rows, not over rows
            b = min(total, a + step)
            want = values.take(ids[a:b], axis=0)
            hit = np.equal(rows[a:b], want, out=same[: b - a])
            if nans:
                hit |= np.isnan(rows[a:b])  # only NaN rows where the value is NaN: maximum propagates NaN
            keys[a:b] = maxlen
            np.copyto(keys[a:b], position[a:b], where=hit)
        index = self._reduceat(np.minimum, keys, offsets, 0).astype(np.int64)
        return values, index

    def renorm_rows(self, rows, max_norm, p):
        """Rows scaled down to ``p``-norm ``max_norm`` where longer (torch's embedding_renorm_)."""
        norms = self.xp.linalg.norm(rows, ord=p, axis=1)
        scale = self.xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(rows.dtype)
        return rows * scale[:, None]

    def linear(self, x, weight, bias):
        # one GEMM straight into a pooled output (CuPy overrides this method)
        out = _pool.empty((x.shape[0], weight.shape[0]), np.result_type(x, weight))
        if bias is not None and _blas.gemm_bias(x, weight, bias, out) is not None:
            return out  # the bias folded into the GEMM (beta=1)
        np.matmul(x, weight.T, out=out)
        if bias is not None:
            broadcast_row(out, bias, np.add)  # (threads here only fight OpenBLAS's spinning workers: measured slower)
        return out

    def layer_norm(self, x, eps, weight, bias):
        """Normalise each row of the 2-d ``x``; ``weight``/``bias`` flat or None.

        Two-pass statistics per block of rows (mean, then the centred sum of
        squares), so every block is read from cache, not memory, after the first
        pass; blocks go to a few threads. The output comes from the buffer pool
        (CuPy overrides this method).
        """
        out = _pool.empty(x.shape, x.dtype)
        scale = x.dtype.type(1.0 / max(x.shape[1], 1))
        eps = x.dtype.type(eps)

        def block(rows, res):
            mean = np.add.reduce(rows, axis=1)
            mean *= scale
            np.subtract(rows, mean[:, None], out=res)
            var = np.vecdot(res, res) if _VECDOT else np.einsum("ij,ij->i", res, res)
            var *= scale
            var += eps
            np.sqrt(var, out=var)
            np.reciprocal(var, out=var)
            res *= var[:, None]
            if weight is not None:
                res *= weight
            if bias is not None:
                res += bias

        if x.size:
            _special.map_blocks(block, x, out, block=_tuning.LN_BLOCK)
        return out

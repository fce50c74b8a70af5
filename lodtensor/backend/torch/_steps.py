"""The pieces of the torch recurrences' step loops (``_recurrent``): Paddle's activations applied in
place and their derivatives taken from their outputs, the thread counts of a loop of small steps,
row gathers, and the guard that refuses a second differentiation.

>>> y = torch.tensor([[0.0, 1.0]])
>>> _ACT_["sigmoid"](y, 2).tolist()  # in place: y now holds the activation's output
[[0.5, 0.7310585975646973]]
>>> g = torch.ones(1, 2)
>>> _GRAD_["sigmoid"](y, g, 2).tolist()  # g * y * (1 - y), in place
[[0.25, 0.1966119259595871]]
"""

import time

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling

from . import _tuning

__all__ = ["StepThreads", "_ACT_", "_GRAD_"]

_aten = torch.ops.aten
_NUMPY_TAKE = (torch.float16, torch.float32, torch.float64)


# -- activations: in place forward, derivative from the output ---------------------------------
def _blocks(x, width):
    return x.reshape(x.shape[0], -1, width)


def _softmax_(x, width):
    x.copy_(torch.softmax(_blocks(x, width), -1).reshape(x.shape))


def _softsign_(x, width):
    x.div_(x.abs().add_(1))


def _tanh_(x, width):
    """tanh in place; on CPU by NumPy's SIMD tanh on the tensor's memory (torch 2.13's CPU tanh ran
    5-20x slower: ``_tuning.NUMPY_TANH``)."""
    if _tuning.NUMPY_TANH and x.device.type == "cpu" and x.dtype in _NUMPY_TANH_DTYPES:
        a = x.numpy()
        np.tanh(a, out=a)
        return x
    return x.tanh_()


_NUMPY_TANH_DTYPES = (torch.float32, torch.float64)

_ACT_ = {
    "sigmoid": lambda x, w: x.sigmoid_(),
    "tanh": _tanh_,
    "relu": lambda x, w: x.relu_(),
    "identity": lambda x, w: x,
    "linear": lambda x, w: x,
    "leaky_relu": lambda x, w: F.leaky_relu_(x, 0.02),
    "elu": lambda x, w: F.elu_(x),
    "softsign": _softsign_,
    "softmax": _softmax_,
}


def _softmax_grad_(y, g, width):
    g_blocks, y_blocks = _blocks(g, width), _blocks(y, width)
    if not _STRIDED_SOFTMAX_GRAD:
        g_blocks, y_blocks = g_blocks.contiguous(), y_blocks.contiguous()
    back = torch._softmax_backward_data(g_blocks, y_blocks, -1, y.dtype)
    g.copy_(back.reshape(g.shape))


def _strided_softmax_grad():
    """Whether ``torch._softmax_backward_data`` reads strided blocks right (a gate's columns of a step's
    buffer): torch 2.4.1's CPU kernel read them as if contiguous (a softmax activation's gradients were
    wrong), torch 2.13's reads them right. Checked once, on two rows of two blocks."""
    y = torch.softmax(torch.arange(16.0, dtype=torch.float64).reshape(2, 8).sin(), -1)
    g = torch.arange(16.0, dtype=torch.float64).reshape(2, 8).cos()
    strided = _blocks(g[:, 1:7], 3), _blocks(y[:, 1:7], 3)
    got = torch._softmax_backward_data(*strided, -1, torch.float64)
    return torch.equal(got, torch._softmax_backward_data(*(b.contiguous() for b in strided), -1, torch.float64))


_STRIDED_SOFTMAX_GRAD = _strided_softmax_grad()


def _softsign_grad_(y, g, width):
    g.mul_((1 - y.abs()).square_())  # d/dx x / (1 + |x|) = 1 / (1 + |x|)^2 = (1 - |y|)^2


# g *= act'(y), in place, from the activation's output y
_GRAD_ = {
    "sigmoid": lambda y, g, w: _aten.sigmoid_backward.grad_input(g, y, grad_input=g),
    "tanh": lambda y, g, w: _aten.tanh_backward.grad_input(g, y, grad_input=g),
    "relu": lambda y, g, w: _aten.threshold_backward.grad_input(g, y, 0, grad_input=g),
    "identity": lambda y, g, w: g,
    "linear": lambda y, g, w: g,
    "leaky_relu": lambda y, g, w: _aten.leaky_relu_backward.grad_input(g, y, 0.02, True, grad_input=g),
    "elu": lambda y, g, w: _aten.elu_backward.grad_input(g, 1.0, 1, 1, True, y, grad_input=g),
    "softsign": _softsign_grad_,
    "softmax": _softmax_grad_,
}


# -- helpers ------------------------------------------------------------------------------------
_SWITCH = []  # [whether changing torch's thread count is cheap here], once measured


def switch_is_cheap():
    """Whether a change of torch's thread count costs at most ``_tuning.STEP_SWITCH_MAX_SECONDS``.

    Measured once, on the first loop that would change it: the fastest of up to three changes there
    and back (one where the first is cheap). torch 2.13 takes microseconds, torch 2.8.0 0.15 ms;
    torch 2.4.1 (its PyPI wheel) 14 ms a change on the 2-core VM, more than a loop of small steps
    saves, so there :class:`StepThreads` keeps torch's count.
    """
    if not _SWITCH:
        have = torch.get_num_threads()
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            torch.set_num_threads(have - 1 if have > 1 else 2)
            torch.set_num_threads(have)
            best = min(best, (time.perf_counter() - start) / 2)
            if best <= _tuning.STEP_SWITCH_MAX_SECONDS:
                break
        _SWITCH[:] = [best <= _tuning.STEP_SWITCH_MAX_SECONDS]
    return _SWITCH[0]


class StepThreads:
    """torch's intra-op threads for a loop of small steps (CPU), restored afterwards.

    A step is one small GEMM and a dozen element-wise ops on a few hundred KB. With one
    thread per core every op pays OpenMP's fork and join, and on a small or loaded machine
    the threads wait for each other (on the loaded 2-core VM, six element-wise ops of a
    ``[2266, 256]`` step took 0.62 ms on one thread and 4.8 ms on two, medians; 2 threads
    made a small LSTM 6-10x slower than 1). Inside ``with StepThreads(...)`` the element-wise
    ops run on ``pointwise`` threads (one per ``STEP_ELEMENTS_PER_THREAD`` values of a step)
    and the per-step GEMMs, through :meth:`gemm`, on ``gemm`` threads (one per
    ``STEP_WORK_PER_THREAD`` multiply-adds), both at most torch's count. CPU data only;
    ``torch.set_num_threads`` is process-wide: other threads of the process see the lower
    count meanwhile. Where changing the count is itself slow (:func:`switch_is_cheap`: 14 ms
    on torch 2.4.1), the loop keeps torch's count.
    """

    __slots__ = ("gemm_threads", "pointwise", "saved")

    def __init__(self, like, batch, d, gates):
        self.gemm_threads = self.pointwise = self.saved = None
        if like.device.type == "cpu":
            have = torch.get_num_threads()
            gemm = max(1, min(have, (int(batch) * d * gates * d) // _tuning.STEP_WORK_PER_THREAD))
            pointwise = max(1, min(have, (int(batch) * d) // _tuning.STEP_ELEMENTS_PER_THREAD))
            if min(gemm, pointwise) < have and switch_is_cheap():
                self.gemm_threads, self.pointwise = gemm, pointwise

    def __enter__(self):
        if self.pointwise is not None:
            self.saved = torch.get_num_threads()
            torch.set_num_threads(self.pointwise)
        return self

    def gemm(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` (a per-step GEMM) on the GEMM's thread count."""
        if self.saved is None or self.gemm_threads == self.pointwise:
            return fn(*args, **kwargs)
        torch.set_num_threads(self.gemm_threads)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(self.pointwise)

    def restore(self):
        """Back to the caller's count (early: before the whole-batch GEMMs after a loop)."""
        if self.saved is not None:
            torch.set_num_threads(self.saved)
            self.saved = None

    def __exit__(self, *exc):
        self.restore()
        return False


def _take(a, index):
    """Rows ``index`` (int64 on ``a``'s device) of ``a``, a new tensor. On CPU, NumPy's take on the
    tensor's memory (1.7x faster than ``index_select`` on the 300 MB of gates of
    ``bench/paddle_layers.py``, measured)."""
    if a.device.type == "cpu" and a.dtype in _NUMPY_TAKE and index.device.type == "cpu":
        try:
            host = a.detach().resolve_conj().resolve_neg().numpy()
        except RuntimeError:  # a tensor without storage of its own (torch.func's wrappers): torch's op
            return a.index_select(0, index)
        return torch.from_numpy(np.take(host, index.numpy(), axis=0))
    return a.index_select(0, index)


def _bounds(counts):
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64).tolist()


def _previous_rows(counts, like):
    """For every step-major row of steps ``1..``, the row of the same sequence one step earlier."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    prev = np.arange(int(counts[0]), total, dtype=np.int64) - np.repeat(counts[:-1], counts[1:])
    return torch.from_numpy(prev).to(like.device)


def _with_previous(first, steps, prev, width):
    """``[first; steps[prev]]`` (``first`` None: ``steps[prev]`` alone), one new buffer."""
    rows = prev.shape[0] + (0 if first is None else first.shape[0])
    out = steps.new_empty((rows, width))
    start = 0
    if first is not None:
        out[: first.shape[0]] = first
        start = first.shape[0]
    torch.index_select(steps, 0, prev, out=out[start:])
    return out


def _rowdot(a, b):
    """Column sums of ``a * b`` as a ``[1, D]`` row."""
    return (a * b).sum(0, keepdim=True)


def _once(where, grads):
    """``grads`` as returned by a backward; where the caller asked for a graph of the gradients
    (``create_graph=True``), they lead to a node that refuses a second differentiation."""
    if not torch.is_grad_enabled():
        return grads
    from torch._C import _functions  # noqa: PLC0415 - what torch's once_differentiable uses

    message = (
        f"{where}: double backward (a gradient of the gradient, create_graph=True) is not supported "
        "through the fused recurrence; differentiate the recurrence once"
    ).encode()
    present = [g for g in grads if g is not None]
    if not present:
        return grads
    try:
        leaves = [g.detach().requires_grad_() for g in present]
    except RuntimeError:  # torch.func's transforms forbid requires_grad_: their grads are taken as they are
        return grads
    err = _functions.DelayedError(message, len(present))
    marked = err(*leaves)
    marked = iter(marked if isinstance(marked, tuple) else (marked,))
    return tuple(None if g is None else next(marked) for g in grads)

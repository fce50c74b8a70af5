"""Argument checks and the time-step plan shared by the layers."""

import numpy as np

from ..backend import backend_name_of
from ..tensor import LoDTensor
from ._math import math_for

__all__ = ["lod_input", "param", "TimePlan", "out_like", "as_torch", "StepThreads", "STEP_WORK_PER_THREAD"]

#: Multiply-adds of one time step's GEMM (active rows x hidden x gates x hidden) that one torch
#: thread is given in the per-step loops of the recurrences; below ``threads x`` this, fewer threads
#: run the loop (see :class:`StepThreads`; measured in docs/porting.md, "Threads").
STEP_WORK_PER_THREAD = 1 << 21


def lod_input(x, where, name="input", *, ndim=2):
    """``x`` as a LoDTensor with a lod and NumPy or torch data of rank ``ndim``; returns ``(x, m)``."""
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: {name} must be a LoDTensor, got {type(x).__name__}")
    x._require_data(where)
    if x.lod_level < 1:
        raise ValueError(f"{where}: {name} must have a lod (lod_level >= 1), got lod_level 0")
    x._check_fits(where)
    m = math_for(x.data)
    if ndim is not None and x.data.ndim != ndim:
        raise ValueError(f"{where}: {name} must have rank {ndim}, got shape {list(x.data.shape)}")
    return x, m


def param(w, like, where, name, shape=None, *, optional=False):
    """Parameter ``w`` as an array of ``like``'s library and dtype, checked against ``shape``
    (``None`` entries match anything). NumPy parameters on torch input become torch constants;
    torch parameters on NumPy input are read as NumPy (forward only)."""
    if w is None:
        if optional:
            return None
        raise TypeError(f"{where}: {name} is required")
    if isinstance(w, LoDTensor):
        w = w.data
    lib = backend_name_of(like)
    wlib = backend_name_of(w)
    if lib == "torch":
        import torch  # noqa: PLC0415

        if wlib != "torch":
            w = torch.as_tensor(np.asarray(w), dtype=like.dtype, device=like.device)
        elif w.dtype != like.dtype:
            raise TypeError(f"{where}: {name} has dtype {w.dtype} but input has {like.dtype}")
    else:
        if wlib == "torch":
            w = w.detach().cpu().numpy()
        w = np.asarray(w)
        if w.dtype != like.dtype:
            w = w.astype(like.dtype)
    if shape is not None:
        got = tuple(int(s) for s in w.shape)
        if len(got) != len(shape) or any(e is not None and e != g for e, g in zip(shape, got)):
            want = "[" + ", ".join("*" if e is None else str(e) for e in shape) + "]"
            raise ValueError(f"{where}: {name} must have shape {want}, got {list(got)}")
    return w


def as_torch(x, where, name="input", *, dtype=None, device=None):
    """``x`` (a LoDTensor or an array) with torch data, for the layers that hold torch Parameters.

    NumPy and CuPy data become torch (zero-copy where the memory allows, as ``LoDTensor.to_torch``);
    floating data takes ``dtype`` and everything goes to ``device`` where given. Torch data
    passes unchanged (no silent dtype or device change); None passes as None.
    """
    if x is None:
        return None
    import torch  # noqa: PLC0415

    data = x.data if isinstance(x, LoDTensor) else x
    lib = backend_name_of(data)
    if lib is None:
        raise TypeError(f"{where}: {name} must be a LoDTensor or a NumPy/torch array, got {type(x).__name__}")
    if lib == "torch":
        return x
    if isinstance(x, LoDTensor):
        t = x.to_torch().data
    elif isinstance(data, np.ndarray):
        t = torch.from_numpy(data if data.flags.writeable else data.copy())
    else:
        t = torch.from_dlpack(data)
    t = t.to(device=device, dtype=dtype if dtype is not None and t.is_floating_point() else None)
    return x.with_data(t) if isinstance(x, LoDTensor) else t


def out_like(x, data):
    """A LoDTensor with ``x``'s lod around ``data``."""
    return x.with_data(data)


class TimePlan:
    """Paddle's batching of a recurrence: sequences sorted by length (longest first, stable);
    step ``t`` runs the ``counts[t]`` sequences longer than ``t``, a prefix of the sorted order,
    so the active batch shrinks as sequences end.

    ``rows`` lists the data row of every (step, active sequence) pair, step-major: forward the
    ``t``-th row of each sequence, with ``reverse`` the ``t``-th from its end. ``bounds[t]`` is
    where step ``t`` starts in ``rows``; ``inverse`` puts step-major results back in row order.
    """

    __slots__ = ("order", "lengths", "counts", "rows", "bounds", "inverse", "steps")

    def __init__(self, offsets, reverse=False):
        offsets = np.asarray(offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        self.order = np.argsort(-lengths, kind="stable")
        self.lengths = lengths[self.order]
        self.steps = int(self.lengths[0]) if self.lengths.size else 0
        self.counts = np.searchsorted(-self.lengths, -np.arange(self.steps), side="left").astype(np.int64)
        self.bounds = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        starts = offsets[:-1][self.order]
        ends = offsets[1:][self.order]
        total = int(self.bounds[-1])
        step_of = np.repeat(np.arange(self.steps, dtype=np.int64), self.counts)
        slot = np.arange(total, dtype=np.int64) - self.bounds[:-1][step_of]
        self.rows = (ends[slot] - 1 - step_of) if reverse else (starts[slot] + step_of)
        self.inverse = np.empty(total, dtype=np.int64)
        self.inverse[self.rows] = np.arange(total, dtype=np.int64)

    def per_step(self, x):
        """Step-major ``x`` (``rows`` taken) cut into each step's rows. A torch tensor is cut by one
        ``torch.split``, whose backward joins the steps' gradients once: a slice per step would,
        in backward, each fill a zero tensor the size of all of ``x`` (measured: 5.1 s of a 10.5 s
        LSTM forward+backward on ``bench/paddle_layers.py``'s batch)."""
        if isinstance(x, np.ndarray):
            return [x[int(self.bounds[t]) : int(self.bounds[t + 1])] for t in range(self.steps)]
        import torch  # noqa: PLC0415

        return torch.split(x, self.counts.tolist())

    def ending(self, t):
        """Sorted positions of the sequences whose last step is ``t``: ``[counts[t+1], counts[t])``."""
        nxt = int(self.counts[t + 1]) if t + 1 < self.steps else 0
        return nxt, int(self.counts[t])


class StepThreads:
    """Fewer torch intra-op threads for the per-step loop of a recurrence whose steps are small.

    A time step is one small GEMM and a few element-wise ops; with torch's default threads
    (one per core) every step pays OpenMP's fork and join, and on a loaded or small machine the
    threads wait for each other: ``dynamic_lstm`` forward+backward ran 6-10x slower with 2
    threads than with 1 on the 2-core development VM under load (docs/porting.md, "Threads").
    Inside ``with StepThreads(data, batch, d, gates):`` torch runs
    ``max(1, batch * d * gates * d // STEP_WORK_PER_THREAD)`` threads at most (CPU torch data
    only), restored on exit. :meth:`inputs` and :meth:`outputs` put the same limit around the
    loop's backward: it is set when the backward reaches the recurrence's outputs and restored
    when it has passed its inputs. ``torch.set_num_threads`` is process-wide: other threads of
    the process see the lower count meanwhile.
    """

    def __init__(self, data, batch, d, gates):
        self.threads = self.saved = None
        if backend_name_of(data) != "torch" or data.device.type != "cpu":
            return
        import torch  # noqa: PLC0415

        have = torch.get_num_threads()
        want = max(1, min(have, (int(batch) * d * gates * d) // STEP_WORK_PER_THREAD))
        if want < have:
            self.threads = want

    def lower(self):
        if self.threads is not None and self.saved is None:
            import torch  # noqa: PLC0415

            self.saved = torch.get_num_threads()
            torch.set_num_threads(self.threads)

    def restore(self):
        if self.saved is not None:
            import torch  # noqa: PLC0415

            torch.set_num_threads(self.saved)
            self.saved = None

    def __enter__(self):
        self.lower()
        return self

    def __exit__(self, *exc):
        self.restore()
        return False

    def _gate(self, arrays, lower_in_backward):
        if self.threads is None:
            return arrays
        import torch  # noqa: PLC0415

        picked = [i for i, a in enumerate(arrays) if isinstance(a, torch.Tensor) and a.requires_grad]
        if not picked or not torch.is_grad_enabled():
            return arrays
        gated = _ThreadGate.apply(self, lower_in_backward, *[arrays[i] for i in picked])
        out = list(arrays)
        for i, g in zip(picked, gated if isinstance(gated, tuple) else (gated,)):
            out[i] = g
        return tuple(out)

    def inputs(self, *arrays):
        """``arrays`` (None passes) with the thread count restored once their gradients are done."""
        return self._gate(arrays, False)

    def outputs(self, *arrays):
        """``arrays`` with the thread count lowered when the backward reaches them."""
        return self._gate(arrays, True)


def _thread_gate():
    import torch  # noqa: PLC0415

    class ThreadGate(torch.autograd.Function):
        """Identity forward; its backward lowers or restores the threads of a :class:`StepThreads`."""

        @staticmethod
        def forward(ctx, state, lower, *xs):
            ctx.state, ctx.lower = state, lower
            return tuple(x.view_as(x) for x in xs) if len(xs) > 1 else xs[0].view_as(xs[0])

        @staticmethod
        def backward(ctx, *grads):
            if ctx.lower:
                ctx.state.lower()
            else:
                ctx.state.restore()
            return (None, None, *grads)

    return ThreadGate


class _LazyGate:
    fn = None

    @classmethod
    def apply(cls, *args):
        if cls.fn is None:
            cls.fn = _thread_gate()
        return cls.fn.apply(*args)


_ThreadGate = _LazyGate

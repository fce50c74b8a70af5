"""Argument checks, parameters, activations and the time-step plan shared by the layers.

The layers are written once against the backend contract (``x.backend``): they run on
NumPy, CuPy and torch (CPU and CUDA) data alike. Host arrays derived from a LoD (step
orders, context rows, masks) reach the data through ``Backend.from_host``, cached on the
LoD per backend and device (:func:`on_device`).
"""

import numpy as np

from ..backend import backend_name_of, backend_of, dtype_kind, get_backend
from ..backend._contract import ACTIVATIONS
from ..ops._common import snapshot
from ..ops._rows import on_host, per_row
from ..tensor import LoDTensor

__all__ = ["lod_input", "require_float", "param", "act_name", "activate", "LAYER_ACTIVATIONS", "TimePlan",
           "time_plan", "step_rows", "step_inverse", "on_device", "out_like", "as_torch"]


def require_float(data, where, name="input"):
    """Refuse non-floating ``data``: the layers compute in floating point, and a floating parameter
    cast to the input's integer dtype would be truncated silently (Paddle takes float only)."""
    if dtype_kind(data.dtype) != "f":
        raise TypeError(
            f"{where}: {name} must have a floating dtype (float16, float32 or float64), got {data.dtype}; "
            f"convert it first (e.g. x.astype('float32'))"
        )


def lod_input(x, where, name="input", *, ndim=2, floating=True):
    """``x`` as a LoDTensor with a lod and data of rank ``ndim`` (and, with ``floating``, of a
    floating dtype); returns ``(x, backend)``, ``x`` a snapshot (``ops._common.snapshot``: another thread's
    ``set_lod`` midway cannot mix two states), which the layer uses instead of its argument."""
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: {name} must be a LoDTensor, got {type(x).__name__}")
    x = snapshot(x)
    x._require_data(where)
    if floating:
        require_float(x.data, where, name)
    if x.lod_level < 1:
        raise ValueError(f"{where}: {name} must have a lod (lod_level >= 1), got lod_level 0")
    x._check_fits(where)
    if ndim is not None and x.data.ndim != ndim:
        raise ValueError(f"{where}: {name} must have rank {ndim}, got shape {list(x.data.shape)}")
    return x, x.backend


def param(w, like, where, name, shape=None, *, optional=False):
    """Parameter ``w`` as an array of ``like``'s library, device and dtype, checked against ``shape``
    (``None`` entries match anything).

    A weight of another library goes through the host: NumPy parameters on torch or CuPy input
    become constants on the input's device; torch parameters on NumPy input are read as NumPy
    (forward only). A weight of the input's library keeps its memory: another dtype is cast
    unless autograd tracks the weight (then a TypeError: the cast would cut its gradient), and
    another device is a TypeError.
    """
    if w is None:
        if optional:
            return None
        raise TypeError(f"{where}: {name} is required")
    if isinstance(w, LoDTensor):
        w = w.data
    if backend_name_of(w) is None:  # a list or a scalar: host values
        w = np.asarray(w)
    be, wbe = backend_of(like), backend_of(w)
    if wbe is not be:
        w = be.from_host(wbe.to_numpy(w), like=like, dtype=like.dtype)
    else:
        if be.device_of(w) != be.device_of(like):
            raise TypeError(
                f"{where}: {name} is on {be.device_of(w)} but input is on {be.device_of(like)}; move one first"
            )
        if w.dtype != like.dtype:
            if be.requires_grad(w):
                raise TypeError(f"{where}: {name} has dtype {w.dtype} but input has {like.dtype}")
            w = be.astype(w, like.dtype)
    if shape is not None:
        got = tuple(int(s) for s in w.shape)
        if len(got) != len(shape) or any(e is not None and e != g for e, g in zip(shape, got)):
            want = "[" + ", ".join("*" if e is None else str(e) for e in shape) + "]"
            raise ValueError(f"{where}: {name} must have shape {want}, got {list(got)}")
    return w


def _pw(np_name, torch_name, *args):
    return lambda be, x: be.pointwise(np_name, torch_name, x, *args)


_HARDTANH = ("hardtanh", "nn.functional.hardtanh")

#: The rest of Paddle's activation operators that ``act=`` of fc, sequence_conv and row_conv may name
#: (with the operators' default attributes, as Paddle appends them), over the backend's pointwise table:
#: name -> fn(backend, x). The recurrences' gate activations stay ``ACTIVATIONS`` (a superset of Paddle's).
LAYER_ACTIVATIONS = {
    "relu6": _pw(*_HARDTANH, 0.0, 6.0),
    "brelu": _pw(*_HARDTANH, 0.0, 24.0),
    "hard_sigmoid": lambda be, x: be.pointwise(*_HARDTANH, x * 0.2 + 0.5, 0.0, 1.0),
    "hard_swish": lambda be, x: x * be.pointwise(*_HARDTANH, x + 3.0, 0.0, 6.0) / 6.0,
    "gelu": _pw("gelu", "nn.functional.gelu"),
    "silu": _pw("silu", "nn.functional.silu"),
    "swish": _pw("silu", "nn.functional.silu"),  # beta = 1
    "softplus": _pw("softplus", "nn.functional.softplus"),  # beta = 1, threshold = 20
    "logsigmoid": lambda be, x: -be.pointwise("softplus", "nn.functional.softplus", -x),
    "mish": _pw("mish", "nn.functional.mish"),
    "selu": _pw("selu", "nn.functional.selu"),
    "celu": _pw("celu", "nn.functional.celu"),
    "stanh": lambda be, x: be.pointwise("tanh", "tanh", x * 0.67) * 1.7159,
    "tanh_shrink": _pw("tanhshrink", "nn.functional.tanhshrink"),
    "softshrink": _pw("softshrink", "nn.functional.softshrink", 0.5),
    "hard_shrink": _pw("hardshrink", "nn.functional.hardshrink", 0.5),
    "thresholded_relu": lambda be, x: be.where(x > 1.0, x, be.zeros(tuple(x.shape), x.dtype, x)),
    **{name: _pw(name, name) for name in ("exp", "expm1", "abs", "square", "sqrt", "rsqrt", "log", "log1p",
                                           "log2", "log10", "reciprocal", "sin", "cos", "erf", "ceil", "floor")},
}


def act_name(name, where, arg="act", *, layer=False):
    """Paddle's activation ``name`` (None: identity) as a key of ``ACTIVATIONS`` (and, for a ``layer``'s
    ``act=``, of ``LAYER_ACTIVATIONS``), checked."""
    if name is None:
        return "identity"
    key = name.lower() if isinstance(name, str) else None
    if key not in ACTIVATIONS and not (layer and key in LAYER_ACTIVATIONS):
        known = list(ACTIVATIONS) + (list(LAYER_ACTIVATIONS) if layer else [])
        raise ValueError(f"{where}: {arg} must be one of {known} or None, got {name!r}")
    return key


def activate(be, name, x):
    """The activation ``name`` (from :func:`act_name`) of ``x`` on backend ``be``, out of place."""
    fn = LAYER_ACTIVATIONS.get(name)
    return be.activation(name, x) if fn is None else fn(be, x)


def as_torch(x, where, name="input", *, dtype=None, device=None):
    """``x`` (a LoDTensor or an array) with torch data, for the layers that hold torch Parameters.

    NumPy and CuPy data become torch (zero-copy where the memory allows, as ``LoDTensor.to_torch``);
    floating data takes ``dtype`` and everything goes to ``device`` where given. Torch data
    passes unchanged (no silent dtype or device change); None passes as None.
    """
    if x is None:
        return None
    if isinstance(x, LoDTensor):
        x._require_data(where)  # not "must be a LoDTensor, got LoDTensor"
    data = x.data if isinstance(x, LoDTensor) else x
    if backend_name_of(data) is None:
        raise TypeError(f"{where}: {name} must be a LoDTensor or a NumPy/torch array, got {type(x).__name__}")
    tb = get_backend("torch")
    if backend_of(data) is tb:
        return x
    t = tb.asarray(data)  # read-only NumPy memory is copied (torch cannot wrap it)
    if dtype is not None and tb.dtype_kind(t.dtype) == "f":
        t = tb.astype(t, dtype)
    if device is not None:
        t = tb.to_device(t, device)
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
    where step ``t`` starts in ``rows`` (``steps_at``: the same as a Python list); ``inverse``
    puts step-major results back in row order. Built once per LoD (:func:`time_plan`): the
    per-sequence and per-step host arrays at once; ``rows`` and ``inverse``, a host pass over
    every row, only when read, which CPU data alone do (device data get theirs made on their
    device: :func:`step_rows`, :func:`step_inverse`).

    >>> plan = TimePlan(np.array([0, 2, 2, 5]))
    >>> plan.counts.tolist(), plan.rows.tolist(), plan.order.tolist()
    ([2, 2, 1], [2, 0, 3, 1, 4], [2, 0, 1])
    """

    __slots__ = ("order", "lengths", "counts", "bounds", "steps", "steps_at", "reverse", "starts", "ends",
                 "_rows", "_inverse")

    def __init__(self, offsets, reverse=False):
        offsets = np.asarray(offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        self.reverse = bool(reverse)
        self.order = np.argsort(-lengths, kind="stable")
        self.lengths = lengths[self.order]
        self.steps = int(self.lengths[0]) if self.lengths.size else 0
        self.counts = np.searchsorted(-self.lengths, -np.arange(self.steps), side="left").astype(np.int64)
        self.bounds = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.steps_at = self.bounds.tolist()
        self.starts = offsets[:-1][self.order]  # of the sorted sequences
        self.ends = offsets[1:][self.order]
        self._rows = self._inverse = None

    @property
    def rows(self):
        """The data row of every (step, active sequence) pair, step-major (host; built on first read)."""
        if self._rows is None:
            self._rows, self._inverse = _host_rows(self)
        return self._rows

    @property
    def inverse(self):
        """The step-major position of every data row (host; built on first read)."""
        if self._inverse is None:
            self._rows, self._inverse = _host_rows(self)
        return self._inverse

    @property
    def nbytes(self):
        """Bytes held (for the LoD's plan cache)."""
        held = (self.order, self.lengths, self.counts, self.bounds, self.starts, self.ends, self._rows, self._inverse)
        return sum(a.nbytes for a in held if a is not None)

    def ending(self, t):
        """Sorted positions of the sequences whose last step is ``t``: ``[counts[t+1], counts[t])``."""
        nxt = int(self.counts[t + 1]) if t + 1 < self.steps else 0
        return nxt, int(self.counts[t])


def _host_rows(plan):
    """``plan``'s ``rows`` and ``inverse`` as host arrays: a NumPy pass over every row (CPU data only)."""
    total = int(plan.bounds[-1])
    step_of = np.repeat(np.arange(plan.steps, dtype=np.int64), plan.counts)
    slot = np.arange(total, dtype=np.int64) - plan.bounds[:-1][step_of]
    rows = (plan.ends[slot] - 1 - step_of) if plan.reverse else (plan.starts[slot] + step_of)
    inverse = np.empty(total, dtype=np.int64)
    inverse[rows] = np.arange(total, dtype=np.int64)
    return rows, inverse


def time_plan(x, reverse=False):
    """The :class:`TimePlan` of ``x``'s last lod level, cached on its LoD."""
    lod = x.lod
    return lod._plan(("nn.time_plan", bool(reverse)), lambda: TimePlan(lod.offsets(-1), bool(reverse)))


def step_rows(x, plan, like):
    """``plan.rows`` (``plan``: ``x``'s :func:`time_plan`) on ``like``'s device, cached on the LoD. Device
    data get it made there from the per-step and per-sequence host arrays (no host pass over the rows):
    the entry ``bounds[t] + j`` of step ``t`` reads row ``starts[j] + t`` (reverse: ``ends[j] - 1 - t``)."""
    be = backend_of(like)

    def build_on_device():
        step = per_row(be, np.arange(plan.steps, dtype=np.int64), plan.counts, like)
        slot = be.arange(int(plan.bounds[-1]), like=like) - per_row(be, plan.bounds[:-1], plan.counts, like)
        if plan.reverse:
            return be.gather(be.from_host(plan.ends - 1, like=like), slot) - step
        return be.gather(be.from_host(plan.starts, like=like), slot) + step

    return on_device(x, ("nn.rows", plan.reverse), lambda: plan.rows, like, build_on_device)


def step_inverse(x, plan, like):
    """``plan.inverse`` on ``like``'s device, cached on the LoD. Device data get it made there (no host
    pass over the rows): row ``r`` of sequence ``i`` runs at step ``t`` (its place in the sequence,
    counted from the end with ``reverse``) as the ``rank[i]``-th sequence of the sorted order, so it
    sits at ``bounds[t] + rank[i]`` (every sequence longer than ``t`` ranks before those that are not)."""
    be = backend_of(like)

    def build_on_device():
        offsets, lengths = x.lod.offsets(-1), x.lod.lengths(-1)
        rank = np.empty(plan.order.size, dtype=np.int64)
        rank[plan.order] = np.arange(plan.order.size, dtype=np.int64)
        at = be.arange(int(offsets[-1]), like=like)
        step = (per_row(be, offsets[1:] - 1, lengths, like) - at) if plan.reverse else \
            (at - per_row(be, offsets[:-1], lengths, like))
        return be.gather(be.from_host(plan.bounds, like=like), step) + per_row(be, rank, lengths, like)

    return on_device(x, ("nn.inverse", plan.reverse), lambda: plan.inverse, like, build_on_device)


def on_device(x, key, build, like, device_build=None):
    """The host array ``build()`` (derived from ``x``'s LoD alone, named by ``key``) as an array of
    ``like``'s backend on its device: built and copied once per LoD, backend and device. Where
    ``device_build`` is given and ``like`` is device data (``ops._rows.on_host``), ``device_build()`` makes
    the same array on the device instead: no host pass over the rows of a fresh LoD."""
    be = backend_of(like)
    lod = x.lod
    key = ("nn.on", key, be.name, be.device_of(like))
    if device_build is not None and not on_host(be, like):
        return lod._plan(key, device_build)
    return lod._plan(key, lambda: be.from_host(build(), like=like))

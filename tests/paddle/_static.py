"""Run real Paddle 2.6 sequence ops from the differential tests.

Paddle 2.6 runs its LoD sequence ops only in static mode. :func:`program`
builds one ``paddle.static.Program`` per case (cached by a key, so a
hypothesis test that feeds many lods builds it once) and returns a callable
that feeds ``core.LoDTensor`` inputs and fetches the outputs with their lod;
:func:`run_paddle` wraps that for one op call. :data:`OPS` holds the Paddle
function for every op of ``lodtensor.sequence``; :func:`lod_reset` and
:func:`lod_append` rebuild the ``fluid.layers`` wrappers that Paddle 2.6 no
longer ships (both append a ``lod_reset`` operator).

:func:`observe` turns lodtensor's results into the same ``Out(data, lod)``
records, and :func:`crash_signal` runs a Paddle call in a child process, for
the inputs on which Paddle's kernels kill the process instead of raising.
"""

import atexit
import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import warnings
from collections import namedtuple

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")  # also keeps doctest collection quiet where paddle is missing

import paddle.nn.functional as F  # noqa: E402
from paddle.base import core  # noqa: E402

import lodtensor as lt  # noqa: E402

__all__ = [
    "Feed",
    "Out",
    "OPS",
    "program",
    "run_paddle",
    "feed_of",
    "paddle_tensor",
    "observe",
    "attempt",
    "crash_signal",
    "lod_reset",
    "lod_append",
]

SN = paddle.static.nn

#: One input of a Program: its row shape (without the rows), dtype, lod level.
#: ``shape`` fixes the whole shape instead (Paddle needs it for sequence_pad's pad_value).
Feed = namedtuple("Feed", "row_shape dtype lod_level shape", defaults=(0, None))

#: One observed output: a NumPy array and its lod (list of offsets lists).
Out = namedtuple("Out", "data lod")


@contextlib.contextmanager
def static_mode():
    """Paddle's static mode for the duration; the previous mode is restored."""
    dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if dynamic:
            paddle.disable_static()


@contextlib.contextmanager
def fresh_program():
    """``(main, startup, scope)``: a new Program pair and Scope, in :func:`static_mode` for the duration."""
    with static_mode():
        yield paddle.static.Program(), paddle.static.Program(), paddle.static.Scope()


def attempt(fn, *args, **kwargs):
    """``(True, result)`` or ``(False, exception)``; any exception counts as "raises"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return True, fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - which calls raise is what is compared
        return False, err


# The crash checks run in a worker process that imports Paddle but never runs it: each check
# forks a child there. Forking the test process itself is not safe once Paddle's executor has
# started its threads (a child can deadlock on a lock held by one of them).
_WORKER_SOURCE = r"""
import os, pickle, struct, sys, time
channel = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)
sys.path.insert(0, sys.argv[1])
import _static
requests = sys.stdin.buffer
while True:
    head = requests.read(8)
    if len(head) < 8:
        break
    op, inputs, attrs, kwargs = pickle.loads(requests.read(struct.unpack("<Q", head)[0]))
    pid = os.fork()
    if pid == 0:
        try:
            _static.run_paddle(op, _static._unpickle_inputs(inputs), attrs, **kwargs)
        except BaseException:
            os._exit(1)
        os._exit(0)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            status = None
            break
        time.sleep(0.002)
    if status is None:
        answer = "hang"
    elif os.WIFSIGNALED(status):
        answer = str(os.WTERMSIG(status))
    else:
        answer = "exit"
    channel.write(answer + "\n")
    channel.flush()
"""
_WORKER = {}  # "process": the worker, started on first use


def _pickle_inputs(inputs):
    return {
        name: (value.numpy(), value.lod()) if isinstance(value, lt.LoDTensor) else (np.asarray(value), None)
        for name, value in inputs.items()
    }


def _unpickle_inputs(inputs):
    return {name: np.asarray(data) if lod is None else lt.LoDTensor(data, lod) for name, (data, lod) in inputs.items()}


def crash_signal(op, inputs, attrs=None, **kwargs):
    """The signal that kills a process running Paddle's ``op`` on ``inputs`` (``signal.SIGFPE``, ...),
    or None when it raises or returns. Same arguments as :func:`run_paddle`.

    For the inputs on which Paddle's kernels die (a division by zero on 0-row
    data, a heap overrun) instead of raising, which would take pytest down too.
    """
    if not hasattr(os, "fork"):
        raise RuntimeError("crash_signal() needs os.fork (Linux or macOS)")
    worker = _WORKER.get("process")
    if worker is None or worker.poll() is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        worker = _WORKER["process"] = subprocess.Popen(
            [sys.executable, "-c", _WORKER_SOURCE, here], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        atexit.register(worker.stdin.close)
    payload = pickle.dumps((op, _pickle_inputs(inputs), attrs, kwargs))
    worker.stdin.write(struct.pack("<Q", len(payload)) + payload)
    worker.stdin.flush()
    answer = worker.stdout.readline().decode().strip()
    if answer == "hang":
        raise RuntimeError(f"Paddle's {op} hung for 60 s in the crash-check child")
    if not answer:
        raise RuntimeError("the crash-check worker died")
    return None if answer == "exit" else signal.Signals(int(answer))


class _Program:
    """One built Program: call it with ``name=core.LoDTensor`` feeds, get a list of :class:`Out`."""

    def __init__(self, build, feeds):
        self.names = list(feeds)
        self.main, startup = paddle.static.Program(), paddle.static.Program()
        self.scope = paddle.static.Scope()
        with static_mode(), paddle.static.program_guard(self.main, startup):
            variables = {}
            for name, feed in feeds.items():
                shape = list(feed.shape) if feed.shape is not None else [-1, *feed.row_shape]
                variables[name] = paddle.static.data(name, shape=shape, dtype=feed.dtype, lod_level=feed.lod_level)
            outs = build(**variables)
            self.fetch = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            self.exe = paddle.static.Executor(core.CPUPlace())
            self.exe.run(startup, scope=self.scope)

    def __call__(self, **inputs):
        feed = {name: paddle_tensor(inputs[name]) for name in self.names}
        with static_mode():
            results = self.exe.run(
                self.main, feed=feed, fetch_list=self.fetch, scope=self.scope, return_numpy=False
            )
        return [Out(np.array(r), r.lod()) for r in results]


class _Refused:
    """A Program that Paddle refused to build: calling it raises the same error again."""

    def __init__(self, error):
        self.error = error

    def __call__(self, **inputs):
        raise self.error


_CACHE = {}


def program(key, build, feeds):
    """The Program for ``key`` (built on first use): ``build(**variables)`` over ``feeds``.

    ``feeds`` maps input names to :class:`Feed`. Returns a callable taking the
    inputs by name (``core.LoDTensor``, :class:`lodtensor.LoDTensor` or NumPy)
    and returning a list of :class:`Out`; it raises where Paddle raises, at
    build time or at run time.
    """
    if key not in _CACHE:
        ok, built = attempt(_Program, build, feeds)
        _CACHE[key] = built if ok else _Refused(built)
    return _CACHE[key]


def feed_of(value, fixed=False):
    """The :class:`Feed` for ``value`` (lodtensor.LoDTensor or NumPy); ``fixed`` fixes its whole shape."""
    lod_level = value.lod_level if isinstance(value, lt.LoDTensor) else 0
    data = value.numpy() if isinstance(value, lt.LoDTensor) else np.asarray(value)
    if fixed:
        return Feed((), data.dtype.name, lod_level, shape=tuple(data.shape))
    return Feed(tuple(data.shape[1:]), data.dtype.name, lod_level)


def run_paddle(op, inputs, attrs=None, *, fixed=(), listed=False):
    """Paddle's ``op`` on ``inputs``: ``(True, [Out, ...])`` or ``(False, error)``.

    ``inputs`` maps names to values in the op's argument order; they become
    Program inputs (the names in ``fixed`` with their whole shape fixed) and
    are passed positionally, as one list when ``listed`` (sequence_concat).
    ``attrs`` are passed by keyword. One Program is built per op, attrs and
    input signature (dtypes, row shapes, lod levels), then reused.
    """
    attrs = dict(attrs or {})
    names = list(inputs)
    feeds = {name: feed_of(value, name in fixed) for name, value in inputs.items()}
    key = (op, listed, repr(sorted(attrs.items())), tuple(feeds.items()))

    def build(**variables):
        args = [variables[name] for name in names]
        return OPS[op](args, **attrs) if listed else OPS[op](*args, **attrs)

    return attempt(program(key, build, feeds), **inputs)


def paddle_tensor(value):
    """A ``core.LoDTensor`` holding a copy of ``value`` (lodtensor.LoDTensor, NumPy array)."""
    if isinstance(value, core.LoDTensor):
        return value
    t = core.LoDTensor()
    if isinstance(value, lt.LoDTensor):
        t.set(np.ascontiguousarray(value.numpy()), core.CPUPlace())
        if value.lod_level:
            t.set_lod(value.lod())
    else:
        t.set(np.ascontiguousarray(value), core.CPUPlace())
    return t


def observe(result):
    """A lodtensor result (LoDTensor, array, tuple of them) as a list of :class:`Out`."""
    if isinstance(result, tuple):
        return [out for item in result for out in observe(item)]
    if isinstance(result, lt.LoDTensor):
        return [Out(result.numpy(), result.lod())]
    return [Out(np.asarray(result), [])]


# ------------------------------------------------------------------------------------------
# lod_reset / lod_append: Paddle 2.0's fluid.layers wrappers around the lod_reset operator
# ------------------------------------------------------------------------------------------
def _lod_reset_op(x, y, attrs):
    helper = paddle.base.layer_helper.LayerHelper("lod_reset")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    inputs = {"X": x} if y is None else {"X": x, "Y": y}
    helper.append_op(type="lod_reset", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def lod_reset(x, y=None, target_lod=None):
    """``fluid.layers.lod_reset`` of Paddle 2.0."""
    if y is not None:
        return _lod_reset_op(x, y, {})
    if target_lod is not None:
        return _lod_reset_op(x, None, {"target_lod": list(target_lod)})
    raise ValueError("y and target_lod should not be both none.")


def lod_append(x, level):
    """``fluid.layers.lod_append`` of Paddle 2.0: ``level`` a list of offsets or a Variable."""
    if isinstance(level, paddle.static.Variable):
        return _lod_reset_op(x, level, {"append": True})
    return _lod_reset_op(x, None, {"append": True, "target_lod": list(level)})


#: op name -> the Paddle static-mode function with the signature of lodtensor.sequence.<op>.
OPS = {
    "sequence_pool": SN.sequence_pool,
    "sequence_first_step": SN.sequence_first_step,
    "sequence_last_step": SN.sequence_last_step,
    "sequence_softmax": SN.sequence_softmax,
    "sequence_expand": SN.sequence_expand,
    "sequence_expand_as": SN.sequence_expand_as,
    "sequence_pad": SN.sequence_pad,
    "sequence_unpad": SN.sequence_unpad,
    "sequence_concat": SN.sequence_concat,
    "sequence_reverse": SN.sequence_reverse,
    "sequence_slice": SN.sequence_slice,
    "sequence_enumerate": SN.sequence_enumerate,
    "sequence_reshape": SN.sequence_reshape,
    "sequence_scatter": SN.sequence_scatter,
    "sequence_mask": F.sequence_mask,
    "lod_reset": lod_reset,
    "lod_append": lod_append,
}

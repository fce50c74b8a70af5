"""Differential tests of the sequence ops: real PaddlePaddle 2.6.2 against ``lodtensor.fluid.layers``.

Paddle 2.6 runs its LoD sequence ops only in static mode, so every case is a
``paddle.static.Program`` (built once per op, attributes and input signature;
see ``_static.py``) fed with ``core.LoDTensor`` inputs; lodtensor runs the same
call eagerly. Compared: every output's data (allclose; exact for integers),
lod, dtype and shape, and *which* calls raise (any exception on both sides
counts as agreement; messages and types are not compared).

Inputs are hand-written (1-level and 2-level lods with empty sequences, every
pool type and pad option, float32 / float64, int64 ids) and hypothesis-drawn
(random lods, fixed seed). Where Paddle refuses an input, misbehaves or
crashes and lodtensor deliberately differs, a ``test_difference_*`` test
asserts the difference, and docs/porting.md lists it; a random test that
lands on such an input asserts the same difference instead of skipping it.

Real Paddle needs numpy<2, so this module runs in its own venv (``make
test-paddle``); elsewhere it is skipped.
"""

import signal

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
hypothesis = pytest.importorskip("hypothesis")

from _static import attempt as _attempt  # noqa: E402
from _static import crash_signal, observe, run_paddle  # noqa: E402
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.fluid import layers as L  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

FLOATS = ["float32", "float64"]
POOLS = ["sum", "average", "sqrt", "max", "first", "last"]  # Paddle 2.6 has no "min"

SETTINGS = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ------------------------------------------------------------------------------------------
# The two sides and how they are compared
# ------------------------------------------------------------------------------------------
def ours(op, *args, **kwargs):
    """lodtensor's ``fluid.layers.<op>``: ``(True, [Out, ...])`` or ``(False, error)``."""
    return _attempt(lambda: observe(getattr(L, op)(*args, **kwargs)))


def both(op, inputs, attrs=None, *, fixed=(), listed=False, ours_args=None, ours_kwargs=None):
    """The same call on Paddle and on lodtensor: ``(paddle_result, ours_result)``.

    lodtensor gets ``inputs``' values positionally (as one list when
    ``listed``) and ``attrs`` by keyword, unless ``ours_args`` /
    ``ours_kwargs`` say otherwise (Paddle needs some arguments as tensors).
    """
    attrs = dict(attrs or {})
    p = run_paddle(op, inputs, attrs, fixed=fixed, listed=listed)
    if ours_args is None:
        ours_args = [list(inputs.values())] if listed else list(inputs.values())
    o = ours(op, *ours_args, **(attrs if ours_kwargs is None else ours_kwargs))
    return p, o


def _tolerance(dtype):
    return {"float32": (2e-6, 1e-6), "float64": (1e-12, 1e-12)}.get(np.dtype(dtype).name, (0, 0))


def assert_same(p_outs, o_outs, context=""):
    """Every output: the same lod, shape and data (allclose), then the same dtype."""
    assert len(p_outs) == len(o_outs), f"{context}: {len(p_outs)} outputs from paddle, {len(o_outs)} from lodtensor"
    for k, (p, o) in enumerate(zip(p_outs, o_outs)):
        where = f"{context} output {k}"
        assert p.lod == o.lod, f"{where}: lod paddle={p.lod} lodtensor={o.lod}"
        assert p.data.shape == o.data.shape, f"{where}: shape paddle={p.data.shape} lodtensor={o.data.shape}"
        rtol, atol = _tolerance(p.data.dtype)
        np.testing.assert_allclose(o.data, p.data, rtol=rtol, atol=atol, err_msg=where)
        assert p.data.dtype == o.data.dtype, f"{where}: dtype paddle={p.data.dtype} lodtensor={o.data.dtype}"


def assert_agree(p, o, context=""):
    """Both raise, or both return the same outputs."""
    (ok_p, rp), (ok_o, ro) = p, o
    assert ok_p == ok_o, (
        f"{context}: paddle {'returns' if ok_p else 'raises'} ({_short(rp)}), "
        f"lodtensor {'returns' if ok_o else 'raises'} ({_short(ro)})"
    )
    if ok_p:
        assert_same(rp, ro, context)


def paddle_refuses_we_accept(p, o, context=""):
    """Documented difference: Paddle raises, lodtensor returns. Returns lodtensor's outputs."""
    (ok_p, rp), (ok_o, ro) = p, o
    assert not ok_p, f"{context}: Paddle now accepts this ({_short(rp)}); update docs/porting.md"
    assert ok_o, f"{context}: lodtensor now raises ({_short(ro)}); update docs/porting.md"
    return ro


def paddle_accepts_we_raise(p, o, exc, context=""):
    """Documented difference: Paddle returns, lodtensor raises ``exc``. Returns Paddle's outputs."""
    (ok_p, rp), (ok_o, ro) = p, o
    assert ok_p, f"{context}: Paddle now raises ({_short(rp)}); update docs/porting.md"
    assert not ok_o, f"{context}: lodtensor now accepts this; update docs/porting.md"
    assert isinstance(ro, exc), f"{context}: {ro!r} is not a {exc}"
    return rp


def _short(value):
    if isinstance(value, Exception):
        lines = [line for line in str(value).splitlines() if line.strip()]
        return f"{type(value).__name__}: {lines[-1].strip()[:200] if lines else ''}"
    return repr(value)[:300]


# ------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------
def T(values, lod=None, dtype="float32"):
    return lt.LoDTensor(np.asarray(values, dtype=dtype), lod)


def I64(values, lod=None):
    return T(values, lod, "int64")


def I32(values, lod=None):
    return T(values, lod, "int32")


LOD1 = [[0, 2, 2, 5]]  # 3 sequences, the middle one empty
LOD2 = [[0, 2, 2, 4], [0, 1, 3, 3, 6]]  # empty sequences at both levels
LOD3 = [[0, 1, 2], [0, 2, 3], [0, 1, 3, 6]]


def seq_data(rows, row_shape=(1,), dtype="float32"):
    n = rows * int(np.prod(row_shape))
    return (np.arange(n) * 0.75 - 2.0).reshape((rows, *row_shape)).astype(dtype)


def X(lod, row_shape=(1,), dtype="float32"):
    return T(seq_data(lod[-1][-1], row_shape, dtype), lod, dtype)


def num_sequences(x):
    return len(x.lod()[-1]) - 1


def sequences(x):
    """The last-level sequences of ``x`` as NumPy arrays."""
    offsets = x.lod()[-1]
    return [x.numpy()[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


POOL_REFERENCE = {
    "sum": lambda s: s.sum(0),
    "average": lambda s: s.mean(0),
    "sqrt": lambda s: s.sum(0) / np.sqrt(len(s)),
    "max": lambda s: s.max(0),
    "min": lambda s: s.min(0),
    "first": lambda s: s[0],
    "last": lambda s: s[-1],
}


def pool_reference(x, pool_type, pad_value):
    return np.stack(
        [POOL_REFERENCE[pool_type](s) if len(s) else np.full(x.numpy().shape[1:], pad_value) for s in sequences(x)]
    )


# ------------------------------------------------------------------------------------------
# Hand-written cases on which both agree
# ------------------------------------------------------------------------------------------
def _float_cases(dtype):
    """(id, op, inputs, attrs, options) for one float dtype."""
    x1, x1w, x2 = X(LOD1, dtype=dtype), X(LOD1, (2,), dtype), X(LOD2, dtype=dtype)
    x1_3d = X(LOD1, (2, 2), dtype)
    cases = []
    for pool_type in POOLS:
        for name, x in (("1level", x1), ("1level-wide", x1w), ("2level", x2)):
            cases.append((f"pool-{pool_type}-{name}", "sequence_pool", {"input": x},
                          {"pool_type": pool_type, "pad_value": -2.5}, {}))
    cases += [
        ("pool-sum-default-pad", "sequence_pool", {"input": x1}, {"pool_type": "sum"}, {}),
        ("pool-sum-pad-none", "sequence_pool", {"input": x1}, {"pool_type": "sum", "pad_value": None}, {}),
        ("pool-MAX-uppercase", "sequence_pool", {"input": x2}, {"pool_type": "MAX", "pad_value": 1.0}, {}),
        ("pool-max-is_test", "sequence_pool", {"input": x1w}, {"pool_type": "max", "is_test": True}, {}),
        ("pool-first-rows-3d", "sequence_pool", {"input": x1_3d}, {"pool_type": "first", "pad_value": 3.0}, {}),
        ("pool-sum-1d-data", "sequence_pool", {"input": X(LOD1, (), dtype)}, {"pool_type": "sum"}, {}),
        ("first_step-1level", "sequence_first_step", {"input": x1w}, {}, {}),
        ("first_step-2level", "sequence_first_step", {"input": x2}, {}, {}),
        ("last_step-1level", "sequence_last_step", {"input": x1w}, {}, {}),
        ("last_step-2level", "sequence_last_step", {"input": x2}, {}, {}),
        ("softmax-1level", "sequence_softmax", {"input": x1}, {}, {}),
        ("softmax-2level", "sequence_softmax", {"input": x2}, {}, {}),
        ("softmax-3level", "sequence_softmax", {"input": X(LOD3, dtype=dtype)}, {}, {}),
        ("softmax-1d-data", "sequence_softmax", {"input": X(LOD1, (), dtype)}, {}, {}),
        ("softmax-all-empty", "sequence_softmax", {"input": T(np.zeros((0, 1)), [[0, 0, 0]], dtype)}, {}, {}),
        ("expand-nolod-x", "sequence_expand", {"x": T(seq_data(3), None, dtype), "y": x1}, {}, {}),
        ("expand-x-lod-zero-repeat", "sequence_expand",
         {"x": x1w, "y": T(np.zeros((3, 1)), [[0, 1, 3, 3]], dtype)}, {}, {}),
        ("expand-ref0", "sequence_expand", {"x": X([[0, 2, 2, 3]], dtype=dtype), "y": x2}, {"ref_level": 0}, {}),
        ("expand-ref1", "sequence_expand", {"x": X([[0, 1, 1, 3, 4]], dtype=dtype), "y": x2}, {"ref_level": 1}, {}),
        ("expand-ref-1", "sequence_expand", {"x": T(seq_data(4), None, dtype), "y": x2}, {"ref_level": -1}, {}),
        ("expand-nolod-ref0", "sequence_expand", {"x": T(seq_data(3, (2,)), None, dtype), "y": x2},
         {"ref_level": 0}, {}),
        ("expand-rows-3d", "sequence_expand", {"x": X([[0, 1, 1, 3]], (2, 2), dtype), "y": X([[0, 2, 3, 5]])}, {}, {}),
        ("expand_as", "sequence_expand_as", {"x": T(seq_data(3), None, dtype), "y": x1}, {}, {}),
        ("expand_as-wide", "sequence_expand_as", {"x": T(seq_data(3, (2,)), None, dtype), "y": x1}, {}, {}),
        ("expand_as-x-lod-ignored", "sequence_expand_as", {"x": T(seq_data(3), [[0, 1, 3]], dtype), "y": x1}, {}, {}),
        ("expand_as-y-all-empty", "sequence_expand_as",
         {"x": T(seq_data(3), None, dtype), "y": T(np.zeros((0, 1)), [[0, 0, 0, 0]])}, {}, {}),
        ("pad-scalar", "sequence_pad", {"x": x1w, "pad_value": np.array([0.0], dtype)}, {}, {}),
        ("pad-scalar-python", "sequence_pad", {"x": x1w, "pad_value": np.array([-1.0], dtype)}, {},
         {"ours_args": [x1w, -1.0]}),
        ("pad-row", "sequence_pad", {"x": x1w, "pad_value": np.array([-1.0, -2.0], dtype)}, {"maxlen": 4}, {}),
        ("pad-maxlen-equal", "sequence_pad", {"x": x1w, "pad_value": np.array([9.0], dtype)}, {"maxlen": 3}, {}),
        ("pad-maxlen-longer", "sequence_pad", {"x": x1, "pad_value": np.array([9.0], dtype)}, {"maxlen": 6}, {}),
        ("pad-rows-3d-scalar", "sequence_pad", {"x": x1_3d, "pad_value": np.array([7.0], dtype)}, {}, {}),
        ("pad-rows-3d-row", "sequence_pad", {"x": x1_3d, "pad_value": np.array([[1.0, 2.0], [3.0, 4.0]], dtype)},
         {"maxlen": 4}, {}),
        ("pad-leading-empty", "sequence_pad",
         {"x": X([[0, 0, 1, 2]], dtype=dtype), "pad_value": np.array([5.0], dtype)}, {}, {}),
        ("unpad", "sequence_unpad", {"x": T(seq_data(3, (3, 2)), None, dtype), "length": I64([2, 0, 3])}, {}, {}),
        ("unpad-x-rows-3d", "sequence_unpad", {"x": T(seq_data(2, (2, 2, 2)), None, dtype), "length": I64([1, 2])},
         {}, {}),
        ("concat-2", "sequence_concat", {"a": x1, "b": X([[0, 0, 1, 3]], dtype=dtype)}, {}, {"listed": True}),
        ("concat-3-wide", "sequence_concat",
         {"a": x1w, "b": X([[0, 0, 1, 2]], (2,), dtype), "c": X([[0, 1, 1, 1]], (2,), dtype)}, {}, {"listed": True}),
        ("concat-1d-data", "sequence_concat", {"a": X(LOD1, (), dtype), "b": X([[0, 1, 2, 2]], (), dtype)}, {},
         {"listed": True}),
        ("reverse", "sequence_reverse", {"x": x1w}, {}, {}),
        ("reverse-rows-3d", "sequence_reverse", {"x": x1_3d}, {}, {}),
        ("slice", "sequence_slice", {"input": x1w, "offset": I64([[1], [0], [1]]), "length": I64([[1], [0], [2]])},
         {}, {}),
        ("slice-all-zero-length", "sequence_slice",
         {"input": x1w, "offset": I64([[1], [0], [3]]), "length": I64([[0], [0], [0]])}, {}, {}),
        ("slice-rows-3d", "sequence_slice",
         {"input": x1_3d, "offset": I64([[0], [0], [0]]), "length": I64([[2], [0], [3]])}, {}, {}),
        ("reshape-widen", "sequence_reshape", {"input": X([[0, 2, 2, 6]], (2,), dtype)}, {"new_dim": 4}, {}),
        ("reshape-to-1", "sequence_reshape", {"input": X([[0, 2, 2, 6]], (2,), dtype)}, {"new_dim": 1}, {}),
        ("reshape-same", "sequence_reshape", {"input": x1w}, {"new_dim": 2}, {}),
        ("scatter", "sequence_scatter",
         {"input": T(np.zeros((3, 6)), None, dtype),
          "index": I64([[0], [1], [2], [5], [4], [3], [2], [1], [3], [2], [5], [4]], [[0, 3, 8, 12]]),
          "updates": T(np.arange(12).reshape(12, 1) + 0.5, [[0, 3, 8, 12]], dtype)}, {}, {}),
        ("scatter-repeated-index-and-empty", "sequence_scatter",
         {"input": T(np.ones((3, 3)), None, dtype), "index": I64([[0], [0], [2]], [[0, 2, 2, 3]]),
          "updates": T([[1.0], [2.0], [3.0]], [[0, 2, 2, 3]], dtype)}, {}, {}),
        ("mask-out-dtype", "sequence_mask", {"x": np.array([2, 0, 3])}, {"maxlen": 5, "dtype": dtype}, {}),
        ("lod_reset-target", "lod_reset", {"x": x1w}, {"target_lod": [0, 4, 5]}, {}),
        ("lod_reset-target-2level-x", "lod_reset", {"x": x2}, {"target_lod": [0, 4, 4, 6]}, {}),
        ("lod_reset-target-nolod-x", "lod_reset", {"x": T(seq_data(6), None, dtype)}, {"target_lod": [0, 0, 6]}, {}),
        ("lod_reset-y-lod", "lod_reset", {"x": X([[0, 6]], dtype=dtype), "y": x2}, {}, {}),
        ("lod_reset-y-int32", "lod_reset", {"x": x1w, "y": I32([0, 1, 5])}, {}, {}),
        ("lod_reset-y-int32-column", "lod_reset", {"x": x1w, "y": I32([[0], [0], [5]])}, {}, {}),
        ("lod_reset-y-wins-over-target", "lod_reset", {"x": x1, "y": X([[0, 1, 5]])}, {"target_lod": [0, 5]}, {}),
        ("lod_append-nolod-x", "lod_append", {"x": T(seq_data(6), None, dtype)}, {"level": [0, 2, 6]}, {}),
        ("lod_append-1level", "lod_append", {"x": x1}, {"level": [0, 1, 1, 2, 4, 5]}, {}),
        ("lod_append-2level", "lod_append", {"x": x2}, {"level": [0, 1, 2, 3, 4, 5, 6]}, {}),
        ("lod_append-y-var", "lod_append", {"x": x1}, {}, {"extra": I32([0, 0, 2, 2, 3, 5])}),
    ]
    return cases


def _int_cases():
    ids = I64([[1], [2], [3], [4], [5]], LOD1)
    ids32 = I32([[1], [2], [3], [4], [5]], LOD1)
    return [
        ("enumerate-win2", "sequence_enumerate", {"input": ids}, {"win_size": 2}, {}),
        ("enumerate-win3-pad", "sequence_enumerate", {"input": ids}, {"win_size": 3, "pad_value": -1}, {}),
        ("enumerate-win-longer-than-seqs", "sequence_enumerate", {"input": ids}, {"win_size": 7, "pad_value": 0}, {}),
        ("enumerate-int32", "sequence_enumerate", {"input": ids32}, {"win_size": 2, "pad_value": 9}, {}),
        ("enumerate-all-empty", "sequence_enumerate", {"input": I64(np.zeros((0, 1)), [[0, 0, 0]])},
         {"win_size": 2}, {}),
        ("pad-int64", "sequence_pad", {"x": ids, "pad_value": np.array([7])}, {}, {}),
        ("unpad-int64", "sequence_unpad", {"x": I64(np.arange(12).reshape(3, 2, 2)), "length": I64([2, 0, 1])},
         {}, {}),
        ("concat-int64", "sequence_concat", {"a": ids, "b": I64([[6], [7]], [[0, 0, 2, 2]])}, {}, {"listed": True}),
        ("reverse-int64", "sequence_reverse", {"x": ids}, {}, {}),
        ("slice-int64-1d-data", "sequence_slice",
         {"input": I64([1, 2, 3, 4, 5], LOD1), "offset": I64([[1], [0], [1]]), "length": I64([[1], [0], [2]])},
         {}, {}),
        ("reshape-int64", "sequence_reshape", {"input": I64(np.arange(12).reshape(6, 2), [[0, 3, 3, 6]])},
         {"new_dim": 3}, {}),
        ("expand-int64", "sequence_expand", {"x": I64([[1], [2], [3]]), "y": X(LOD1)}, {}, {}),
        ("expand_as-int64", "sequence_expand_as", {"x": I64([[1], [2], [3]]), "y": X(LOD1)}, {}, {}),
        ("scatter-int64", "sequence_scatter",
         {"input": I64(np.ones((2, 3))), "index": I64([[0], [1], [2]], [[0, 2, 3]]),
          "updates": I64([[1], [2], [3]], [[0, 2, 3]])}, {}, {}),
        ("scatter-1d-index", "sequence_scatter",
         {"input": T(np.ones((2, 3))), "index": I64([0, 1, 2], [[0, 2, 3]]),
          "updates": T([1.0, 2.0, 3.0], [[0, 2, 3]])}, {}, {}),
        ("mask", "sequence_mask", {"x": np.array([2, 0, 3])}, {}, {}),
        ("mask-2d", "sequence_mask", {"x": np.array([[2, 0], [3, 1]])}, {}, {}),
        ("mask-int32-bool", "sequence_mask", {"x": np.array([2, 0, 3], "int32")}, {"maxlen": 4, "dtype": "bool"}, {}),
        ("mask-int32-out", "sequence_mask", {"x": np.array([2, 0, 3])}, {"maxlen": 3, "dtype": "int32"}, {}),
        ("mask-truncates", "sequence_mask", {"x": np.array([2, 0, 3])}, {"maxlen": 2}, {}),
        ("mask-all-zero", "sequence_mask", {"x": np.array([0, 0])}, {}, {}),
        ("mask-no-lengths", "sequence_mask", {"x": np.zeros(0, "int64")}, {"maxlen": 3}, {}),
        ("lod_reset-int64", "lod_reset", {"x": I64(np.arange(6))}, {"target_lod": [0, 3, 6]}, {}),
        ("lod_reset-zero-rows", "lod_reset", {"x": T(np.zeros((0, 2)))}, {"target_lod": [0, 0]}, {}),
        ("lod_append-zero-rows", "lod_append", {"x": T(np.zeros((0, 2)))}, {"level": [0, 0, 0]}, {}),
    ]


def _params():
    params = []
    for dtype in FLOATS:
        for case_id, op, inputs, attrs, options in _float_cases(dtype):
            params.append(pytest.param(op, inputs, attrs, options, id=f"{case_id}-{dtype}"))
    for case_id, op, inputs, attrs, options in _int_cases():
        params.append(pytest.param(op, inputs, attrs, options, id=case_id))
    return params


@pytest.mark.parametrize("op, inputs, attrs, options", _params())
def test_agrees_with_paddle(op, inputs, attrs, options):
    options = dict(options)
    extra = options.pop("extra", None)
    if extra is not None:  # lod_append(x, level) with level a Paddle Variable (int32 data)
        p = run_paddle(op, {**inputs, "level": extra}, attrs)
        o = ours(op, *inputs.values(), extra.numpy(), **attrs)
    else:
        p, o = both(op, inputs, attrs, fixed=("pad_value",), **options)
    assert p[0], f"Paddle raises on a case meant to agree: {_short(p[1])}"
    assert_agree(p, o, f"{op}({attrs})")


@pytest.mark.parametrize("pool_type", ["average", "sqrt"])
@pytest.mark.parametrize("lod", [LOD1, LOD2], ids=["1level", "2level"])
def test_pool_mean_float32_keeps_the_dtype(pool_type, lod):
    """average and sqrt pooling of float32 rows stay float32, data and lod equal to Paddle's."""
    x = X(lod, (2,))
    p, o = both("sequence_pool", {"input": x}, {"pool_type": pool_type, "pad_value": -2.5})
    assert p[0] and o[0] and p[1][0].data.dtype == o[1][0].data.dtype == np.float32
    assert_same(p[1], o[1])


def test_fluid_layers_cover_every_paddle_op():
    """Every op in the harness exists in lodtensor.fluid.layers under the same name."""
    from _static import OPS

    missing = sorted(set(OPS) - set(L.__all__))
    assert not missing, missing


# ------------------------------------------------------------------------------------------
# Calls that both refuse
# ------------------------------------------------------------------------------------------
X1, X1W, X2 = X(LOD1), X(LOD1, (2,)), X(LOD2)
IDS = I64([[1], [2], [3], [4], [5]], LOD1)

BOTH_RAISE = [
    ("pool-unknown-type", "sequence_pool", {"input": X1}, {"pool_type": "median"}),
    ("pool-no-lod", "sequence_pool", {"input": T(np.zeros((3, 1)))}, {"pool_type": "sum"}),
    ("softmax-int64-data", "sequence_softmax", {"input": I64([[1], [2], [3]], [[0, 1, 3]])}, {}),
    ("softmax-no-lod", "sequence_softmax", {"input": T(np.zeros((3, 1)))}, {}),
    ("expand-count-mismatch", "sequence_expand", {"x": X1, "y": X([[0, 1, 2]])}, {}),
    ("expand-ref-level-out-of-range", "sequence_expand", {"x": T(np.zeros((2, 1))), "y": X2}, {"ref_level": 2}),
    ("expand-y-no-lod", "sequence_expand", {"x": T(np.zeros((2, 1))), "y": T(np.zeros((2, 1)))}, {}),
    ("expand_as-count-mismatch", "sequence_expand_as", {"x": T(np.zeros((2, 1))), "y": X1}, {}),
    ("expand_as-y-no-lod", "sequence_expand_as", {"x": T(np.zeros((3, 1))), "y": T(np.zeros((3, 1)))}, {}),
    ("pad-maxlen-too-short", "sequence_pad", {"x": X1W, "pad_value": np.array([0.0], "float32")}, {"maxlen": 2}),
    ("pad-value-wrong-shape", "sequence_pad", {"x": X(LOD1, (3,)), "pad_value": np.array([1.0, 2.0], "float32")}, {}),
    ("pad-no-lod", "sequence_pad", {"x": T(np.zeros((3, 1))), "pad_value": np.array([0.0], "float32")}, {}),
    ("unpad-length-too-long", "sequence_unpad", {"x": T(np.zeros((3, 2, 2))), "length": I64([3, 0, 1])}, {}),
    ("unpad-count-mismatch", "sequence_unpad", {"x": T(np.zeros((3, 2, 2))), "length": I64([1, 1])}, {}),
    ("concat-count-mismatch", "sequence_concat", {"a": X1, "b": X([[0, 2]])}, {}),
    ("concat-width-mismatch", "sequence_concat", {"a": X1, "b": X([[0, 0, 1, 2]], (2,))}, {}),
    ("concat-no-lod", "sequence_concat", {"a": T(np.zeros((3, 1))), "b": T(np.zeros((2, 1)))}, {}),
    ("concat-levels-mismatch", "sequence_concat", {"a": X([[0, 1, 3, 6]]), "b": X([[0, 2, 3], [0, 1, 3, 6]])}, {}),
    ("reverse-no-lod", "sequence_reverse", {"x": T(np.zeros((3, 2)))}, {}),
    ("slice-out-of-range", "sequence_slice",
     {"input": X1W, "offset": I64([[1], [0], [2]]), "length": I64([[2], [0], [2]])}, {}),
    ("slice-negative-offset", "sequence_slice",
     {"input": X1W, "offset": I64([[-1], [0], [0]]), "length": I64([[1], [0], [2]])}, {}),
    ("slice-negative-length", "sequence_slice",
     {"input": X1W, "offset": I64([[1], [0], [0]]), "length": I64([[-1], [0], [2]])}, {}),
    ("slice-count-mismatch", "sequence_slice", {"input": X1W, "offset": I64([[1], [0]]), "length": I64([[1], [0]])},
     {}),
    ("enumerate-win0", "sequence_enumerate", {"input": IDS}, {"win_size": 0}),
    ("enumerate-wide-rows", "sequence_enumerate", {"input": I64(np.arange(10).reshape(5, 2), LOD1)}, {"win_size": 2}),
    ("reshape-not-dividing", "sequence_reshape", {"input": X([[0, 1, 2, 6]], (2,))}, {"new_dim": 4}),
    ("reshape-rows-3d", "sequence_reshape", {"input": X([[0, 2, 2, 6]], (2, 2))}, {"new_dim": 4}),
    ("reshape-1d-data", "sequence_reshape", {"input": X([[0, 2, 2, 6]], ())}, {"new_dim": 2}),
    ("lod_reset-lengths-not-offsets", "lod_reset", {"x": X([[0, 6]])}, {"target_lod": [4, 2]}),
    ("lod_reset-bad-end", "lod_reset", {"x": X([[0, 6]])}, {"target_lod": [0, 4, 5]}),
    ("lod_reset-decreasing", "lod_reset", {"x": X([[0, 6]])}, {"target_lod": [0, 4, 3, 6]}),
    ("lod_reset-one-offset", "lod_reset", {"x": X([[0, 6]])}, {"target_lod": [0]}),
    ("lod_reset-empty-target", "lod_reset", {"x": X([[0, 6]])}, {"target_lod": []}),
    ("lod_reset-y-lod-other-rows", "lod_reset", {"x": X([[0, 6]]), "y": X([[0, 1, 3]])}, {}),
    ("lod_reset-y-data-bad-end", "lod_reset", {"x": X([[0, 6]]), "y": I32([0, 1, 5])}, {}),
    ("lod_append-bad-end", "lod_append", {"x": T(np.zeros((6, 1)))}, {"level": [0, 2, 5]}),
    ("lod_append-decreasing", "lod_append", {"x": T(np.zeros((6, 1)))}, {"level": [0, 3, 2, 6]}),
    ("lod_append-lengths-not-offsets", "lod_append", {"x": T(np.zeros((6, 1)))}, {"level": [2, 4]}),
    ("lod_append-one-offset", "lod_append", {"x": T(np.zeros((6, 1)))}, {"level": [0]}),
    # a pad_value the result's dtype cannot hold: a cast would pad with another number
    ("enumerate-fractional-pad", "sequence_enumerate", {"input": I64([[1], [2], [3]], [[0, 2, 3]])},
     {"win_size": 2, "pad_value": 0.5}),
    ("enumerate-pad-out-of-int32", "sequence_enumerate", {"input": I32([[1], [2], [3]], [[0, 2, 3]])},
     {"win_size": 2, "pad_value": 2**32 + 7}),
    ("pad-fractional-pad-value", "sequence_pad",
     {"x": I64([[1], [2], [3]], [[0, 2, 3]]), "pad_value": np.array([0.5], "float32")}, {}),
    ("pad-pad-value-out-of-int32", "sequence_pad",
     {"x": I32([[1], [2], [3]], [[0, 2, 3]]), "pad_value": np.array([2**40])}, {}),
    ("pool-string-pad-value", "sequence_pool", {"input": X1}, {"pool_type": "sum", "pad_value": "1.5"}),
]


@pytest.mark.parametrize(
    "op, inputs, attrs", [case[1:] for case in BOTH_RAISE], ids=[case[0] for case in BOTH_RAISE]
)
def test_both_raise(op, inputs, attrs):
    p, o = both(op, inputs, attrs, fixed=("pad_value",), listed=op == "sequence_concat")
    assert not p[0], f"Paddle accepts: {_short(p[1])}"
    assert not o[0], f"lodtensor accepts: {_short(o[1])}"


def test_paddle_error_types():
    """The exception types docs/porting.md names for Paddle: TypeError while building for a dtype it
    does not take, RuntimeError for an unknown pool_type, IndexError for an out-of-range slice,
    ValueError for most other refusals."""
    cases = [
        (TypeError, "sequence_softmax", {"input": I64([[1], [2], [3]], [[0, 1, 3]])}, {}),
        (RuntimeError, "sequence_pool", {"input": X1}, {"pool_type": "median"}),
        (IndexError, "sequence_slice", {"input": X1W, "offset": I64([[1], [0], [2]]), "length": I64([[2], [0], [2]])},
         {}),
        (ValueError, "sequence_expand", {"x": X1, "y": X([[0, 1, 2]])}, {}),
    ]
    for exc, op, inputs, attrs in cases:
        ok, err = run_paddle(op, inputs, attrs)
        assert not ok and isinstance(err, exc), (op, err)


# ------------------------------------------------------------------------------------------
# Random lods
# ------------------------------------------------------------------------------------------
@st.composite
def lod_lengths(draw, levels, max_seqs=4, max_len=4, min_seqs=1):
    """Lengths per level, outermost first, zeros included; every outer level holds a sequence."""
    out = [draw(st.lists(st.integers(0, max_len), min_size=min_seqs, max_size=max_seqs))]
    for _ in range(levels - 1):
        if sum(out[-1]) == 0:
            out[-1][0] = 1
        count = sum(out[-1])
        out.append(draw(st.lists(st.integers(0, max_len), min_size=count, max_size=count)))
    return out


def random_values(draw, shape, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 10, size=shape).astype(dtype)


@st.composite
def lod_tensors(draw, dtype, levels=(1,), row_shapes=((1,),), **kwargs):
    lengths = draw(lod_lengths(draw(st.sampled_from(levels)), **kwargs))
    rows = sum(lengths[-1])
    data = random_values(draw, (rows, *draw(st.sampled_from(row_shapes))), dtype)
    return lt.LoDTensor(data, recursive_sequence_lengths=lengths)


def _offsets(lengths):
    return [0, *np.cumsum(lengths, dtype=np.int64).tolist()]


POOL_PARAMS = [
    pytest.param(pool_type, dtype, id=f"{pool_type}-{dtype}")
    for pool_type in POOLS
    for dtype in FLOATS
]


@pytest.mark.parametrize("pool_type, dtype", POOL_PARAMS)
@SETTINGS
@given(data=st.data())
def test_random_pool(pool_type, dtype, data):
    x = data.draw(lod_tensors(dtype, levels=(1, 2), row_shapes=((1,), (3,))))
    pad_value = data.draw(st.sampled_from([0.0, -1.5]))
    p, o = both("sequence_pool", {"input": x}, {"pool_type": pool_type, "pad_value": pad_value})
    context = f"sequence_pool({x.lod()}, {pool_type!r})"
    if x.num_rows < num_sequences(x):  # test_difference_pool_fewer_rows_than_sequences
        event("test_difference_pool_fewer_rows_than_sequences")
        (out,) = paddle_refuses_we_accept(p, o, context)
        np.testing.assert_allclose(out.data, pool_reference(x, pool_type, pad_value), rtol=1e-6)
    else:
        assert_agree(p, o, context)


@pytest.mark.parametrize("op", ["sequence_first_step", "sequence_last_step"])
@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_random_first_and_last_step(op, dtype, data):
    x = data.draw(lod_tensors(dtype, levels=(1, 2), row_shapes=((1,), (2,))))
    p, o = both(op, {"input": x})
    if x.num_rows < num_sequences(x):  # test_difference_pool_fewer_rows_than_sequences
        event("test_difference_pool_fewer_rows_than_sequences")
        (out,) = paddle_refuses_we_accept(p, o, f"{op}({x.lod()})")
        np.testing.assert_array_equal(out.data, pool_reference(x, op.split("_")[1], 0.0))
    else:
        assert_agree(p, o, f"{op}({x.lod()})")


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_random_softmax(dtype, data):
    x = data.draw(lod_tensors(dtype, levels=(1, 2, 3), row_shapes=((1,), ())))
    assert_agree(*both("sequence_softmax", {"input": x}), f"sequence_softmax({x.lod()})")


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_expand(dtype, data):
    y = data.draw(lod_tensors("float32", levels=(1, 2)))
    ref_level = data.draw(st.sampled_from([-1, *range(y.lod_level)]))
    count = len(y.lod()[ref_level]) - 1
    row_shape = data.draw(st.sampled_from([(1,), (2,)]))
    if data.draw(st.booleans()):
        x = T(random_values(data.draw, (count, *row_shape), dtype), None, dtype)
    else:
        lengths = data.draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
        x = T(random_values(data.draw, (sum(lengths), *row_shape), dtype), [_offsets(lengths)], dtype)
    context = f"sequence_expand({x.lod()}, {y.lod()}, ref_level={ref_level})"
    if x.lod_level and x.num_rows == 0:  # test_difference_zero_rows_crash_paddle
        event("test_difference_zero_rows_crash_paddle")
        assert crash_signal("sequence_expand", {"x": x, "y": y}, {"ref_level": ref_level}) == signal.SIGFPE, context
        assert ours("sequence_expand", x, y, ref_level)[0] or sum(y.lengths(ref_level)) == 0, context
        return
    p, o = both("sequence_expand", {"x": x, "y": y}, {"ref_level": ref_level})
    if sum(y.lengths(ref_level)) == 0 and x.lod_level:  # test_expand_all_repeats_zero
        event("test_expand_all_repeats_zero")
    assert_agree(p, o, context)


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_expand_as(dtype, data):
    y = data.draw(lod_tensors("float32"))
    rows = num_sequences(y)
    x = T(random_values(data.draw, (rows, *data.draw(st.sampled_from([(1,), (3,)]))), dtype), None, dtype)
    assert_agree(*both("sequence_expand_as", {"x": x, "y": y}), f"sequence_expand_as({rows} rows, {y.lod()})")


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_pad_and_unpad(dtype, data):
    """sequence_pad with a scalar or a row pad_value and maxlen None / exact / longer / too short,
    then sequence_unpad of the result, on both sides."""
    x = data.draw(lod_tensors(dtype, row_shapes=((1,), (2,), (2, 3))))
    row_shape = x.numpy().shape[1:]
    kind = data.draw(st.sampled_from(["scalar", "row"]))
    pad = random_values(data.draw, (1,) if kind == "scalar" else row_shape, dtype)
    longest = max(x.lengths().tolist())
    maxlen = data.draw(st.sampled_from([None, longest, longest + 2, longest - 1]))
    attrs = {} if maxlen is None else {"maxlen": maxlen}
    ours_pad = data.draw(st.sampled_from([pad, pad.reshape(()) if kind == "scalar" else pad]))
    inputs = {"x": x, "pad_value": pad}
    context = f"sequence_pad({x.lod()}, {kind} {pad.tolist()}, maxlen={maxlen})"
    if x.num_rows == 0:  # test_difference_zero_rows_crash_paddle
        event("test_difference_zero_rows_crash_paddle")
        assert crash_signal("sequence_pad", inputs, attrs, fixed=("pad_value",)) == signal.SIGFPE, context
        if maxlen is None or maxlen >= longest:
            assert ours("sequence_pad", x, ours_pad, maxlen)[0], context
        return
    p, o = both("sequence_pad", inputs, attrs, fixed=("pad_value",), ours_args=[x, ours_pad, maxlen], ours_kwargs={})
    assert_agree(p, o, context)
    if not p[0]:
        return
    padded, length = p[1]
    back = {"x": T(padded.data, None, dtype), "length": I64(length.data)}
    unpadded = both("sequence_unpad", back)
    assert_agree(*unpadded, f"sequence_unpad after {context}")
    assert unpadded[0][1][0].lod == x.lod()
    np.testing.assert_array_equal(unpadded[0][1][0].data, x.numpy())


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_random_unpad(dtype, data):
    n = data.draw(st.integers(1, 4))
    maxlen = data.draw(st.integers(1, 4))
    row_shape = data.draw(st.sampled_from([(1,), (2,)]))
    x = T(random_values(data.draw, (n, maxlen, *row_shape), dtype), None, dtype)
    length = I64(data.draw(st.lists(st.integers(0, maxlen), min_size=n, max_size=n)))
    context = f"sequence_unpad({x.numpy().shape}, {length.numpy().tolist()})"
    if length.numpy().sum() == 0:  # test_difference_zero_rows_crash_paddle
        event("test_difference_zero_rows_crash_paddle")
        assert crash_signal("sequence_unpad", {"x": x, "length": length}) == signal.SIGFPE, context
        (out,) = ours("sequence_unpad", x, length)[1]
        assert out.data.shape == (0, *row_shape) and out.lod == [[0] * (n + 1)]
        return
    assert_agree(*both("sequence_unpad", {"x": x, "length": length}), context)


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_concat(dtype, data):
    k = data.draw(st.integers(2, 3))
    n = data.draw(st.integers(1, 4))
    row_shape = data.draw(st.sampled_from([(1,), (2,)]))
    xs = []
    for _ in range(k):
        lengths = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        xs.append(T(random_values(data.draw, (sum(lengths), *row_shape), dtype), [_offsets(lengths)], dtype))
    inputs = {f"x{i}": x for i, x in enumerate(xs)}
    p, o = both("sequence_concat", inputs, listed=True)
    context = f"sequence_concat({[x.lod() for x in xs]})"
    if any(x.num_rows == 0 for x in xs):  # test_difference_concat_refusals
        event("test_difference_concat_refusals")
        (out,) = paddle_refuses_we_accept(p, o, context)
        expected = [np.concatenate(parts) for parts in zip(*(sequences(x) for x in xs))]
        np.testing.assert_array_equal(out.data, np.concatenate(expected))
    else:
        assert_agree(p, o, context)


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_reverse(dtype, data):
    x = data.draw(lod_tensors(dtype, row_shapes=((1,), (2,), (2, 2))))
    if x.num_rows == 0:  # test_difference_zero_rows_crash_paddle
        event("test_difference_zero_rows_crash_paddle")
        assert crash_signal("sequence_reverse", {"x": x}) == signal.SIGFPE
        assert ours("sequence_reverse", x)[0]
        return
    assert_agree(*both("sequence_reverse", {"x": x}), f"sequence_reverse({x.lod()})")


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_slice(dtype, data):
    """Random in-range slices, and now and then an out-of-range one (both raise)."""
    x = data.draw(lod_tensors(dtype, row_shapes=((1,), (2,))))
    lengths = x.lengths().tolist()
    offset = [data.draw(st.integers(0, n)) for n in lengths]
    length = [data.draw(st.integers(0, n - o)) for n, o in zip(lengths, offset)]
    if data.draw(st.integers(0, 4)) == 0:
        i = data.draw(st.integers(0, len(lengths) - 1))
        length[i] = lengths[i] - offset[i] + 1
    inputs = {"input": x, "offset": I64(np.reshape(offset, (-1, 1))), "length": I64(np.reshape(length, (-1, 1)))}
    assert_agree(*both("sequence_slice", inputs), f"sequence_slice({x.lod()}, {offset}, {length})")


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@SETTINGS
@given(data=st.data())
def test_random_enumerate(dtype, data):
    x = data.draw(lod_tensors(dtype))
    win_size = data.draw(st.integers(2, 4))
    pad_value = data.draw(st.integers(-2, 9))
    assert_agree(
        *both("sequence_enumerate", {"input": x}, {"win_size": win_size, "pad_value": pad_value}),
        f"sequence_enumerate({x.lod()}, {win_size}, {pad_value})",
    )


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_reshape(dtype, data):
    """Random widths and new_dim; when new_dim does not divide a sequence, both raise."""
    x = data.draw(lod_tensors(dtype, row_shapes=((1,), (2,), (4,), (6,))))
    new_dim = data.draw(st.sampled_from([1, 2, 3, 4, 6]))
    assert_agree(
        *both("sequence_reshape", {"input": x}, {"new_dim": new_dim}), f"sequence_reshape({x.lod()}, {new_dim})"
    )


@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@SETTINGS
@given(data=st.data())
def test_random_scatter(dtype, data):
    index_lod = data.draw(lod_tensors("int64"))
    n, rows = num_sequences(index_lod), index_lod.num_rows
    width = data.draw(st.integers(1, 5))
    lod = index_lod.lod()
    index = I64(np.reshape(data.draw(st.lists(st.integers(0, width - 1), min_size=rows, max_size=rows)), (-1, 1)), lod)
    updates = T(random_values(data.draw, (rows, 1), dtype), lod, dtype)
    x = T(random_values(data.draw, (n, width), dtype), None, dtype)
    assert_agree(
        *both("sequence_scatter", {"input": x, "index": index, "updates": updates}),
        f"sequence_scatter({x.numpy().shape}, {index.tolist()})",
    )


@SETTINGS
@given(data=st.data())
def test_random_mask(data):
    shape = data.draw(st.sampled_from([(3,), (2, 2), (4,)]))
    x = np.asarray(data.draw(st.lists(st.integers(0, 5), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))))
    x = x.reshape(shape).astype(data.draw(st.sampled_from(["int64", "int32"])))
    maxlen = data.draw(st.sampled_from([None, 1, 3, 7]))
    dtype = data.draw(st.sampled_from(["int64", "int32", "float32", "float64", "bool"]))
    assert_agree(
        *both("sequence_mask", {"x": x}, {"maxlen": maxlen, "dtype": dtype}),
        f"sequence_mask({x.tolist()}, {maxlen}, {dtype})",
    )


def _split(total, parts, data):
    """``parts`` random non-negative lengths summing to ``total``."""
    if not parts:
        return []
    cuts = sorted(data.draw(st.lists(st.integers(0, total), min_size=parts - 1, max_size=parts - 1)))
    return np.diff([0, *cuts, total]).tolist()


def _x_with_levels(data, dtype, rows):
    """A tensor of ``rows`` rows (width 2) with 0, 1 or 2 random lod levels."""
    levels = data.draw(st.integers(0, 2))
    values = random_values(data.draw, (rows, 2), dtype)
    if levels == 0:
        return T(values, None, dtype)
    count = data.draw(st.integers(1, 4))
    lod = [_offsets(_split(rows, count, data))]
    if levels == 2:
        lod.insert(0, _random_offsets(data, count))
    return T(values, lod, dtype)


def _random_offsets(data, end):
    cuts = sorted(data.draw(st.lists(st.integers(0, end), max_size=4)))
    return [0, *cuts, end]


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_random_lod_reset(dtype, data):
    rows = data.draw(st.integers(0, 6))
    x = _x_with_levels(data, dtype, rows)
    how = data.draw(st.sampled_from(["target", "target", "y-lod", "y-data", "bad-end", "decreasing"]))
    if how == "y-lod":
        inputs, attrs = {"x": x, "y": _x_with_levels(data, "float32", rows)}, {}
        if not inputs["y"].lod_level:  # y without a lod gives its data as offsets: use int32 offsets
            inputs["y"] = I32(_random_offsets(data, rows))
    elif how == "y-data":
        inputs, attrs = {"x": x, "y": I32(_random_offsets(data, rows))}, {}
    else:
        target = _random_offsets(data, rows)
        if how == "bad-end":
            target[-1] += 1
        elif how == "decreasing" and len(target) > 2:
            target[1] = target[-1] + 1
        inputs, attrs = {"x": x}, {"target_lod": target}
    assert_agree(*both("lod_reset", inputs, attrs), f"lod_reset({x.lod()}, {how}, {attrs})")


@pytest.mark.parametrize("as_variable", [False, True], ids=["level-list", "level-variable"])
@SETTINGS
@given(data=st.data())
def test_random_lod_append(as_variable, data):
    rows = data.draw(st.integers(0, 6))
    x = _x_with_levels(data, "float32", rows)
    if x.lod_level and data.draw(st.integers(0, 3)) > 0:
        level = _offsets(_split(rows, rows, data))  # one sequence per row: what a lod needs below it
    else:
        level = _random_offsets(data, rows)
    if data.draw(st.integers(0, 5)) == 0:
        level = [*level[:-1], rows + 1]  # ends past the rows: both raise
    fits_rows = level[-1] == rows
    fits = fits_rows and (not x.lod_level or len(level) - 1 == rows)
    if as_variable:
        p = run_paddle("lod_append", {"x": x, "level": I32(level)})
        o = ours("lod_append", x, np.asarray(level, "int32"))
    else:
        p, o = both("lod_append", {"x": x}, {"level": level})
    context = f"lod_append({x.lod()}, {level})"
    if fits and len(level) < 2:  # test_difference_levels_of_no_sequence (docs/porting.md)
        event("test_difference_levels_of_no_sequence")
        (out,) = paddle_refuses_we_accept(p, o, context)
        assert out.lod == [*x.lod(), level] and out.data.shape[0] == 0
    elif fits or not fits_rows or len(level) < 2:
        assert_agree(p, o, context)
    else:  # test_difference_lod_append_invalid_lod
        event("test_difference_lod_append_invalid_lod")
        (out,) = paddle_accepts_we_raise(p, o, lt.LoDError, context)
        assert out.lod == [*x.lod(), level]


# ------------------------------------------------------------------------------------------
# Documented differences (docs/porting.md, "Sequence ops: differences from Paddle")
# ------------------------------------------------------------------------------------------
def test_difference_pool_min():
    """Paddle 2.6 has no "min" pool type (RuntimeError); lodtensor computes it."""
    p, o = both("sequence_pool", {"input": X1}, {"pool_type": "min", "pad_value": -9.0})
    (out,) = paddle_refuses_we_accept(p, o)
    assert out.data.ravel().tolist() == [-2.0, -9.0, -0.5]
    assert isinstance(p[1], RuntimeError) and "MAX" in str(p[1])


@pytest.mark.parametrize("pool_type", POOLS)
def test_difference_pool_integer_data(pool_type):
    """Paddle's sequence_pool takes float32/float64 only; lodtensor pools integers too
    (sum, max, first, last keep int64; average and sqrt give float64)."""
    x = I64([[1], [2], [3], [4], [5]], LOD1)
    p, o = both("sequence_pool", {"input": x}, {"pool_type": pool_type, "pad_value": -9})
    (out,) = paddle_refuses_we_accept(p, o)
    assert isinstance(p[1], TypeError)
    assert out.data.dtype == (np.float64 if pool_type in ("average", "sqrt") else np.int64)
    np.testing.assert_allclose(out.data, pool_reference(x, pool_type, -9))


@pytest.mark.parametrize("op", ["sequence_pool", "sequence_first_step", "sequence_last_step"])
@pytest.mark.parametrize("lod", [[[0, 0, 0, 1]], [[0, 1, 1, 1]], [[0, 0, 0]], [[0, 3], [0, 0, 0, 1]]], ids=str)
def test_difference_pool_fewer_rows_than_sequences(op, lod):
    """Paddle's pooling kernel requires at least as many rows as sequences (so also refuses 0 rows);
    lodtensor pools any valid lod (empty sequences give pad_value)."""
    x = X(lod)
    attrs = {"pool_type": "sum", "pad_value": 4.0} if op == "sequence_pool" else {}
    out = paddle_refuses_we_accept(*both(op, {"input": x}, attrs))[0]
    assert out.lod == x.lod()[:-1]
    pad = 4.0 if op == "sequence_pool" else 0.0
    np.testing.assert_array_equal(out.data, pool_reference(x, attrs.get("pool_type", op.split("_")[1]), pad))


def test_difference_pool_max_1d_data():
    """Paddle's "max" pool needs rank >= 2 data (the other types take (rows,)); lodtensor takes (rows,)."""
    x = X(LOD1, ())
    (out,) = paddle_refuses_we_accept(*both("sequence_pool", {"input": x}, {"pool_type": "max", "pad_value": 0.0}))
    assert out.data.tolist() == [-1.25, 0.0, 1.0]


@pytest.mark.parametrize("op", ["sequence_pool", "sequence_first_step", "sequence_last_step"])
def test_difference_pool_three_levels(op):
    """Paddle pools inputs of 1 or 2 lod levels; lodtensor any number (the outer levels are kept)."""
    x = X(LOD3)
    attrs = {"pool_type": "max"} if op == "sequence_pool" else {}
    (out,) = paddle_refuses_we_accept(*both(op, {"input": x}, attrs))
    assert out.lod == LOD3[:-1]


def test_difference_softmax_wide_rows():
    """Paddle's sequence_softmax needs rows of width 1; lodtensor normalises every column."""
    x = X(LOD1, (2,))
    (out,) = paddle_refuses_we_accept(*both("sequence_softmax", {"input": x}))
    for column in range(2):
        single = both("sequence_softmax", {"input": T(x.numpy()[:, column : column + 1], LOD1)})
        assert_agree(*single)
        np.testing.assert_allclose(out.data[:, column : column + 1], single[0][1][0].data, rtol=1e-6)


def test_difference_softmax_large_values():
    """Paddle's sequence_softmax does not subtract the maximum: exp overflows to NaN for inputs
    near 100 (float32); lodtensor's is stable."""
    x = T([[100.0], [101.0], [-100.0]], [[0, 2, 3]])
    p, o = both("sequence_softmax", {"input": x})
    assert p[0] and o[0]
    assert np.isnan(p[1][0].data[:2]).all()
    np.testing.assert_allclose(o[1][0].data.ravel(), [0.26894142, 0.7310586, 1.0], rtol=1e-6)


def test_difference_expand_multi_level_x():
    """Paddle's sequence_expand takes x with at most one lod level; lodtensor repeats the top-level
    sequences of x with all their inner levels."""
    x = X([[0, 2, 3], [0, 1, 3, 6]])
    y = X([[0, 1, 3]])
    (out,) = paddle_refuses_we_accept(*both("sequence_expand", {"x": x, "y": y}))
    assert out.lod == [[0, 2, 3, 4], [0, 1, 3, 6, 9]]
    assert out.data.ravel().tolist() == x.numpy().ravel().tolist() + x.numpy()[3:].ravel().tolist()


def test_difference_expand_negative_ref_level():
    """Paddle's ref_level is -1 or 0..levels-1; lodtensor also counts other negative levels from the end."""
    x = T(seq_data(3))
    p, o = both("sequence_expand", {"x": x, "y": X2}, {"ref_level": -2})
    (out,) = paddle_refuses_we_accept(p, o)
    assert_same(run_paddle("sequence_expand", {"x": x, "y": X2}, {"ref_level": 0})[1], [out])


@pytest.mark.parametrize("op", ["sequence_expand", "sequence_expand_as"])
def test_difference_expand_rank1_x(op):
    """Paddle's sequence_expand and sequence_expand_as need x of rank >= 2; lodtensor takes (rows,)."""
    x = I64([1, 2, 3])
    (out,) = paddle_refuses_we_accept(*both(op, {"x": x, "y": X1}))
    assert out.data.tolist() == [1, 1, 3, 3, 3]
    wide = both(op, {"x": I64([[1], [2], [3]]), "y": X1})
    assert wide[0][1][0].data.ravel().tolist() == out.data.tolist()


def test_expand_all_repeats_zero():
    """When y's level repeats every sequence of x 0 times, both return 0 rows with the one-offset lod
    [[0]] (a level of no sequence). For a lod-less x both return 0 rows without lod."""
    y = T(np.zeros((0, 1)), [[0, 0, 0, 0]])
    p, o = both("sequence_expand", {"x": X1, "y": y})
    assert_agree(p, o, "sequence_expand(all repeats 0)")
    assert o[1][0].data.shape == (0, 1) and o[1][0].lod == [[0]]
    p, o = both("sequence_expand", {"x": T(seq_data(3)), "y": y})
    assert_agree(p, o, "sequence_expand(lod-less x, all repeats 0)")
    assert o[1][0].data.shape == (0, 1) and o[1][0].lod == []


def test_difference_expand_as_multi_level_y():
    """Paddle's sequence_expand_as needs y with exactly one lod level; lodtensor uses y's last level
    and keeps all of y's levels."""
    (out,) = paddle_refuses_we_accept(*both("sequence_expand_as", {"x": T(seq_data(4)), "y": X2}))
    assert out.lod == LOD2 and out.data.ravel().tolist() == [-2.0, -1.25, -1.25, 0.25, 0.25, 0.25]


def test_difference_pad_multi_level():
    """Paddle's sequence_pad takes one lod level; lodtensor pads the last level and both outputs keep
    the outer levels."""
    pad = np.array([0.0], "float32")
    padded, length = paddle_refuses_we_accept(*both("sequence_pad", {"x": X2, "pad_value": pad}, fixed=("pad_value",)))
    assert padded.lod == length.lod == LOD2[:-1]
    assert padded.data.shape == (4, 3, 1) and length.data.tolist() == [1, 2, 0, 3]


def test_difference_pad_rank1_data():
    """Paddle's sequence_pad needs data of rank >= 2; lodtensor pads (rows,) data to (sequences, maxlen)."""
    pad = np.array([0.0], "float32")
    p = run_paddle("sequence_pad", {"x": X(LOD1, ()), "pad_value": pad}, fixed=("pad_value",))
    o = ours("sequence_pad", X(LOD1, ()), 0.0)
    padded, length = paddle_refuses_we_accept(p, o)
    assert padded.data.tolist() == [[-2.0, -1.25, 0.0], [0.0, 0.0, 0.0], [-0.5, 0.25, 1.0]]


def test_difference_pad_maxlen_minus_one():
    """Paddle reads maxlen=-1 as "the longest sequence" (its internal default); lodtensor raises
    (use maxlen=None)."""
    pad = np.array([0.0], "float32")
    p, o = both("sequence_pad", {"x": X1W, "pad_value": pad}, {"maxlen": -1}, fixed=("pad_value",))
    padded, _ = paddle_accepts_we_raise(p, o, ValueError)
    assert_same([padded], ours("sequence_pad", X1W, pad)[1][:1])


@pytest.mark.parametrize(
    "op, inputs, attrs",
    [
        ("sequence_pad", {"x": T(np.zeros((0, 2)), [[0, 0, 0]]), "pad_value": np.array([1.0], "float32")}, {}),
        ("sequence_pad", {"x": T(np.zeros((0, 2)), [[0, 0, 0]]), "pad_value": np.array([1.0], "float32")},
         {"maxlen": 2}),
        ("sequence_unpad", {"x": T(np.zeros((2, 3, 1))), "length": I64([0, 0])}, {}),
        ("sequence_reverse", {"x": T(np.zeros((0, 2)), [[0, 0, 0]])}, {}),
        ("sequence_expand", {"x": T(np.zeros((0, 2)), [[0, 0, 0]]), "y": X([[0, 1, 3]])}, {}),
    ],
    ids=["pad", "pad-maxlen", "unpad", "reverse", "expand-x-with-lod"],
)
def test_difference_zero_rows_crash_paddle(op, inputs, attrs):
    """On 0-row data (every sequence empty) Paddle's sequence_pad, sequence_unpad, sequence_reverse and
    sequence_expand (x with a lod) kernels divide by zero and kill the process (SIGFPE); lodtensor
    returns the empty result."""
    assert crash_signal(op, inputs, attrs, fixed=("pad_value",)) == signal.SIGFPE
    ok, outs = ours(op, *inputs.values(), **attrs)
    assert ok, outs
    if op == "sequence_pad":
        assert outs[0].data.shape == (2, attrs.get("maxlen", 0), 2) and (outs[0].data == 1).all()
        assert outs[1].data.tolist() == [0, 0]
    elif op == "sequence_unpad":
        assert outs[0].data.shape == (0, 1) and outs[0].lod == [[0, 0, 0]]
    elif op == "sequence_expand":
        assert outs[0].data.shape == (0, 2) and outs[0].lod == [[0, 0, 0, 0]]
    else:
        assert outs[0].data.shape == (0, 2) and outs[0].lod == [[0, 0, 0]]


@pytest.mark.parametrize("shape, length", [((3, 3), [2, 0, 1]), ((3, 40), [2, 3, 4]), ((1, 1), [1])])
def test_unpad_2d_input_gives_a_column(shape, length):
    """sequence_unpad of (sequences, maxlen) data gives (rows, 1), as Paddle's kernel (#26; Paddle's
    own OpTest with [3, 40] and lengths [2, 3, 4] expects (9, 1))."""
    x = T(np.arange(np.prod(shape), dtype="float64").reshape(shape), None, "float64")
    p, o = both("sequence_unpad", {"x": x, "length": I64(length)})
    assert p[0] and o[0]
    (pout,), (oout,) = p[1], o[1]
    assert pout.data.shape == oout.data.shape == (sum(length), 1)
    assert pout.lod == oout.lod
    np.testing.assert_array_equal(pout.data, oout.data)


def test_difference_unpad_keeps_outer_lod():
    """Paddle's sequence_unpad drops the lod of its input; lodtensor keeps it as the outer levels,
    so that pad then unpad restores a 2-level tensor."""
    x = T(seq_data(3, (2, 2)), [[0, 1, 3]])
    p, o = both("sequence_unpad", {"x": x, "length": I64([2, 0, 1])})
    assert p[0] and o[0]
    assert p[1][0].lod == [[0, 2, 2, 3]] and o[1][0].lod == [[0, 1, 3], [0, 2, 2, 3]]
    np.testing.assert_array_equal(p[1][0].data, o[1][0].data)


def test_difference_unpad_length_forms():
    """Paddle needs length as a 1-D int64 tensor; lodtensor also takes int32 and (n, 1)."""
    x = T(seq_data(3, (2, 2)))
    expected = run_paddle("sequence_unpad", {"x": x, "length": I64([2, 0, 1])})
    for length in (I32([2, 0, 1]), I64([[2], [0], [1]])):
        (out,) = paddle_refuses_we_accept(*both("sequence_unpad", {"x": x, "length": length}))
        assert_same(expected[1], [out])


def test_difference_unpad_negative_length():
    """Paddle's sequence_unpad returns a tensor with an invalid (decreasing) lod for a negative
    length; lodtensor raises LoDError."""
    x = T(seq_data(3, (2, 2)))
    (out,) = paddle_accepts_we_raise(*both("sequence_unpad", {"x": x, "length": I64([2, -1, 1])}), lt.LoDError)
    assert out.lod == [[0, 2, 1, 2]]


def test_difference_concat_two_levels():
    """Paddle 2.6's sequence_concat on 2-level inputs returns a 1-level lod and corrupt data (rows past
    the inputs are uninitialised memory); lodtensor concatenates the last-level sequences and keeps
    the outer level."""
    p, o = both("sequence_concat", {"a": X(LOD2), "b": X(LOD2)}, listed=True)
    assert p[0] and o[0]
    (pout,), (oout,) = p[1], o[1]
    assert len(pout.lod) == 1 and pout.lod != oout.lod
    assert oout.lod == [[0, 2, 2, 4], [0, 2, 6, 6, 12]]
    data = X(LOD2).numpy().ravel()
    assert oout.data.ravel().tolist() == [*data[:1], *data[:1], *data[1:3], *data[1:3], *data[3:], *data[3:]]


def test_difference_concat_refusals():
    """Paddle's sequence_concat refuses one input and an input with 0 rows; lodtensor accepts them.
    Inputs of different dtypes: both refuse (lodtensor never converts silently)."""
    a = X([[0, 2, 3]])
    (out,) = paddle_refuses_we_accept(*both("sequence_concat", {"a": a}, listed=True))
    assert out.lod == a.lod() and out.data.tolist() == a.numpy().tolist()
    b64 = X([[0, 0, 2]], dtype="float64")
    p, o = both("sequence_concat", {"a": a, "b": b64}, listed=True)
    assert not p[0] and not o[0] and isinstance(o[1], TypeError)
    empty = T(np.zeros((0, 1)), [[0, 0, 0]])
    (out,) = paddle_refuses_we_accept(*both("sequence_concat", {"a": a, "b": empty}, listed=True))
    assert out.lod == a.lod() and out.data.tolist() == a.numpy().tolist()


@pytest.mark.parametrize(
    "op, inputs, attrs",
    [
        ("sequence_reverse", {"x": X2}, {}),
        ("sequence_reverse", {"x": I64([1, 2, 3, 4, 5], LOD1)}, {}),
        ("sequence_slice", {"input": X2, "offset": I64([[0], [1], [0], [1]]), "length": I64([[1], [1], [0], [2]])},
         {}),
        ("sequence_slice", {"input": X1W, "offset": I64([1, 0, 1]), "length": I64([1, 0, 2])}, {}),
        ("sequence_slice", {"input": X1W, "offset": I32([[1], [0], [1]]), "length": I32([[1], [0], [2]])}, {}),
        ("sequence_enumerate", {"input": IDS}, {"win_size": 1}),
        ("sequence_enumerate", {"input": T([[1.0], [2.0], [3.0], [4.0], [5.0]], LOD1)}, {"win_size": 2}),
        ("sequence_enumerate", {"input": I64([1, 2, 3, 4, 5], LOD1)}, {"win_size": 2}),
        ("sequence_enumerate", {"input": I64(np.arange(1, 7).reshape(6, 1), LOD2)}, {"win_size": 2}),
        ("sequence_reshape", {"input": X([[0, 1, 3], [0, 2, 4, 6]], (2,))}, {"new_dim": 4}),
        ("sequence_mask", {"x": np.array([2, 0, 3])}, {"maxlen": 0}),
        ("lod_reset", {"x": X1, "y": I64([0, 1, 5])}, {}),
    ],
    ids=[
        "reverse-2level", "reverse-rank1", "slice-2level", "slice-1d-offset", "slice-int32-offset",
        "enumerate-win1", "enumerate-float-ids", "enumerate-1d-ids", "enumerate-2level", "reshape-2level",
        "mask-maxlen0", "lod_reset-int64-y",
    ],
)
def test_difference_paddle_refuses_we_accept(op, inputs, attrs):
    """Inputs Paddle refuses and lodtensor accepts: several lod levels (the op acts on the last),
    (rows,) data, 1-D or int32 index tensors, win_size=1, float ids, maxlen=0, int64 lod_reset offsets."""
    outs = paddle_refuses_we_accept(*both(op, inputs, attrs))
    if op == "sequence_reverse" and inputs["x"].lod_level == 2:
        assert outs[0].lod == LOD2 and outs[0].data.ravel().tolist() == [-2.0, -0.5, -1.25, 1.75, 1.0, 0.25]
    if op == "sequence_enumerate" and attrs["win_size"] == 1:
        assert outs[0].data.tolist() == IDS.numpy().tolist()
    if op == "sequence_mask":
        assert outs[0].data.shape == (3, 0)
    if op == "lod_reset":
        assert outs[0].lod == [[0, 1, 5]]


def test_difference_scatter_checks():
    """Paddle's sequence_scatter does not check the index range (an index past the width writes into
    the next row; a negative one corrupts the heap), nor that input has one row per sequence, nor
    that updates has index's lod; lodtensor raises IndexError, ValueError, LoDError."""
    ones = T(np.ones((2, 3)))
    updates = T([[1.0], [2.0], [3.0]], [[0, 2, 3]])
    p, o = both("sequence_scatter", {"input": ones, "index": I64([[0], [3], [2]], [[0, 2, 3]]), "updates": updates})
    (out,) = paddle_accepts_we_raise(p, o, IndexError)
    assert out.data.tolist() == [[2.0, 1.0, 1.0], [3.0, 1.0, 4.0]]  # index 3 of row 0 landed in row 1
    index = I64([[0], [1], [2]], [[0, 2, 3]])
    p, o = both("sequence_scatter", {"input": T(np.ones((3, 3))), "index": index, "updates": updates})
    (out,) = paddle_accepts_we_raise(p, o, ValueError)
    assert out.data.tolist() == [[2.0, 3.0, 1.0], [1.0, 1.0, 4.0], [1.0, 1.0, 1.0]]
    p, o = both("sequence_scatter", {"input": ones, "index": index, "updates": T(updates.numpy(), [[0, 1, 3]])})
    (out,) = paddle_accepts_we_raise(p, o, lt.LoDError)
    assert out.data.tolist() == [[2.0, 3.0, 1.0], [1.0, 1.0, 4.0]]


def test_difference_scatter_negative_index():
    """A negative index makes Paddle write before the row (into the previous row, or before its
    buffer for row 0, which corrupts the heap); lodtensor raises IndexError."""
    inputs = {"input": T(np.ones((2, 3))), "index": I64([[0], [1], [-1]], [[0, 2, 3]]),
              "updates": T([[1.0], [2.0], [3.0]], [[0, 2, 3]])}
    (out,) = paddle_accepts_we_raise(*both("sequence_scatter", inputs), IndexError)
    assert out.data.tolist() == [[2.0, 3.0, 4.0], [1.0, 1.0, 1.0]]  # index -1 of row 1 landed in row 0


def test_difference_scatter_lenient_inputs():
    """Paddle's sequence_scatter needs a 1-level int64 index; lodtensor also takes int32 and several
    levels (the last is used). Updates of another dtype than input: both refuse (no silent cast)."""
    ones = T(np.ones((2, 3)))
    updates = T([[1.0], [2.0], [3.0]], [[0, 2, 3]])
    expected = [[2.0, 3.0, 1.0], [1.0, 1.0, 4.0]]
    index32 = I32([[0], [1], [2]], [[0, 2, 3]])
    (out,) = paddle_refuses_we_accept(*both("sequence_scatter", {"input": ones, "index": index32, "updates": updates}))
    assert out.data.tolist() == expected and out.data.dtype == np.float32
    updates64 = T(updates.numpy(), [[0, 2, 3]], "float64")
    p, o = both("sequence_scatter", {"input": ones, "index": I64([[0], [1], [2]], [[0, 2, 3]]), "updates": updates64})
    assert not p[0] and not o[0] and isinstance(o[1], TypeError)
    two = [[0, 1, 3], [0, 2, 2, 3]]
    p, o = both("sequence_scatter", {"input": T(np.ones((3, 3))), "index": I64([[0], [1], [2]], two),
                                     "updates": T(updates.numpy(), two)})
    (out,) = paddle_refuses_we_accept(p, o)
    assert out.data.tolist() == [[2.0, 3.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 4.0]]


def test_difference_mask_checks():
    """Paddle's sequence_mask reads maxlen=-1 as the default, treats negative lengths as 0 and takes
    float lengths; lodtensor raises ValueError, LoDError and TypeError."""
    (out,) = paddle_accepts_we_raise(*both("sequence_mask", {"x": np.array([2, 0, 3])}, {"maxlen": -1}), ValueError)
    assert out.data.tolist() == [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
    (out,) = paddle_accepts_we_raise(*both("sequence_mask", {"x": np.array([-1, 2])}), lt.LoDError)
    assert out.data.tolist() == [[0, 0], [1, 1]]
    (out,) = paddle_accepts_we_raise(*both("sequence_mask", {"x": np.array([0.5, 2.0])}), TypeError)
    assert out.data.tolist() == [[1, 0], [1, 1]]


@pytest.mark.parametrize("as_variable", [False, True], ids=["level-list", "level-variable"])
@pytest.mark.parametrize(
    "x, level",
    [(X([[0, 2, 5, 6]]), [0, 1, 2, 6]), (X([[0, 1, 3], [0, 2, 5, 6]]), [0, 2, 4, 6])],
    ids=["1level", "2level"],
)
def test_difference_lod_append_invalid_lod(x, level, as_variable):
    """Paddle's lod_append only checks the new level against the rows, so the old last level can end
    past the sequences of the new one: Paddle returns that invalid lod, lodtensor raises LoDError."""
    if as_variable:
        p, o = run_paddle("lod_append", {"x": x, "level": I32(level)}), ours("lod_append", x, level)
    else:
        p, o = both("lod_append", {"x": x}, {"level": level})
    (out,) = paddle_accepts_we_raise(p, o, lt.LoDError)
    assert out.lod == [*x.lod(), level]
    with pytest.raises(lt.LoDError):  # the lod Paddle returned is not a valid lod
        lt.LoDTensor(out.data, out.lod)


# ------------------------------------------------------------------------------------------
# #26: Paddle's tensor-without-LoD x, maxlen as a tensor, the mask dtypes
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("ref_level", [-1, 0])
def test_expand_plain_array_x(kind, ref_level):
    """sequence_expand of a plain array x: Paddle's tensor without LoD (rows repeated, no lod)."""
    x = seq_data(3, (2,))
    y = X([[0, 1, 3], [0, 2, 2, 5]]) if ref_level == 0 else X(LOD1)
    if ref_level == 0:
        x = x[:2]
    p = run_paddle("sequence_expand", {"x": T(x), "y": y}, {"ref_level": ref_level})
    plain = x if kind == "numpy" else pytest.importorskip("torch").from_numpy(x)
    (out,) = observe(L.sequence_expand(plain, y, ref_level=ref_level))
    assert p[0]
    assert_same(p[1], [out._replace(data=np.asarray(out.data))])


@pytest.mark.parametrize("maxlen", [np.array([4], "int32"), np.array(4, "int32"), np.array([2], "int64")])
def test_mask_maxlen_tensor(maxlen):
    """Paddle takes maxlen as a one-element int32 tensor; lodtensor as any one-element integer
    tensor (NumPy, torch, LoDTensor)."""
    x = np.array([2, 0, 3])
    expected = paddle_mask(x, paddle.to_tensor(maxlen.astype("int32")), "float32")
    for value in (maxlen, lt.LoDTensor(maxlen.reshape(-1))):
        np.testing.assert_array_equal(L.sequence_mask(x, maxlen=value, dtype="float32"), expected)
    torch = pytest.importorskip("torch")
    got = L.sequence_mask(torch.from_numpy(x), maxlen=torch.from_numpy(maxlen), dtype="float32")
    np.testing.assert_array_equal(got.numpy(), expected)


def paddle_mask(x, maxlen, dtype):
    import paddle.nn.functional as PF  # noqa: PLC0415 - dygraph call

    return PF.sequence_mask(paddle.to_tensor(x), maxlen=maxlen, dtype=dtype).numpy()


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "float16", "float64", "complex64"])
def test_mask_numeric_dtypes(dtype):
    x = np.array([2, 0, 3])
    expected = paddle_mask(x, None, dtype)
    got = L.sequence_mask(x, dtype=dtype)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["str", "object", "datetime64[s]", "V8", None])
def test_difference_mask_non_numeric_dtype(dtype):
    """Non-numeric mask dtypes: Paddle refuses a name it does not know and maps others on its own;
    lodtensor raises TypeError for any dtype that is not bool or numeric (#25)."""
    with pytest.raises(TypeError, match="dtype must be a bool or numeric dtype"):
        L.sequence_mask(np.array([2, 0, 3]), dtype=dtype)

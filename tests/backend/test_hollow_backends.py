"""Sequence ops over LoDs with a level of no sequence (``tests/hollow.py``: an empty batch ``[[0]]``,
documents without sentences ``[[0, 0, 0], [0]]``, ...) on the torch backend (CPU, its generic code,
the torch-CUDA route with its kernels emulated) and on the CuPy backend (kernels emulated): the NumPy
backend's shapes, dtypes and values (or its error), gradients of the input's shape, no kernel launch
with an empty grid or block (CUDA refuses those), and torch.func.vmap / grad and torch.compile over
them. The ``cupy`` cases run in ``make test-cupy-emulated`` too (``-k cupy``)."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S

from ..hollow import hollow_cases
from ._hollow_variant import _emulator, emulated, route, variant  # noqa: F401 - fixtures
from ._hollow_variant import torch_tensors as _tensors
from .test_ops_on_backends import _assert_same, _host

torch = pytest.importorskip("torch")
from torch.func import grad, vmap  # noqa: E402

# the cupy stub's arrays are NumPy's: the SQRT pool's 0 / 0 of an empty sequence (filled with the pad
# value next) warns there, not on a GPU (the contract: divide_rows gives NaN quietly)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")

CASES = hollow_cases(dtype=np.float64)
POOLS = ("sum", "average", "sqrt", "max", "min", "first", "last")


def _ops(t):
    """``{name: fn(T, A)}`` over ``t`` (NumPy): ``T`` puts a NumPy LoDTensor on the backend under test
    (floating data tracked by autograd on torch, unless ``grad=False``: a LoD reference), ``A`` a
    NumPy array."""
    lod = t.lod()
    top, last = len(lod[0]) - 1, len(lod[-1]) - 1
    ids = lt.LoDTensor(np.zeros((0, 1), np.int64), lod)
    out = {}
    for level in range(-len(lod), 0):
        for kind in POOLS:
            out[f"pool {kind} level {level}"] = lambda T, A, k=kind, lv=level: S.sequence_pool(
                T(t), k, pad_value=-2.0, level=lv)
        out[f"softmax level {level}"] = lambda T, A, lv=level: S.sequence_softmax(T(t), level=lv)
    out.update({
        "first_step": lambda T, A: S.sequence_first_step(T(t)),
        "last_step": lambda T, A: S.sequence_last_step(T(t)),
        "pad": lambda T, A: S.sequence_pad(T(t), A(np.array([-1.0]))),
        "pad maxlen": lambda T, A: S.sequence_pad(T(t), -1.0, maxlen=3),
        "unpad": lambda T, A: S.sequence_unpad(S.sequence_pad(T(t), -1.0, maxlen=2)[0], A(np.zeros(last, np.int64))),
        "to_padded": lambda T, A: T(t).to_padded(pad_value=3.0),
        "to_padded_all": lambda T, A: T(t).to_padded_all(pad_value=0.0),
        "reverse": lambda T, A: S.sequence_reverse(T(t)),
        "concat": lambda T, A: S.sequence_concat([T(t), T(t)]),
        "expand self": lambda T, A: S.sequence_expand(T(t), T(t, grad=False)),
        "expand top rows": lambda T, A: S.sequence_expand(T(lt.LoDTensor(np.ones((top, 3)))), T(t, grad=False),
                                                          ref_level=0),
        "expand last rows": lambda T, A: S.sequence_expand(T(lt.LoDTensor(np.ones((last, 3)))), T(t, grad=False)),
        "expand_as": lambda T, A: S.sequence_expand_as(T(lt.LoDTensor(np.ones((last, 3)))), T(t, grad=False)),
        "enumerate": lambda T, A: S.sequence_enumerate(T(ids), 2),
        "reshape": lambda T, A: S.sequence_reshape(T(t), 3),
        "slice": lambda T, A: S.sequence_slice(T(t), np.zeros(last, np.int64), np.zeros(last, np.int64)),
        "scatter": lambda T, A: S.sequence_scatter(A(np.zeros((last, 4))), T(ids),
                                                   T(lt.LoDTensor(np.zeros((0, 1)), lod))),
        "mask": lambda T, A: S.sequence_mask(A(np.zeros(last, np.int64))),
        "lod_reset": lambda T, A: S.lod_reset(T(t), target_lod=[0]),
    })
    return out


PAIRS = [(case, op) for case, t in CASES.items() for op in _ops(t)]


@pytest.mark.parametrize("case, op", PAIRS, ids=[f"{c}-{o}" for c, o in PAIRS])
def test_matches_numpy(variant, case, op):  # noqa: F811 - the imported fixture
    fn = _ops(CASES[case])[op]
    try:
        want = _host(lt.get_backend("numpy"), fn(lambda x, grad=True: x, np.asarray))
    except Exception as err:  # NumPy refuses it: so must the others, with the same message
        with pytest.raises(type(err)) as got:
            fn(variant.T, variant.A)
        assert str(got.value) == str(err)
        return
    res = fn(variant.T, variant.A)
    _assert_same(_host(variant.be, res), want, f"{case} {op} on {variant.name}")
    variant.no_empty_launch()
    if not variant.autograd or not variant.leaves:
        return
    # torch: every floating result stays in the graph, and a backward pass gives every input a
    # gradient of its own shape (zeros: no row is read)
    floating = [d for d in _tensors(res) if d.is_floating_point()]
    assert all(d.requires_grad for d in floating), [(tuple(d.shape), d.requires_grad) for d in floating]
    if floating:
        sum((d * 1.5).sum() for d in floating).backward()
        for leaf in variant.leaves:
            assert leaf.grad is not None and leaf.grad.shape == leaf.shape, op
            assert not leaf.grad.any()


def test_the_pairs_cover_every_case_and_level():
    assert {c for c, _ in PAIRS} == set(CASES)
    assert ("batch0x2", "pool max level -2") in PAIRS and ("docs_without_sentences", "softmax level -2") in PAIRS


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "uint8"])
def test_dtypes_match_numpy(variant, dtype):  # noqa: F811 - the imported fixture
    """Pools (integer sums in int64, averages in float64, as the NumPy backend), softmax (refused for
    integers: the same error), pad, reverse and to_padded_all of every hollow case in ``dtype``."""
    for case, t in hollow_cases(dtype=dtype).items():
        ops = {"pad": lambda T, t=t: S.sequence_pad(T(t, grad=False), 0),
               "reverse": lambda T, t=t: S.sequence_reverse(T(t, grad=False)),
               "to_padded_all": lambda T, t=t: T(t, grad=False).to_padded_all()}
        for level in range(-len(t.lod()), 0):
            ops[f"softmax {level}"] = lambda T, t=t, lv=level: S.sequence_softmax(T(t, grad=False), level=lv)
            for kind in POOLS:
                ops[f"{kind} {level}"] = lambda T, t=t, k=kind, lv=level: S.sequence_pool(T(t, grad=False), k,
                                                                                        level=lv)
        for name, fn in ops.items():
            try:
                want = _host(lt.get_backend("numpy"), fn(lambda x, grad=True: x))
            except TypeError:
                with pytest.raises(TypeError, match="floating dtype"):
                    fn(variant.T)
                continue
            _assert_same(_host(variant.be, fn(variant.T)), want, f"{dtype} {case} {name} on {variant.name}")
    variant.no_empty_launch()


# -- torch.func and torch.compile ---------------------------------------------------------------------

def _func_ops(lod):
    def t(v):
        return lt.LoDTensor(v, lod)
    last = len(lod[-1]) - 1
    ops = {f"pool {k}": (lambda v, k=k: S.sequence_pool(t(v), k, pad_value=-1.0).data) for k in POOLS}
    ops.update({
        "pool top max": lambda v: S.sequence_pool(t(v), "max", level=0).data,
        "softmax": lambda v: S.sequence_softmax(t(v)).data,
        "pad": lambda v: S.sequence_pad(t(v), 0.0)[0].data,
        "unpad": lambda v: S.sequence_unpad(S.sequence_pad(t(v), -1.0)[0], np.zeros(last, np.int64)).data,
        "to_padded": lambda v: t(v).to_padded(pad_value=0.0)[0],
        "reverse": lambda v: S.sequence_reverse(t(v)).data,
    })
    return ops


FUNC = [(case, op) for case, t in CASES.items() for op in _func_ops(t.lod())]


@pytest.mark.parametrize("case, op", FUNC, ids=[f"{c}-{o}" for c, o in FUNC])
def test_vmap_and_grad(torch_device, case, op):
    """vmap over samples sharing a hollow LoD equals the loop; grad and vmap(grad) give zero
    gradients of the data's shape (first/last of no row included: the result keeps the graph)."""
    f = _func_ops(CASES[case].lod())[op]
    x = torch.zeros((4,) + tuple(CASES[case].data.shape), dtype=torch.float64, device=torch_device)
    want = torch.stack([f(x[i]) for i in range(4)])
    got = vmap(f)(x)
    assert got.shape == want.shape and torch.equal(got, want)
    g = grad(lambda v: f(v).sum())(x[0])
    assert g.shape == x[0].shape and not g.any()
    gs = vmap(grad(lambda v: f(v).sum()))(x)
    assert gs.shape == x.shape and not gs.any()


def test_torch_compile_over_hollow_lods():
    dynamo = pytest.importorskip("torch._dynamo")

    def f(x):
        return (S.sequence_pool(x, "max", pad_value=-1.0).data * 2 + 1, x.to_padded(pad_value=0.0)[0].sum(),
                torch.tanh(x).data, S.sequence_last_step(x).data)

    dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager")
    try:
        for case, t in CASES.items():
            v = torch.zeros(t.data.shape, dtype=torch.float64, requires_grad=True)
            x = lt.LoDTensor(v, t.lod())
            got, want = compiled(x), f(x)
            for a, b in zip(got, want):
                assert a.shape == b.shape and torch.equal(a, b), case
            sum(o.sum() for o in got).backward()
            assert v.grad.shape == v.shape and not v.grad.any(), case
    finally:
        dynamo.reset()

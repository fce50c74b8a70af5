"""Code nobody on this project wrote, ported the way the docs promise, second pass.

Short, focused rewrites of the usage pattern of:

- the ``torch.nested`` documentation page (pytorch/pytorch ``docs/source/nested.md``): its
  construction, data layout, ``narrow`` + ``contiguous()``, ``unbind``, padding and shape examples,
  with ``lodtensor.nested`` in place of ``torch.nested``, compared with torch 2.13 on the same data.
  ``ln.narrow(...).contiguous()`` kept the padding rows in ``values()`` (and the holed offsets).
- the first nested tensor tutorial's ``mha_nested`` (pytorch/tutorials
  ``prototype_source/nestedtensor.py``, 2022): strided nested tensors, ``F.linear``, ``reshape(N, -1,
  heads, E)``, ``transpose``, ``torch.matmul`` of two ragged dims, ``F.softmax``, ``to_padded_tensor``
  with an ``output_size``.
- fluid 1.x model code (PaddlePaddle/models ``text_classification``, ``lexical_analysis``): the tensor
  layers it calls between the LoD layers (``fluid.layers.tanh``, ``concat``, ``create_parameter``),
  ``emission.shape[1]`` on a layer's output, and the names that do not port (``chunk_eval``,
  ``fluid.DataFeeder``, ``fluid.Executor``), which must say so. Paddle's own results for the same
  programs are in ``tests/paddle/test_paddle_outside_code2.py``.
"""

import math

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.fluid as fluid

torch = pytest.importorskip("torch")
F = torch.nn.functional
import lodtensor.nested as ln  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _same(ours, theirs):
    ours_list = [np.asarray(x) for x in (ours.unbind() if hasattr(ours, "unbind") else ours)]
    theirs_list = [x.detach().numpy() for x in theirs.unbind()]
    assert len(ours_list) == len(theirs_list)
    for a, b in zip(ours_list, theirs_list):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# pytorch/pytorch docs/source/nested.md
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [torch.nested, ln], ids=["torch", "lodtensor"])
def test_nested_docs_construction_and_layout(m):
    a, b = torch.arange(3), torch.arange(5) + 3
    nt = m.nested_tensor([a, b], layout=torch.jagged)
    assert [c.tolist() for c in nt] == [[0, 1, 2], [3, 4, 5, 6, 7]]
    with pytest.raises(RuntimeError, match="same dim"):
        m.nested_tensor([torch.randn(5, 4), torch.randn(2, 5, 4)], layout=torch.jagged)
    x = torch.randn(4, 6, requires_grad=True)
    y = torch.randn(3, 6, requires_grad=True)
    m.as_nested_tensor([x, y], layout=torch.jagged, dtype=torch.float32).sum().backward()
    assert x.grad.eq(1).all() and y.grad.eq(1).all()
    nt = m.nested_tensor([torch.randn(5, 4), torch.randn(3, 4)], layout=torch.jagged, dtype=torch.float32)
    assert tuple(nt.values().shape) == (8, 4) and nt.offsets().tolist() == [0, 5, 8] and nt.dim() == 3
    # values and offsets straight in, and a second tensor on the first one's offsets
    values = torch.randn(8, 4)
    nt2 = m.nested_tensor_from_jagged(values=values, offsets=nt.offsets())
    assert tuple(nt2.shape)[0] == 2 and nt2.shape[2] == 4
    _same((nt + nt2).unbind(), torch.nested.nested_tensor_from_jagged(nt.values() + values, nt.offsets()))
    # unbind is a view: a write through it shows in the nested tensor
    p, q = torch.randn(2, 3), torch.randn(3, 3)
    nt = m.nested_tensor([p, q], layout=torch.jagged)
    first = nt.unbind()[0]
    assert first is not p
    first.mul_(3)
    torch.testing.assert_close(nt.unbind()[0], p * 3)
    padded = m.to_padded_tensor(m.nested_tensor([p, torch.randn(6, 3)], layout=torch.jagged), padding=4.2)
    assert tuple(padded.shape) == (2, 6, 3) and padded[0, 2:].eq(torch.tensor(4.2)).all()
    torch.testing.assert_close(padded[0, :2], p)


def test_nested_docs_narrow_then_contiguous_as_torch():
    """``narrow`` of a padded tensor has holes; ``contiguous()`` packs the components. Before, ours
    returned the holed tensor itself: ``is_contiguous()`` False, ``values()`` all 15 padded rows and
    ``offsets()`` ``[0, 5, 10, 15]``, where torch gives the 10 rows and ``[0, 3, 5, 10]``."""
    torch.manual_seed(0)
    base = torch.randn(3, 5, 4)
    seq_lens = torch.tensor([3, 2, 5])
    results = {}
    for name, m in (("torch", torch.nested), ("ours", ln)):
        nt = m.narrow(base, dim=1, start=0, length=seq_lens, layout=torch.jagged)
        assert not nt.is_contiguous()
        packed = nt.contiguous()
        assert packed.is_contiguous() and packed.lengths() is None
        results[name] = packed
    ours, theirs = results["ours"], results["torch"]
    torch.testing.assert_close(ours.values(), theirs.values())
    assert ours.offsets().tolist() == theirs.offsets().tolist() == [0, 3, 5, 10]
    _same(ours, theirs)
    # the gradient reaches the padded rows taken, only (torch 2.13's backward through its
    # contiguous() of a narrowed tensor raises "CloneBackward0 returned an invalid gradient")
    padded = base.clone().requires_grad_(True)
    packed = ln.narrow(padded, dim=1, start=0, length=seq_lens, layout=torch.jagged).contiguous()
    (packed.values() * torch.arange(4.0)).sum().backward()
    want = (torch.arange(5)[None, :, None] < seq_lens[:, None, None]) * torch.arange(4.0)
    torch.testing.assert_close(padded.grad, want)
    # a copy: writing to it leaves the narrowed tensor as it was (torch's contiguous() copies too)
    nt = ln.narrow(base, dim=1, start=0, length=seq_lens, layout=torch.jagged)
    packed = nt.contiguous()
    packed.values().zero_()
    torch.testing.assert_close(nt.unbind()[2], base[2])
    assert nt.contiguous() is not packed


@pytest.mark.parametrize("m", [torch.nested, ln], ids=["torch", "lodtensor"])
def test_nested_docs_shape_manipulations(m):
    torch.manual_seed(1)
    a, b = torch.randn(2, 6), torch.randn(4, 6)
    nt = m.nested_tensor([a, b], layout=torch.jagged)
    cases = {
        "unsqueeze": (nt.unsqueeze(-1), [a[..., None], b[..., None]]),
        "unflatten": (nt.unflatten(-1, [2, 3]), [a.unflatten(-1, [2, 3]), b.unflatten(-1, [2, 3])]),
        "cat": (torch.cat([nt, nt], dim=2), [torch.cat([a, a], 1), torch.cat([b, b], 1)]),
        "stack": (torch.stack([nt, nt], dim=2), [torch.stack([a, a], 1), torch.stack([b, b], 1)]),
        "transpose": (nt.transpose(-1, -2), [a.T, b.T]),
        "chunk": (nt.chunk(2, dim=0)[1], [b]),
    }
    for name, (got, want) in cases.items():
        comps = got.unbind()
        assert len(comps) == len(want), name
        for g, w in zip(comps, want):
            torch.testing.assert_close(g, w, msg=name)
    assert str(tuple(nt.transpose(-1, -2).shape)[1]) == "6"


# --------------------------------------------------------------------------------------------
# pytorch/tutorials prototype_source/nestedtensor.py (2022): mha_nested on strided nested tensors
# --------------------------------------------------------------------------------------------
def _mha_nested(query, key, value, nheads, w_q, w_k, w_v, w_out, b_q, b_k, b_v, b_out):
    n, e_total = query.size(0), w_q.size(0)
    e_head = e_total // nheads
    query, key, value = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
    query = query.reshape(n, -1, nheads, e_head).transpose(1, 2)
    key = key.reshape(n, -1, nheads, e_head).transpose(1, 2)
    value = value.reshape(n, -1, nheads, e_head).transpose(1, 2)
    weights = torch.matmul(query, key.transpose(-1, -2)) * (1.0 / math.sqrt(e_head))
    weights = F.softmax(weights, dim=-1)
    out = torch.matmul(weights, value).transpose(1, 2).reshape(n, -1, e_total)
    return F.linear(out, w_out, b_out)


def test_first_nested_tutorial_mha_nested():
    torch.manual_seed(2)
    lens, e, heads = [3, 1, 6, 2], 8, 2
    params = [torch.randn(e, e) for _ in range(4)] + [torch.randn(e) for _ in range(4)]
    qs, ks, vs = ([torch.randn(n, e) for n in lens] for _ in range(3))
    shape = (len(lens), max(lens), e)
    outs = {}
    for name, m in (("torch", torch.nested), ("ours", ln)):
        q, k, v = m.nested_tensor(qs), m.nested_tensor(ks), m.nested_tensor(vs)
        out = _mha_nested(q, k, v, heads, *params)
        outs[name] = m.to_padded_tensor(out, 0.0, shape)
    torch.testing.assert_close(outs["ours"], outs["torch"], rtol=1e-5, atol=1e-5)
    # and each sentence alone, dense
    w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o = params
    for i, n in enumerate(lens):
        alone = F.multi_head_attention_forward(
            qs[i][:, None], ks[i][:, None], vs[i][:, None], e, heads, None, torch.cat([b_q, b_k, b_v]), None, None,
            False, 0.0, w_o, b_o, use_separate_proj_weight=True, q_proj_weight=w_q, k_proj_weight=w_k,
            v_proj_weight=w_v, need_weights=False)[0][:, 0]
        torch.testing.assert_close(outs["ours"][i, :n], alone, rtol=1e-4, atol=1e-4)
        assert outs["ours"][i, n:].eq(0).all()


# --------------------------------------------------------------------------------------------
# fluid 1.x model code: the tensor layers, shape as an attribute, the names that do not port
# --------------------------------------------------------------------------------------------
def test_fluid_activation_layers_keep_the_lod_on_every_backend():
    x = lt.LoDTensor(np.array([[-1.0, 0.5], [2.0, -0.25], [0.0, 3.0]]), [[0, 1, 3]])
    for name, ref in (("tanh", np.tanh), ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("relu", lambda v: v * (v > 0)),
                      ("square", np.square), ("exp", np.exp)):
        out = getattr(fluid.layers, name)(x)
        assert isinstance(out.data, np.ndarray) and out.lod() == [[0, 1, 3]], name
        np.testing.assert_allclose(out.data, ref(x.data), rtol=1e-12, err_msg=name)
    # torch data keeps autograd
    xt = x.to_torch()
    xt.data.requires_grad_(True)
    fluid.layers.tanh(xt).data.sum().backward()
    torch.testing.assert_close(xt.data.grad, 1 - torch.tanh(xt.data.detach()) ** 2)
    # the softmax layer, along the last axis (a plain array stays a plain array)
    np.testing.assert_allclose(fluid.layers.softmax(np.log(np.array([[1.0, 3.0]]))), [[0.25, 0.75]])
    with pytest.raises(TypeError, match=r"fluid.layers.tanh\(\): x must be floating .* int64"):
        fluid.layers.tanh(lt.LoDTensor(np.arange(3)[:, None], [[0, 3]]))
    with pytest.raises(ValueError, match=r"axis must be in \[-2, 2\) .* got 2"):
        fluid.layers.softmax(x, axis=2)


def test_fluid_concat_lods_and_errors():
    fwd = lt.LoDTensor(np.ones((3, 2), "float32"), [[0, 1, 3]])
    bwd = lt.LoDTensor(np.zeros((3, 1), "float32"), [[0, 2, 3]])
    both = fluid.layers.concat(input=[fwd, bwd], axis=1)
    assert both.lod() == [[0, 1, 3]] and both.data.tolist() == [[1, 1, 0]] * 3  # the first input's lod
    two = lt.LoDTensor(np.zeros((2, 2), "float32"), [[0, 1, 2], [0, 0, 2]])
    deep = lt.LoDTensor(np.ones((3, 2), "float32"), [[0, 2], [0, 1, 3]])
    assert fluid.layers.concat([two, deep], axis=0).lod() == [[0, 1, 2, 4], [0, 0, 2, 3, 5]]
    plain = fluid.layers.concat([np.ones((2, 2)), np.zeros((1, 2))])
    assert isinstance(plain, np.ndarray) and plain.shape == (3, 2)
    with pytest.raises(ValueError, match=r"input\[1\] has shape \[3, 1\] but input\[0\] has \[3, 2\]; .* axis 0"):
        fluid.layers.concat([fwd, bwd], axis=0)
    with pytest.raises(ValueError, match=r"one depth, got depths \[1, 2\]"):
        fluid.layers.concat([fwd, deep], axis=0)
    with pytest.raises(ValueError, match=r"axis must be in \[-2, 2\) for inputs of rank 2, got 5"):
        fluid.layers.concat([fwd, fwd], axis=5)
    with pytest.raises(TypeError, match=r"input\[1\] is torch data but input\[0\] is numpy"):
        fluid.layers.concat([fwd, bwd.to_torch()], axis=1)
    assert fwd.lod() == [[0, 1, 3]] and fwd.data.tolist() == [[1, 1]] * 3  # untouched


def test_fluid_create_parameter_and_shape_attribute_in_a_program():
    def infer(emission):
        size = emission.shape[1]  # a fluid Variable's attribute: a method here before
        crfw = fluid.layers.create_parameter(shape=[size + 2, size], dtype=emission.dtype, name="crfw")
        return crfw, fluid.layers.crf_decoding(input=emission, param_attr=fluid.ParamAttr(name="crfw"))

    net = fluid.Program(infer)
    emission = lt.LoDTensor(np.eye(3, dtype="float32") * 9, [[0, 3]])
    crfw, path = net(emission)
    assert net.paddle_names() == ["crfw"] and tuple(crfw.shape) == (5, 3)
    assert path.lod() == [[0, 3]] and path.data.shape == (3, 1)
    # shape: Paddle's method (a list) and a Variable's attribute (a tuple, as Paddle's) at once
    assert emission.shape() == [3, 3] and type(emission.shape()) is list
    assert emission.shape[1] == 3 and len(emission.shape) == 2 and emission.shape == (3, 3)
    assert lt.LoDTensor().shape() == [0]
    with pytest.raises(RuntimeError, match=r"create_parameter\(\) creates parameters, so it runs inside a fluid"):
        fluid.layers.create_parameter([2], "float32")
    with pytest.raises(TypeError, match=r"shape must be a list or tuple of ints, got 3"):
        fluid.Program(lambda: fluid.layers.create_parameter(3, "float32"))()


@pytest.mark.parametrize("where, name, hint", [
    (fluid.layers, "chunk_eval", "docs/porting.md"),
    (fluid.layers, "DynamicRNN", "docs/porting.md"),
    (fluid, "DataFeeder", "fluid.create_lod_tensor"),
    (fluid, "Executor", "net(feed="),
    (fluid, "metrics", "NumPy or torch"),
])
def test_names_that_do_not_port_say_so(where, name, hint):
    with pytest.raises(AttributeError, match=name) as info:
        getattr(where, name)
    assert hint in str(info.value)
    assert not hasattr(where, name)

"""Two ragged dims (documents x sentences x words): the LoD's two levels as one nested tensor; every op
defined per sentence works on it, checked against per-sentence NumPy/torch and the LoD sequence ops."""

import numpy as np
import pytest

import lodtensor
import lodtensor.nested as ln
from lodtensor.sequence import sequence_pool

torch = pytest.importorskip("torch")


def _docs(seed=0, width=4):
    g = np.random.default_rng(seed)
    shape = [[3, 1], [2], [], [4, 0, 2]]
    return [[g.standard_normal((w, width)).astype(np.float32) for w in doc] for doc in shape]


def _each(nt):
    return [s for doc in nt.to_tensor_list() for s in doc]


def test_construction_and_metadata():
    docs = _docs()
    nt = ln.nested_tensor(docs)
    assert nt.dim() == 4 and len(nt) == 4 and nt.size(0) == 4 and nt.size(3) == 4
    with pytest.raises(ValueError, match="irregular"):
        nt.size(1)
    assert [len(d) for d in nt.unbind()] == [2, 1, 0, 3]
    for got, want in zip(_each(nt), [s for d in docs for s in d]):
        np.testing.assert_array_equal(got, want)
    t = nt.to_lod_tensor()
    assert t.lod() == [[0, 2, 3, 3, 6], [0, 3, 4, 6, 10, 10, 12]]
    assert np.shares_memory(np.asarray(t.data), nt._buffer)
    padded = nt.to_padded_tensor(0.0)
    assert padded.shape == (4, 3, 4, 4)
    np.testing.assert_array_equal(padded[3, 2, :2], docs[3][2])
    assert not padded[2].any()
    assert "two-level nested_tensor" in repr(nt)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("op, ref", [
    (ln.exp, np.exp),
    (ln.gelu, lambda s: torch.nn.functional.gelu(torch.from_numpy(s)).numpy()),
    (lambda nt: nt * 2 + 1, lambda s: s * 2 + 1),
    (lambda nt: ln.softmax(nt, 2), lambda s: torch.softmax(torch.from_numpy(s), 0).numpy()),
    (lambda nt: ln.softmax(nt, -1), lambda s: torch.softmax(torch.from_numpy(s), 1).numpy()),
    (lambda nt: ln.log_softmax(nt, 2), lambda s: torch.log_softmax(torch.from_numpy(s), 0).numpy()),
    (lambda nt: ln.layer_norm(nt, (4,)), lambda s: torch.nn.functional.layer_norm(torch.from_numpy(s), (4,)).numpy()),
    (lambda nt: nt.unsqueeze(-1).squeeze(-1), lambda s: s),
    (lambda nt: nt.narrow(3, 1, 2), lambda s: s[:, 1:3]),
], ids=["exp", "gelu", "affine", "softmax-words", "softmax-hidden", "log_softmax-words", "layer_norm", "squeeze",
        "narrow"])
def test_per_sentence_ops(op, ref, lib):
    docs = _docs(1)
    nt = ln.nested_tensor(docs)
    nt = nt.to_torch() if lib == "torch" else nt
    out = op(nt)
    assert out.dim() == 4 and len(out) == 4
    for got, s in zip(_each(out), [s for d in docs for s in d]):
        got = got.numpy() if hasattr(got, "numpy") and not isinstance(got, np.ndarray) else got
        np.testing.assert_allclose(got, ref(s), rtol=2e-5, atol=2e-5)


def test_pooling_words_gives_documents_of_sentence_vectors():
    docs = _docs(2)
    nt = ln.nested_tensor(docs)
    pooled = ln.sum(nt, 2)  # (documents, (sentences), hidden)
    assert pooled.dim() == 3 and pooled.nested_size().tolist() == [[2, 4], [1, 4], [0, 4], [3, 4]]
    t = nt.to_lod_tensor()
    np.testing.assert_allclose(pooled.values(), sequence_pool(t, "sum").data, rtol=1e-6)
    empty = ln.max(nt, 2).values.values()[4]  # a sentence of no words: float32's lowest, as torch's jagged
    np.testing.assert_array_equal(empty, np.full(4, np.finfo(np.float32).min))
    maxed = ln.max(ln.nested_tensor(docs[:2]), 2)
    assert maxed.values.dim() == 3 and maxed.indices.nested_size().tolist() == [[2, 4], [1, 4]]
    doc_vectors = ln.mean(ln.mean(nt, 2), 1)  # then the sentences of each document: a dense (documents, hidden)
    assert doc_vectors.shape == (4, 4)
    np.testing.assert_allclose(doc_vectors[0], np.mean([s.mean(0) for s in docs[0]], axis=0), rtol=1e-5)
    with pytest.raises(ValueError, match="outer ragged dim"):
        ln.sum(nt, 1)
    with pytest.raises(ValueError, match="two ragged dims"):
        nt.reshape(4, -1, -1, 2)


def test_torch_functions_and_autograd_on_two_levels():
    docs = _docs(3)
    nt = ln.nested_tensor(docs).to_torch()
    weight = torch.randn(5, 4, requires_grad=True)
    out = torch.nn.functional.linear(torch.tanh(nt), weight)
    assert out.dim() == 4 and out.size(3) == 5
    ln.sum(out, 2).values().sum().backward()
    want = sum(torch.tanh(torch.from_numpy(s)).sum(0) for d in docs for s in d)
    torch.testing.assert_close(weight.grad, want.expand(5, 4), rtol=1e-4, atol=1e-4)
    again = out.to(torch.float64)
    assert again.dim() == 4 and again.dtype == torch.float64


def test_lodtensor_two_levels_round_trip():
    """The same documents through the LoD core: from_nested_list's lod equals the two-level nested tensor's."""
    docs = _docs(4)
    nt = ln.nested_tensor(docs)
    t = nt.to_lod_tensor()
    assert t.lod() == [[0] + np.cumsum([len(d) for d in docs]).tolist(),
                       [0] + np.cumsum([len(s) for d in docs for s in d]).tolist()]
    assert isinstance(t, lodtensor.LoDTensor)


def test_the_documents_are_a_level_of_the_structure():
    """One ragged model: the documents' offsets are an outer LoD level of the Structure (no wrapper per op);
    every op that keeps the components keeps it, conversions and pickling too."""
    import pickle  # noqa: PLC0415

    docs = _docs(5)
    nt = ln.nested_tensor(docs)
    assert [lvl.tolist() for lvl in nt._struct.outer] == [[0, 2, 3, 3, 6]]
    assert _canon_shape(nt.shape) == ("4", "s1", "s2", "4")
    for out in (nt * 2, ln.exp(nt), nt.transpose(2, 3), nt.unsqueeze(-1), ln.softmax(nt, -1), nt.to_torch(),
                pickle.loads(pickle.dumps(nt)), nt.clone(), ln.cat([nt, nt], dim=-1), ln.stack([nt, nt], dim=3)):
        assert out._struct.outer[0].tolist() == [0, 2, 3, 3, 6] and len(out) == 4
    t = nt.transpose(2, 3)
    for got, want in zip(_each(t), [s for d in docs for s in d]):
        np.testing.assert_array_equal(np.asarray(got), want.T)
    assert [d.nested_size().tolist() for d in nt[1:3]] == [[[2, 4]], []]  # a run of documents, a view
    assert nt[-1].nested_size().tolist() == [[4, 4], [0, 4], [2, 4]]  # a document: its sentences
    assert [len(c) for c in nt.chunk(2, dim=0)] == [2, 2]
    with pytest.raises(ValueError, match="outer ragged dim"):
        nt.transpose(1, 2)


def test_more_outer_levels_compose():
    """Two outer levels (corpora -> documents -> sentences) over components: the same op code."""
    from lodtensor.nested._construct import with_levels  # noqa: PLC0415

    docs = _docs(6)
    sentences = [s for d in docs for s in d]
    nt = with_levels(ln.nested_tensor(sentences), (np.array([0, 1, 4]), np.array([0, 2, 3, 3, 6])))
    assert nt.dim() == 5 and len(nt) == 2
    pooled = ln.mean(nt, 3)  # over the words: (corpora, (documents), (sentences), hidden)
    assert pooled.dim() == 4 and [lvl.tolist() for lvl in pooled._struct.outer] == [[0, 1, 4]]
    np.testing.assert_allclose(pooled.values()[:, 0], [s.mean(0)[0] for s in sentences], rtol=1e-6)
    t = ln.exp(nt).to_lod_tensor()
    assert t.lod() == [[0, 1, 4], [0, 2, 3, 3, 6], [0, 3, 4, 6, 10, 10, 12]]
    padded = nt.to_padded_tensor(0.0)
    assert padded.shape == (2, 3, 3, 4, 4)
    np.testing.assert_array_equal(padded[1, 2, 2, :2], docs[3][2])


def _canon_shape(shape):
    names = {}
    return tuple(names.setdefault(str(s), f"s{len(names) + 1}") if str(s).startswith("j") else str(s) for s in shape)

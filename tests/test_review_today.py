"""Second reading of the bug hunts merged after bcbbf95: regressions they introduced, each against NumPy/torch."""

import numpy as np
import pytest

import lodtensor as lt


@pytest.mark.parametrize("other, ne", [(None, False), ("a", True), (b"a", False)])
def test_torch_comparison_without_an_operand_loop_stays_torch(other, ne):
    """t == None on torch data gave a LoDTensor of NumPy data: the data was read back to the host (a copy of
    every row from a GPU, a NotImplementedError on the meta device) and the result left torch's backend."""
    torch = pytest.importorskip("torch")
    t = lt.LoDTensor(torch.arange(6.0).reshape(3, 2).requires_grad_(), [[0, 1, 3]])
    got = (t != other) if ne else (t == other)
    assert isinstance(got, lt.LoDTensor) and got.lod == [[0, 1, 3]]
    assert isinstance(got.data, torch.Tensor) and got.data.dtype == torch.bool and got.data.shape == (3, 2)
    assert got.data.tolist() == [[ne, ne]] * 3
    # NumPy's own answer for the same rows (ndarray == None is all False, != "a" all True)
    want = (np.arange(6.0).reshape(3, 2) != other) if ne else (np.arange(6.0).reshape(3, 2) == other)
    assert got.data.numpy().tolist() == want.tolist()
    meta = lt.LoDTensor(torch.empty(3, 2, device="meta"), [[0, 1, 3]])
    out = meta == None  # noqa: E711 - ndarray's meaning; nothing is read from the meta device
    assert out.data.device.type == "meta" and out.data.dtype == torch.bool and out.lod == [[0, 1, 3]]


def test_numpy_comparison_without_an_operand_loop_is_unchanged():
    t = lt.LoDTensor(np.arange(3.0), [[0, 1, 3]])
    got = t == "a"
    assert isinstance(got.data, np.ndarray) and got.data.dtype == bool and not got.data.any()
    assert (t != None).data.all()  # noqa: E711


@pytest.mark.parametrize(
    "arrays",
    [
        [np.array([1, 2]), np.array(["2020-01-01"], "M8[D]")],  # int and datetime: no common dtype
        [np.zeros(2, [("a", "i4")]), np.zeros(1, [("b", "f4")])],  # structured dtypes of other fields
    ],
    ids=["int+datetime", "structured"],
)
def test_arrays_without_a_common_dtype_get_the_named_error(arrays):
    """The joined fast path let NumPy's DTypePromotionError out (no argument named); before it, and now,
    the careful path names the value that is no number."""
    with pytest.raises(TypeError, match="nested must hold numbers"):
        lt.from_nested_list(arrays, lod_level=1)
    with pytest.raises(TypeError, match="must hold numbers"):
        lt.create_lod_tensor(arrays, [[len(a) for a in arrays]], lt.CPUPlace())


# -- host decoding ops read one data/lod state (the thread hunt's snapshot, defeated after ids_column) ------
_IDS = np.array([1, 3, 2, 3, 3, 0, 1, 2, 3, 1, 2, 0], np.int64).reshape(12, 1)
_LOD_A = [[0, 1, 3], [0, 4, 8, 12]]
_LOD_B = [[0, 2, 3], [0, 2, 8, 12]]  # the same rows and sequence counts, other sequences


def _replace_after_ids(monkeypatch, x, when=1):
    """Another thread's ``set()`` + ``set_lod()``, made to land right after the op read ``x``'s ids."""
    from lodtensor.sequence import _decode  # noqa: PLC0415

    real, calls = _decode.ids_column, []

    def ids_then_replace(t, *args, **kwargs):
        out = real(t, *args, **kwargs)
        calls.append(1)
        if len(calls) == when:
            x.set(_IDS[::-1].copy())
            x.set_lod(_LOD_B)
        return out

    monkeypatch.setattr(_decode, "ids_column", ids_then_replace)


def _same(a, b):
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, lt.LoDTensor):
        return a.lod == b.lod and np.array_equal(a.data, b.data)
    return np.array_equal(a, b)


def test_sequence_erase_reads_one_state(monkeypatch):
    """The ids came from a snapshot, the rows and the levels from the tensor again: rows of one state kept by
    the ids of another (a result of no state the tensor was ever in)."""
    import lodtensor.sequence as S  # noqa: PLC0415

    want = S.sequence_erase(lt.LoDTensor(_IDS, _LOD_A), [3])
    x = lt.LoDTensor(_IDS, _LOD_A)
    _replace_after_ids(monkeypatch, x)
    assert _same(S.sequence_erase(x, [3]), want)


def test_edit_distance_reads_one_state(monkeypatch):
    import lodtensor.sequence as S  # noqa: PLC0415

    ref = lt.LoDTensor(_IDS[::-1].copy(), _LOD_A)
    want = S.edit_distance(lt.LoDTensor(_IDS, _LOD_A), ref, normalized=False)
    x = lt.LoDTensor(_IDS, _LOD_A)
    _replace_after_ids(monkeypatch, x)
    assert _same(S.edit_distance(x, ref, normalized=False), want)
    want = S.edit_distance(lt.LoDTensor(_IDS, _LOD_A), ref, normalized=False, ignored_tokens=[0])
    x = lt.LoDTensor(_IDS, _LOD_A)  # the same through ignored_tokens (the erase reads the ids first)
    _replace_after_ids(monkeypatch, x)
    assert _same(S.edit_distance(x, ref, normalized=False, ignored_tokens=[0]), want)


def test_ctc_align_reads_one_state(monkeypatch):
    import lodtensor.sequence as S  # noqa: PLC0415

    want = S.ctc_align(lt.LoDTensor(_IDS, _LOD_A), blank=0)
    x = lt.LoDTensor(_IDS, _LOD_A)
    _replace_after_ids(monkeypatch, x)
    assert _same(S.ctc_align(x, blank=0), want)


def test_lod_rank_table_reads_one_lod(monkeypatch):
    """The lengths of one lod and the coarse levels of another (a set_lod() between the two reads)."""
    import lodtensor.sequence as S  # noqa: PLC0415

    want = S.lod_rank_table(lt.LoDTensor(_IDS, _LOD_A), level=1)
    x = lt.LoDTensor(_IDS, _LOD_A)
    real = lt.LoDTensor.lengths

    def lengths_then_relod(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        x.set_lod(_LOD_B)  # another thread, midway
        return out

    monkeypatch.setattr(lt.LoDTensor, "lengths", lengths_then_relod)
    got = S.lod_rank_table(x, level=1)
    assert got.items() == want.items() and got.coarse_lod() == want.coarse_lod()


def test_array_function_out_given_by_position_is_checked_and_returned():
    """np.clip(t, 0, 4, o): the same out as out=o, passed by position, slipped past the lod check (t's rows
    written under o's lod) and gave back the flat buffer instead of o, as NumPy gives back its out."""
    t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    o = lt.LoDTensor(np.full((3, 2), 7.0), [[0, 2, 3]])
    for call in (lambda: np.clip(t, 0, 4, o), lambda: np.round(t, 0, o), lambda: np.cumsum(t, 0, None, o),
                 lambda: np.take(t, [0, 1, 2], 0, o)):
        with pytest.raises(lt.errors.LoDError, match="another lod"):
            call()
        assert o.data.tolist() == [[7.0, 7.0]] * 3 and o.lod == [[0, 2, 3]]
    same = lt.LoDTensor(np.zeros((3, 2)), [[0, 1, 3]])
    want = np.clip(np.arange(6.0).reshape(3, 2), 0, 4)
    assert np.clip(t, 0, 4, same) is same and same.data.tolist() == want.tolist()
    assert np.round(t, 0, same) is same and np.clip(t, 0, 4, out=same) is same
    assert np.clip(np.arange(6.0).reshape(3, 2), 0, 4, o) is o  # plain arguments: o keeps its lod
    assert o.lod == [[0, 2, 3]] and o.data.tolist() == want.tolist()


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_jagged_offsets_are_shared_only_once_torch_knows_their_nested_int(backend):
    """Threads converting one LoD at once got its one offsets tensor, but torch's registry of nested ints
    looks, then adds (torch.nested._internal.nested_tensor.get_tensor_symint): two threads asking for the same
    offsets got two nested ints, and ``a + b`` of their jagged tensors raised "shapes (3, j1, 3) and (3, j0, 3)"
    (test_thread_hunt's test_jagged_views_of_one_lod_made_on_threads_combine failed about one run in four).
    Now the nested int is registered by the converting thread before the offsets are published."""
    torch = pytest.importorskip("torch")
    registry = getattr(pytest.importorskip("torch.nested._internal.nested_tensor"), "_tensor_symint_registry", None)
    if registry is None:
        pytest.skip("torch keeps its nested ints elsewhere")
    data = np.zeros((6, 3), np.float32)
    t = lt.LoDTensor(data if backend == "numpy" else torch.from_numpy(data), [[0, 2, 5, 6]])
    seen = []

    class Published(dict):  # the LoD's cache: what a jagged conversion publishes there for other threads
        def setdefault(self, key, value):
            if isinstance(key, tuple) and key[0] == "interop.jagged":
                seen.append(registry.get(value[0]) is not None)
            return super().setdefault(key, value)

        def __setitem__(self, key, value):
            if isinstance(key, tuple) and key[0] == "interop.jagged":
                seen.append(registry.get(value[0]) is not None)
            super().__setitem__(key, value)

    t.lod._cache = Published(t.lod._cache or {})
    a = t.to_nested_jagged()
    b = t.with_data(t.data + 1).to_nested_jagged()
    assert seen == [True]  # published once, already known to torch
    assert a._offsets is b._offsets and float((a + b).values().sum()) == 18.0


def test_beam_search_reads_scores_of_one_state(monkeypatch):
    """beam_search read the scores' rows, then their lod: another thread's set() + set_lod() in between
    ranked one state's scores under the other's sources."""
    import lodtensor.sequence as S  # noqa: PLC0415
    from lodtensor.sequence import _beam  # noqa: PLC0415

    pre_ids = lt.LoDTensor(np.array([[1], [2], [3]], np.int64), [[0, 1, 3], [0, 1, 2, 3]])
    pre_scores = lt.LoDTensor(np.zeros((3, 1), np.float32), [[0, 1, 3], [0, 1, 2, 3]])
    rows = np.array([[0.1, 0.9], [0.8, 0.2], [0.4, 0.6]], np.float32)  # one row per prefix
    lod_a, lod_b = [[0, 1, 3], [0, 1, 2, 3]], [[0, 2, 3], [0, 1, 2, 3]]  # other sources in lod_b
    args = dict(pre_ids=pre_ids, pre_scores=pre_scores, ids=None, beam_size=2, end_id=0)
    want = S.beam_search(scores=lt.LoDTensor(rows, lod_a), **args)
    x = lt.LoDTensor(rows, lod_a)
    real = _beam._column

    def column_then_replace(t, where, name, kind):
        out = real(t, where, name, kind)
        if name == "scores":
            x.set(rows[::-1].copy())
            x.set_lod(lod_b)
        return out

    monkeypatch.setattr(_beam, "_column", column_then_replace)
    assert _same(S.beam_search(scores=x, **args), want)

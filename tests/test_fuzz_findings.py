"""Regression tests for what the long fuzz run (tests/fuzz) found: each failed before its fix."""

import numpy as np
import pytest

import lodtensor as lt

torch = pytest.importorskip("torch")


class _Producer:
    """A DLPack producer that reports ``device`` and hands over ``array``'s capsule."""

    def __init__(self, array, device=(1, 0), ragged=None):
        self.array, self.device, self.ragged = array, device, ragged

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.device


class _Ragged(_Producer):
    def __dlpack_ragged__(self, **kwargs):
        return self.ragged()


# -- from_dlpack (fuzz target dlpack_producers) ---------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
def test_from_dlpack_cuda_producer_without_cuda_is_a_clear_error():
    # was: AssertionError "Torch not compiled with CUDA enabled" from inside torch.from_dlpack
    with pytest.raises(ValueError, match=r"data is on a CUDA device, but cupy is not installed"):
        lt.from_dlpack(_Producer(np.arange(3.0), (2, 0)))
    with pytest.raises(ValueError, match=r"lod level 0 is on a CUDA device"):
        lt.from_dlpack(np.arange(3.0), [_Producer(np.array([0, 3]), (2, 0))])


@pytest.mark.parametrize("device", [("x", 0), None, (1,), "cpu", (1.5, 0)])
def test_from_dlpack_malformed_device_names_the_method(device):
    # was: "invalid literal for int()", "'NoneType' object is not subscriptable", or silently int(1.5)
    with pytest.raises(TypeError, match=r"data.__dlpack_device__\(\) must return \(device_type, device_id\)"):
        lt.from_dlpack(_Producer(np.arange(3.0), device))


@pytest.mark.parametrize("make, match", [
    (lambda v: None, r"must return \(values_capsule, \(offsets_capsule, ...\)\), got NoneType"),
    (lambda v: (v.__dlpack__(), 5), r"got a tuple of \(PyCapsule, int\)"),
    (lambda v: (v.__dlpack__(), np.array([0, 3]).__dlpack__(), None), r"got a tuple of \(PyCapsule, PyCapsule, "),
    (lambda v: (v, (np.array([0, 3]).__dlpack__(),)), r"the values of data.__dlpack_ragged__\(\) must be a DLPack "
                                                       r"capsule, got ndarray"),
    (lambda v: (v.__dlpack__(), ([0, 3],)), r"lod level 0 of data.__dlpack_ragged__\(\) must be a DLPack capsule"),
])
def test_from_dlpack_malformed_ragged_return_is_named(make, match):
    # was: "cannot unpack non-iterable NoneType object", "'int' object is not iterable",
    # "PyCapsule_GetPointer called with invalid PyCapsule object"
    values = np.arange(3.0)
    with pytest.raises(TypeError, match=match):
        lt.from_dlpack(_Ragged(values, ragged=lambda: make(values)))


def test_from_dlpack_reused_ragged_capsule_is_named():
    # the same capsule as values and offsets: the second use was
    # "PyCapsule_GetPointer called with incorrect name"
    values = np.arange(3, dtype=np.int64)

    def same_capsule_twice():
        capsule = values.__dlpack__()
        return capsule, (capsule,)

    with pytest.raises(ValueError, match=r"lod level 0 of data.__dlpack_ragged__\(\) is not an unused DLPack"):
        lt.from_dlpack(_Ragged(values, ragged=same_capsule_twice))
    good = lt.from_dlpack(_Ragged(values, ragged=lambda: (values.__dlpack__(), (np.array([0, 1, 3]).__dlpack__(),))))
    assert good.lod() == [[0, 1, 3]] and good.data.tolist() == [0, 1, 2]


def test_from_dlpack_bfloat16_offsets_name_the_level():
    # was: TypeError "Got unsupported ScalarType BFloat16" (from torch's .numpy())
    with pytest.raises(TypeError, match=r"from_dlpack\(\): lod level 0 must hold integers, got a torch tensor of "
                                        r"torch.bfloat16"):
        lt.from_dlpack(np.arange(5.0), [torch.tensor([0, 2, 5], dtype=torch.bfloat16)])
    # integer torch offsets still work, strided too
    t = lt.from_dlpack(np.arange(5.0), [torch.tensor([0, 9, 2, 9, 5])[::2]])
    assert t.lod() == [[0, 2, 5]]


# -- text: crafted Arrow string columns (fuzz target arrow_crafted, through text.lookup) -----------
_BROKEN_STRINGS = """
import numpy as np, pyarrow as pa
from lodtensor.text import Vocab, lookup, split_sentences, text_column
# offsets that leave the 12 bytes of text: validate() (buffer sizes only) passes them
docs = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(np.array([0, 1 << 20, 3], np.int32)),
                                              pa.py_buffer(b"hello. world")])
words = pa.ListArray.from_arrays(pa.array([0, 2], pa.int32()), docs)
for call in (lambda: lookup(words, Vocab(["hello"])), lambda: split_sentences(docs), lambda: text_column(docs)):
    try:
        call()
    except ValueError as err:
        print(err)
    else:
        print("accepted")
"""


def test_text_refuses_string_offsets_outside_their_data():
    # was: lookup() died of SIGSEGV in pyarrow's index_in, and text_column() handed back strings
    # made of whatever memory followed the buffer (run in a subprocess: the bug kills the process)
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _BROKEN_STRINGS], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert lines[0].startswith("lookup(): the words are not valid Arrow strings: ")
    assert lines[1].startswith("split_sentences(): the documents are not valid Arrow strings: ")
    assert lines[2].startswith("text_column(): the documents are not valid Arrow strings: ")


def test_text_column_refuses_invalid_utf8_and_keeps_valid_columns():
    pa = pytest.importorskip("pyarrow")
    from lodtensor.text import Vocab, lookup, text_column

    raw = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                 pa.py_buffer(b"\xff\xfe")])
    with pytest.raises(ValueError, match=r"text_column\(\): the documents are not valid Arrow strings: .*UTF8"):
        text_column(raw)
    # valid columns, sliced ones too, still work
    words = pa.array([["a", "b"], ["c"], ["a"]]).slice(1)
    t = lookup(words, Vocab(["a", "b", "c"]))
    assert t.lod() == [[0, 1, 2]] and t.data.tolist() == [4, 2]
    assert text_column(pa.array(["x", "y z"]).slice(1)).to_pylist() == ["y z"]


# -- from_awkward: ListArray with a negative start (fuzz target awkward_crafted) ------------------
def test_from_awkward_refuses_negative_list_starts():
    # was: silently wrong lists: awkward's conversion counts a negative start from the end of the
    # content, so starts [-1, 0] / stops [2, 3] over [0, 1, 2, 3] gave [[3, 0, 1], [0, 1, 2]]
    ak = pytest.importorskip("awkward")
    content = ak.contents.NumpyArray(np.arange(4))
    bad = ak.contents.ListArray(ak.index.Index64(np.array([-1, 0])), ak.index.Index64(np.array([2, 3])), content)
    assert ak.validity_error(bad)  # awkward itself calls it invalid
    with pytest.raises(ValueError, match=r"from_awkward\(\): ListArray at depth 0 has list 0 from -1 to 2; a list "
                                         r"must lie within the 4 items of its content"):
        lt.from_awkward(ak.Array(bad, check_valid=False))
    # an empty list may start anywhere (awkward's rule); valid starts are fine
    empty = ak.contents.ListArray(ak.index.Index64(np.array([-1, 1])), ak.index.Index64(np.array([-1, 3])), content)
    assert lt.from_awkward(ak.Array(empty)).tolist() == [[], [1, 2]]


def test_from_awkward_refuses_list_stops_past_the_content_before_allocating():
    # was: MemoryError "Unable to allocate 8.00 TiB" (the fuzz run's stops of 2**31 - 1: 32 GiB):
    # awkward's ListArray -> offsets conversion allocates the lists' total length before it checks
    # their stops (an IndexedArray over a ListOffsetArray projects to such a ListArray). Sizes here
    # are past any memory, so that the unfixed code fails at once rather than filling GiBs.
    ak = pytest.importorskip("awkward")
    content = ak.contents.NumpyArray(np.arange(4))
    lists = ak.contents.ListOffsetArray(ak.index.Index64(np.array([0, 2**40])), content)
    layout = ak.contents.ListOffsetArray(
        ak.index.Index64(np.array([0, 2])), ak.contents.IndexedArray(ak.index.Index64(np.array([0, 0])), lists))
    with pytest.raises(ValueError, match=r"ListArray at depth 1 has list 0 from 0 to 1099511627776; a list must lie "
                                         r"within the 4 items of its content \(0 <= start <= stop <= 4\)"):
        lt.from_awkward(ak.Array(layout, check_valid=False))
    stops_past = ak.contents.ListArray(ak.index.Index64(np.array([0, 0])), ak.index.Index64(np.array([2**40, 1])),
                                       content)
    with pytest.raises(ValueError, match=r"has list 0 from 0 to 1099511627776"):
        lt.from_awkward(ak.Array(stops_past, check_valid=False))
    # overlapping lists inside the content are valid (awkward's rule), and gathered
    overlap = ak.contents.ListArray(ak.index.Index64(np.array([0, 1])), ak.index.Index64(np.array([3, 4])), content)
    assert lt.from_awkward(ak.Array(overlap)).tolist() == [[0, 1, 2], [1, 2, 3]]


# -- the collectives' head decoder (fuzz target wire_heads) ---------------------------------------
def test_wire_head_refuses_bfloat16_from_a_numpy_array():
    # a head saying "bfloat16 data of a NumPy array" (no such array: a corrupt or forged head) was
    # decoded, and the receiver died in unpack with torch's TypeError "Got unsupported ScalarType BFloat16"
    from lodtensor.distributed import _wire as w

    t = lt.LoDTensor(torch.zeros(3, 2, dtype=torch.bfloat16), [[0, 1, 3]])
    described = [w.describe(t, "t")]
    head = w.encode_head("broadcast", 0, described, follow=0, sends=w.item_of(described[0]).nbytes)
    table = np.stack([head, w.encode_head("broadcast", 0, [], follow=0, sends=0)])
    good = w.decode_head("broadcast", table, 2)  # as sent: a torch array
    assert good.geometry[0] == (1, "bfloat16", (2,), "torch")
    table[0, w._LIB] = w.LIBS.index("numpy") + 1
    with pytest.raises(ValueError, match=r"broadcast\(\): the head from rank 0 is corrupt \(dtype bfloat16 from a "
                                         r"numpy array\)"):
        w.decode_head("broadcast", table, 2)


def test_from_awkward_refuses_negative_list_offsets():
    # was: offsets [-2, -1] over [0..7] sliced the content Python-style (content[-2:-1]), a silently
    # wrong [[6]]; awkward's own validity check calls the layout invalid (fuzz target awkward_crafted)
    ak = pytest.importorskip("awkward")
    content = ak.contents.NumpyArray(np.arange(8))
    bad = ak.contents.ListOffsetArray(ak.index.Index64(np.array([-2, -1])), content)
    assert ak.validity_error(bad)
    with pytest.raises(ValueError, match=r"from_awkward\(\): ListOffsetArray at depth 0 runs from offset -2 to -1; "
                                         r"its lists must lie within the 8 items of its content"):
        lt.from_awkward(ak.Array(bad, check_valid=False))
    # offsets from a later start, and levels of empty lists only, are fine
    later = ak.contents.ListOffsetArray(ak.index.Index64(np.array([2, 3, 5])), content)
    assert lt.from_awkward(ak.Array(later)).tolist() == [[2], [3, 4]]
    empty = ak.contents.ListOffsetArray(ak.index.Index64(np.array([9, 9])), content)
    assert lt.from_awkward(ak.Array(empty, check_valid=False)).tolist() == [[]]

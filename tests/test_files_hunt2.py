"""Second hunt of the readers of outside bytes: sizes that wrap, compression bombs, buffers Arrow may
leave out, and torch.load(weights_only=True) opcodes that skip the unpickling gate.

Each test failed before its fix (the docstring says how).
"""

import copyreg
import io
import json

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.backend._pickle import array_from_bytes, portable

from ._torch_range import safe_globals

pa = pytest.importorskip("pyarrow")


# -- the collectives' wire: a forged row shape ----------------------------------------------------
def test_a_head_whose_row_shape_wraps_int64_is_refused():
    """Before: the row size was an int64 product, so (2**32, 2**32) wrapped to 0 bytes and decoded as a
    tensor of one row and no bytes; torch then failed to reshape the received buffer (RuntimeError)."""
    from lodtensor.distributed import _wire

    t = lt.LoDTensor(np.zeros((3, 1, 1), np.float32), [[0, 1, 3]])
    table = np.stack([_wire.encode_head("all_gather", -1, [_wire.describe(t, "t")], follow=0, sends=0)] * 2)
    table[:, _wire._SHAPE : _wire._SHAPE + 2] = 1 << 32
    table[:, _wire._INLINE] = 1
    with pytest.raises(ValueError, match=r"all_gather\(\): the header from rank 0 announces a tensor of "
                                         r"73786976294838206\d+ bytes"):
        _wire.decode_head("all_gather", table, 2)


# -- lt.load: a compressed record batch ------------------------------------------------------------
def _ipc(path, t, compression):
    """An IPC file with lt.save's header and column, its buffers compressed as ``compression`` says."""
    from lodtensor.interop.files import _checksums

    arr = t.to_arrow()
    meta = {"format": "lodtensor.ipc", "version": 1, "lod_level": t.lod_level, "dtype": t.dtype.str,
            "row_shape": [int(s) for s in t.shape()[1:]], "num_rows": t.num_rows,
            "lod_crc32": _checksums(t.lod.levels)}
    schema = pa.schema([pa.field("lodtensor", arr.type, nullable=False)],
                       metadata={b"lodtensor": json.dumps(meta).encode()})
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema, options=options) as writer:
        writer.write_batch(pa.record_batch([arr], schema=schema))


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
@pytest.mark.parametrize("mmap", [True, False])
def test_load_refuses_a_compressed_record_batch(tmp_path, compression, mmap):
    """Before: a file of a few KiB loaded as megabytes decompressed into memory (a bomb: ~27,000x for
    zstd zeros), not the mapped, zero-copy tensor load() promises."""
    n = 4_000_000
    t = lt.LoDTensor(np.zeros(n, np.int8), [[0, 3, n]])
    _ipc(tmp_path / "plain.arrow", t, None)
    assert lt.load(tmp_path / "plain.arrow", mmap=mmap).lod() == [[0, 3, n]]  # the writer makes valid files
    bomb = tmp_path / "bomb.arrow"
    _ipc(bomb, t, compression)
    assert bomb.stat().st_size < n // 50
    with pytest.raises(ValueError, match=r"load\(\): .*bomb\.arrow is not a valid .*compressed buffers"):
        lt.load(bomb, mmap=mmap)


def test_load_reads_metadata_offsets_inside_the_file_only(tmp_path):
    """The compression check reads the footer's offsets itself: pointing them anywhere is a ValueError."""
    path = tmp_path / "t.arrow"
    lt.save(path, lt.LoDTensor(np.arange(6.0), [[0, 2, 6]]))
    blob = path.read_bytes()
    bad = tmp_path / "bad.arrow"
    for value in (0x7FFFFFF0, -0x7FFFFFF0, len(blob) - 4, 0):
        b = bytearray(blob)
        b[-10:-6] = value.to_bytes(4, "little", signed=True)  # the footer's length
        bad.write_bytes(bytes(b))
        with pytest.raises(ValueError, match="bad.arrow"):
            lt.load(bad)


# -- from_arrow of arrays a producer built -------------------------------------------------------
def test_from_arrow_takes_an_empty_array_without_a_data_buffer():
    """Before: TypeError 'a bytes-like object is required, not NoneType' (Arrow lets an empty array
    have no data buffer, as nanoarrow producers export it)."""
    empty = pa.Array.from_buffers(pa.float32(), 0, [None, None])
    t = lt.from_arrow(empty)
    assert t.shape() == [0] and t.dtype == np.float32
    lists = pa.LargeListArray.from_buffers(pa.large_list(pa.float32()), 2, [None, pa.py_buffer(np.zeros(3, np.int64))],
                                           children=[empty])
    t = lt.from_arrow(lists)
    assert t.lod() == [[0, 0, 0]] and t.shape() == [0]


def test_from_arrow_refuses_a_fixed_size_list_slice_past_its_child():
    """Before: validate() passed (it checks the child's length, not the slice's share) and NumPy's
    reshape failed with 'cannot reshape array of size 2 into shape (2,2)', naming nothing."""
    arr = pa.FixedSizeListArray.from_buffers(pa.list_(pa.int64(), 2), 2, [None], offset=1,
                                             children=[pa.array(np.arange(4))])
    with pytest.raises(ValueError, match=r"from_arrow\(\): a fixed_size_list level of 2 lists of 2 from list 1 "
                                         r"reaches past its 4 child values"):
        lt.from_arrow(arr)


# -- unpickling array data -------------------------------------------------------------------------
def test_unpickled_shapes_past_int64_and_unknown_devices_are_value_errors():
    """Before: torch's TypeError 'Overflow when unpacking long long' for a dim of 2**63, and a
    ModuleNotFoundError ('torch.hpu') for a device torch has no module for."""
    torch = pytest.importorskip("torch")
    for lib, dtype in (("torch", "float32"), ("numpy", "<f4")):
        with pytest.raises(ValueError, match=r"shape must be a tuple of non-negative ints below 2\*\*63"):
            array_from_bytes(lib, None, dtype, (0, 1 << 63), "cpu", False)
    for device in ("hpu", "privateuseone"):
        if getattr(torch, device, None) is not None:  # a torch that has this device's module
            continue
        with pytest.raises(ValueError, match=f"device '{device}' is not available here"):
            array_from_bytes("torch", b"\0" * 4, "float32", (1,), device, False)


# -- torch.load(weights_only=True): the class is admitted, so NEWOBJ and BUILD must not skip the gate ------
def _forged(cls, state, obj=None):
    """torch.save bytes where ``cls`` is made by NEWOBJ (no __init__) and, unless ``state`` is None,
    filled by BUILD with ``state``; ``obj`` (default: that object alone) is what is saved."""
    torch = pytest.importorskip("torch")
    build = () if state is None else ((None, state),)
    cls.__reduce_ex__ = lambda self, proto: (copyreg.__newobj__, (cls,), *build)
    try:
        buf = io.BytesIO()
        torch.save(object.__new__(cls) if obj is None else obj, buf)
    finally:
        del cls.__reduce_ex__
    return buf.getvalue()


def _weights_only_load(blob):
    import torch

    with safe_globals(lt.interop.torch_safe_globals()):
        return torch.load(io.BytesIO(blob), weights_only=True)


def test_weights_only_load_refuses_a_lodtensor_state_set_directly():
    """Before: BUILD set the slots to anything (a lod that is an int, data that is a LoD), loaded
    without error; every later use raised AttributeError."""
    lod_of = lt.LoD([[0, 1]])
    for state in ({"_data": portable(np.arange(2.0)), "_lod": 5}, {"_data": lod_of, "_lod": lod_of}):
        with pytest.raises(Exception, match="unpickling a LoDTensor: refusing to set its state directly"):
            _weights_only_load(_forged(lt.LoDTensor, state))
    with pytest.raises(TypeError, match="refusing to set its state directly"):
        import pickle

        pickle.loads(_forged_pickle())


def _forged_pickle():
    import pickle

    lt.LoDTensor.__reduce_ex__ = lambda self, proto: (copyreg.__newobj__, (lt.LoDTensor,), (None, {"_lod": 5}))
    try:
        return pickle.dumps(object.__new__(lt.LoDTensor), protocol=4)
    finally:
        del lt.LoDTensor.__reduce_ex__


def test_weights_only_load_of_a_bare_new_lodtensor_is_the_empty_tensor():
    """Before: NEWOBJ alone gave a LoDTensor with no slot set: repr, lod() and every op raised AttributeError."""
    t = _weights_only_load(_forged(lt.LoDTensor, None))
    assert type(t) is lt.LoDTensor and t.lod() == [] and t.data is None
    assert repr(t) == repr(lt.LoDTensor())


def test_weights_only_load_checks_a_place_whose_state_was_set():
    """Before: a CUDAPlace whose _id BUILD set to a string rode into the tensor (place 'cuda:x')."""
    t = lt.LoDTensor()
    t._where = object.__new__(lt.CUDAPlace)
    blob = _forged(lt.CUDAPlace, {"_id": "x"}, obj=t)
    with pytest.raises(Exception, match="unpickling a CUDAPlace: refusing to set its state directly"):
        _weights_only_load(blob)


def test_a_place_made_by_a_pickle_is_checked_like_any_other():
    """A place's NEWOBJ runs its checking constructor; its state cannot be set (standalone, not only in a tensor)."""
    import pickle

    for cls, state in ((lt.CUDAPlace, {"_id": "x"}), (lt.CPUPlace, {"kind": "gpu"})):
        with pytest.raises(Exception, match=f"unpickling a {cls.__name__}: refusing to set its state directly"):
            _weights_only_load(_forged(cls, state))
    lt.CUDAPlace.__reduce_ex__ = lambda self, proto: (copyreg.__newobj__, (lt.CUDAPlace, "x"))
    try:
        blob = pickle.dumps(lt.CUDAPlace(1), protocol=4)
    finally:
        del lt.CUDAPlace.__reduce_ex__
    with pytest.raises(TypeError, match="CUDAPlace\\(\\): device_id must be an integer, got str 'x'"):
        pickle.loads(blob)
    assert pickle.loads(pickle.dumps(lt.CUDAPlace(3))) == lt.CUDAPlace(3)
    assert pickle.loads(pickle.dumps(lt.place.DevicePlace("meta"))).device == "meta"

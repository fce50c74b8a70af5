"""The public entry points under fuzz: each target draws adversarial input and checks the contract.

A target is a function of a hypothesis ``data`` object. It calls one entry
point; the call must raise an allowed error (the caller's objects untouched)
or return a result that passes :func:`oracle.check_tensor`.
"""

import os
import pickle
import random
import threading

import numpy as np
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import sequence as seq

from .oracle import ALLOWED, attempt, check_tensor
from .strategies import data_arrays, ints, lod_like, to_offsets, valid_lengths

TARGETS = {}

try:
    import torch
except ImportError:  # the torch half of the targets is skipped
    torch = None


def target(fn):
    TARGETS[fn.__name__] = fn
    return fn


def _maybe_torch(data, array):
    if torch is not None and data.draw(st.integers(0, 3)) == 0:
        return torch.from_numpy(np.ascontiguousarray(array))
    return array


def _sizes():
    """Sizes a caller asks for (maxlen, win_size...): small, negative, or past any memory."""
    return st.one_of(st.integers(-3, 12), st.sampled_from([-(2**63), 2**63, 2**64, 2**70]))


def _valid_tensor(data, rows_max=24):
    lengths = data.draw(valid_lengths())
    rows = sum(lengths[-1])
    array = data.draw(data_arrays(rows))
    return lt.LoDTensor(_maybe_torch(data, array), recursive_sequence_lengths=lengths)


def _snapshot(t):
    return (t.lod(), None if t.data is None else t.numpy().tobytes())


@target
def construct_offsets(data):
    array = _maybe_torch(data, data.draw(data_arrays()))
    lod = data.draw(lod_like(rows=int(array.shape[0])))
    t = attempt(lt.LoDTensor, array, lod)
    if t is not None:
        check_tensor(t)


@target
def construct_lengths(data):
    array = _maybe_torch(data, data.draw(data_arrays()))
    lengths = data.draw(lod_like(rows=int(array.shape[0]), form="lengths"))
    for make in (
        lambda: lt.LoDTensor(array, recursive_sequence_lengths=lengths),
        lambda: lt.create_lod_tensor(array, lengths, lt.CPUPlace()),
    ):
        t = attempt(make)
        if t is not None:
            check_tensor(t)


@target
def one_level_factories(data):
    array = _maybe_torch(data, data.draw(data_arrays()))
    level = data.draw(st.lists(ints(), max_size=8))
    for make in (lambda: lt.LoDTensor.from_offsets(array, level), lambda: lt.LoDTensor.from_lengths(array, level)):
        t = attempt(make)
        if t is not None:
            check_tensor(t)
    lod = attempt(lt.LoD, data.draw(lod_like()), num_rows=data.draw(st.one_of(st.none(), ints())))
    if lod is not None:
        assert all(level.flags.writeable is False for level in lod.levels)


@target
def setters_keep_state_on_error(data):
    t = _valid_tensor(data)
    before = _snapshot(t)
    action = data.draw(st.sampled_from(["set_lod", "set_lengths", "set", "set_then_lod"]))
    rows = int(t.data.shape[0])
    try:
        if action == "set_lod":
            t.set_lod(data.draw(lod_like(rows=rows)))
        elif action == "set_lengths":
            t.set_recursive_sequence_lengths(data.draw(lod_like(rows=rows, form="lengths")))
        else:
            t.set(data.draw(data_arrays()), lt.CPUPlace())
            if action == "set_then_lod":
                t.set_lod(data.draw(lod_like(rows=int(t.data.shape[0]))))
    except ALLOWED:
        if action != "set_then_lod":
            assert _snapshot(t) == before, "a setter that raised changed the tensor"
    check_tensor(t)


@target
def with_data(data):
    t = _valid_tensor(data)
    before = _snapshot(t)
    array = _maybe_torch(data, data.draw(data_arrays()))
    lod = data.draw(st.one_of(st.none(), lod_like(rows=int(array.shape[0]))))
    out = attempt(t.with_data, array, lod)
    assert _snapshot(t) == before
    if out is not None:
        check_tensor(out)


@target
def resized_torch_data(data):
    if torch is None:
        return
    lengths = data.draw(valid_lengths())
    rows = sum(lengths[-1])
    t = lt.LoDTensor(torch.arange(float(rows)), recursive_sequence_lengths=lengths)
    t.data.resize_(data.draw(st.integers(0, rows + 5)))  # behind the tensor's back
    check_tensor(t)


@target
def padded_factories(data):
    rows = data.draw(st.integers(0, 6))
    width = data.draw(st.integers(0, 6))
    padded = _maybe_torch(data, np.arange(rows * width * 2, dtype=np.float64).reshape(rows, width, 2))
    lengths = data.draw(st.lists(ints(width), max_size=8))
    t = attempt(lt.from_padded, padded, lengths)
    if t is not None:
        check_tensor(t)
    base = _valid_tensor(data)
    dense, masks = base.to_padded_all()
    masks = [np.array(m) for m in masks]
    for m in masks:
        if m.size and data.draw(st.booleans()):
            flat = m.reshape(-1)
            flat[data.draw(st.integers(0, flat.size - 1))] ^= True
    t = attempt(lt.from_padded_all, dense, masks)
    if t is not None:
        check_tensor(t)


@target
def nested_lists(data):
    leaf = st.one_of(ints(), st.floats(allow_nan=True), st.booleans(), st.text(max_size=2), st.none())
    lists = st.recursive(st.lists(leaf, max_size=4), lambda inner: st.lists(inner, max_size=4), max_leaves=20)
    nested = data.draw(lists)
    dtype = data.draw(st.sampled_from([None, "int64", "float32", "int8", "bool"]))
    t = attempt(lt.from_nested_list, nested, dtype=dtype)
    if t is not None:
        check_tensor(t)


@target
def pickles(data):
    t = _valid_tensor(data)
    blob = bytearray(pickle.dumps(t, protocol=data.draw(st.integers(2, 5))))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = rnd.randrange(len(blob))
        if data.draw(st.booleans()):
            blob[i] ^= 1 << rnd.randrange(8)
        else:
            blob[i] = rnd.randrange(256)
    try:
        out = pickle.loads(bytes(blob))
    except Exception:  # noqa: BLE001 - any error from a corrupted pickle is fine; a crash is not
        return
    if isinstance(out, lt.LoDTensor):
        check_tensor(out)


@target
def sequence_op_arguments(data):
    t = _valid_tensor(data)
    before = _snapshot(t)
    n = len(t.lod()[-1]) - 1
    some = st.lists(ints(), min_size=n, max_size=n) if n else st.just([])
    choice = data.draw(st.sampled_from(
        ["slice", "unpad", "pad", "enumerate", "reshape", "expand", "reset", "append", "pool", "to_padded", "scatter"]))
    if choice == "slice":
        call = lambda: seq.sequence_slice(t, np.array(data.draw(some)), np.array(data.draw(some)))  # noqa: E731
    elif choice == "unpad":
        padded, _ = t.to_padded()
        call = lambda: seq.sequence_unpad(padded, np.array(data.draw(some)))  # noqa: E731
    elif choice == "pad":
        call = lambda: seq.sequence_pad(t, 0, maxlen=data.draw(st.one_of(st.none(), _sizes())))  # noqa: E731
    elif choice == "enumerate":
        call = lambda: seq.sequence_enumerate(t, data.draw(_sizes()), pad_value=0)  # noqa: E731
    elif choice == "reshape":
        call = lambda: seq.sequence_reshape(t, data.draw(_sizes()))  # noqa: E731
    elif choice == "expand":
        y = lt.LoDTensor(np.zeros(0), [[0, 0]])
        lengths = data.draw(valid_lengths())
        y = lt.LoDTensor(np.zeros(sum(lengths[-1])), recursive_sequence_lengths=lengths)
        call = lambda: seq.sequence_expand(t, y, ref_level=data.draw(st.integers(-3, 3)))  # noqa: E731
    elif choice == "reset":
        call = lambda: seq.lod_reset(t, target_lod=data.draw(lod_like(rows=int(t.data.shape[0]))))  # noqa: E731
    elif choice == "append":
        call = lambda: seq.lod_append(t, data.draw(st.lists(ints(), max_size=8)))  # noqa: E731
    elif choice == "pool":
        pad = data.draw(st.one_of(ints(), st.floats(allow_nan=True)))
        call = lambda: seq.sequence_pool(t, data.draw(st.sampled_from(["sum", "max", "min", "average", "sqrt", "last"])), pad_value=pad)  # noqa: E731,E501
    elif choice == "to_padded":
        call = lambda: t.to_padded(level=data.draw(st.integers(-4, 4)), maxlen=data.draw(st.one_of(st.none(), _sizes())))  # noqa: E731,E501
    else:
        rows = data.draw(valid_lengths(max_levels=1))
        cols = [data.draw(st.integers(-3, 6)) for _ in range(sum(rows[-1]))]
        index = lt.LoDTensor(np.array(cols, dtype=np.int64), recursive_sequence_lengths=rows)
        dense = np.zeros((len(rows[-1]), data.draw(st.integers(0, 5))))
        call = lambda: seq.sequence_scatter(dense, index, index.with_data(np.ones(index.data.shape[0])))  # noqa: E731
    out = attempt(call)
    assert _snapshot(t) == before, f"{choice} changed its input"
    if isinstance(out, tuple):
        out = out[0]
    if isinstance(out, lt.LoDTensor):
        check_tensor(out, ops=out.data is not None and out.data.dtype != object)


@target
def nested_from_jagged(data):
    import lodtensor.nested as ln

    rows = data.draw(st.integers(0, 12))
    values = _maybe_torch(data, np.arange(rows * 2, dtype=np.float64).reshape(rows, 2))
    level = data.draw(st.lists(ints(), max_size=6))
    key = data.draw(st.sampled_from(["offsets", "lengths"]))
    nt = attempt(ln.nested_tensor_from_jagged, values, **{key: np.array(level) if level else level})
    if nt is not None:  # as torch: the offsets (or lengths from row 0) may cover a run of the rows, not all
        parts = nt.unbind()
        first = int(level[0]) if key == "offsets" and len(level) else 0
        covered = sum(int(p.shape[0]) for p in parts)
        assert all(p.shape[0] >= 0 for p in parts) and 0 <= first and first + covered <= rows
        if parts:
            flat = np.concatenate([np.asarray(p).reshape(-1, 2) for p in parts])
            assert np.array_equal(flat, np.asarray(values)[first : first + covered])
        check_tensor(nt.to_lod_tensor())
    if torch is not None and level:
        try:
            njt = torch.nested.nested_tensor_from_jagged(torch.zeros(rows, 2), offsets=torch.tensor(level))
        except Exception:  # noqa: BLE001 - torch may refuse it itself
            return
        nt = attempt(ln.as_nested_tensor, njt)
        if nt is not None:
            check_tensor(nt.to_lod_tensor())


@target
def vocab_ids(data):
    from lodtensor.text import Vocab, batch

    vocab = Vocab(["a", "b", "c"])
    ids = data.draw(st.lists(st.one_of(ints(6), st.floats(), st.text(max_size=2), st.booleans()), max_size=5))
    out = attempt(vocab.decode, ids)
    if out is not None:
        assert all(isinstance(tok, str) for tok in out) and len(out) == len(ids)
    t = attempt(batch, [ids, ids[:1]], vocab=vocab if data.draw(st.booleans()) else None)
    if t is not None:
        check_tensor(t)


def _flip(data, blob):
    """``blob`` with a few random bytes flipped, or truncated."""
    blob = bytearray(blob)
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    if data.draw(st.booleans()):
        return bytes(blob[: rnd.randrange(len(blob) + 1)])
    for _ in range(data.draw(st.integers(1, 4))):
        blob[rnd.randrange(len(blob))] ^= 1 << rnd.randrange(8)
    return bytes(blob)


@target
def saved_files(data):
    """lt.load of a saved file with bytes flipped: a ValueError naming the file, or the same LoD over its rows."""
    import tempfile

    t = _valid_tensor(data)
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/t.arrow"
        if attempt(lt.save, path, t) is None and not os.path.exists(path):
            return
        with open(path, "rb") as f:
            blob = _flip(data, f.read())
        with open(path, "wb") as f:
            f.write(blob)
        for mmap in (True, False):
            try:
                got = lt.load(path, mmap=mmap)
            except ValueError as err:
                assert "t.arrow" in str(err), err
                continue
            assert got.lod() == t.lod() and got.shape() == t.shape(), (got.lod(), t.lod())
            check_tensor(got)
            del got


@target
def parquet_files(data):
    """lt.read_parquet of a written file with bytes flipped: an allowed error naming the file, or valid tensors."""
    import tempfile

    t = _valid_tensor(data)
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/t.parquet"
        if attempt(lt.write_parquet, path, {"x": t}) is None and not os.path.exists(path):
            return
        with open(path, "rb") as f:
            blob = _flip(data, f.read())
        with open(path, "wb") as f:
            f.write(blob)
        batch_size = data.draw(st.sampled_from([None, 1, 3]))
        try:
            got = lt.read_parquet(path) if batch_size is None else list(lt.read_parquet(path, batch_size=batch_size))
        except (ValueError, KeyError) as err:
            assert "t.parquet" in str(err), err
            return
        for cols in [got] if batch_size is None else got:
            for col in cols.values():
                check_tensor(col)


@target
def threads_and_set_num_threads(data):
    """Kernels on several threads while another changes the thread count: right results, no error."""
    lengths = [data.draw(st.integers(0, 300)) for _ in range(40)]
    x = lt.LoDTensor(np.random.default_rng(0).random((sum(lengths), 64)), recursive_sequence_lengths=[lengths])
    want = seq.sequence_pool(x, "max").data.copy(), x.to_padded()[0].copy()
    errors = []
    stop = threading.Event()

    def work():
        try:
            for _ in range(5):
                assert np.array_equal(seq.sequence_pool(x, "max").data, want[0])
                assert np.array_equal(x.to_padded()[0], want[1])
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    def toggle():
        while not stop.is_set():
            lt.set_num_threads(random.choice([1, 2, 3, None]))

    toggler = threading.Thread(target=toggle)
    toggler.start()
    workers = [threading.Thread(target=work) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    toggler.join()
    lt.set_num_threads(None)
    assert not errors, errors





@target
def nested_pickles(data):
    import lodtensor.nested as ln

    shapes = data.draw(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=4))
    parts = [np.ones(shape) * i for i, shape in enumerate(shapes)]
    if torch is not None and data.draw(st.booleans()):
        parts = [torch.from_numpy(p) for p in parts]
    nt = ln.nested_tensor(parts)
    blob = bytearray(pickle.dumps(nt, protocol=4))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(0, 3))):
        blob[rnd.randrange(len(blob) - 16)] ^= 1 << rnd.randrange(8)
    try:
        out = pickle.loads(bytes(blob))
    except Exception:  # noqa: BLE001 - any error from a corrupted pickle is fine; a crash is not
        return
    if isinstance(out, ln.NestedTensor):
        comps = out.unbind()
        total = sum(int(np.prod(tuple(c.shape))) for c in comps)
        assert total == int(out.values().shape[0]) if out.values().ndim == 1 else True
        try:  # valid sizes can still ask for more padded memory than the machine has
            out.to_padded_tensor(0.0)
        except MemoryError:
            pass
        except RuntimeError as err:
            if "allocate" not in str(err):
                raise
# Targets kept in modules of their own register through ``target`` too (imported last, so
# ``target`` exists when they load): file formats, foreign containers (Arrow, awkward, DLPack, the
# collectives' heads), and the wire / deep-structure doors.
from . import targets_files, targets_interop, targets_peers, targets_wire  # noqa: E402, F401

__all__ = ["TARGETS", "to_offsets"]

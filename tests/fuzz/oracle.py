"""What every public entry point owes the caller, checked against plain-Python references.

An entry point either raises one of :data:`ALLOWED` (with a message) or
returns a result that is right. :func:`check_tensor` checks a LoDTensor that
came back: its LoD is valid and fits its rows (or the tensor says it does not
and every op refuses), nothing it hands out aliases its state, and the core
ops (``tolist``, indexing, ``to_padded``, ``sequence_pool``, pickling) agree
with references computed one sequence at a time in plain Python.
"""

import copy
import pickle

import numpy as np

import lodtensor as lt
from lodtensor.sequence import sequence_pool

#: The errors a public entry point may raise on bad input (LoDError is a ValueError,
#: BackendMismatchError a TypeError).
ALLOWED = (ValueError, TypeError, IndexError, OverflowError)


def attempt(fn, *args, **kwargs):
    """``fn(...)``, or None when it raised an allowed error; anything else propagates."""
    try:
        return fn(*args, **kwargs)
    except ALLOWED as err:
        assert str(err), f"{fn!r} raised {type(err).__name__} with an empty message"
        return None


def _numpy(x):
    return np.asarray(lt.LoDTensor(x).numpy()) if not isinstance(x, np.ndarray) else x


def reference_valid(levels, rows):
    """Whether offsets ``levels`` (lists of ints) form a LoD that fits ``rows`` rows."""
    for k, level in enumerate(levels):
        if len(level) < 1 or level[0] != 0 or any(b < a for a, b in zip(level, level[1:])):
            return False
        end = len(levels[k + 1]) - 1 if k + 1 < len(levels) else rows
        if level[-1] != end:
            return False
    return True


def reference_nested(rows, levels):
    """Nested lists of ``rows`` (a list) following ``levels``, one sequence at a time."""
    items = rows
    for level in reversed(levels):
        items = [items[a:b] for a, b in zip(level, level[1:])]
    return items


def reference_sequences(rows, levels, level):
    """The rows of every sequence of ``level`` (counted in rows), as lists."""
    offsets = levels[level]
    for finer in levels[level + 1 :]:
        offsets = [finer[i] for i in offsets]
    return [rows[a:b] for a, b in zip(offsets, offsets[1:])]


def _refuses(fn):
    try:
        fn()
    except ALLOWED:
        return True
    return False


def check_tensor(t, *, ops=True):
    """Invariants of a LoDTensor returned by a public entry point, then its ops against references."""
    assert isinstance(t, lt.LoDTensor), type(t)
    repr(t)
    if t.data is None:
        return
    levels = t.lod()
    rows = int(t.data.shape[0])
    valid = t.has_valid_recursive_sequence_lengths()
    for level in levels:  # each level on its own is always valid
        assert reference_valid([level], level[-1]), levels
    assert valid == reference_valid(levels, rows), (levels, rows, valid)
    # nothing handed out aliases the tensor's state
    if levels:
        got = t.lod()
        got[0][-1] += 1
        assert t.lod() == levels
        off = t.offsets(0)
        try:
            off.setflags(write=True)
        except ValueError:
            pass
        else:
            raise AssertionError("offsets() could be made writable")
        base = off.base
        while isinstance(base, np.ndarray):
            assert not base.flags.writeable
            try:
                base.setflags(write=True)
            except ValueError:
                pass
            else:
                raise AssertionError("a base of offsets() could be made writable")
            base = base.base
    if not levels:
        return
    if not valid:
        for fn in (t.tolist, t.to_padded, lambda: t[0], lambda: sequence_pool(t, "sum"), t.to_nested, t.unbind):
            assert _refuses(fn), f"{fn} ran on a tensor whose lod does not fit its rows"
        return
    if not ops:
        return
    flat = _numpy(t.data)
    row_list = flat.tolist()
    nested = reference_nested(row_list, levels)
    # repr, not ==: NaN rows (from None or nan leaves) must compare equal to themselves.
    want = repr(nested)
    assert repr(t.tolist()) == want
    for i in range(len(t)):
        assert repr(t[i].tolist()) == repr(nested[i])
    assert repr([part.tolist() for part in t.unbind()]) == want
    again = pickle.loads(pickle.dumps(t))
    assert again.lod() == levels and repr(again.tolist()) == want
    assert copy.deepcopy(t).lod() == levels
    for level in range(len(levels)):
        seqs = reference_sequences(row_list, levels, level)
        padded, lengths = t.to_padded(level=level, pad_value=0)
        padded = _numpy(padded)
        assert _numpy(lengths).tolist() == [len(s) for s in seqs]
        for i, seq in enumerate(seqs):
            assert repr(padded[i, : len(seq)].tolist()) == repr(seq)
            assert not np.any(padded[i, len(seq) :])
    _check_pools(t, flat, levels)


def _check_pools(t, flat, levels):
    seqs = reference_sequences(list(flat), levels, len(levels) - 1)
    kind = flat.dtype.kind
    row_shape = flat.shape[1:]
    for pool in ("sum", "average", "max", "min", "first", "last"):
        out = attempt(sequence_pool, t, pool)
        assert out is not None, f"sequence_pool({pool}) refused a valid tensor"
        got = _numpy(out.data)
        for i, seq in enumerate(seqs):
            if not seq:
                assert not np.any(got[i]), (pool, i)
                continue
            block = np.stack(seq).reshape((len(seq),) + row_shape)
            if pool == "sum":
                wide = np.uint64 if block.dtype == np.uint64 else np.int64  # uint64 sums stay uint64
                want = block.astype(wide if kind in "biu" else block.dtype).sum(axis=0)
            elif pool == "average":
                want = block.astype(np.float64 if kind in "biu" else block.dtype).mean(axis=0)
            elif pool == "max":
                want = block.max(axis=0)
            elif pool == "min":
                want = block.min(axis=0)
            else:
                want = block[0 if pool == "first" else -1]
            if kind in "biu" and pool != "average":
                assert np.array_equal(got[i], want), (pool, i, got[i], want)
            else:  # another summation order: within a rounding error of the largest input
                scale = float(np.abs(block.astype(np.float64)).max(initial=0.0)) * len(seq) + 1.0
                assert np.allclose(got[i], want, rtol=1e-4, atol=1e-6 * scale, equal_nan=True), (pool, i, got[i], want)

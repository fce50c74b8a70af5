"""Decoding ops on id sequences: ``sequence_erase``, ``edit_distance``, ``ctc_align``,
``ctc_greedy_decoder``.

They run on host NumPy (ids are small) without a loop over sequences; the
results go back to the input's backend. ``edit_distance``, ``ctc_align`` and
``ctc_greedy_decoder`` also take Paddle's padded ("tensor") form: a dense
``[batch, T]`` input with a length per row.
"""

import numpy as np

from ..lod import offsets_to_segment_ids
from ..ops._common import flag_arg, host_ints
from ..tensor import LoDTensor
from ._host import host, ids_column, like, make, require_lod

__all__ = ["sequence_erase", "edit_distance", "ctc_align", "ctc_greedy_decoder"]


def _tokens(tokens, where, name="tokens"):
    try:
        arr = np.asarray(list(tokens) if not isinstance(tokens, np.ndarray) else tokens)
    except TypeError:
        raise TypeError(f"{where}: {name} must be a list of integer ids, got {type(tokens).__name__}") from None
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} must be a list of integer ids, got {arr.ravel()[:8].tolist()}")
    return arr.astype(np.int64).ravel()


def _erase(x, tokens, where, name="tokens"):
    x = require_lod(x, where)  # one data/lod state for the ids, the rows and every level read below
    ids = ids_column(x, where)
    data = host(x)
    keep = ~np.isin(ids, _tokens(tokens, where, name))
    offsets = x.offsets(-1)
    kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    levels = [x.offsets(k) for k in range(x.lod_level - 1)] + [kept[offsets]]
    return make(data[keep], levels, x)


def sequence_erase(input, tokens):  # noqa: A002 - Paddle's name
    """Remove every row whose id is one of ``tokens``; the last lod level shrinks to match.

    ``input`` holds integer ids, shape ``[N, 1]`` (or ``[N]``); the outer lod
    levels are kept, as in Paddle. See Also: ``fluid.layers.sequence_erase``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([[2], [2], [6], [1], [3], [9], [6], [1], [0], [1]]), [[0, 3, 6, 10]])
    >>> out = sequence_erase(x, tokens=[2, 3, 5])
    >>> out.lod(), out.data.ravel().tolist()
    ([[0, 1, 3, 7]], [6, 1, 9, 6, 1, 0, 1])
    """
    return _erase(input, tokens, "sequence_erase()")


def _lengths(length, batch, width, where, name):
    """Host int64 lengths ``[batch]`` from ``[batch]`` or ``[batch, 1]``, each in ``[0, width]``."""
    lens = host_ints(length, where, name)
    arr = length.data if isinstance(length, LoDTensor) else length
    shape = tuple(int(d) for d in (arr.shape if hasattr(arr, "shape") else np.shape(arr)))
    if shape not in ((batch,), (batch, 1)):
        raise ValueError(f"{where}: {name} must have shape [{batch}] or [{batch}, 1] (one per row), got {list(shape)}")
    bad = np.flatnonzero((lens < 0) | (lens > width))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where}: {name}[{i}]={int(lens[i])} is outside [0, {width}] (the padded input's width)")
    return lens


def _dense(x, where, name, ndim):
    """The host array of Paddle's padded form (an array, or a LoDTensor without a lod)."""
    if isinstance(x, LoDTensor):
        x._require_data(where)
        if x.lod_level:
            raise ValueError(
                f"{where}: {name} has a lod, so its length is given by it; pass {name}_length only with "
                f"padded input (a [batch, T] array)"
            )
    data = host(x)
    if data.ndim != ndim:
        want = "[batch, T]" if ndim == 2 else "[batch, T, num_classes + 1]"
        raise ValueError(f"{where}: padded {name} must have shape {want}, got {list(data.shape)}")
    return data


def _packed(dense, lens):
    """The valid prefix of every row of ``dense`` ``[batch, T, ...]`` as flat rows and offsets."""
    keep = np.arange(dense.shape[1])[None, :] < lens[:, None]
    return dense[keep], np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def _padded_ids(ids, offsets):
    lengths = np.diff(offsets)
    width = int(lengths.max()) if lengths.size else 0
    out = np.full((lengths.size, max(width, 1)), -1, dtype=np.int64)
    seg = offsets_to_segment_ids(offsets)
    pos = np.arange(ids.size, dtype=np.int64) - offsets[:-1][seg]
    out[seg, pos] = ids
    return out, lengths


def _levenshtein(hyp, hyp_len, ref, ref_len):
    """Edit distances of all pairs at once: one vectorised row of the DP table per hyp position.

    Row ``i`` is ``d[j] = min(d_prev[j] + 1, d_prev[j-1] + cost, d[j-1] + 1)``; the last term
    is a running minimum: ``d[j] = j + cummin(a[j] - j)``.
    """
    batch = hyp_len.size
    width = ref.shape[1] + 1
    cols = np.arange(width, dtype=np.float64)
    row = np.broadcast_to(cols, (batch, width)).copy()
    dist = np.zeros(batch, dtype=np.float64)
    done = hyp_len == 0
    dist[done] = row[done, ref_len[done]]
    for i in range(1, int(hyp_len.max(initial=0)) + 1):
        cost = (hyp[:, i - 1 : i] != ref).astype(np.float64)
        a = np.empty_like(row)
        a[:, 0] = i
        a[:, 1:] = np.minimum(row[:, 1:] + 1.0, row[:, :-1] + cost)
        row = cols + np.minimum.accumulate(a - cols, axis=1)
        now = hyp_len == i
        dist[now] = row[now, ref_len[now]]
    return dist


def edit_distance(input, label, normalized=True, ignored_tokens=None, input_length=None, label_length=None):  # noqa: A002
    """Levenshtein distance between each hypothesis of ``input`` and its reference in ``label``.

    LoD form: both are id LoDTensors (``[N, 1]``) with the same number of sequences.
    Padded form (Paddle's "tensor" input): ``input`` ``[batch, T1]`` and ``label``
    ``[batch, T2]`` are dense integer arrays and ``input_length`` / ``label_length``
    (``[batch]`` or ``[batch, 1]``) say how many leading ids of each row count.
    Tokens in ``ignored_tokens`` are erased from both first (in the padded form,
    from the counted ids; Paddle's erase needs a lod there). With ``normalized``
    the distance is divided by the reference length (which must then be non-zero,
    as Paddle requires).

    Returns ``(distance, sequence_num)``: float32 ``[num_sequences, 1]`` and
    int64 ``[1]``, as Paddle.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> hyp = lt.LoDTensor(np.array([[1], [2], [3], [4]]), [[0, 3, 4]])
    >>> ref = lt.LoDTensor(np.array([[1], [3], [3], [5]]), [[0, 2, 4]])
    >>> d, n = edit_distance(hyp, ref, normalized=False)
    >>> d.ravel().tolist(), n.tolist()
    ([1.0, 2.0], [2])
    >>> hyp = np.array([[10, 3, 0, 0], [6, 5, 8, 2]])
    >>> ref = np.array([[10, 4, 0], [6, 7, 8]])
    >>> d, n = edit_distance(hyp, ref, input_length=[2, 4], label_length=[2, 3])
    >>> np.round(d.ravel(), 4).tolist(), n.tolist()
    ([0.5, 0.6667], [2])
    """
    where = "edit_distance()"
    normalized = flag_arg(normalized, where, "normalized")
    if (input_length is None) != (label_length is None):
        missing = "label_length" if label_length is None else "input_length"
        raise ValueError(f"{where}: the padded form needs both input_length and label_length; {missing} is None")
    if input_length is not None:
        hyp_dense = _dense(input, where, "input", 2)
        ref_dense = _dense(label, where, "label", 2)
        if hyp_dense.shape[0] != ref_dense.shape[0]:
            raise ValueError(
                f"{where}: input and label must hold the same number of rows, got {hyp_dense.shape[0]} and "
                f"{ref_dense.shape[0]}"
            )
        for dense, name in ((hyp_dense, "input"), (ref_dense, "label")):
            if dense.size and dense.dtype.kind not in "iu":
                raise TypeError(f"{where}: {name} must hold integer ids, got dtype {dense.dtype}")
        hyp_ids, hyp_off = _packed(hyp_dense, _lengths(input_length, hyp_dense.shape[0], hyp_dense.shape[1],
                                                       where, "input_length"))
        ref_ids, ref_off = _packed(ref_dense, _lengths(label_length, ref_dense.shape[0], ref_dense.shape[1],
                                                       where, "label_length"))
        if hyp_off.size == 1:  # no rows: no distances
            return like(np.zeros((0, 1), np.float32), input), like(np.zeros(1, np.int64), input)
        input = make(hyp_ids.reshape(-1, 1), [hyp_off], input)
        label = make(ref_ids.reshape(-1, 1), [ref_off], label)
    input = require_lod(input, where, "input")  # noqa: A001 - one state each: the ids and offsets below agree
    label = require_lod(label, where, "label")
    if ignored_tokens is not None and _tokens(ignored_tokens, where, "ignored_tokens").size:
        input = _erase(input, ignored_tokens, where, "ignored_tokens")
        label = _erase(label, ignored_tokens, where, "ignored_tokens")
    hyp_ids = ids_column(input, where, "input")
    ref_ids = ids_column(label, where, "label")
    hyp_off, ref_off = input.offsets(-1), label.offsets(-1)
    if hyp_off.size != ref_off.size:
        raise ValueError(
            f"{where}: input and label must hold the same number of sequences, "
                f"got {hyp_off.size - 1} and {ref_off.size - 1}"
        )
    hyp, hyp_len = _padded_ids(hyp_ids, hyp_off)
    ref, ref_len = _padded_ids(ref_ids, ref_off)
    dist = _levenshtein(hyp, hyp_len, ref, ref_len)
    if normalized:
        if np.any(ref_len == 0):
            bad = int(np.flatnonzero(ref_len == 0)[0])
            raise ValueError(f"{where}: label sequence {bad} is empty; normalized=True divides by the label length")
        dist = dist / ref_len
    distance = like(dist.astype(np.float32).reshape(-1, 1), input)
    return distance, like(np.array([hyp_len.size], dtype=np.int64), input)


def _ctc_keep(ids, offsets, blank, merge_repeated):
    """Which of ``ids`` survive CTC alignment: not ``blank`` and, with ``merge_repeated``, not equal
    to the id before it in the same sequence (blanks count as ids there, so ``a blank a`` keeps both)."""
    keep = ids != blank
    if merge_repeated and ids.size:
        first = np.zeros(ids.size, dtype=bool)
        first[offsets[:-1][offsets[:-1] < ids.size]] = True
        repeat = np.zeros(ids.size, dtype=bool)
        repeat[1:] = ids[1:] == ids[:-1]
        keep &= first | ~repeat
    return keep


def _align(ids, offsets, blank, merge_repeated):
    """The kept ids and the new offsets."""
    keep = _ctc_keep(ids, offsets, blank, merge_repeated)
    kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return ids[keep], kept[offsets]


def _align_padded(dense, lens, blank, merge_repeated, padding_value):
    """Padded form: each row's aligned ids at its front, ``padding_value`` after; the new lengths."""
    ids, offsets = _packed(dense, lens)
    out_ids, out_off = _align(ids, offsets, blank, merge_repeated)
    out_len = np.diff(out_off)
    out = np.full(dense.shape[:2], padding_value, dtype=dense.dtype)
    out[np.arange(dense.shape[1])[None, :] < out_len[:, None]] = out_ids
    return out, out_len


def _int(value, where, name):
    """A Python int from an integer (or a one-element integer array), else a TypeError naming ``name``."""
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything that is not array-like is refused below
        arr = np.asarray(None)
    if arr.size != 1 or arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} must be an integer, got {type(value).__name__} {value!r}")
    return int(arr.reshape(()))


def ctc_align(input, blank, merge_repeated=True, input_length=None, padding_value=0):  # noqa: A002
    """Paddle's ``ctc_align`` operator: drop ``blank`` ids and, with ``merge_repeated``, merge runs
    of the same id (a blank between two equal ids keeps both).

    LoD form: ``input`` is an id LoDTensor ``[N, 1]`` (the top lod level delimits the
    sequences); the result has the input's dtype and one lod level. Where every sequence
    aligns to nothing, Paddle returns one row ``-1`` with an all-zero lod (which does not fit);
    lodtensor returns zero rows.

    Padded form: ``input`` is ``[batch, T]`` and ``input_length`` ``[batch]`` or ``[batch, 1]``;
    returns ``(output, output_length)``: ``[batch, T]`` with each row's ids at its front and
    ``padding_value`` after them, and ``[batch, 1]`` lengths, both in the input's dtype.

    See Also
    --------
    ctc_greedy_decoder : the arg-max of class scores, then ``ctc_align`` with ``merge_repeated``.

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([[0], [1], [1], [0], [1], [2], [2]]), [[0, 4, 7]])
    >>> ctc_align(x, blank=0).data.ravel().tolist()
    [1, 1, 2]
    >>> out = ctc_align(x, blank=0, merge_repeated=False)
    >>> out.lod(), out.data.ravel().tolist()
    ([[0, 2, 5]], [1, 1, 1, 2, 2])
    >>> out, length = ctc_align(np.array([[0, 2, 2, 4], [1, 1, 0, 0]]), 0, input_length=[4, 2], padding_value=-1)
    >>> out.tolist(), length.ravel().tolist()
    ([[2, 4, -1, -1], [1, -1, -1, -1]], [2, 1])
    """
    where = "ctc_align()"
    blank = _int(blank, where, "blank")
    merge_repeated = flag_arg(merge_repeated, where, "merge_repeated")
    if input_length is not None:
        dense = _dense(input, where, "input", 2)
        if dense.size and dense.dtype.kind not in "iu":
            raise TypeError(f"{where}: input must hold integer ids, got dtype {dense.dtype}")
        lens = _lengths(input_length, dense.shape[0], dense.shape[1], where, "input_length")
        out, out_len = _align_padded(dense, lens, blank, bool(merge_repeated), _int(padding_value, where,
                                                                                    "padding_value"))
        return like(out, input), like(out_len.astype(dense.dtype).reshape(-1, 1), input)
    input = require_lod(input, where)  # noqa: A001 - one state: the ids and the offsets below agree
    ids = ids_column(input, where)
    offsets = input._lod.absolute_offsets(0)
    out_ids, out_off = _align(ids, offsets, blank, bool(merge_repeated))
    return make(out_ids.astype(host(input).dtype).reshape(-1, 1), [out_off], input)


def ctc_greedy_decoder(input, blank, input_length=None, padding_value=0):  # noqa: A002
    """Best path CTC decoding: the arg-max class of every row, repeats merged, ``blank`` removed.

    LoD form: ``input`` is a LoDTensor of class probabilities ``[N, num_classes + 1]``
    (the top lod level delimits the sequences). Returns int64 ids ``[M, 1]`` with one
    lod level. Where every sequence decodes to nothing, Paddle returns one row ``-1``
    with an all-zero lod (which does not fit); lodtensor returns zero rows.

    Padded form: ``input`` is ``[batch, T, num_classes + 1]`` and ``input_length``
    ``[batch]`` or ``[batch, 1]``; returns ``(output, output_length)``, int64
    ``[batch, T]`` (each row's ids, then ``padding_value``) and ``[batch, 1]``, as Paddle.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> p = np.eye(3)[[1, 1, 0, 1, 2, 2, 0]]
    >>> out = ctc_greedy_decoder(lt.LoDTensor(p, [[0, 4, 7]]), blank=0)
    >>> out.lod(), out.data.ravel().tolist()
    ([[0, 2, 3]], [1, 1, 2])
    >>> out, length = ctc_greedy_decoder(np.eye(3)[[[1, 1, 0, 1], [2, 2, 0, 0]]], 0, input_length=[4, 3])
    >>> out.tolist(), length.ravel().tolist()
    ([[1, 1, 0, 0], [2, 0, 0, 0]], [2, 1])
    """
    where = "ctc_greedy_decoder()"
    blank = _int(blank, where, "blank")
    if input_length is not None:
        probs = _dense(input, where, "input", 3)
        ids = np.argmax(probs, axis=2).astype(np.int64) if probs.size else np.zeros(probs.shape[:2], np.int64)
        lens = _lengths(input_length, ids.shape[0], ids.shape[1], where, "input_length")
        out, out_len = _align_padded(ids, lens, blank, True, _int(padding_value, where, "padding_value"))
        return like(out, input), like(out_len.reshape(-1, 1), input)
    input = require_lod(input, where)  # noqa: A001 - Paddle's name
    probs = host(input)
    if probs.ndim != 2:
        raise ValueError(f"{where}: input must have shape [N, num_classes + 1], got {list(probs.shape)}")
    ids = np.argmax(probs, axis=1).astype(np.int64) if probs.shape[0] else np.zeros(0, np.int64)
    out_ids, out_off = _align(ids, input._lod.absolute_offsets(0), blank, True)
    return make(out_ids.reshape(-1, 1), [out_off], input)

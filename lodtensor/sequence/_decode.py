"""Decoding ops on id sequences: ``sequence_erase``, ``edit_distance``, ``ctc_greedy_decoder``.

They run on host NumPy (ids are small) without a loop over sequences; the
results go back to the input's backend.
"""

import numpy as np

from ..lod import offsets_to_segment_ids
from ._host import host, ids_column, like, make, require_lod

__all__ = ["sequence_erase", "edit_distance", "ctc_greedy_decoder"]


def _tokens(tokens, where):
    try:
        arr = np.asarray(list(tokens) if not isinstance(tokens, np.ndarray) else tokens)
    except TypeError:
        raise TypeError(f"{where}: tokens must be a list of integer ids, got {type(tokens).__name__}") from None
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: tokens must be a list of integer ids, got {arr.ravel()[:8].tolist()}")
    return arr.astype(np.int64).ravel()


def _erase(x, tokens, where):
    ids = ids_column(x, where)
    data = host(x)
    keep = ~np.isin(ids, _tokens(tokens, where))
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

    Both are id LoDTensors (``[N, 1]``) with the same number of sequences.
    Tokens in ``ignored_tokens`` are erased from both first. With
    ``normalized`` the distance is divided by the reference length (which must
    then be non-zero, as Paddle requires).

    Returns ``(distance, sequence_num)``: float32 ``[num_sequences, 1]`` and
    int64 ``[1]``, as Paddle. ``input_length``/``label_length`` (Paddle's padded
    form) are not needed for LoD input and must be None.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> hyp = lt.LoDTensor(np.array([[1], [2], [3], [4]]), [[0, 3, 4]])
    >>> ref = lt.LoDTensor(np.array([[1], [3], [3], [5]]), [[0, 2, 4]])
    >>> d, n = edit_distance(hyp, ref, normalized=False)
    >>> d.ravel().tolist(), n.tolist()
    ([1.0, 2.0], [2])
    """
    where = "edit_distance()"
    if input_length is not None or label_length is not None:
        raise ValueError(f"{where}: input_length/label_length are for padded input; LoDTensor input carries its lod")
    if ignored_tokens is not None and len(ignored_tokens):
        input = _erase(input, ignored_tokens, where)
        label = _erase(label, ignored_tokens, where)
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


def ctc_greedy_decoder(input, blank, input_length=None, padding_value=0):  # noqa: A002
    """Best path CTC decoding: the arg-max class of every row, repeats merged, ``blank`` removed.

    ``input`` is a LoDTensor of class probabilities ``[N, num_classes + 1]``
    (the top lod level delimits the sequences). Returns int64 ids ``[M, 1]``
    with one lod level. Where every sequence decodes to nothing, Paddle returns
    one row ``-1`` with an all-zero lod (which does not fit); lodtensor returns
    zero rows.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> p = np.eye(3)[[1, 1, 0, 1, 2, 2, 0]]
    >>> out = ctc_greedy_decoder(lt.LoDTensor(p, [[0, 4, 7]]), blank=0)
    >>> out.lod(), out.data.ravel().tolist()
    ([[0, 2, 3]], [1, 1, 2])
    """
    where = "ctc_greedy_decoder()"
    if input_length is not None:
        raise ValueError(f"{where}: input_length is for padded input; LoDTensor input carries its lod")
    require_lod(input, where)
    probs = host(input)
    if probs.ndim != 2:
        raise ValueError(f"{where}: input must have shape [N, num_classes + 1], got {list(probs.shape)}")
    ids = np.argmax(probs, axis=1).astype(np.int64) if probs.shape[0] else np.zeros(0, np.int64)
    offsets = input._lod.absolute_offsets(0)
    first = np.zeros(ids.size, dtype=bool)
    first[offsets[:-1][offsets[:-1] < ids.size]] = True
    repeat = np.zeros(ids.size, dtype=bool)
    repeat[1:] = ids[1:] == ids[:-1]
    keep = (ids != int(blank)) & (first | ~repeat)
    kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return make(ids[keep].reshape(-1, 1), [kept[offsets]], input)


"""Paddle's ``beam_search`` step and ``beam_search_decode`` back-trace, on 2-level LoDTensors.

A beam-search state is a 2-level LoDTensor: level 0 maps each source sentence to
its prefixes (beams), level 1 maps each prefix to the candidates selected from
it. Both ops work on all sources at once (sorting, ``searchsorted``), with a
loop over time steps only.
"""

import numpy as np

from ..lod import lengths_to_offsets, offsets_to_segment_ids
from ..ops._common import flag_arg, int_arg, snapshot
from ..tensor import LoDTensor
from ._host import host, like, make

__all__ = ["beam_search", "beam_search_decode"]


def _column(x, where, name, kind):
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: {name} must be a LoDTensor, got {type(x).__name__}")
    x._require_data(where)
    data = host(x)
    if kind == "i" and data.size and data.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} must hold integer ids, got dtype {data.dtype}")
    return data


def beam_search(pre_ids, pre_scores, ids, scores, beam_size, end_id, level=0, is_accumulated=True,
                return_parent_idx=False):
    """One step of beam search: keep the ``beam_size`` best candidates of every source sentence.

    ``pre_ids``/``pre_scores`` (``[P, 1]``) are the prefixes' last ids and
    scores; ``scores`` (``[P, K]``, a 2-level LoDTensor whose lod level
    ``level`` maps sources to prefixes) holds the candidates' scores and ``ids``
    (``[P, K]``, or None for ids ``0..K-1``) their ids. A prefix that ended
    (``pre_id == end_id``) proposes only ``end_id`` with its own score. With
    ``is_accumulated=False`` the score is ``pre_score + log(score)``. A source
    whose every candidate is an ended prefix's ``end_id`` is pruned (no
    candidates). Ties in score go to the later prefix, as in Paddle.

    Returns ``(selected_ids, selected_scores)`` (and ``parent_idx``, int32,
    the prefix of every selected row, with ``return_parent_idx``): ``[M, 1]``
    LoDTensors with 2 levels, sources -> prefixes -> selected candidates.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> lod = [[0, 2], [0, 1, 2]]                     # one source, two prefixes
    >>> pre_ids = lt.LoDTensor(np.array([[1], [2]]), lod)
    >>> pre_scores = lt.LoDTensor(np.array([[0.5], [0.4]], "float32"), lod)
    >>> ids = lt.LoDTensor(np.array([[3, 4], [5, 6]]), lod)
    >>> scores = lt.LoDTensor(np.array([[0.9, 0.2], [0.7, 0.8]], "float32"), lod)
    >>> sel_ids, sel_scores = beam_search(pre_ids, pre_scores, ids, scores, beam_size=2, end_id=0)
    >>> sel_ids.lod(), sel_ids.data.ravel().tolist()
    ([[0, 2], [0, 1, 2]], [3, 6])
    """
    where = "beam_search()"
    beam_size, end_id = int_arg(beam_size, where, "beam_size", 1), int_arg(end_id, where, "end_id")
    level = int_arg(level, where, "level", 0)
    is_accumulated = flag_arg(is_accumulated, where, "is_accumulated")
    return_parent_idx = flag_arg(return_parent_idx, where, "return_parent_idx")
    p_ids = _column(pre_ids, where, "pre_ids", "i").reshape(-1).astype(np.int64)
    p_scores = _column(pre_scores, where, "pre_scores", "f").reshape(-1)
    if isinstance(scores, LoDTensor):
        scores = snapshot(scores)  # one data/lod state: the rows read here and the lod read below agree
    sc = _column(scores, where, "scores", "f")
    if scores.lod_level <= level:
        raise ValueError(
            f"{where}: scores must have a lod of more than {level} levels, got lod_level {scores.lod_level}"
        )
    n_prefix = sc.shape[0]
    width = int(np.prod(sc.shape[1:], dtype=np.int64))  # not reshape(-1): no prefix (size 0) leaves -1 open
    sc = sc.reshape(n_prefix, width)
    if p_ids.size != n_prefix or p_scores.size != n_prefix:
        raise ValueError(
            f"{where}: pre_ids ({p_ids.size} rows) and pre_scores ({p_scores.size} rows) must have one row per "
            f"prefix of scores ({n_prefix})"
        )
    if ids is None:
        cand = np.broadcast_to(np.arange(width, dtype=np.int64), (n_prefix, width))
    else:
        cand = _column(ids, where, "ids", "i")
        if cand.size != n_prefix * width:
            raise ValueError(
                f"{where}: ids has shape {list(cand.shape)} but scores has {[n_prefix, width]}; they must match"
            )
        cand = cand.reshape(n_prefix, width).astype(np.int64)
    high = scores._lod.absolute_offsets(level)
    if int(high[-1]) != n_prefix:
        raise ValueError(f"{where}: lod level {level} of scores must end at its {n_prefix} rows, got {int(high[-1])}")
    # scores in float32 (Paddle's kernel), float64 ones in float64: a float32 round trip would change
    # the selected scores and tie candidates that differ only past float32's precision
    work = np.result_type(sc.dtype, np.float32)
    cand_score = sc.astype(work) if is_accumulated else (p_scores[:, None] + np.log(sc)).astype(work)
    ended = p_ids == end_id
    # every candidate: (prefix, id, score); an ended prefix proposes only (end_id, its score)
    col = np.arange(width)
    valid = np.where(ended[:, None], col[None, :] == 0, True)
    c_prefix = np.broadcast_to(np.arange(n_prefix, dtype=np.int64)[:, None], (n_prefix, width))[valid]
    c_id = np.where(ended[:, None], end_id, cand)[valid]
    c_score = np.where(ended[:, None], p_scores[:, None].astype(work), cand_score)[valid]
    c_order = np.arange(c_id.size, dtype=np.int64)
    source = offsets_to_segment_ids(high)[c_prefix]
    # per source: score desc, prefix desc (Paddle's Item order), first seen first
    order = np.lexsort((c_order, -c_prefix, -c_score.astype(np.float64), source))
    src_sorted = source[order]
    src_start = np.searchsorted(src_sorted, np.arange(high.size - 1), side="left")
    rank = np.arange(order.size) - src_start[src_sorted] if order.size else np.zeros(0, np.int64)
    chosen = order[rank < beam_size]
    # prune a source whose every chosen candidate is end_id following an ended prefix
    finished = np.ones(high.size - 1, dtype=bool)
    not_end = ~((c_id[chosen] == end_id) & ended[c_prefix[chosen]])
    finished[source[chosen][not_end]] = False
    chosen = chosen[~finished[source[chosen]]]
    # output grouped by prefix, within a prefix in score order
    chosen = chosen[np.argsort(c_prefix[chosen], kind="stable")]
    per_prefix = np.bincount(c_prefix[chosen], minlength=n_prefix).astype(np.int64)
    levels = [high, lengths_to_offsets(per_prefix)]
    sel_ids = make(c_id[chosen].reshape(-1, 1), levels, scores)
    sel_scores = make(c_score[chosen].reshape(-1, 1).astype(sc.dtype), levels, scores)
    if return_parent_idx:
        return sel_ids, sel_scores, like(c_prefix[chosen].astype(np.int32), scores)
    return sel_ids, sel_scores


def beam_search_decode(ids, scores, beam_size, end_id):
    """Back-trace the steps of a beam search into whole sentences.

    ``ids``/``scores`` are :class:`LoDTensorArray` s of the ``selected_ids`` /
    ``selected_scores`` of every :func:`beam_search` step. Each source's
    hypotheses start at the last step where it still had candidates and follow
    the prefixes back to step 0; repeated ``end_id`` tokens are dropped. Within
    a source the sentences are sorted by their final score, best first.

    Returns ``(sentence_ids, sentence_scores)``: 2-level LoDTensors, sources ->
    sentences -> tokens (int64 ids and the score after each token).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> step0 = lt.LoDTensor(np.array([[4], [5]]), [[0, 1], [0, 2]])
    >>> step1 = lt.LoDTensor(np.array([[7], [8]]), [[0, 2], [0, 1, 2]])
    >>> s0 = step0.with_data(np.array([[0.5], [0.4]], "float32"))
    >>> s1 = step1.with_data(np.array([[0.9], [1.0]], "float32"))
    >>> out_ids, out_scores = beam_search_decode([step0, step1], [s0, s1], beam_size=2, end_id=0)
    >>> out_ids.lod(), out_ids.data.ravel().tolist()
    ([[0, 2], [0, 2, 4]], [5, 8, 4, 7])
    """
    where = "beam_search_decode()"
    int_arg(beam_size, where, "beam_size")  # an int, as Paddle's attribute; the steps' lods set the beams
    end_id = int_arg(end_id, where, "end_id")
    ids, scores = list(ids), list(scores)
    if not ids:
        raise ValueError(f"{where}: ids is an empty LoDTensorArray")
    if len(ids) != len(scores):
        raise ValueError(f"{where}: ids has {len(ids)} steps but scores has {len(scores)}")
    step_ids, step_scores, src_lods, cand_lods = [], [], [], []
    for t, (i_t, s_t) in enumerate(zip(ids, scores)):
        if not isinstance(i_t, LoDTensor) or i_t.lod_level != 2:
            raise ValueError(f"{where}: ids[{t}] must be a LoDTensor with 2 lod levels (sources, prefixes)")
        step_ids.append(_column(i_t, where, f"ids[{t}]", "i").reshape(-1).astype(np.int64))
        step_scores.append(_column(s_t, where, f"scores[{t}]", "f").reshape(-1))
        if step_scores[-1].size != step_ids[-1].size:
            raise ValueError(f"{where}: scores[{t}] has {step_scores[-1].size} rows, ids[{t}] has {step_ids[-1].size}")
        src_lods.append(i_t.offsets(0))
        cand_lods.append(i_t.offsets(1))
    n_src = src_lods[0].size - 1
    for t, src in enumerate(src_lods):
        if src.size - 1 != n_src:
            raise ValueError(f"{where}: ids[{t}] has {src.size - 1} sources, ids[0] has {n_src}")
    # live hypotheses: source, row pointer into the current step; tokens recorded per step
    hyp_src = np.zeros(0, np.int64)
    hyp_ptr = np.zeros(0, np.int64)
    hyp_len = np.zeros(0, np.int64)
    hyp_first = np.zeros(0, np.float64)
    rec_hyp, rec_step, rec_id, rec_score = [], [], [], []
    for t in range(len(step_ids) - 1, -1, -1):
        cur_ids, cur_scores, src_off, cand_off = step_ids[t], step_scores[t], src_lods[t], cand_lods[t]
        started = np.zeros(n_src, dtype=bool)
        started[hyp_src] = True
        # continue the live hypotheses: record the token unless it repeats end_id
        if hyp_ptr.size:
            tok = cur_ids[hyp_ptr]
            write = (tok != end_id) | (hyp_len == 0)
            idx = np.flatnonzero(write)
            rec_hyp.append(idx)
            rec_step.append(np.full(idx.size, t))
            rec_id.append(tok[idx])
            rec_score.append(cur_scores[hyp_ptr][idx])
            first = hyp_len == 0
            hyp_first[first & write] = cur_scores[hyp_ptr][first & write]
            hyp_len = hyp_len + write
            hyp_ptr = np.searchsorted(cand_off, hyp_ptr, side="right") - 1
        # sources without hypotheses start here from every candidate row they have
        rows_src = offsets_to_segment_ids(src_off)  # prefix -> source
        cand_prefix = offsets_to_segment_ids(cand_off, cand_off[-1])
        new_rows = np.flatnonzero(~started[rows_src[cand_prefix]]) if cand_prefix.size else np.zeros(0, np.int64)
        if new_rows.size:
            base = hyp_ptr.size
            new_idx = base + np.arange(new_rows.size)
            rec_hyp.append(new_idx)
            rec_step.append(np.full(new_rows.size, t))
            rec_id.append(cur_ids[new_rows])
            rec_score.append(cur_scores[new_rows])
            hyp_src = np.concatenate([hyp_src, rows_src[cand_prefix[new_rows]]])
            hyp_ptr = np.concatenate([hyp_ptr, cand_prefix[new_rows]])
            hyp_len = np.concatenate([hyp_len, np.ones(new_rows.size, np.int64)])
            hyp_first = np.concatenate([hyp_first, cur_scores[new_rows].astype(np.float64)])
    r_hyp = np.concatenate(rec_hyp) if rec_hyp else np.zeros(0, np.int64)
    r_step = np.concatenate(rec_step) if rec_step else np.zeros(0, np.int64)
    r_id = np.concatenate(rec_id) if rec_id else np.zeros(0, np.int64)
    r_score = np.concatenate(rec_score) if rec_score else np.zeros(0, step_scores[0].dtype)
    # sentences: by source, then final score (best first, stable), tokens in time order
    hyp_order = np.lexsort((np.arange(hyp_src.size), -hyp_first, hyp_src))
    hyp_rank = np.empty_like(hyp_order)
    hyp_rank[hyp_order] = np.arange(hyp_order.size)
    tokens = np.lexsort((r_step, hyp_rank[r_hyp])) if r_hyp.size else np.zeros(0, np.int64)
    per_src = np.bincount(hyp_src, minlength=n_src).astype(np.int64)
    levels = [lengths_to_offsets(per_src), lengths_to_offsets(hyp_len[hyp_order])]
    ref = ids[0]
    sent_ids = make(r_id[tokens], levels, ref)
    sent_scores = make(r_score[tokens], levels, ref)
    return sent_ids, sent_scores


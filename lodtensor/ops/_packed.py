"""Index plans between rows in sequence order and torch's time-major ``PackedSequence`` rows.

Host NumPy only (no torch import): the LoDTensor interop (``to_packed_sequence``,
``from_packed_sequence``) and the nested front end (``nt.to_packed_sequence()``,
``as_nested_tensor(packed)``) build their gathers from these, one vectorised
pass over the lengths, never a Python list of sequences.
"""

import numpy as np

__all__ = ["time_major_rows", "packed_lengths", "pack_order", "packed_sequence", "unpacked_rows"]


def pack_order(lengths, torch):
    """The order in which ``pack_sequence`` puts sequences of ``lengths``: longest first, equal lengths
    in the order of torch's own sort (``pack_padded_sequence`` sorts the lengths with ``torch.sort``,
    which is not stable past 16 values), so that data and indices equal torch's. ``torch`` is the
    caller's torch module (this module imports none).

    >>> import torch
    >>> pack_order(np.array([2, 3, 2]), torch).tolist()
    [1, 0, 2]
    """
    lengths = torch.from_numpy(np.array(lengths, dtype=np.int64))  # a copy: a LoD's arrays are read-only
    return torch.sort(lengths, descending=True)[1].numpy()


def packed_sequence(rows, lengths, enforce_sorted, torch):
    """``pack_sequence`` of the sequences of ``rows`` (a torch tensor, sequences one after another, of
    ``lengths``: each >= 1, non-increasing where ``enforce_sorted``, as the caller checked) in one gather:
    the same data, batch sizes and indices as torch's. ``torch`` is the caller's torch module.

    >>> import torch
    >>> ps = packed_sequence(torch.arange(5.0), np.array([2, 3]), False, torch)
    >>> ps.data.tolist(), ps.batch_sizes.tolist(), ps.sorted_indices.tolist()
    ([2.0, 0.0, 3.0, 1.0, 4.0], [2, 2, 1], [1, 0])
    """
    order = np.arange(lengths.size, dtype=np.int64) if enforce_sorted else pack_order(lengths, torch)
    dest, batch_sizes = time_major_rows(lengths, order)
    src = np.empty_like(dest)
    src[dest] = np.arange(dest.size, dtype=np.int64)
    device = rows.device
    packed = rows[torch.from_numpy(src).to(device)]
    sorted_indices = unsorted_indices = None
    if not enforce_sorted:
        sorted_indices = torch.from_numpy(order).to(device)
        unsorted_indices = torch.from_numpy(np.argsort(order)).to(device)
    batch_sizes = torch.from_numpy(batch_sizes.astype(np.int64))
    return torch.nn.utils.rnn.PackedSequence(packed, batch_sizes, sorted_indices, unsorted_indices)


def unpacked_rows(ps, where, torch):
    """``(rows, lengths)`` of the ``PackedSequence`` ``ps``: its rows back in sequence order (one gather,
    autograd kept) and the sequences' lengths in the caller's order, after :func:`packed_lengths`' checks."""
    lengths, order = packed_lengths(ps, where)
    dest, _ = time_major_rows(lengths, order)
    return ps.data[torch.from_numpy(dest).to(ps.data.device)], lengths


def time_major_rows(lengths, order):
    """For rows in sequence order, their position in the time-major packed layout, and the batch sizes.

    ``order`` lists the sequences longest first; at step ``s`` the packed data
    holds the first ``batch_sizes[s]`` of them, so the row at step ``s`` of the
    sequence ranked ``r`` goes to ``start[s] + r``.

    >>> dest, batch_sizes = time_major_rows(np.array([2, 3]), np.array([1, 0]))
    >>> dest.tolist(), batch_sizes.tolist()
    ([1, 3, 0, 2, 4], [2, 2, 1])
    """
    n = lengths.size
    sorted_lengths = lengths[order]
    longest = int(sorted_lengths[0]) if n else 0
    # batch_sizes[s] = number of sequences longer than s
    counts = np.bincount(sorted_lengths, minlength=longest + 1)
    batch_sizes = n - np.cumsum(counts)[:longest]
    start = np.zeros(longest, dtype=np.int64)
    np.cumsum(batch_sizes[:-1], out=start[1:])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    seq = np.repeat(np.arange(n), lengths)
    step = np.arange(offsets[-1]) - offsets[seq]
    return start[step] + rank[seq], batch_sizes


def packed_lengths(ps, where):
    """``(lengths, order)`` of the sequences of the ``PackedSequence`` ``ps``: their lengths in the
    caller's order and the order torch packed them in (longest first), both int64, after checking
    ``batch_sizes`` and ``sorted_indices`` (``where`` names the caller in the ValueError)."""
    bs = ps.batch_sizes.detach().cpu().numpy().astype(np.int64)
    rows = int(ps.data.shape[0])
    if bs.ndim != 1 or bs.size == 0 or (bs < 1).any() or (bs[1:] > bs[:-1]).any() or int(bs.sum()) != rows:
        raise ValueError(
            f"{where}: batch_sizes must be positive, non-increasing and add up to the "
            f"{rows} rows of ps.data, got {bs[:8].tolist()}{'...' if bs.size > 8 else ''} (sum {int(bs.sum())})"
        )
    n = int(bs[0])
    # sorted_lengths[r] = number of steps in which sequence ranked r is present
    sorted_lengths = np.bincount(bs, minlength=n + 1)[::-1].cumsum()[::-1][1:]
    if ps.sorted_indices is None:
        order = np.arange(n)
    else:
        order = ps.sorted_indices.detach().cpu().numpy().astype(np.int64)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(f"{where}: sorted_indices must be a permutation of range({n})")
    lengths = np.empty(n, dtype=np.int64)
    lengths[order] = sorted_lengths
    return lengths, order

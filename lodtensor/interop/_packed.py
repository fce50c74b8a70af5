"""torch's ``PackedSequence``: the rows of a one-level LoDTensor reordered time-major, and back.

>>> import torch
>>> import lodtensor as lt
>>> ps = lt.LoDTensor(torch.arange(5.0), [[0, 3, 5]]).to_packed_sequence()
>>> ps.batch_sizes.tolist()
[2, 2, 1]
"""

import numpy as np

from .._compile import eager_under_compile
from ..lod import LoD
from ..ops._packed import packed_sequence, unpacked_rows
from ..tensor import LoDTensor
from ._lazy import lod_tensor_arg
from ._torch_base import _torch, _torch_data

__all__ = ["to_packed_sequence", "from_packed_sequence"]


@eager_under_compile  # reads the host offsets: under torch.compile, behind a graph break
def to_packed_sequence(t, enforce_sorted=False):
    """A ``torch.nn.utils.rnn.PackedSequence`` of the last level's sequences; a copy (time-major rows).

    Equivalent to ``pack_sequence(list(sequences), enforce_sorted)`` built in one
    gather, without a Python list of sequences. Autograd flows through for
    torch data. Only the last lod level is used (outer levels are dropped).

    Raises
    ------
    ValueError
        An empty sequence or no sequence at all (a PackedSequence cannot hold them), or, with
        ``enforce_sorted=True``, lengths that are not non-increasing.

    Examples
    --------
    >>> import torch
    >>> import lodtensor as lt
    >>> ps = lt.LoDTensor(torch.arange(5.0), [[0, 3, 5]]).to_packed_sequence()
    >>> ps.data.tolist(), ps.batch_sizes.tolist()  # time-major: step 0 of both sequences first
    ([0.0, 3.0, 1.0, 4.0, 2.0], [2, 2, 1])
    """
    lod_tensor_arg(t, "to_packed_sequence()")
    torch = _torch("to_packed_sequence()")
    t._require_lod("to_packed_sequence()")
    data = _torch_data(t, "to_packed_sequence()")
    lengths = t.lod.absolute_offsets(-1)
    lengths = np.diff(lengths)
    if not lengths.size:
        raise ValueError(
            f"to_packed_sequence(): lod level {t.lod_level - 1} holds no sequence (offsets [0]); a PackedSequence "
            f"needs one at least (torch's RNNs and pad_packed_sequence refuse empty batch_sizes)"
        )
    if (lengths == 0).any():
        j = int(np.flatnonzero(lengths == 0)[0])
        raise ValueError(f"to_packed_sequence(): sequence {j} is empty; a PackedSequence needs length >= 1 each")
    if enforce_sorted:
        up = lengths[1:] > lengths[:-1]
        if up.any():
            j = int(np.flatnonzero(up)[0])
            raise ValueError(
                f"to_packed_sequence(enforce_sorted=True): lengths must be non-increasing, but "
                f"lengths[{j}]={lengths[j]} < lengths[{j + 1}]={lengths[j + 1]}; pass enforce_sorted=False"
            )
    return packed_sequence(data, lengths, enforce_sorted, torch)  # equal lengths in torch.sort's order, as torch


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def from_packed_sequence(ps):
    """A one-level LoDTensor (torch data) from a ``PackedSequence``; a copy (rows back in sequence order).

    Inverse of :func:`to_packed_sequence`: sequence ``i`` of the result is
    ``unpack_sequence(ps)[i]``. The batch sizes and permutations are checked,
    and the lod goes through the LoD gate.

    Raises
    ------
    ValueError
        Batch sizes that are not positive and non-increasing, that do not add
        up to the rows, or indices that are not a permutation.

    Examples
    --------
    >>> import torch
    >>> from torch.nn.utils.rnn import pack_sequence
    >>> ps = pack_sequence([torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0, 5.0])], enforce_sorted=False)
    >>> t = from_packed_sequence(ps)
    >>> t.lod(), t.tolist()
    ([[0, 2, 5]], [[1.0, 2.0], [3.0, 4.0, 5.0]])
    """
    torch = _torch("from_packed_sequence()")
    from torch.nn.utils.rnn import PackedSequence  # noqa: PLC0415 - torch loaded above

    if not isinstance(ps, PackedSequence):
        raise TypeError(f"from_packed_sequence(): ps must be a PackedSequence, got {type(ps).__name__}")
    data, lengths = unpacked_rows(ps, "from_packed_sequence()", torch)
    return LoDTensor(data, LoD.from_lengths([lengths], num_rows=int(ps.data.shape[0])))

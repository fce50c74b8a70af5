"""Row index helpers of the torch backend, on the offsets' device: each row's segment, and each row's
place in the padded ``(sequences, maxlen)`` layout. Shared by the backend's ops, its autograd
Functions' backward passes (``_cpu``, ``_cuda``) and their forward-mode derivatives (``_jvp``).

>>> offsets = torch.tensor([0, 2, 2, 3])
>>> segment_ids(offsets, 3).tolist(), pad_index(offsets, 2, 3).tolist()
([0, 0, 2], [0, 1, 4])
"""

import torch

__all__ = ["segment_ids", "pad_index"]


def segment_ids(offsets, rows):
    """The segment of each of the ``rows`` rows (int64, on the offsets' device)."""
    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=offsets.device), lengths, output_size=rows)


def pad_index(offsets, maxlen, rows):
    """The flat position ``sequence * maxlen + position`` of each of the ``rows`` rows."""
    lengths = offsets[1:] - offsets[:-1]
    shift = torch.arange(lengths.numel(), device=offsets.device) * maxlen - offsets[:-1]
    return torch.arange(rows, device=offsets.device) + torch.repeat_interleave(shift, lengths, output_size=rows)

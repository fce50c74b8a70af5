"""Forward-mode derivatives (``jvp``) of the torch backend's autograd Functions (``_cpu``, ``_cuda``), as
torch ops on the tangent: ``torch.autograd.forward_ad``, ``torch.func.jvp`` and ``jacfwd`` through the
sequence ops. Each is the forward op's linearisation at the saved forward values; none runs a kernel
(a tangent may be a torch.func wrapper, with no memory of its own for one).

>>> offsets = torch.tensor([0, 2, 3])
>>> segment_sum(torch.ones(3, 2), offsets).tolist()
[[2.0, 2.0], [1.0, 1.0]]
"""

import torch  # noqa: F401 - the example above uses it

from ._rows import pad_index, segment_ids

__all__ = [
    "segment_sum", "segment_mean", "segment_extreme", "segment_softmax", "pad", "unpad",
    "save", "SoftmaxRule", "PadRule", "UnpadRule",
]


def segment_sum(t, offsets, ids=None):
    """The tangent of each segment's sum: the sum of the tangents."""
    ids = segment_ids(offsets, t.shape[0]) if ids is None or not ids.numel() else ids
    return t.new_zeros((offsets.numel() - 1,) + tuple(t.shape[1:])).index_add(0, ids, t)


def segment_mean(t, offsets, ids=None):
    """The tangent of each segment's mean (0 for an empty segment)."""
    lengths = (offsets[1:] - offsets[:-1]).clamp(min=1).to(t.dtype).reshape((-1,) + (1,) * (t.dim() - 1))
    return segment_sum(t, offsets, ids) / lengths


def segment_extreme(t, data, out, offsets, ids=None):
    """The tangent of each segment's max or min: the tangents of the rows that reach it, shared evenly
    (the gradient's rule, as ``scatter_reduce``'s); 0 for an empty segment."""
    ids = segment_ids(offsets, t.shape[0]) if ids is None or not ids.numel() else ids
    hit = (data == out.index_select(0, ids)).to(t.dtype)
    ties = segment_sum(hit, offsets, ids).clamp(min=1)
    return segment_sum(t * hit, offsets, ids) / ties


def segment_softmax(t, y, offsets, ids=None):
    """The tangent of each segment's softmax: ``y * (t - segment_sum(t * y))``."""
    ids = segment_ids(offsets, t.shape[0]) if ids is None or not ids.numel() else ids
    return y * (t - segment_sum(t * y, offsets, ids).index_select(0, ids))


def pad(t, offsets, maxlen):
    """The tangent of the padding: the tangent padded with zeros (the pad value is a constant)."""
    n, row = offsets.numel() - 1, tuple(t.shape[1:])
    flat = t.new_zeros((n * int(maxlen),) + row).index_copy(0, pad_index(offsets, int(maxlen), t.shape[0]), t)
    return flat.reshape((n, int(maxlen)) + row)


def unpad(t, offsets, rows):
    """The tangent of the unpadding: the tangent's rows inside the sequences."""
    n, maxlen = int(t.shape[0]), int(t.shape[1])
    return t.reshape((n * maxlen,) + tuple(t.shape[2:])).index_select(0, pad_index(offsets, maxlen, int(rows)))


# -- what the Functions share: their saved tensors and the jvp of softmax, pad and unpad -------------
def save(ctx, *tensors):
    """Keep ``tensors`` for the backward pass and for ``jvp`` alike (both read ``ctx.saved_tensors``)."""
    ctx.save_for_backward(*tensors)
    ctx.save_for_forward(*tensors)


class SoftmaxRule:
    """``jvp`` of a segment softmax Function that saves ``(output, offsets, ...)`` (``_cpu``, ``_cuda``).
    A base class before ``torch.autograd.Function``, as the two below."""

    @staticmethod
    def jvp(ctx, tangent, *_):
        out, offsets = ctx.saved_tensors[:2]
        return segment_softmax(tangent, out, offsets)


class PadRule:
    """``setup_context`` and ``jvp`` of a pad Function of inputs ``(data, offsets, maxlen, ...)``: the
    offsets saved, ``ctx.rows`` and ``ctx.maxlen`` kept (the backward's unpadding reads them)."""

    @staticmethod
    def setup_context(ctx, inputs, output):
        data, offsets, maxlen = inputs[:3]
        save(ctx, offsets)
        ctx.rows, ctx.maxlen = data.shape[0], maxlen

    @staticmethod
    def jvp(ctx, tangent, *_):
        return pad(tangent, ctx.saved_tensors[0], ctx.maxlen)


class UnpadRule:
    """``jvp`` of an unpad Function that saves ``(offsets,)`` and keeps its output's rows in ``ctx.rows``."""

    @staticmethod
    def jvp(ctx, tangent, *_):
        return unpad(tangent, ctx.saved_tensors[0], ctx.rows)

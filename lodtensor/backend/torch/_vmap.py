"""``torch.func.vmap`` over the torch backend's autograd Functions (``_cpu``, ``_cuda``).

A segment op works column by column over the rows of one LoD: a batch of samples that share the
LoD (vmap's batch dimension on the data, not on the offsets) is the same op over the same rows with
more columns. So each Function's vmap rule puts the batch dimension beside the row's own
dimensions, flattens them into one (the kernels take ``[rows, width]``), applies the Function once,
and gives the result back with the batch dimension where it landed. Per-sample gradients
(``vmap(grad(f))``) go through the same rules: the backward passes are torch ops, which vmap
batches itself.

A batched LoD (``in_dims`` on the offsets), or any other batched argument, is refused: each sample
would be a different ragged layout, which is a batch of LoDTensors, not one.
"""

import torch

__all__ = ["wrapped", "rows_rule"]


def wrapped(x):
    """Whether ``x`` is a torch.func wrapper (``grad``'s, ``vmap``'s): it has no memory of its own
    for a kernel to read (a backward under ``torch.func.grad`` gets them)."""
    return isinstance(x, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(x)


def _batched(dims):
    """Whether an argument's in_dims (None, an int, or a tuple of them for a tuple argument) batch it."""
    if isinstance(dims, (tuple, list)):
        return any(_batched(d) for d in dims)
    return dims is not None


def rows_rule(cls=None, *, lead=1):
    """Give autograd Function ``cls`` a vmap rule. Its first argument is the data: ``lead`` leading
    dimensions that the op lays out (1: ``[rows, *row]``; 2: padded ``[n, maxlen, *row]``), then the
    row's own; its result has as many leading dimensions as its own layout gives, then the row's.
    A class decorator: ``@rows_rule`` or ``@rows_rule(lead=2)``."""
    if cls is None:
        return lambda c: rows_rule(c, lead=lead)

    def vmap(info, in_dims, data, *rest):
        others = [i for i, d in enumerate(in_dims[1:], start=1) if _batched(d)]
        if others or in_dims[0] is None:
            raise ValueError(
                f"torch.func.vmap over {cls.__name__}: only the data may be batched, "
                f"(argument(s) {others or [0]} batched); expected the LoD's offsets and every other argument "
                "the same for each sample (a LoD per sample is a list of LoDTensors)")
        moved = data.movedim(in_dims[0], lead)  # [*lead, batch, *row]
        row = tuple(moved.shape[lead + 1:])
        width = info.batch_size * int(torch.Size(row).numel())
        out = cls.apply(moved.reshape(tuple(moved.shape[:lead]) + (width,)), *rest)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"torch.func.vmap over {cls.__name__}: its result is not one tensor")
        at = out.dim() - 1  # the flattened [batch * row] is the result's last dimension
        return out.reshape(tuple(out.shape[:at]) + (info.batch_size,) + row), at

    cls.vmap = staticmethod(vmap)
    return cls

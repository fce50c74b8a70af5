"""``torch.func.vmap`` over the torch backend's autograd Functions (``_cpu``, ``_cuda``).

A segment op works column by column over the rows of one LoD: a batch of samples that share the
LoD (vmap's batch dimension on the data, not on the offsets) is the same op over the same rows with
more columns. So each Function's vmap rule puts the batch dimension beside the row's own
dimensions, flattens them into one (the kernels take ``[rows, width]``), applies the Function once,
and gives the result back with the batch dimension where it landed. Per-sample gradients
(``vmap(grad(f))``) go through the same rules: the backward passes are torch ops, which vmap
batches itself.

The recurrences (``_recurrent``: LSTM, GRU) are not column-wise: a sample's rows mix through the
weights. Their rule (:func:`steps_rule`) puts the batch beside the sequences instead: ``B`` samples of
``n`` sequences are ``n * B`` sequences of the same lengths, each sequence's ``B`` copies side by side
in every time step, so the step order stays a prefix per step and the Function runs once.

A batched LoD (``in_dims`` on the offsets), or any other batched argument, is refused: each sample
would be a different ragged layout, which is a batch of LoDTensors, not one.
"""

import inspect

import torch

try:  # torch internals fast_apply copies (torch 2.13's Function.apply); another torch keeps its own apply
    from torch._functorch.utils import unwrap_dead_wrappers
except ImportError:
    unwrap_dead_wrappers = None

__all__ = ["wrapped", "legacy_batched", "rows_rule", "steps_rule", "fast_apply"]


def wrapped(x):
    """Whether ``x`` is a torch.func wrapper (``grad``'s, ``vmap``'s) or a legacy vmap batch (the gradients
    ``autograd.grad(..., is_grads_batched=True)`` hands a backward, as ``autograd.functional.jacobian``'s and
    ``hessian``'s ``vectorize=True`` do): it has no memory of its own for a kernel to read."""
    if not isinstance(x, torch.Tensor):
        return False
    return torch._C._functorch.is_functorch_wrapped_tensor(x) or legacy_batched(x)


def legacy_batched(x):
    """Whether ``x`` is a legacy vmap batch (``autograd.grad(..., is_grads_batched=True)``'s gradients): unlike
    torch.func's, that vmap ignores the Functions' vmap rules, so such data must take plain torch ops."""
    return torch._C._functorch.is_legacy_batchedtensor(x)


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
    return fast_apply(cls)


def _refuse(cls, in_dims, allowed):
    others = [i for i, d in enumerate(in_dims) if _batched(d) and i not in allowed]
    if others:
        raise ValueError(
            f"torch.func.vmap over {cls.__name__}: only the data and the initial states may be batched "
            f"(argument(s) {others} batched); expected the LoD's offsets and the weights the same for each "
            "sample (a LoD per sample is a list of LoDTensors; weights per sample, a loop)")


def steps_rule(cls=None, *, states, row_outputs):
    """Give recurrence Function ``cls`` (``apply(x, *weights, *states, rows, inverse, counts, *flags)``,
    ``rows``/``inverse``/``counts`` at 5/6/7) a vmap rule that folds the batch into the sequences (see the
    module's docstring). ``states``: the positions of the initial states ``[n, D]`` (batched or not);
    ``row_outputs``: how many outputs come first in the rows' order (the rest are step-major buffers)."""
    if cls is None:
        return lambda c: steps_rule(c, states=states, row_outputs=row_outputs)

    def vmap(info, in_dims, *args):
        _refuse(cls, in_dims, (0, *states))
        b = info.batch_size
        x = args[0].movedim(in_dims[0], 0) if in_dims[0] is not None else args[0].expand(b, *args[0].shape)
        n_rows = int(x.shape[1])
        args = list(args)
        args[0] = x.reshape((b * n_rows,) + tuple(x.shape[2:]))  # sample after sample
        for i in states:  # sequence after sequence, its samples side by side
            s, d = args[i], in_dims[i]
            if s is not None:
                s = s.movedim(d, 1) if d is not None else s.unsqueeze(1).expand(s.shape[0], b, *s.shape[1:])
                args[i] = s.reshape((-1,) + tuple(s.shape[2:]))
        rows, inverse = args[5], args[6]
        batch = torch.arange(b, dtype=rows.dtype, device=rows.device)
        args[5] = (rows[:, None] + batch * n_rows).reshape(-1)  # step position p*B + j reads sample j's row
        args[6] = (inverse[None, :] * b + batch[:, None]).reshape(-1)
        args[7] = [int(n) * b for n in args[7]]
        out = cls.apply(*args)
        shaped = [o.reshape((b, n_rows) + tuple(o.shape[1:])) for o in out[:row_outputs]]
        shaped += [o.reshape((-1, b) + tuple(o.shape[1:])) for o in out[row_outputs:]]
        return tuple(shaped), (0,) * row_outputs + (1,) * (len(out) - row_outputs)

    cls.vmap = staticmethod(vmap)
    return fast_apply(cls)


_BASE_APPLY = torch._C._FunctionBase.__dict__.get("apply")  # the C entry that ``Function.apply`` ends in
# torch's Python ``Function.apply`` (a classmethod in torch 2.13); None where apply is torch's C code already
_FUNCTION_APPLY = getattr(torch.autograd.Function.__dict__.get("apply"), "__func__", None)


def fast_apply(cls):
    """Give autograd Function ``cls`` (one that defines ``setup_context``) an ``apply`` without torch's
    per-call ``inspect.signature(cls.forward).bind(...)``: 8-20 us a call, most of a small op's fixed cost.

    Where every argument of ``forward`` is passed by position, that binding is the arguments as they
    are, so the call goes straight to the C entry (after the dead wrappers are unwrapped, as torch
    does). Keyword arguments, fewer arguments (defaults to fill in), a subclass, or a torch.func
    transform in force (``vmap``, ``grad``...) take torch's own ``Function.apply``. torch.compile
    never calls this: dynamo traces the class's ``apply`` as its own. A torch whose ``apply`` is not
    the Python classmethod this copies (torch 2.14 moved it to C) keeps its own ``apply``; there, and
    for the calls that take torch's ``apply``, ``forward``'s signature is kept on it (``__signature__``)
    so the binding does not rebuild it every call (22 -> 15 us a call on torch 2.13-2.15)."""
    signature = inspect.signature(cls.forward)
    params = signature.parameters.values()
    if getattr(cls.forward, "__signature__", None) is None:
        # kept on the function: the binding that remains (keywords, and every call on a torch whose apply
        # is C code, 2.14 on) reads it instead of rebuilding it from the code object, 8 us a call
        cls.forward.__signature__ = signature
    if None in (_BASE_APPLY, _FUNCTION_APPLY, unwrap_dead_wrappers):
        return cls
    if cls.setup_context is torch.autograd.Function.setup_context or any(
            p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        return cls
    arity = len(params)
    base = _BASE_APPLY.__get__(None, cls)
    active = torch._C._are_functorch_transforms_active

    def apply(klass, *args, **kwargs):
        if kwargs or len(args) != arity or klass is not cls or active():
            return _FUNCTION_APPLY(klass, *args, **kwargs)
        return base(*unwrap_dead_wrappers(args))

    cls.apply = classmethod(apply)
    return cls

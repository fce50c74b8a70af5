"""``load_state_dict`` that checks the whole state before it writes one parameter.

torch's ``Module.load_state_dict`` copies every entry that fits and raises at the end for the ones
that do not (a wrong shape, a value that is not a tensor, a missing or unexpected key under
``strict``): the module is left half loaded. The layers of :mod:`lodtensor.nn` check first, so a
call that raises leaves every parameter as it was.
"""

import torch

from ..errors import ShapeError

__all__ = ["CheckedLoad"]


def _names(keys):
    keys = list(keys)
    return ", ".join(repr(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")


class CheckedLoad:
    """Mixin for a ``torch.nn.Module``: :meth:`load_state_dict` refuses a bad state before loading any of it."""

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """torch's ``load_state_dict``, but every entry is checked before the first is copied.

        A wrong shape, a value that is not a tensor, or (with ``strict``) a missing or unexpected key
        raises ``ShapeError`` (a ``ValueError`` and, as torch's error is, a ``RuntimeError``) naming the
        key, and leaves every parameter as it was; ``state_dict`` not a mapping raises ``TypeError``.

        >>> import torch
        >>> from lodtensor.nn import FC
        >>> fc = FC(3, 2)
        >>> before = fc.weight.detach().clone()
        >>> fc.load_state_dict({"weight": torch.ones(3, 2), "bias": torch.ones(5)})
        Traceback (most recent call last):
        ...
        lodtensor.errors.ShapeError: FC.load_state_dict(): state_dict['bias'] has shape [5], but the module's ...
        >>> bool((fc.weight == before).all())  # the weight, which fitted, was not written either
        True
        >>> fc.load_state_dict({"weight": torch.ones(3, 2), "bias": torch.ones(2)})
        <All keys matched successfully>
        """
        where = f"{type(self).__name__}.load_state_dict()"
        if not hasattr(state_dict, "items") or not hasattr(state_dict, "keys"):
            raise TypeError(f"{where}: state_dict must be a mapping of names to tensors, got "
                            f"{type(state_dict).__name__}")
        own = self.state_dict(keep_vars=True)
        for key, value in state_dict.items():
            if key not in own:
                continue
            if not torch.overrides.is_tensor_like(value):  # torch's words (its error is a RuntimeError too)
                raise ShapeError(f"{where}: state_dict[{key!r}] expected torch.Tensor or Tensor-like object from "
                                 f"checkpoint but received {type(value).__name__}; convert it with torch.as_tensor "
                                 f"first; nothing was loaded")
            if tuple(value.shape) != tuple(own[key].shape):
                raise ShapeError(f"{where}: state_dict[{key!r}] has shape {list(value.shape)}, but the module's "
                                 f"{key} has shape {list(own[key].shape)}; nothing was loaded")
        if strict:
            unexpected = [k for k in state_dict.keys() if k not in own]
            missing = [k for k in own if k not in state_dict]
            if unexpected:
                raise ShapeError(f"{where}: state_dict has key(s) the module lacks: {_names(unexpected)} "
                                 f"(strict=True); nothing was loaded")
            if missing:
                raise ShapeError(f"{where}: state_dict lacks key(s) of the module: {_names(missing)} "
                                 f"(strict=True); nothing was loaded")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

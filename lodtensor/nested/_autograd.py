"""The autograd surface of a NestedTensor (torch data): requires_grad, grad, backward.

A mixin of :class:`~lodtensor.nested._tensor.NestedTensor`, which provides the buffer
(``_buf``; ``_array()``, the array holding it; ``_tracked()``, that array read for its state), the structure
and the two layout helpers it calls (``_grad_view``, ``_buffer_like``). NumPy and CuPy data record no
history: ``requires_grad`` is False.
"""

from ..backend import backend_of
from ..errors import ShapeError
from ._dispatch import compiling
from ._dtypes import check_requires_grad

__all__ = ["autograd_arrays", "AutogradMixin", "view_source"]


def view_source(array):
    """``array`` (a tensor's buffer, or a view's window) as a view of that tensor takes it: ``array`` itself,
    or, where ``array`` is a leaf that requires grad and autograd records nothing now (``torch.no_grad()``),
    ``array`` detached (the same memory). torch's jagged layout keeps a leaf's ``requires_grad`` on the
    nested tensor, not on its ``values``, so its view taken under no_grad does not require grad (nor
    refuses an in-place write once grad mode is back), where a dense view would."""
    be = backend_of(array)
    if not be.requires_grad(array) or not getattr(array, "is_leaf", False) or compiling():
        return array
    base = getattr(array, "_base", None)  # a view taken under no_grad of a tracked array: the dense rule, as torch's
    if base is not None and be.requires_grad(base):
        return array
    if getattr(array[:0], "grad_fn", None) is not None:  # autograd records: a view of it gets a history
        return array
    return be.detach(array)


class AutogradMixin:
    """``requires_grad``, ``is_leaf``, ``grad``, ``grad_fn``, ``requires_grad_``, ``retain_grad`` and
    ``backward``."""

    __slots__ = ()

    @property
    def requires_grad(self):
        return bool(getattr(self._tracked(), "requires_grad", False))

    @property
    def is_leaf(self):
        return bool(getattr(self._tracked(), "is_leaf", True))

    @property
    def grad(self):
        """Gradient of a torch leaf as a NestedTensor of the same structure (None before backward); settable to
        None (``zero_grad(set_to_none=True)``) or to a nested tensor of the same structure, as torch's."""
        grad = getattr(self._tracked(), "grad", None)
        return None if grad is None else self._grad_view(grad)

    @grad.setter
    def grad(self, value):
        if value is not None and not (hasattr(value, "_struct") and self._struct.same_as(value._struct)):
            raise ShapeError("grad: assigned grad must be None or a nested tensor with the same nested structure")
        self._tracked().grad = None if value is None else self._grad_array(value)

    def _grad_array(self, value):
        """``value``, a nested tensor like this one, as the array its ``grad`` holds (:meth:`_grad_view`'s
        inverse)."""
        return self._buffer_like(value) if getattr(self, "_leaf", None) is None else self._leaf_array(value)

    def register_hook(self, hook):
        """Call ``hook(grad)`` with this tensor's gradient (a nested tensor of its structure) during backward;
        a nested tensor it returns replaces the gradient, as torch's. Returns the handle (``handle.remove()``).

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> x = ln.nested_tensor([torch.ones(2), torch.ones(1)], requires_grad=True)
        >>> handle = x.register_hook(lambda g: g * 10)
        >>> (x * 3).backward(ln.ones_like(x))
        >>> x.grad.to_padded_tensor(0).tolist()
        [[30.0, 30.0], [30.0, 0.0]]
        """
        array = self._tracked()
        if not backend_of(array).requires_grad(array):
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")

        def on_buffer(grad):
            out = hook(self._grad_view(grad))
            return None if out is None else self._grad_array(out)

        return array.register_hook(on_buffer)

    @property
    def grad_fn(self):
        return getattr(self._tracked(), "grad_fn", None)

    def requires_grad_(self, requires_grad=True):
        """Make this (torch, floating) leaf record operations; in place, returns self.

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)]).requires_grad_()
        >>> nt.requires_grad, nt.is_leaf
        (True, True)
        """
        array = self._array()  # (the buffer; a view's window of its input)
        check_requires_grad(array, requires_grad, "requires_grad_()")
        if self._hole_leaf(requires_grad):  # (a tensor with holes: a leaf over its values, as torch's)
            return self
        be = self.backend
        if requires_grad and not be.requires_grad(array):
            # an array of its own over the same memory takes the flag, as torch's nested tensor takes it: the
            # views taken before (their components, values()) keep reading ``array``, so they stay without it
            own = be.detach(array).requires_grad_(True)
            own.grad = array.grad  # (one kept from before requires_grad_(False))
            self._rebind(own)
        elif requires_grad or be.requires_grad(array):
            array.requires_grad_(requires_grad)
        return self

    @property
    def retains_grad(self):
        return bool(getattr(self._tracked(), "retains_grad", False))

    def retain_grad(self):
        """Keep this (torch, non-leaf) tensor's ``grad`` after backward, as torch's; a no-op on a leaf.

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> x = ln.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)], requires_grad=True)
        >>> y = x.transpose(1, 2)
        >>> y.retain_grad()
        >>> (y * 3).sum().backward()
        >>> y.retains_grad, y.grad.to_padded_tensor(0).shape
        (True, torch.Size([2, 3, 2]))
        """
        array = self._tracked()  # (the buffer; a view's window of its input, or its own alias: _views.aliased)
        if not self.backend.requires_grad(array):
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False (NumPy and CuPy data "
                               "never record autograd history; torch data needs requires_grad=True)")
        array.retain_grad()

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backpropagate from this torch nested tensor; ``gradient`` a NestedTensor of the same structure;
        ``inputs`` (tensors, nested or not) the only ones whose ``grad`` accumulates, as torch's.

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> x = ln.nested_tensor([torch.ones(2), torch.ones(1)], requires_grad=True)
        >>> y = x * 3
        >>> y.backward(ln.ones_like(y))
        >>> x.grad.to_padded_tensor(0).tolist()
        [[3.0, 3.0], [3.0, 0.0]]
        """
        buf = self._buf
        if not self.backend.requires_grad(buf):
            raise TypeError(
                "backward(): this nested tensor records no autograd history (NumPy and CuPy data never do; "
                "torch data needs requires_grad=True on an input)"
            )
        if gradient is None:
            if self.numel() != 1:
                raise ShapeError("backward(): grad can be implicitly created only for scalar outputs")
            grad = None
        else:
            if not isinstance(gradient, type(self)) or not self._struct.same_as(gradient._struct):
                raise ShapeError("backward(): gradient must be a nested tensor with the same nested structure")
            grad = self._buffer_like(gradient)
        buf.backward(grad, retain_graph=retain_graph, create_graph=create_graph, inputs=autograd_arrays(inputs))


def autograd_arrays(tensors):
    """``tensors`` (one, a sequence, or None) with each nested tensor as the array autograd tracks for it."""
    if tensors is None:
        return None
    listed = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    return [t._tracked() if isinstance(t, AutogradMixin) else t for t in listed]

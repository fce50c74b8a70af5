"""The memory-level methods torch's jagged layout has: ``storage_offset``, ``is_pinned``, ``share_memory_`` /
``is_shared``, ``detach_``, ``apply_``, ``new_empty`` / ``new_zeros`` / ``new_ones``, and ``native_dropout``.

They act on the array that holds a nested tensor's data (``_array()``: its
buffer, or a view's window of its input's rows). Where only torch has the
notion (page-locked or shared memory), torch data answers as torch does and
NumPy / CuPy data answers what is true of them (``is_pinned()`` and
``is_shared()`` are False, ``share_memory_()`` refuses: NumPy has no storage to
move). Installed on the class when ``lodtensor.nested`` is imported
(``NestedTensor._attach``), as the accessors are.
"""

import builtins
import numbers
import operator

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from . import _holes as holes
from ._autograd import autograd_arrays
from ._broadcast import check_nested
from ._construct import _place
from ._dtypes import check_requires_grad, kind_of, resolve_dtype, torch_name
from ._registry import implements
from ._tensor import NestedTensor, make

__all__ = ["StorageMethods", "native_dropout", "autograd_grad", "autograd_backward"]


def _pointer(a):
    """The address of ``a``'s first element from its array interface (host or CUDA), None without one."""
    iface = getattr(a, "__array_interface__", None) or getattr(a, "__cuda_array_interface__", None)
    return None if not isinstance(iface, dict) else int(iface["data"][0])


def element_offset(a):
    """Elements from the start of the memory ``a`` views to its first element: torch's own
    ``storage_offset()``; for arrays without one (NumPy, CuPy), from the array that owns the memory (found
    through ``.base``)."""
    method = getattr(a, "storage_offset", None)
    if callable(method):
        return int(method())
    root = a
    while _pointer(getattr(root, "base", None)) is not None:
        root = root.base
    start, first = _pointer(root), _pointer(a)
    return 0 if start is None or first is None else (first - start) // a.dtype.itemsize


def _flag(nt, name):
    """The data's own answer to ``name()`` (torch's ``is_pinned``/``is_shared``), False where its array has none."""
    method = getattr(nt._array(), name, None)
    return bool(method()) if callable(method) else False


class StorageMethods:
    """The methods; see each one."""

    def storage_offset(self):
        """The offset, in elements, of this tensor's first element in the memory it views (torch's jagged
        ``storage_offset()``, which is ``values().storage_offset()``): 0 for a tensor that owns its buffer,
        where its window starts for a view (``narrow``, ``chunk``, ``nt[..., 1:3]``, components ``nt[1:]``).
        NumPy data counts from the start of the array that owns the memory (followed through ``.base``).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.zeros((2, 12)), np.zeros((3, 12))])
        >>> nt.storage_offset(), nt.narrow(2, 1, 3).storage_offset(), [c.storage_offset() for c in nt.chunk(3, -1)]
        (0, 1, [0, 4, 8])
        """
        return element_offset(self.values())

    def is_pinned(self):
        """Whether the data is in page-locked (pinned) host memory: torch data answers as torch's
        ``is_pinned()``; NumPy and CuPy arrays carry no such flag, so False (as torch says of memory it did
        not pin).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros(2), np.ones(3)]).is_pinned()
        False
        """
        return _flag(self, "is_pinned")

    def is_shared(self):
        """Whether the data is in shared memory (torch's ``is_shared()``; False for NumPy and CuPy data).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros(2), np.ones(3)]).is_shared()
        False
        """
        return _flag(self, "is_shared")

    def share_memory_(self):
        """Move the data into shared memory, in place, for other processes (torch's ``share_memory_()``:
        a no-op where it is already shared or on CUDA); returns self. Views of this tensor's memory (the
        input of a view, its other views) move with it, as torch's storage does.

        Raises
        ------
        TypeError
            For NumPy and CuPy data: an array cannot move its memory in place (build the nested tensor
            from torch tensors, or over a buffer of ``multiprocessing.shared_memory``).

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([torch.zeros(2), torch.ones(3)])
        >>> nt.share_memory_() is nt, nt.is_shared()
        (True, True)
        """
        array = self._array()
        method = getattr(array, "share_memory_", None)
        if not callable(method):
            raise TypeError(
                f"share_memory_(): {self.backend.name} data cannot move into shared memory in place (only "
                f"torch's storage can); build the nested tensor from torch tensors, or over a buffer of "
                f"multiprocessing.shared_memory"
            )
        method()
        return self

    def detach_(self):
        """Detach this tensor from the graph that made it, in place (torch data: no history, a leaf, no
        ``requires_grad``; NumPy and CuPy data have none, so nothing changes); returns self. A view
        (transposed, or of part of a regular dim) refuses, as torch refuses to detach views in place;
        ``detach()`` makes a detached view. Other nested tensors over the same buffer keep their history.

        Raises
        ------
        RuntimeError
            For a view: "Can't detach views in-place. Use detach() instead."

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([torch.ones(2), torch.ones(3)], requires_grad=True) * 2
        >>> nt.requires_grad, nt.detach_() is nt, nt.requires_grad, nt.is_leaf
        (True, True, False, True)
        """
        if self._perm is not None or self._src is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead. (a transposed view, or a view "
                               "of part of a regular dim, of another nested tensor)")
        be = self.backend
        self._buf, self._leaf = be.detach(self._buf), None  # (a tensor with holes made a leaf: plain again)
        holes = getattr(self, "_holes", None)
        if holes is not None:  # values() answers from the holes' values: detached with the buffer
            self._holes = (be.detach(holes[0]), *holes[1:])
        return self

    def apply_(self, callable):  # noqa: A002 - torch's parameter name
        """Replace every element ``x`` by ``callable(x)`` (a Python number), cast to the dtype, in place;
        returns self. As torch's ``apply_``: one Python call per element (slow; for host data only), and it
        refuses data that requires grad. Nothing is written if a call raises.

        Raises
        ------
        TypeError
            ``callable`` is not callable, or returns something that is no number.
        RuntimeError
            The data is on a GPU, or requires grad.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.array([1, 2]), np.array([3])])
        >>> nt.apply_(lambda x: x * 10) is nt, nt.to_tensor_list()
        (True, [array([10, 20]), array([30])])
        """
        fn = callable
        if not builtins.callable(fn):  # (the builtin: torch names the parameter ``callable``)
            raise TypeError(f"apply_(): callable must be callable, got {type(fn).__name__}")
        be = self.backend
        holes.check_writable(self)
        array = self._array()
        if be.device_of(array) != "cpu":
            raise RuntimeError(f"apply_ is only implemented on CPU tensors (the data is on {be.device_of(array)})")
        if be.requires_grad(array):
            raise RuntimeError("Can't call apply_() on Variable that requires grad. Use var.detach().apply_() "
                               "instead.")
        host = be.to_numpy(array)  # (NumPy data itself; torch CPU data's memory seen by NumPy)
        results = np.asarray([fn(x) for x in host.ravel().tolist()])  # one Python call per element, as torch
        if results.size and results.dtype.kind not in "biufc":
            raise TypeError(f"apply_(): callable must return numbers, got {type(results.ravel()[0].item()).__name__}")
        array[...] = be.from_host(results.astype(host.dtype).reshape(host.shape), like=array)
        self._written()
        return self

    def new_empty(self, *size, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
        """A dense 0-d array of this tensor's library, dtype and device (or those given), uninitialised, as
        torch's jagged ``new_empty``; any other ``size`` raises, as torch's ("not supported for NJT with
        shape != ()").

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros(2), np.ones(3)]).new_empty(()).shape
        ()
        """
        return _new(self, "new_empty", size, dtype, device, requires_grad, lambda be, d, like: be.empty((), d, like))

    def new_zeros(self, *size, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
        """A dense 0-d array holding 0, of this tensor's library, dtype and device (or those given), as torch's
        jagged ``new_zeros``; any other ``size`` raises, as torch's.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros(2), np.ones(3)]).new_zeros(())
        array(0.)
        """
        return _new(self, "new_zeros", size, dtype, device, requires_grad, lambda be, d, like: be.zeros((), d, like))

    def new_ones(self, *size, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
        """A dense 0-d array holding 1, of this tensor's library, dtype and device (or those given), as torch's
        jagged ``new_ones``; any other ``size`` raises, as torch's.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros(2), np.ones(3)]).new_ones((), dtype="int32")
        array(1, dtype=int32)
        """
        return _new(self, "new_ones", size, dtype, device, requires_grad, lambda be, d, like: be.full((), 1, d, like))


def _new(nt, name, size, dtype, device, requires_grad, fill):
    where = f"{name}()"
    if not size:
        raise TypeError(f"{where} missing 1 required positional argument: 'size' (a nested tensor's: ())")
    if len(size) == 1 and not isinstance(size[0], numbers.Integral):
        size = size[0]
    try:
        shape = tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"{where}: size must be a tuple of ints, got {size!r}") from None
    if shape:
        raise ShapeError(f"{name}() not supported for NJT with shape != (): a nested tensor's {name} makes a 0-d "
                         f"dense array only (torch's jagged layout), got size {list(shape)}")
    be = nt.backend
    out = _place(fill(be, resolve_dtype(dtype, be.name) or nt.dtype, nt._array()), device)
    check_requires_grad(out, requires_grad, where)
    if requires_grad:
        out.requires_grad_(True)
    return out


@implements("native_dropout", "torch.native_dropout")
def native_dropout(input, p, train):
    """``(output, mask)``: torch's ``native_dropout``. Training (``train`` True or None), each element is kept
    with probability ``1 - p`` (``mask`` True, bool) and scaled by ``1 / (1 - p)``, the others are 0
    (``p=1``: every one); ``train=False`` gives a copy of ``input`` and a mask of True. NumPy data draws from
    NumPy's global random state, torch data from torch's; the gradient is ``mask / (1 - p)``.

    >>> import lodtensor.nested as ln
    >>> out, mask = ln.native_dropout(ln.nested_tensor([[1.0, 2.0], [3.0]]), 0.5, False)
    >>> out.to_tensor_list()[0].tolist(), mask.to_tensor_list()[1].tolist()
    ([1.0, 2.0], [True])
    """
    check_nested(input, "native_dropout()")
    if not isinstance(p, numbers.Real):
        raise TypeError(f"native_dropout(): argument 'p' (position 2) must be float, not {type(p).__name__}")
    if not 0 <= p <= 1:
        raise ArgumentError(f"native_dropout(): dropout probability has to be between 0 and 1, but got p={p} "
                            f"(torch: bernoulli_ expects p to be in [0, 1])", argument="p", value=p)
    buf = input._buffer
    be = input.backend
    if train is not None and not train:  # evaluation: a copy, every element kept (any dtype, as torch's)
        out, mask = be.clone(buf), be.full(tuple(buf.shape), True, be.as_dtype("bool"), buf)
    else:
        if kind_of(buf.dtype) not in "fc":
            raise DTypeError(f"native_dropout(): result type Float can't be cast to the desired output type "
                             f"{torch_name(buf.dtype)}; dropout needs floating point data, got {buf.dtype}")
        mask = be.keep_mask(tuple(buf.shape), p, buf)
        out = buf * be.astype(mask, buf.dtype) * (0.0 if p == 1 else 1.0 / (1.0 - p))
    return make(out, input._struct, input._layout), make(mask, input._struct, input._layout)


NestedTensor._attach(**{name: StorageMethods.__dict__[name] for name in (
    "storage_offset", "is_pinned", "is_shared", "share_memory_", "detach_", "apply_", "new_empty", "new_zeros",
    "new_ones")})


@implements("autograd_grad", "torch.autograd.grad")
def autograd_grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
                  allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``torch.autograd.grad`` where outputs, inputs or grad_outputs are nested tensors (torch data): the
    gradient of each nested input is a nested tensor of its structure, as torch's jagged layout gives.

    >>> import torch
    >>> import lodtensor.nested as ln
    >>> x = ln.nested_tensor([torch.ones(2), torch.ones(1)], requires_grad=True)
    >>> (g,) = torch.autograd.grad((x * x).values().sum(), x)
    >>> g.to_padded_tensor(0).tolist()
    [[2.0, 2.0], [2.0, 0.0]]
    """
    import torch  # noqa: PLC0415 - torch calls this (torch.autograd.grad of a nested tensor), so it is loaded

    del only_inputs  # (deprecated and ignored, as torch's)
    outs, ins = _listed(outputs), _listed(inputs)
    grads = torch.autograd.grad(
        [o._buf if isinstance(o, NestedTensor) else o for o in outs], autograd_arrays(ins),
        _grad_arrays(outs, grad_outputs), retain_graph=retain_graph, create_graph=create_graph,
        allow_unused=allow_unused, is_grads_batched=is_grads_batched, materialize_grads=materialize_grads)
    return tuple(x._grad_view(g) if isinstance(x, NestedTensor) and g is not None else g for x, g in zip(ins, grads))


@implements("autograd_backward", "torch.autograd.backward")
def autograd_backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
                      inputs=None):
    """``torch.autograd.backward`` where tensors, grad_tensors or inputs are nested tensors (torch data).

    >>> import torch
    >>> import lodtensor.nested as ln
    >>> x = ln.nested_tensor([torch.ones(2), torch.ones(1)], requires_grad=True)
    >>> y = x * 3
    >>> torch.autograd.backward(y, ln.ones_like(y), inputs=[x])
    >>> x.grad.to_padded_tensor(0).tolist()
    [[3.0, 3.0], [3.0, 0.0]]
    """
    import torch  # noqa: PLC0415 - torch calls this (torch.autograd.backward of a nested tensor)

    outs = _listed(tensors)
    torch.autograd.backward([o._buf if isinstance(o, NestedTensor) else o for o in outs],
                            _grad_arrays(outs, grad_tensors if grad_tensors is not None else grad_variables),
                            retain_graph=retain_graph, create_graph=create_graph, inputs=autograd_arrays(inputs))


def _listed(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _grad_arrays(outs, grads):
    """The gradients given for ``outs`` (None, one, or one each) as arrays laid out as their buffers."""
    if grads is None:
        return None
    out = []
    for i, (o, g) in enumerate(zip(outs, _listed(grads))):
        if isinstance(o, NestedTensor) and isinstance(g, NestedTensor):
            if not o._struct.same_as(g._struct):
                raise ShapeError(f"torch.autograd: the gradient given for output {i} must have its nested structure: "
                                 f"sizes {o._struct.sizes.tolist()[:8]}, got {g._struct.sizes.tolist()[:8]}")
            g = o._buffer_like(g)
        out.append(g)
    return out

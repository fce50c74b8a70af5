"""NestedTensor's conversions: to another library, device, dtype or layout.

They build on the constructors and the layouts, so this module sits above
them and installs its methods on :class:`NestedTensor` (``NestedTensor._attach``)
when ``lodtensor.nested`` is imported.
"""

import functools

import numpy as np

from ..backend import backend_name_of, get_backend
from ..errors import ArgumentError
from . import _holes as holes
from ._construct import as_nested_tensor
from ._dtypes import kind_of
from ._layouts import layout_of, to_layout
from ._registry import OP_TABLE
from ._tensor import NestedTensor, make_view

__all__ = ["Conversions"]


class Conversions:
    """``to``, ``to_torch``, ``numpy``, the casts (``double``, ``float``, ``long``, ...) and ``__array__``."""

    def to_torch(self):
        """This nested tensor with torch data, sharing memory with NumPy/CuPy buffers.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.zeros(2), np.ones(3)])
        >>> tt = nt.to_torch()
        >>> type(tt.to_tensor_list()[0]).__name__, tt.dtype
        ('Tensor', torch.float64)
        """
        held = holes.converted(self, lambda rows: rows.to_torch())  # (with holes: over their values, shared)
        if held is not None:
            holes.twinned(self, held)  # (torch values over NumPy memory: counting no writes)
            return held
        buf = get_backend("torch").asarray(self._buf)
        if buf is self._buf:
            return self
        return make_view(buf, self._st, self._perm, self._layout)

    def to(self, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
        """This nested tensor on ``device`` and/or with ``dtype`` (self when nothing changes, unless
        ``copy=True``).

        As torch's ``to``: positional arguments may be a device, a dtype, both,
        or another nested tensor (whose device and dtype are taken), then
        ``non_blocking`` and ``copy`` (``non_blocking`` is a hint, as torch's).
        With an :class:`~lodtensor.nested.Layout` (``nt.to(ln.Layout.Packed)``)
        it converts to that layout instead. A tensor with holes (``offsets`` and ``lengths``) converts all of
        its ``values`` and keeps the holes, as torch's.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1, 2], [3]])
        >>> nt.to(np.float32).dtype, nt.to(np.int64) is nt, nt.to(np.int64, copy=True) is nt
        (dtype('float32'), True, False)
        """
        if args and layout_of(args[0]) is not None:  # nt.to(ln.Layout.Masked) or nt.to("masked"): a layout
            return to_layout(self, *args)
        head = [a for a in args if not isinstance(a, bool)]
        flags = args[len(head):]  # torch's positional non_blocking, copy: after the device/dtype/tensor
        if len(flags) > 2 or any(isinstance(a, bool) for a in args[: len(head)]):
            raise TypeError(f"to(): takes a device, dtype or tensor, then non_blocking and copy; got {args!r}")
        if len(flags) == 2:
            copy = flags[1]
        if memory_format is not None and "preserve" not in str(memory_format) and "contiguous" not in str(
                memory_format):  # (torch's jagged layout changes no layout for either)
            raise ArgumentError(f"to(): memory_format must be torch.preserve_format or torch.contiguous_format for "
                                f"a nested tensor, got {memory_format!r}", argument="memory_format",
                                value=memory_format)
        for arg in head:
            if isinstance(arg, NestedTensor) or (not _is_dtype(arg) and backend_name_of(arg) is not None
                                                 and hasattr(arg, "shape")):  # another (nested) tensor
                device = (arg.device if isinstance(arg, NestedTensor) else get_backend(backend_name_of(arg))
                          .device_of(arg)) if device is None else device
                dtype = arg.dtype if dtype is None else dtype
            elif _is_dtype(arg):
                dtype = arg
            else:
                device = arg
        convert = functools.partial(as_nested_tensor, dtype=dtype, device=device)
        out = holes.converted(self, convert)  # with holes: all of values converted, the holes kept (as torch's,
        kept = out is not None  # with either memory_format)
        out = convert(self) if out is None else out  # (a transposed view stays one: preserve_format)
        if memory_format is not None and "contiguous" in str(memory_format) and out is not self and not kept:
            out = out.contiguous()
        return OP_TABLE["clone"](out) if copy and out is self else out

    def double(self):
        """A float64 copy (self when already float64).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.zeros(2, "float32"), np.ones(3, "float32")])
        >>> d = nt.double()  # a copy
        >>> d.dtype, d.double() is d
        (dtype('float64'), True)
        """
        return self.to(dtype=np.float64)

    def float(self):
        """A float32 copy (self when already float32).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])  # Python floats: float32, as torch
        >>> nt.float() is nt, nt.double().float().dtype
        (True, dtype('float32'))
        """
        return self.to(dtype=np.float32)

    def half(self):
        """A float16 copy (self when already float16).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).half().dtype
        dtype('float16')
        """
        return self.to(dtype=np.float16)

    def cpu(self):
        """This nested tensor in host memory (self when it is there), as torch's ``Tensor.cpu()``.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
        >>> nt.cpu() is nt
        True
        """
        return self.to(device="cpu")

    def bfloat16(self):
        """A bfloat16 copy (torch data; NumPy has no bfloat16), as torch's ``Tensor.bfloat16()``.

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([torch.ones(2), torch.ones(1)]).bfloat16().dtype
        torch.bfloat16
        """
        return self.to(dtype=self.backend.as_dtype("bfloat16"))

    def type_as(self, other):
        """A copy with ``other``'s dtype (self when it has it already), as torch's ``Tensor.type_as``.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1, 2], [3]])
        >>> nt.type_as(np.zeros(1, np.float32)).dtype
        dtype('float32')
        """
        if getattr(other, "dtype", None) is None or not hasattr(other, "shape"):
            raise TypeError(f"type_as(): other must be a tensor or an array (its dtype is taken), got "
                            f"{type(other).__name__}")
        return self.to(dtype=other.dtype)

    def is_floating_point(self):
        """Whether the dtype is a floating one, as torch's ``Tensor.is_floating_point()``.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0], [2.0]]).is_floating_point(), ln.nested_tensor([[1], [2]]).is_floating_point()
        (True, False)
        """
        return kind_of(self.dtype) == "f"

    def element_size(self):
        """Bytes per element, as torch's ``Tensor.element_size()``.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0], [2.0]]).element_size()
        4
        """
        return int(self.dtype.itemsize)

    @property
    def is_cuda(self):
        """Whether the data is on a CUDA device, as torch's ``Tensor.is_cuda``.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0], [2.0]]).is_cuda
        False
        """
        return str(self.device).startswith("cuda")

    def type(self, dtype=None):
        """The dtype's name without ``dtype``; else a copy of that dtype, as ``to(dtype)`` (torch's
        ``Tensor.type``).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1, 2], [3]])
        >>> nt.type(), nt.type(np.float64).dtype
        ('int64', dtype('float64'))
        """
        if dtype is None:
            return str(self.dtype).replace("torch.", "")
        return self.to(dtype=dtype)

    def numpy(self):
        """This nested tensor with NumPy data (a view of host memory where possible).

        >>> import torch
        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([torch.zeros(2), torch.ones(3)]).numpy()
        >>> [a.tolist() for a in nt.to_tensor_list()]
        [[0.0, 0.0], [1.0, 1.0, 1.0]]
        """
        held = holes.converted(self, lambda rows: rows.numpy())  # (with holes: over their values, shared)
        if held is not None:
            holes.twinned(self, held)  # (its torch values, now NumPy's too: counting no writes)
            return held
        buf = self.backend.to_numpy(self._buf)
        if buf is self._buf:
            return self
        return make_view(buf, self._st, self._perm, self._layout)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "a NestedTensor has no single dense array; use to_padded_tensor(padding), to_packed() "
            "or to_tensor_list()"
        )


def _is_dtype(x):
    """Whether ``x`` names a dtype (a NumPy dtype or type, a torch dtype, a dtype name) rather than a device."""
    if isinstance(x, (np.dtype, type)) or type(x).__name__ == "dtype":
        return True
    if isinstance(x, str) and x.split(":")[0] not in ("cpu", "cuda", "gpu"):
        try:
            np.dtype(x)
        except TypeError:
            return False
        return True
    return False


def _cast(name, dtype):
    """torch's ``Tensor.<name>()``: a copy of ``dtype`` (self when already of it)."""
    label = np.dtype(dtype).name

    def method(self):
        return self.to(dtype=dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"A {label} copy (self when already {label}), as torch's ``Tensor.{name}()``.\n\n"
                      f">>> import lodtensor.nested as ln\n"
                      f">>> ln.nested_tensor([[1.5, -2.0], [3.0]]).{name}().dtype\ndtype('{label}')\n")
    return method


_CASTS = {"long": np.int64, "int": np.int32, "short": np.int16, "char": np.int8, "byte": np.uint8, "bool": np.bool_}

NestedTensor._attach(**{name: Conversions.__dict__[name] for name in (
    "to_torch", "to", "double", "float", "half", "type", "numpy", "__array__", "cpu", "bfloat16", "type_as",
    "is_floating_point", "element_size", "is_cuda")})
_CAST_METHODS = {name: _cast(name, dtype) for name, dtype in _CASTS.items()}
NestedTensor._attach(**_CAST_METHODS)
__test__ = {f"NestedTensor.{name}": method for name, method in _CAST_METHODS.items()}  # their doctests

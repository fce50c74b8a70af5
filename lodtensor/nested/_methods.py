"""torch's smaller Tensor methods that its jagged layout answers and NestedTensor lacked: other names of
``transpose``/``permute`` (``swapaxes``, ``swapdims``, ``movedim``, ``moveaxis``, ``mT``, ``adjoint``),
``diff`` along a regular dim, ``isreal``, the complex casts (``cfloat``, ``cdouble``), the
questions (``is_complex``, ``is_signed``, ``is_conj``, ``is_neg``, ``is_inference``, ``get_device``) and
sizes (``itemsize``, ``nbytes``), and ``new_tensor``. Each is written with the ops already registered, so
every backend runs it."""

import numpy as np

from ..errors import DTypeError, ShapeError
from ._broadcast import check_nested
from ._dtypes import check_requires_grad, kind_of, resolve_dtype
from ._registry import OP_TABLE, implements
from ._structure import op_dim
from ._tensor import NestedTensor, make_view, normalize_dim

__all__ = ["swapaxes", "swapdims", "movedim", "moveaxis", "adjoint", "diff", "isreal", "real", "imag"]

_T = "torch.Tensor."


def swapaxes(input, axis0, axis1):
    """``transpose(axis0, axis1)`` (NumPy's name), a view.

    >>> import lodtensor.nested as ln
    >>> ln.swapaxes(ln.nested_tensor([np.zeros((2, 3)), np.zeros((1, 3))]), 1, 2).nested_size().tolist()
    [[3, 2], [3, 1]]
    """
    return OP_TABLE["transpose"](input, axis0, axis1)


def swapdims(input, dim0, dim1):
    """``transpose(dim0, dim1)``, a view.

    >>> import lodtensor.nested as ln
    >>> ln.swapdims(ln.nested_tensor([np.zeros((2, 3)), np.zeros((1, 3))]), 2, 1).nested_size().tolist()
    [[3, 2], [3, 1]]
    """
    return OP_TABLE["transpose"](input, dim0, dim1)


def movedim(input, source, destination):
    """Dims ``source`` moved to ``destination`` (ints or sequences), the others in order: a ``permute``
    (a view; dim 0 stays in place, as torch's jagged layout requires).

    >>> import lodtensor.nested as ln
    >>> ln.movedim(ln.nested_tensor([np.zeros((2, 3, 4)), np.zeros((1, 3, 4))]), 1, 3).nested_size().tolist()
    [[3, 4, 2], [3, 4, 1]]
    """
    check_nested(input, "movedim()")
    n = input.dim()
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the same "
                         f"number of dims as destination ({dst} dims)")
    src, dst = [normalize_dim(d, n) for d in src], [normalize_dim(d, n) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"movedim: repeated dim in source {src} or destination {dst}")
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return OP_TABLE["permute"](input, *order)


def moveaxis(input, source, destination):
    """``movedim`` (NumPy's name).

    >>> import lodtensor.nested as ln
    >>> ln.moveaxis(ln.nested_tensor([np.zeros((2, 3, 4)), np.zeros((1, 3, 4))]), -1, 1).nested_size().tolist()
    [[4, 2, 3], [4, 1, 3]]
    """
    return movedim(input, source, destination)


def adjoint(input):
    """The last two dims swapped and the values conjugated (``mT``, ``conj()`` where complex), as torch's.

    >>> import lodtensor.nested as ln
    >>> ln.adjoint(ln.nested_tensor([np.array([[1 + 2j, 3j]]), np.array([[4 + 0j, 5j]])])).to_tensor_list()[0]
    array([[1.-2.j],
           [0.-3.j]])
    """
    check_nested(input, "adjoint()")
    out = OP_TABLE["transpose"](input, -2, -1)
    return OP_TABLE["conj"](out) if kind_of(input.dtype) == "c" else out


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along regular component dim ``dim`` (``x[i + 1] - x[i]``; bool data:
    ``!=``), as torch's jagged layout: a ragged dim is refused. ``prepend``/``append``: nested tensors of
    ``input``'s components joined before/after along ``dim`` first.

    >>> import lodtensor.nested as ln
    >>> ln.diff(ln.nested_tensor([np.array([[1, 4, 9]]), np.array([[2, 2, 5], [0, 1, 1]])])).to_tensor_list()[1]
    array([[0, 3],
           [1, 0]])
    """
    check_nested(input, "diff()")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ShapeError(f"diff expects n to be non-negative, got n={n!r}")
    d = op_dim(input, dim, "diff()")
    axis = d - 1
    if d == 0 or (axis < input._struct.rank and not input._struct.regular[axis]):
        raise ShapeError(f"diff(): not supported for NestedTensor on {'dim 0' if d == 0 else 'ragged dim'} {dim}; "
                         f"take differences along a regular dim")
    parts = [p for p in (prepend, input, append) if p is not None]
    for p in parts:
        if not isinstance(p, NestedTensor):
            raise TypeError(f"diff(): prepend and append must be nested tensors of input's components, got "
                            f"{type(p).__name__}")
    out = OP_TABLE["cat"](parts, dim=d) if len(parts) > 1 else input
    lead = (slice(None),) * d
    for _ in range(n):
        size = out._struct.sizes[0, axis] if out._struct.n else 0
        if size == 0:
            break
        later, earlier = out[lead + (slice(1, None),)], out[lead + (slice(0, size - 1),)]
        out = OP_TABLE["ne" if kind_of(out.dtype) == "b" else "sub"](later, earlier)
    return out


def isreal(input):
    """True where an element has no imaginary part (every element of real data), as a bool nested tensor.

    >>> import lodtensor.nested as ln
    >>> ln.isreal(ln.nested_tensor([np.array([1 + 0j, 2j]), np.array([3 + 0j])])).to_tensor_list()
    [array([ True, False]), array([ True])]
    """
    check_nested(input, "isreal()")
    if kind_of(input.dtype) != "c":
        return OP_TABLE["ones_like"](input, dtype=resolve_dtype(np.bool_, input.backend.name))
    return OP_TABLE["eq"](imag(input), 0)


def real(input):
    """The real parts of complex data, a view (writes reach the data, as torch's ``real``); real data itself.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.array([1 + 2j, 3j]), np.array([4 - 1j])])
    >>> ln.real(nt).to_tensor_list(), nt.imag.to_tensor_list()
    ([array([1., 0.]), array([4.])], [array([2., 3.]), array([-1.])])
    """
    check_nested(input, "real()")
    if kind_of(input.dtype) != "c":
        return input
    return make_view(input._buf.real, input._st, input._perm, input._layout)


def imag(input):
    """The imaginary parts of complex data, a view; refused for real data, as torch refuses it.

    >>> import lodtensor.nested as ln
    >>> ln.imag(ln.nested_tensor([np.array([1 + 2j, 3j]), np.array([4 - 1j])])).to_tensor_list()
    [array([2., 3.]), array([-1.])]
    """
    check_nested(input, "imag()")
    if kind_of(input.dtype) != "c":
        raise DTypeError("imag is not implemented for tensors with non-complex dtypes.")
    return make_view(input._buf.imag, input._st, input._perm, input._layout)


implements("swapaxes", "torch.swapaxes", _T + "swapaxes")(swapaxes)
implements("swapdims", "torch.swapdims", _T + "swapdims")(swapdims)
implements("movedim", "torch.movedim", _T + "movedim")(movedim)
implements("moveaxis", "torch.moveaxis", _T + "moveaxis")(moveaxis)
implements("adjoint", "torch.adjoint", _T + "adjoint")(adjoint)
implements("diff", "torch.diff", _T + "diff")(diff)
implements("isreal", "torch.isreal", _T + "isreal")(isreal)
implements("real", "torch.real")(real)
implements("imag", "torch.imag")(imag)
NestedTensor.real, NestedTensor.imag = property(real), property(imag)


class TensorQuestions:
    """The methods and properties installed on NestedTensor; see each one."""

    @property
    def mT(self):  # noqa: N802 - torch's name
        """The last two dims swapped (a view), as torch's ``mT``.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros((2, 3)), np.zeros((1, 3))]).mT.nested_size().tolist()
        [[3, 2], [3, 1]]
        """
        return OP_TABLE["transpose"](self, -2, -1)

    @property
    def itemsize(self):
        """Bytes per element.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).itemsize
        4
        """
        return int(self._buf.itemsize)

    @property
    def nbytes(self):
        """Bytes of the elements the storage holds (torch's ``nbytes`` of a nested tensor: of its ``values()``).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).nbytes
        12
        """
        return int(np.prod(tuple(self._buf.shape))) * self.itemsize

    def is_complex(self):
        """Whether the dtype is complex. ``is_signed()``: whether it holds negative numbers.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1, 2], [3]])
        >>> nt.is_complex(), nt.is_signed(), nt.is_conj(), nt.is_neg(), nt.is_inference(), nt.get_device()
        (False, True, False, False, False, -1)
        """
        return kind_of(self.dtype) == "c"

    def is_signed(self):
        """Whether the dtype holds negative numbers.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.array([1], np.uint8)]).is_signed(), ln.nested_tensor([[1.0]]).is_signed()
        (False, True)
        """
        return kind_of(self.dtype) in "ifc"

    def is_conj(self):
        """Whether torch data carries a lazy conjugation bit (NumPy and CuPy data never do).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.array([1j])]).conj().is_conj()
        False
        """
        return bool(getattr(self._buf, "is_conj", lambda: False)())

    def is_neg(self):
        """Whether torch data carries a lazy negation bit (NumPy and CuPy data never do).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0]]).is_neg()
        False
        """
        return bool(getattr(self._buf, "is_neg", lambda: False)())

    def is_inference(self):
        """Whether torch data is an inference tensor (made under ``torch.inference_mode``).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0]]).is_inference()
        False
        """
        return bool(getattr(self._buf, "is_inference", lambda: False)())

    def get_device(self):
        """The GPU index of the data, -1 on the host (torch's convention).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0]]).get_device()
        -1
        """
        device = self.backend.device_of(self._buf)  # ("cpu", "cuda:0")
        return -1 if device == "cpu" else int(device.partition(":")[2] or 0)

    def cfloat(self):
        """A complex64 copy (``cdouble()``: complex128).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).cfloat().dtype, ln.nested_tensor([[1.0], [3.0]]).cdouble().dtype
        (dtype('complex64'), dtype('complex128'))
        """
        return self.to(dtype=resolve_dtype(np.complex64, self.backend.name))

    def cdouble(self):
        """A complex128 copy.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0]]).cdouble().to_tensor_list()
        [array([1.+0.j])]
        """
        return self.to(dtype=resolve_dtype(np.complex128, self.backend.name))

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A dense array (tensor) of ``data`` in this tensor's library, dtype and device unless given.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).new_tensor([1, 2])
        array([1., 2.], dtype=float32)
        """
        be = self.backend
        want = self._buf.dtype if dtype is None else resolve_dtype(dtype, be.name)
        host = np.asarray(data)
        if host.dtype.kind not in "biufc":
            raise TypeError(f"new_tensor(): data must be numbers (a scalar or nested sequences), got {data!r}")
        out = be.from_host(host, like=self._buf, dtype=want)
        if device is not None:
            out = be.to_device(out, str(device))
        check_requires_grad(out, requires_grad, "new_tensor()")
        return out.requires_grad_(True) if requires_grad else out


for _name in ("mT", "itemsize", "nbytes", "is_complex", "is_signed", "is_conj", "is_neg", "is_inference",
              "get_device", "cfloat", "cdouble", "new_tensor"):
    if _name not in NestedTensor.__dict__:
        setattr(NestedTensor, _name, TensorQuestions.__dict__[_name])

"""The shape of a nested tensor: ``Size([2, j1, 128])``, ragged dims as symbolic sizes (and its layout's
name, :class:`LayoutName`, which compares equal to torch's layout objects).

torch's jagged layout gives every ragged dim a symbolic size (a "nested int"
printed ``j1``, ``j2``...) so that ``B, S, E = nt.shape`` works and two shapes
compare equal when their ragged structure is the same. Here a
:class:`RaggedSize` stands for one ragged dim: the per-component sizes of that
dim. Two ragged sizes are equal exactly when those sizes are equal (by value,
as binary ops accept nested tensors of equal structures); equal ones are the
same object while any of them lives, so they print the same ``j`` number.
"""

import hashlib
import itertools
import operator
import weakref

import numpy as np

from ..errors import ShapeError

__all__ = ["RaggedSize", "Size", "ragged_size", "is_ragged_size", "keep_ragged", "LayoutName"]

_COUNTER = itertools.count(1)
#: (components, digest of the sizes) -> the live RaggedSize of those sizes
_LIVE = weakref.WeakValueDictionary()


class RaggedSize:
    """The size of a ragged dim: one size per component, printed ``j<k>`` as torch prints nested ints.

    It compares equal to another ragged size of the same per-component sizes
    and to nothing else (not to any int, as in torch). Where a shape is
    accepted (``reshape``, ``view``, ``expand``, ``unflatten``, ``to_padded_tensor``'s
    ``output_size`` excepted) it means "this ragged dim, unchanged".

    Examples
    --------
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 6)), np.zeros((4, 6))])
    >>> B, S, E = nt.shape
    >>> B, E, str(S).startswith("j"), S.lengths().tolist()
    (2, 6, True, [2, 4])
    >>> S == (nt + 1).shape[1], S == 4
    (True, False)
    """

    __slots__ = ("_lengths", "_number", "__weakref__")

    def __init__(self, lengths, number):
        self._lengths = lengths
        self._number = number

    def lengths(self):
        """The size of this dim in each component (a copy, int64).

        >>> import lodtensor.nested as ln
        >>> B, S, E = ln.nested_tensor([np.zeros((2, 3)), np.zeros((4, 3))]).shape
        >>> S.lengths().tolist()
        [2, 4]
        """
        return self._lengths.copy()

    def __repr__(self):
        return f"j{self._number}"

    __str__ = __repr__

    def __eq__(self, other):
        if self is other:
            return True
        if isinstance(other, RaggedSize):
            return self._lengths.shape == other._lengths.shape and bool(np.array_equal(self._lengths, other._lengths))
        return False

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(("ragged", self._lengths.size, _digest(self._lengths)))

    def _refuse(self, what):
        raise ShapeError(
            f"{what}: the ragged dim {self!r} has no single size (its sizes are "
            f"{self._lengths[:8].tolist()}{' ...' if self._lengths.size > 8 else ''}); use nested_size() or "
            f"lengths() for the per-component sizes"
        )

    def __index__(self):  # noqa: PLE0305 - a ragged size has no int; this always raises
        self._refuse("int()")

    __int__ = __index__

    def __bool__(self):
        return True


def _digest(lengths):
    return hashlib.blake2b(np.ascontiguousarray(lengths, dtype=np.int64).tobytes(), digest_size=16).digest()


def ragged_size(lengths):
    """The :class:`RaggedSize` of per-component sizes ``lengths`` (the live one when there is one)."""
    lengths = np.array(lengths, dtype=np.int64)
    lengths.setflags(write=False)
    key = (lengths.size, _digest(lengths))
    found = _LIVE.get(key)
    if found is not None:
        return found
    sym = RaggedSize(lengths, next(_COUNTER))
    _LIVE[key] = sym
    return sym


def is_ragged_size(x):
    return isinstance(x, RaggedSize)


class Size(tuple):
    """A nested tensor's shape: a tuple of ints and :class:`RaggedSize` entries, printed like ``torch.Size``.

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.zeros((2, 3)), np.zeros((2, 3))]).shape
    Size([2, 2, 3])
    """

    __slots__ = ()

    def __repr__(self):
        return f"Size([{', '.join(str(s) for s in self)}])"

    __str__ = __repr__

    def __getitem__(self, index):
        out = tuple.__getitem__(self, index)
        return Size(out) if isinstance(index, slice) else out

    def numel(self):
        """The number of elements: only when no dim is ragged.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros((2, 3)), np.zeros((2, 3))]).shape.numel()
        12
        >>> ln.nested_tensor([np.zeros((2, 3)), np.zeros((4, 3))]).shape.numel()
        Traceback (most recent call last):
        ...
        lodtensor.errors.ShapeError: numel(): the ragged dim j... has no single size (its sizes are [2, 4]); ...
        """
        for s in self:
            if isinstance(s, RaggedSize):
                s._refuse("numel()")
        return int(np.prod(self, dtype=np.int64))


def keep_ragged(where, nt, shape, offset=0):
    """``shape`` as ints, a ragged dim's own :class:`RaggedSize` (``nt.shape[d]``) turned into -1 ("keep it").

    ``offset``: how many new leading dims ``shape`` has before ``nt``'s dims (``expand`` has none).
    """
    own = nt.shape
    out = []
    for j, size in enumerate(shape):
        if isinstance(size, RaggedSize):
            d = j - offset
            if not 0 <= d < len(own) or own[d] != size:
                raise ShapeError(
                    f"{where}: the ragged size {size!r} at dimension {j} of {_text(shape)} is not this nested "
                    f"tensor's dim {d} (its shape is {own}); a ragged size can only keep its own dim"
                )
            out.append(-1)
            continue
        try:
            out.append(operator.index(size))
        except TypeError:
            raise TypeError(f"{where}: shape must be integers, got {_text(shape)}") from None
    return tuple(out)


def row_inferred(nt, shape):
    """``shape`` with its one -1 past the ragged dim 1 inferred from the row size, as torch's jagged ``view``
    (a dense view of ``values()``), or None where that does not apply (then a -1 keeps that dim's size, as the
    strided layout's; where both apply they agree: the rows' element count fixes the size)."""
    st = nt._struct
    if nt._layout != "jagged" or not st.is_lod or len(shape) < 3 or shape[1] != -1:
        return None
    rest = list(shape[2:])
    known = int(np.prod([s for s in rest if s != -1], dtype=np.int64))
    if rest.count(-1) != 1 or known <= 0 or int(np.prod(st.tail, dtype=np.int64)) % known:
        return None
    rest[rest.index(-1)] = int(np.prod(st.tail, dtype=np.int64)) // known
    return (*shape[:2], *rest)


def _text(shape):
    return f"[{', '.join(str(s) for s in shape)}]"


class LayoutName(str):
    """A layout's name that also equals torch's layout object of that name (``str(torch.jagged)`` is
    ``"torch.jagged"``), without importing torch."""

    __slots__ = ()

    def __eq__(self, other):
        return str.__eq__(self, other) if isinstance(other, str) else str(other) == f"torch.{self}"

    def __ne__(self, other):
        return not self == other

    __hash__ = str.__hash__

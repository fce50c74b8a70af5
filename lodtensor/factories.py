"""Factories: LoDTensors from nested lists, padded arrays, and Paddle's helpers."""

import operator

import numpy as np

from ._compile import eager_under_compile
from ._data import to_place
from ._dense import lod_from_masks
from ._nested_list import flatten
from .backend import backend_name_of, backend_of
from .errors import LoDError
from .lod import LoD, as_lengths
from .place import CPUPlace, as_place, place_of
from .tensor import LoDTensor, _wrap, coerce_data

__all__ = [
    "from_nested_list",
    "from_padded",
    "from_padded_all",
    "create_lod_tensor",
    "create_random_int_lodtensor",
]


def _as_dtype(dtype):
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a NumPy dtype or its name, got {dtype!r}") from None
    if dt.kind not in "biufc":
        raise TypeError(f"dtype must be numeric or bool, got {dt}")
    return dt


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def from_nested_list(nested, dtype=None, lod_level=None, place=None):
    """Build a LoDTensor from nested Python lists, one lod level per list level.

    Every list level above the values becomes a lod level (outermost first);
    with a smaller ``lod_level`` the inner lists are the rows' own dimensions.
    One pass per level, no array per item. An empty list gives an empty
    tensor without lod (as ``np.array([])``), unless ``lod_level`` asks for levels.

    Parameters
    ----------
    nested : list or tuple
        E.g. documents -> sentences -> token ids.
    dtype : NumPy dtype or name, optional
        Default: inferred as NumPy does (ints -> int64, floats -> float64).
    lod_level : int, optional
        Number of lod levels; default: every list level above the values.
    place : Place or device string, optional
        Where the data goes (default host memory).

    Raises
    ------
    ValueError
        Lists of inconsistent depth, rows of different shapes, or ``lod_level``
        deeper than the lists.
    TypeError
        Leaves that are not numbers (strings, None), or a non-numeric dtype.

    Examples
    --------
    >>> t = from_nested_list([[[1, 2], [3]], [[4, 5, 6]]])
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 3], [0, 2, 3, 6]], [1, 2, 3, 4, 5, 6])
    >>> from_nested_list([[[1, 2], [3, 4]], [[5, 6]]], lod_level=1).shape()
    [3, 2]
    >>> from_nested_list([[1, 2], 3])
    Traceback (most recent call last):
    ...
    ValueError: nested has inconsistent depth: at depth 1, item 1 is int 3 but other items there are lists
    """
    dtype = _as_dtype(dtype)
    rows, lengths = flatten(nested, lod_level=lod_level, dtype=dtype)
    lod = LoD._from_valid_lengths(lengths) if lengths else LoD._from_valid(())
    data, where = to_place(rows, as_place(place), copy=False)
    return _wrap(data, lod, where)


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def from_padded_all(padded, masks):
    """Inverse of :meth:`LoDTensor.to_padded_all`: rows where the masks are True; a copy.

    >>> t = from_nested_list([[[1], [2, 3]], [[4]]])
    >>> from_padded_all(*t.to_padded_all()).tolist()
    [[[1], [2, 3]], [[4]]]
    """
    padded = coerce_data(padded, name="padded")
    lod, row_mask = lod_from_masks(masks)
    if tuple(padded.shape[: row_mask.ndim]) != row_mask.shape:
        raise ValueError(
            f"from_padded_all(): padded must start with the mask shape {row_mask.shape}, "
            f"got {tuple(padded.shape)}"
        )
    be = backend_of(padded)
    data = padded[be.from_host(row_mask, like=padded)]
    return LoDTensor(data, lod)


def create_lod_tensor(data, recursive_seq_lens, place):
    """Paddle's ``fluid.create_lod_tensor``: a LoDTensor from an array, nested list or LoDTensor.

    A NumPy array (or LoDTensor, whose data is copied) gets the lod described
    by ``recursive_seq_lens``. A nested list is flattened as in Paddle: its
    values become rows with a trailing dimension of 1 (``(N, 1)`` for lists of
    ids), int64 for ints and float64 for floats. Unlike Paddle, lists with
    several lod levels are accepted.

    Raises
    ------
    LoDError
        ``recursive_seq_lens`` does not match the data.
    TypeError
        ``data`` is none of the accepted kinds.

    See Also
    --------
    paddle.base.create_lod_tensor

    Examples
    --------
    >>> t = create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], CPUPlace())
    >>> t.shape(), t.lod()
    ([5, 1], [[0, 2, 5]])
    >>> create_lod_tensor(np.ones((5, 3)), [[2, 2]], CPUPlace())
    Traceback (most recent call last):
    ...
    lodtensor.errors.LoDError: recursive_sequence_lengths level 0 must add up to len(data)=5, got sum=4
    """
    place = as_place(place) or CPUPlace()
    if isinstance(data, LoDTensor):
        data = data._require_data("create_lod_tensor()")
    if isinstance(data, (list, tuple)):
        expected = LoD.from_lengths(recursive_seq_lens)
        rows, lengths = flatten(data, lod_level=len(expected), name="data")
        for k, got in enumerate(lengths):
            want = expected.lengths(k)
            if got.shape != want.shape or not np.array_equal(got, want):
                raise LoDError(
                    f"create_lod_tensor(): data and recursive_seq_lens do not match: the list "
                    f"has lengths {got.tolist()} at level {k}, recursive_seq_lens[{k}] is {want.tolist()}",
                    level=k,
                )
        if len(lengths) < len(expected):
            raise LoDError(
                f"create_lod_tensor(): recursive_seq_lens has {len(expected)} levels but the "
                f"list has only {len(lengths)}",
                level=len(lengths),
            )
        rows = rows.reshape(rows.shape + (1,))
        data, where = to_place(rows, place, copy=False)
        return _wrap(data, expected, where)
    if backend_name_of(data) is None:
        raise TypeError(
            f"create_lod_tensor(): data must be a LoDTensor, a NumPy array or a nested list, "
            f"got {type(data).__name__}"
        )
    tensor = LoDTensor()
    tensor.set(data, place)
    tensor.set_recursive_sequence_lengths(recursive_seq_lens)
    return tensor


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def create_random_int_lodtensor(recursive_seq_lens, base_shape, place, low, high):
    """Paddle's ``fluid.create_random_int_lodtensor``: int64 values in ``[low, high]``.

    The data has shape ``[sum(recursive_seq_lens[-1])] + base_shape`` and is
    drawn from NumPy's global random state (``np.random.seed`` applies).

    >>> t = create_random_int_lodtensor([[2, 3]], [4], CPUPlace(), 0, 9)
    >>> t.shape(), t.lod(), bool(((t.numpy() >= 0) & (t.numpy() <= 9)).all())
    ([5, 4], [[0, 2, 5]], True)
    """
    lod = LoD.from_lengths(recursive_seq_lens)
    if not lod.num_levels:  # the rows are the last level's sum: there must be a level
        raise ValueError(f"create_random_int_lodtensor(): recursive_seq_lens must hold at least one level of "
                         f"lengths, e.g. [[2, 3]], got {recursive_seq_lens!r}")
    if not isinstance(base_shape, (list, tuple)):
        raise TypeError(f"create_random_int_lodtensor(): base_shape must be a list, got {type(base_shape).__name__}")
    try:
        dims = [operator.index(d) for d in base_shape]
    except TypeError:
        raise TypeError(f"create_random_int_lodtensor(): base_shape must hold integers, got {base_shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"create_random_int_lodtensor(): base_shape must be non-negative, got {base_shape!r}")
    try:
        low, high = operator.index(low), operator.index(high)
    except TypeError:
        raise TypeError(
            f"create_random_int_lodtensor(): low and high must be integers, got low={low!r}, high={high!r}"
        ) from None
    if low > high:
        raise ValueError(f"create_random_int_lodtensor(): low={low} must not exceed high={high}")
    if low < -(2**63) or high > 2**63 - 1:
        raise ValueError(f"create_random_int_lodtensor(): low and high must be int64 values "
                         f"(-2**63 ... 2**63 - 1), got low={low}, high={high}")
    data = np.random.randint(low, high + 1, size=[lod.num_rows] + dims).astype(np.int64)
    return create_lod_tensor(data, recursive_seq_lens, place)


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def from_padded(padded, lengths):
    """Inverse of :meth:`LoDTensor.to_padded`: a one-level LoDTensor; a copy.

    Parameters
    ----------
    padded : array, shape ``(num_sequences, maxlen, *row_shape)``
    lengths : 1-D integer array-like, ``0 <= lengths[i] <= maxlen``

    Examples
    --------
    >>> t = from_padded(np.array([[1, 2, 0], [3, 4, 5]]), [2, 3])
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 5]], [1, 2, 3, 4, 5])
    """
    padded = coerce_data(padded, name="padded")
    if padded.ndim < 2:
        raise ValueError(
            f"from_padded(): padded must have at least 2 dimensions (sequences, maxlen, ...), "
            f"got shape {tuple(padded.shape)}"
        )
    n, maxlen = int(padded.shape[0]), int(padded.shape[1])
    lens = as_lengths(lengths, name="lengths")
    if lens.size != n:
        raise ValueError(f"from_padded(): lengths must have one entry per sequence ({n}), got {lens.size}")
    if lens.size and lens.max() > maxlen:
        j = int(np.argmax(lens > maxlen))
        raise ValueError(f"from_padded(): lengths[{j}]={lens[j]} exceeds the padded length {maxlen}")
    return _unpadded(padded, lens)


def _unpadded(padded, lens):
    """:func:`from_padded` of checked arguments: ``padded`` a backend array of 2 or more dims, ``lens`` int64
    lengths from ``as_lengths``, one per sequence, none past ``padded.shape[1]`` (``sequence_unpad`` checks
    them itself, with its own messages: not a second time here)."""
    lod = LoD._from_valid_lengths([lens])
    be = backend_of(padded)
    # no host plan: the LoD is new, so a plan (built for reuse) would be built for this call alone
    data = be.unpad(padded, lod.on(be, "offsets", 0, like=padded), total=lod.num_rows)
    return _wrap(data, lod, place_of(data, be))

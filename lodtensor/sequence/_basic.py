"""The sequence ops of API.md section 2 (see :mod:`lodtensor.sequence`)."""

import operator

import numpy as np

from ..backend import backend_name_of
from ..ops import levels as _levels
from ..ops import reduce as _reduce
from ..ops import reshape as _reshape
from ..ops import select as _select
from ..ops._common import flag_arg
from ..tensor import LoDTensor

__all__ = [
    "sequence_pool",
    "sequence_first_step",
    "sequence_last_step",
    "sequence_softmax",
    "sequence_expand",
    "sequence_expand_as",
    "sequence_pad",
    "sequence_unpad",
    "sequence_concat",
    "sequence_reverse",
    "sequence_slice",
    "sequence_enumerate",
    "sequence_reshape",
    "sequence_scatter",
    "sequence_mask",
    "lod_reset",
    "lod_append",
]


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0, *, level=-1):  # noqa: A002 - Paddle's name
    """Pool the rows of every sequence into one row.

    ``pool_type`` is one of ``"sum"``, ``"average"``, ``"sqrt"`` (sum divided
    by the square root of the length), ``"max"``, ``"min"``, ``"first"``,
    ``"last"`` (case-insensitive). Empty sequences give ``pad_value``.

    Acts on the last level by default; ``level=k`` pools every sequence of
    level ``k`` (all its rows). The result keeps the levels above the pooled
    one: a 2-level input pooled on its last level is a 1-level result with one
    row per sentence.

    Parameters
    ----------
    input : lodtensor.LoDTensor, lod_level >= 1
    pool_type : str
    is_test : bool
        Accepted for Paddle compatibility; no effect.
    pad_value : float
        The result for an empty sequence; None means the default 0.0, as in Paddle.
        It must be a number the result's dtype holds exactly.
    level : int, keyword-only
        Which lod level to pool (lodtensor extension; Paddle: always the last).

    Returns
    -------
    lodtensor.LoDTensor, shape ``(num_sequences, *row_shape)``

    See Also
    --------
    paddle.static.nn.sequence_pool

    Notes
    -----
    Paddle 2.6 has no ``"min"``; lodtensor adds it.

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(1.0, 7.0).reshape(6, 1), [[0, 2, 3], [0, 1, 3, 6]])
    >>> out = sequence_pool(x, "max")
    >>> out.lod(), out.data.ravel().tolist()
    ([[0, 2, 3]], [1.0, 3.0, 6.0])
    >>> sequence_pool(x, "sum", level=0).data.ravel().tolist()
    [6.0, 15.0]
    """
    flag_arg(is_test, "sequence_pool()", "is_test")
    return _reduce.pool(input, pool_type, level=level, pad_value=0.0 if pad_value is None else pad_value)


def sequence_first_step(input):  # noqa: A002
    """The first row of every last-level sequence (``pad_value`` 0 for empty ones).

    Same as ``sequence_pool(input, "first")``. See Also: paddle.static.nn.sequence_first_step.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> sequence_first_step(lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])).data.tolist()
    [0.0, 2.0]
    """
    return _reduce.pool(input, "first", where="sequence_first_step()")


def sequence_last_step(input):  # noqa: A002
    """The last row of every last-level sequence (``pad_value`` 0 for empty ones).

    Same as ``sequence_pool(input, "last")``. See Also: paddle.static.nn.sequence_last_step.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> sequence_last_step(lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])).data.tolist()
    [1.0, 4.0]
    """
    return _reduce.pool(input, "last", where="sequence_last_step()")


def sequence_softmax(input, use_cudnn=False, name=None, *, level=-1):  # noqa: A002
    """Softmax over the rows of every last-level sequence; same lod.

    Paddle accepts only one column (shape ``(rows, 1)`` or ``(rows,)``);
    lodtensor applies the softmax to each column of wider rows independently.
    ``level=k`` normalises over every sequence of level ``k`` instead.

    See Also
    --------
    paddle.static.nn.sequence_softmax

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> out = sequence_softmax(lt.LoDTensor(np.log([1.0, 3.0, 2.0, 2.0]), [[0, 2, 4]]))
    >>> np.round(out.data, 3).tolist()
    [0.25, 0.75, 0.5, 0.5]
    """
    flag_arg(use_cudnn, "sequence_softmax()", "use_cudnn")
    return _reduce.softmax(input, level=level)


def sequence_expand(x, y, ref_level=-1, name=None):
    """Repeat the sequences of ``x`` by the lengths of ``y``'s lod level ``ref_level``.

    Sequence ``i`` of ``x`` (row ``i`` when ``x`` has no lod) appears
    ``len(y's sequence i at ref_level)`` times; every copy is a sequence of
    its own in the result. When ``x`` has no lod (a LoDTensor without one, or a
    plain NumPy/CuPy/torch array, as Paddle's tensor without LoD) the result has
    none either, as in Paddle. A multi-level ``x`` is repeated by its top-level
    sequences, each with all its inner levels (Paddle allows only one level).

    See Also
    --------
    paddle.static.nn.sequence_expand

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([1, 2, 3, 4]), [[0, 2, 4]])
    >>> y = lt.LoDTensor(np.zeros(8), [[0, 2, 4], [0, 3, 6, 7, 8]])
    >>> out = sequence_expand(x, y, ref_level=0)
    >>> out.lod(), out.data.tolist()
    ([[0, 2, 4, 6, 8]], [1, 2, 1, 2, 3, 4, 3, 4])
    >>> out = sequence_expand(np.array([[1], [2]]), lt.LoDTensor(np.zeros(3), [[0, 1, 3]]))
    >>> out.lod(), out.data.ravel().tolist()
    ([], [1, 2, 2])
    """
    if not isinstance(x, LoDTensor) and backend_name_of(x) is not None:  # a tensor without LoD
        x = LoDTensor(x)
    return _select.expand(x, y, ref_level)


def sequence_expand_as(x, y, name=None):
    """Row ``i`` of ``x`` repeated as often as ``y``'s last-level sequence ``i`` is long.

    The result has ``y``'s lod (all its levels; Paddle allows ``y`` only one).

    See Also
    --------
    paddle.static.nn.sequence_expand_as

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> out = sequence_expand_as(np.array([1, 2, 3]), lt.LoDTensor(np.zeros(5), [[0, 2, 2, 5]]))
    >>> out.lod(), out.data.tolist()
    ([[0, 2, 2, 5]], [1, 1, 3, 3, 3])
    """
    return _select.expand_as(x, y)


def sequence_pad(x, pad_value, maxlen=None, name=None):
    """Pad the last-level sequences to a dense ``(sequences, maxlen, *row)`` array.

    Returns ``(out, length)``; both keep the outer lod levels of ``x`` (none
    for a 1-level input, as in Paddle). ``pad_value`` is a scalar, a
    one-element array or an array of the row shape, whose values the data's
    dtype holds exactly (``0.5`` for integer data raises, where a cast would
    pad with 0). ``maxlen`` defaults to the longest sequence; a shorter one raises.

    See Also
    --------
    paddle.static.nn.sequence_pad

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> out, length = sequence_pad(lt.LoDTensor(np.arange(1, 6), [[0, 2, 2, 5]]), 0)
    >>> out.data.tolist(), length.data.tolist()
    ([[1, 2, 0], [0, 0, 0], [3, 4, 5]], [2, 0, 3])
    """
    return _reshape.pad(x, pad_value, maxlen)


def sequence_unpad(x, length, name=None):
    """Inverse of :func:`sequence_pad`: keep the first ``length[i]`` rows of padded sequence ``i``.

    ``x`` is a dense array or a LoDTensor whose outer lod is kept above the new level.
    ``x`` of shape ``(sequences, maxlen, *row)`` gives rows of shape ``row``; a 2-D ``x``
    (``(sequences, maxlen)``) gives rows of one column, shape ``(rows, 1)``, as Paddle's
    kernel does.

    See Also
    --------
    paddle.static.nn.sequence_unpad

    Examples
    --------
    >>> import numpy as np
    >>> out = sequence_unpad(np.array([[1, 2, 0], [0, 0, 0], [3, 4, 5]]), [2, 0, 3])
    >>> out.lod(), out.data.ravel().tolist(), out.data.shape
    ([[0, 2, 2, 5]], [1, 2, 3, 4, 5], (5, 1))
    """
    out = _reshape.unpad(x, length)
    if getattr(x.data if isinstance(x, LoDTensor) else x, "ndim", None) == 2:
        out = out.with_data(out.data.reshape(-1, 1))  # Paddle: [rows] + dims[2:], then a column
    return out


def sequence_concat(input, name=None):  # noqa: A002
    """Concatenate the inputs sequence by sequence: result ``j`` = input[0][j] + input[1][j] + ...

    Acts on the last level; every input needs the same number of sequences
    and the same outer levels, which are kept. (Paddle 2.6 returns corrupt data
    for 2-level inputs; see docs/porting.md.)

    See Also
    --------
    paddle.static.nn.sequence_concat

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> a = lt.LoDTensor(np.array([1, 2, 3]), [[0, 2, 3]])
    >>> b = lt.LoDTensor(np.array([4, 5]), [[0, 0, 2]])
    >>> sequence_concat([a, b]).tolist()
    [[1, 2], [3, 4, 5]]
    """
    return _select.concat(input)


def sequence_reverse(x, name=None):
    """Reverse the rows inside every last-level sequence; same lod.

    See Also
    --------
    paddle.static.nn.sequence_reverse

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> sequence_reverse(lt.LoDTensor(np.arange(5), [[0, 2, 2, 5]])).tolist()
    [[1, 0], [], [4, 3, 2]]
    """
    return _select.reverse(x)


def sequence_slice(input, offset, length, name=None):  # noqa: A002
    """Sequence ``i`` becomes its rows ``offset[i]`` to ``offset[i] + length[i]``.

    ``offset`` and ``length`` hold one integer per last-level sequence (shape
    ``(n,)`` or ``(n, 1)``); out-of-range slices raise ``IndexError``.

    See Also
    --------
    paddle.static.nn.sequence_slice

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(5), [[0, 2, 2, 5]])
    >>> sequence_slice(x, [1, 0, 1], [1, 0, 2]).tolist()
    [[1], [], [3, 4]]
    """
    return _select.slice_sequences(input, offset, length)


def sequence_enumerate(input, win_size, pad_value=0, name=None):  # noqa: A002
    """Sliding windows of ``win_size`` ids inside every sequence, ``pad_value`` past its end.

    Input shape ``(rows, 1)`` or ``(rows,)`` of ids; output ``(rows, win_size)``, same lod.
    ``pad_value`` must be a number the ids' dtype holds exactly.

    See Also
    --------
    paddle.static.nn.sequence_enumerate

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([[1], [2], [3], [4], [5]]), [[0, 2, 5]])
    >>> sequence_enumerate(x, 2, pad_value=-1).data.tolist()
    [[1, 2], [2, -1], [3, 4], [4, 5], [5, -1]]
    """
    return _reshape.enumerate_windows(input, win_size, pad_value)


def sequence_reshape(input, new_dim):  # noqa: A002
    """Re-cut the ``D`` columns of every sequence into rows of ``new_dim`` columns.

    A sequence of ``L`` rows becomes ``L * D / new_dim`` rows; every sequence
    must hold a multiple of ``new_dim`` values. The data is a view.

    See Also
    --------
    paddle.static.nn.sequence_reshape

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> out = sequence_reshape(lt.LoDTensor(np.arange(12).reshape(6, 2), [[0, 2, 2, 6]]), 4)
    >>> out.lod(), out.data.shape
    ([[0, 1, 1, 3]], (3, 4))
    """
    return _reshape.reshape_rows(input, new_dim)


def sequence_scatter(input, index, updates, name=None):  # noqa: A002
    """``input`` plus ``updates`` added at the columns ``index`` of each row.

    ``input`` is dense with one row per sequence of ``index``;
    ``out[i, index[i][j]] += updates[i][j]``. Repeated columns accumulate.
    Returns an array of ``input``'s type (a new one; ``input`` is untouched).

    See Also
    --------
    paddle.static.nn.sequence_scatter

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> index = lt.LoDTensor(np.array([[0], [0], [2]]), [[0, 2, 3]])
    >>> updates = lt.LoDTensor(np.array([[1.0], [2.0], [3.0]]), [[0, 2, 3]])
    >>> sequence_scatter(np.ones((2, 3)), index, updates).tolist()
    [[4.0, 1.0, 1.0], [1.0, 1.0, 4.0]]
    """
    return _select.scatter(input, index, updates)


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """``mask[..., j] = j < x[...]`` for lengths ``x``; ``maxlen`` defaults to ``max(x)``.

    Array in, array out; a LoDTensor keeps its lod; a 0-d length gives one row of shape
    ``(maxlen,)``, as in Paddle. ``maxlen`` is an integer or, as in
    Paddle, a one-element integer tensor (NumPy, torch, CuPy or LoDTensor). ``dtype`` is a
    bool or numeric dtype (a name, a NumPy dtype or a torch dtype); others raise ``TypeError``.

    See Also
    --------
    paddle.nn.functional.sequence_mask

    Examples
    --------
    >>> import numpy as np
    >>> sequence_mask(np.array([2, 0, 3])).tolist()
    [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
    >>> sequence_mask(np.array([1, 2]), maxlen=np.array([3]), dtype="float32").tolist()
    [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    >>> sequence_mask(np.array([1, 2]), dtype="U3")
    Traceback (most recent call last):
    ...
    TypeError: sequence_mask(): dtype must be a bool or numeric dtype, got '<U3'
    """
    where = "sequence_mask()"
    return _reshape.mask(x, _maxlen(maxlen, where), _mask_dtype(dtype, where), where=where)


def _maxlen(maxlen, where):
    """``maxlen`` as given, or the int of a one-element integer tensor (Paddle takes both)."""
    if maxlen is None or isinstance(maxlen, (int, np.integer)):
        return maxlen
    data = maxlen.data if isinstance(maxlen, LoDTensor) else maxlen
    name = backend_name_of(data)
    if name is None:
        return maxlen  # left to the op's integer check
    shape = tuple(int(s) for s in data.shape)
    if int(np.prod(shape, dtype=np.int64)) != 1:
        raise ValueError(f"{where}: maxlen given as a tensor must hold one integer, got shape {list(shape)}")
    host = np.asarray(data.tolist()).reshape(())
    if host.dtype.kind not in "iu":
        raise TypeError(f"{where}: maxlen must be an integer, got a tensor of {host.dtype} ({host.item()!r})")
    return operator.index(host.item())


def _mask_dtype(dtype, where):
    """``dtype`` as a NumPy dtype of kind bool, int, uint, float or complex (as Paddle), else a clear error."""
    spelled = str(dtype).replace("torch.", "") if type(dtype).__module__.startswith("torch") else dtype
    try:
        resolved = None if dtype is None else np.dtype(spelled)
    except TypeError:
        resolved = None
    if resolved is None or resolved.kind not in "biufc":
        shown = repr(str(resolved)) if resolved is not None else repr(dtype)
        raise TypeError(f"{where}: dtype must be a bool or numeric dtype, got {shown}")
    return resolved


def lod_reset(x, y=None, target_lod=None):
    """``x``'s data (shared, not copied) with a new lod.

    The new lod is ``y``'s lod when ``y`` has one, else ``y``'s data read as
    offsets, else ``target_lod`` (offsets such as ``[0, 2, 5]``, or a list of
    levels). It must fit ``x``'s rows.

    See Also
    --------
    paddle.fluid.layers.lod_reset

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(6), [[0, 2, 5, 6]])
    >>> lod_reset(x, target_lod=[0, 4, 6]).lod()
    [[0, 4, 6]]
    """
    return _levels.reset(x, y, target_lod)


def lod_append(x, level):
    """``x`` with ``level`` (offsets into the rows) added as its new finest lod level.

    Validated: the old last level must end at the number of sequences of
    ``level`` and ``level`` must end at the number of rows (Paddle does not
    check and can return an invalid lod).

    See Also
    --------
    paddle.fluid.layers.lod_append

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(6))
    >>> lod_append(x, [0, 2, 6]).lod()
    [[0, 2, 6]]
    >>> lod_append(lod_append(x, [0, 2, 6]), [0, 1, 2, 3, 4, 5, 6]).lod()
    [[0, 2, 6], [0, 1, 2, 3, 4, 5, 6]]
    """
    return _levels.append(x, level)

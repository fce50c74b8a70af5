"""TensorFlow: a LoD is a RaggedTensor's nested row splits, outermost first.

``t.to_ragged_tensor()`` is ``tf.RaggedTensor.from_nested_row_splits(data, lod
levels)`` and :func:`from_ragged_tensor` reads ``nested_row_splits`` and
``flat_values`` back; TensorFlow is imported on first use (the ``tf`` extra).
"""

import numpy as np

from ..backend import backend_name_of
from ..lod import LoD
from ..tensor import LoDTensor
from ._lazy import loaded, lod_tensor_arg, require

__all__ = ["to_ragged_tensor", "from_ragged_tensor"]


def to_ragged_tensor(t):
    """This tensor as a ``tf.RaggedTensor`` (``ragged_rank = lod_level``); a ``tf.Tensor`` without a lod.

    The flat values are converted with ``tf.convert_to_tensor`` (TensorFlow
    decides whether it copies: it owns its memory, so expect one copy of the
    data); the row splits are the int64 offsets. The splits are not checked
    again (``validate=False``): the LoD already is.

    The TensorFlow lines are skipped by the doctest run: TensorFlow is not one of the test extras
    (``tests/interop/test_tf.py`` runs these conversions in TensorFlow's own interpreter).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 3], [0, 2, 2, 5]])
    >>> [level.tolist() for level in t.lod.levels]  # the row splits, outermost first
    [[0, 2, 3], [0, 2, 2, 5]]
    >>> t.to_ragged_tensor().to_list()  # doctest: +SKIP
    [[[0.0, 1.0], []], [[2.0, 3.0, 4.0]]]
    """
    lod_tensor_arg(t, "to_ragged_tensor()")
    tf = require("tensorflow", "tf", "to_ragged_tensor()")
    data = t._check_fits("to_ragged_tensor()")
    if backend_name_of(data) != "numpy":
        data = t.backend.to_numpy(data)  # torch CPU: shared; GPU: a copy to the host
    values = tf.convert_to_tensor(data)
    if not t.lod_level:
        return values
    splits = [tf.convert_to_tensor(level) for level in t.lod.levels]
    return tf.RaggedTensor.from_nested_row_splits(values, splits, validate=False)


def from_ragged_tensor(rt):
    """A LoDTensor (NumPy data) from a ``tf.RaggedTensor`` or a dense ``tf.Tensor``.

    The row splits (int32 or int64) go through the LoD gate as the lod levels;
    the flat values become the data (``.numpy()``: shared with TensorFlow's
    CPU buffer where TensorFlow allows it, else a copy).

    Raises
    ------
    TypeError
        Not a TensorFlow tensor.
    LoDError
        Row splits that break a LoD rule.

    Examples
    --------
    TensorFlow is not one of the test extras, so the doctest run skips these lines
    (``tests/interop/test_tf.py`` runs the round trip in TensorFlow's own interpreter):

    >>> import tensorflow as tf  # doctest: +SKIP
    >>> rt = tf.ragged.constant([[1, 2], [], [3]])  # doctest: +SKIP
    >>> t = from_ragged_tensor(rt)  # doctest: +SKIP
    >>> t.lod(), t.data.tolist()  # doctest: +SKIP
    ([[0, 2, 2, 3]], [1, 2, 3])
    """
    tf = loaded("tensorflow")
    if tf is None or not isinstance(rt, (tf.RaggedTensor, tf.Tensor)):
        raise TypeError(f"from_ragged_tensor(): expected a tf.RaggedTensor or tf.Tensor, got {type(rt).__name__}")
    if isinstance(rt, tf.Tensor):
        return LoDTensor(rt.numpy())
    levels = [np.asarray(s.numpy(), dtype=np.int64) for s in rt.nested_row_splits]
    data = rt.flat_values.numpy()
    return LoDTensor(data, LoD(levels, num_rows=int(data.shape[0])))

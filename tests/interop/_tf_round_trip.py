"""Run with TensorFlow's interpreter by test_tf.py: round trips against real tf.RaggedTensor."""

import numpy as np

import lodtensor as lt
from lodtensor.errors import LoDError


def main():
    import tensorflow as tf  # noqa: PLC0415 - this script runs in TensorFlow's interpreter only

    rng = np.random.default_rng(0)
    for case in range(30):
        outer = rng.integers(0, 4, size=rng.integers(1, 5))
        inner = rng.integers(0, 4, size=int(outer.sum())) if outer.sum() else None
        levels = [outer.tolist()] + ([inner.tolist()] if inner is not None else [])
        rows = int(sum(levels[-1]))
        row_shape = [(), (3,)][case % 2]
        t = lt.LoDTensor(rng.normal(size=(rows, *row_shape)).astype(np.float32), recursive_sequence_lengths=levels)
        rt = t.to_ragged_tensor()
        assert isinstance(rt, tf.RaggedTensor) and rt.ragged_rank == t.lod_level
        assert rt.to_list() == t.tolist(), case
        ref = tf.RaggedTensor.from_nested_row_lengths(t.data, [np.asarray(lv, np.int64) for lv in levels])
        assert rt.to_list() == ref.to_list()
        back = lt.from_ragged_tensor(ref)
        assert back.lod() == t.lod() and np.array_equal(back.data, t.data), case

    # levels of no sequence: TensorFlow's row_splits [0] (an empty batch, documents without sentences)
    from tests.hollow import hollow_cases  # noqa: PLC0415 - PYTHONPATH is the repository root

    for name, t in hollow_cases().items():
        rt = t.to_ragged_tensor()
        assert [s.numpy().tolist() for s in rt.nested_row_splits] == t.lod(), name
        back = lt.from_ragged_tensor(rt)
        assert back.lod() == t.lod() and back.data.shape == t.data.shape, name
    empty = tf.RaggedTensor.from_row_splits(tf.zeros([0], tf.float32), tf.constant([0], tf.int64))
    assert lt.from_ragged_tensor(empty).lod() == [[0]]

    # int32 splits, and a dense tensor
    rt32 = tf.RaggedTensor.from_row_splits(tf.constant([1, 2, 3]), tf.constant([0, 2, 3], tf.int32))
    assert lt.from_ragged_tensor(rt32).lod() == [[0, 2, 3]]
    assert lt.from_ragged_tensor(tf.constant([1.0, 2.0])).lod_level == 0
    # bad splits (built without TensorFlow's own check) are refused by the gate
    bad = tf.RaggedTensor.from_row_splits(tf.constant([1, 2, 3]), tf.constant([0, 2, 1, 3], tf.int64), validate=False)
    try:
        lt.from_ragged_tensor(bad)
    except LoDError as err:
        assert "non-decreasing" in str(err)
    else:
        raise AssertionError("bad splits accepted")
    try:
        lt.from_ragged_tensor([1, 2])
    except TypeError as err:
        assert "expected a tf.RaggedTensor" in str(err)
    print("tf ok")


if __name__ == "__main__":
    main()

"""Tensors whose LoD has a level of no sequence (offsets ``[0]``): an empty batch, or the level under
parents that are all empty (``t[0:1]`` of a document without sentences). Shared by the tests that check
every op takes them (or refuses them clearly) as it takes any other LoD."""

import numpy as np

import lodtensor as lt


def hollow_cases(row_shape=(3,), dtype=np.float32):
    """``{name: LoDTensor}`` (NumPy) with at least one level of no sequence, and one-level neighbours
    whose sequences are all empty."""
    def make(lod):
        return lt.LoDTensor(np.zeros((0,) + tuple(row_shape), dtype=dtype), lod=lod)

    doc = lt.LoDTensor(np.arange(6 * int(np.prod(row_shape))).astype(dtype).reshape((6,) + tuple(row_shape)),
                       lod=[[0, 0, 2], [0, 3, 6]])
    return {
        "batch0": make([[0]]),  # no sequence at all
        "batch0x2": make([[0], [0]]),  # two levels, no document
        "docs_without_sentences": make([[0, 0, 0], [0]]),  # two documents, no sentence
        "slice_of_empty_doc": doc[0:1],  # [[0, 0], [0]]
        "empty_sequences": make([[0, 0, 0]]),  # two empty sequences (valid all along)
    }

"""A short tour of lodtensor: hierarchical token batches without padding by hand.

Run: python examples/tour.py
"""

import numpy as np

import lodtensor as lt
from lodtensor import fluid

# Two documents -> sentences -> token ids, straight from Python lists.
docs = [
    [[11, 12, 13], [14, 15]],          # document 0: two sentences
    [[21], [22, 23, 24, 25], [26]],    # document 1: three sentences
]
t = lt.from_nested_list(docs)
print("data      ", t.data)
print("lod       ", t.lod())
print("lengths   ", t.recursive_sequence_lengths())
assert t.lod() == [[0, 2, 5], [0, 3, 5, 6, 10, 11]]

# t[i] is a view: document 1, one level shorter, no copy of the data.
doc1 = t[1]
print("t[1]      ", doc1.tolist(), "shares memory:", np.shares_memory(doc1.data, t.data))
assert doc1.tolist() == [[21], [22, 23, 24, 25], [26]]

# Pad the sentences for a dense kernel, and come back.
padded, lengths = t.to_padded(pad_value=0)
print("padded sentences\n", padded)
back = lt.from_padded(padded, lengths)
assert np.array_equal(back.data, t.data)

# Pad every level at once: documents x sentences x words, plus a mask per level.
dense, masks = t.to_padded_all()
print("dense shape", dense.shape, "mask shapes", [m.shape for m in masks])

# NumPy interop: np.array(t) is the flat data; ufuncs keep the lod.
scaled = np.sqrt(t * 4.0)
print("np.sqrt(t * 4) keeps the lod:", scaled.lod() == t.lod())

# The same batch written the Paddle way.
p = fluid.LoDTensor()
p.set(np.array([[11], [12], [13], [14], [15], [21], [22], [23], [24], [25], [26]], dtype="int64"), fluid.CPUPlace())
p.set_recursive_sequence_lengths([[2, 3], [3, 2, 1, 4, 1]])
print("paddle-style", p.lod(), p.shape(), p.has_valid_recursive_sequence_lengths())
assert p.lod() == t.lod()
print("tour finished")

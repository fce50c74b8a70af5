"""A few kernels and conversions, for comparing two checkouts on one machine (not run by bench/run.py).

Prints seconds per call (best of 5 repeats): the compiled float32 GELU on 4M values, ``from_arrow`` of
200K sequences over 3M rows (foreign offsets: copied into the LoD's memory), and ``numpy()`` of a
LoDTensor of torch data. Run the trees alternately, as ``small.py`` says::

    for i in 1 2 3; do for tree in /path/to/old /path/to/new; do
        (cd /tmp && PYTHONPATH=$tree python $tree/bench/compare/calls.py); done; done
"""

import json
import timeit

import numpy as np
import pyarrow as pa
import torch

import lodtensor as lt
from lodtensor.backend.numpy import _special

rng = np.random.default_rng(0)
x = rng.standard_normal(4_000_000).astype(np.float32)
offsets = np.concatenate(([0], np.cumsum(rng.integers(0, 30, 200_000))))
arr = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(np.arange(offsets[-1], dtype=np.float32)))
t = lt.LoDTensor(torch.randn(300_000, 8), [np.arange(0, 300_001, 30).tolist()])
calls = {
    "gelu f32 4M (compiled kernel)": (lambda: _special.gelu(x), 5),
    "from_arrow 200K seqs (3M rows)": (lambda: lt.from_arrow(arr), 20),
    "LoDTensor.numpy() of torch data": (t.numpy, 2000),
}
print(json.dumps({name: min(timeit.repeat(f, number=n, repeat=5)) / n for name, (f, n) in calls.items()}))

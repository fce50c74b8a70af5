"""Per-call overhead of NumPy's protocol on a LoDTensor, for comparing two checkouts on one machine (not run
by bench/run.py).

Run the trees alternately in one session and compare the minima (this prints microseconds per call, best of
9 repeats of 1,000 calls, a float32 LoDTensor of 29 rows x 16 in 4 sequences, NumPy and torch data)::

    for i in 1 2 3; do for tree in /path/to/old /path/to/new; do
        (cd /tmp && PYTHONPATH=$tree python $tree/bench/compare/ufunc.py); done; done
"""

import json
import timeit

import numpy as np

import lodtensor as lt

rng = np.random.default_rng(0)
data = rng.standard_normal((29, 16)).astype(np.float32)
lod = [[0, 5, 14, 17, 29]]
t = lt.LoDTensor(data, lod)
o = lt.LoDTensor(np.zeros((29, 16), np.float32), lod)
calls = {
    "t + 1.0": lambda: t + 1.0,
    "np.exp(t)": lambda: np.exp(t),
    "np.add(t, t, out=o)": lambda: np.add(t, t, out=o),
    "np.sum(t, axis=1)": lambda: np.sum(t, axis=1),
    "np.clip(t, 0, 1, out=o)": lambda: np.clip(t, 0, 1, out=o),
}
try:
    import torch

    tt = lt.LoDTensor(torch.from_numpy(data), lod)
    calls["torch: t + 1.0"] = lambda: tt + 1.0
    calls["torch: np.positive(t)"] = lambda: np.positive(tt)
except ImportError:
    pass
print(json.dumps({name: round(min(timeit.repeat(f, number=1000, repeat=9)) / 1000 * 1e6, 2)
                  for name, f in calls.items()}))

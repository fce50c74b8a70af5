"""Per-call overhead of a few nested ops, for comparing two checkouts on one machine (not run by bench/run.py).

Run the trees alternately in one session and compare the minima (this prints microseconds per call, best of
9 repeats of 1,000 calls, a 4-component float32 nested tensor of 29 rows x 16)::

    for i in 1 2 3; do for tree in /path/to/old /path/to/new; do
        (cd /tmp && PYTHONPATH=$tree python $tree/bench/compare/small.py); done; done
"""

import json
import timeit

import numpy as np

import lodtensor.nested as ln

rng = np.random.default_rng(0)
nt = ln.nested_tensor([rng.standard_normal((n, 16)).astype(np.float32) for n in (5, 9, 3, 12)], layout="jagged")
calls = {
    "nt.sum(-1)": lambda: nt.sum(-1),
    "nt.sum(1)": lambda: nt.sum(1),
    "ln.cat([nt, nt], -1)": lambda: ln.cat([nt, nt], -1),
    "nt.sign()": nt.sign,
    "nt + 1.0": lambda: nt + 1.0,
}
print(json.dumps({name: round(min(timeit.repeat(f, number=1000, repeat=9)) / 1000 * 1e6, 1)
                  for name, f in calls.items()}))

"""Root pytest configuration: skip collecting backend modules whose array library is absent.

The doctest collector (``--doctest-modules``) imports every module under
``lodtensor/``; the cupy and torch backends import their library at the top.
"""

import importlib.util

collect_ignore = ["tests/data"]  # fixtures and the scripts that write them (run by hand, with real Paddle)
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("lodtensor/backend/torch")
if importlib.util.find_spec("cupy") is None:  # the CUDA sources' folder (cuda/) needs no cupy
    collect_ignore += ["lodtensor/backend/cupy/_backend.py", "lodtensor/backend/cupy/_arrays.py"]

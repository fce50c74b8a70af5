"""Root pytest configuration: skip collecting backend modules whose array library is absent.

The doctest collector (``--doctest-modules``) imports every module under
``lodtensor/``; the cupy and torch backends import their library at the top.
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("lodtensor/backend/torch")
if importlib.util.find_spec("cupy") is None:  # the CUDA sources' folder (cuda/) needs no cupy
    collect_ignore += ["lodtensor/backend/cupy/_backend.py", "lodtensor/backend/cupy/_arrays.py"]

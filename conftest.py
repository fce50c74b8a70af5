"""Root pytest configuration: skip collecting backend modules whose array library is absent.

The doctest collector (``--doctest-modules``) imports every module under
``lodtensor/``; the cupy and torch backends import their library at the top.
"""

import importlib.util

collect_ignore = [
    f"lodtensor/backend/{name}.py" for name in ("cupy", "torch") if importlib.util.find_spec(name) is None
]

"""Root pytest configuration: skip collecting backend modules whose array library is absent.

The doctest collector (``--doctest-modules``) imports every module under
``lodtensor/``; the cupy and torch backends import their library at the top.
"""

import importlib.util

collect_ignore = ["tests/data"]  # fixtures and the scripts that write them (run by hand, with real Paddle)
collect_ignore.append("tests/_memory_drive.py")  # a script run in a child process (tests/test_memory_hunt.py)
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("lodtensor/backend/torch")
if importlib.util.find_spec("cupy") is None:  # the CUDA sources' folder (cuda/) needs no cupy
    collect_ignore += ["lodtensor/backend/cupy/_backend.py", "lodtensor/backend/cupy/_arrays.py"]

# doctests that show a torch API newer than the oldest torch setup.cfg admits (torch>=2.4): skipped where
# the installed torch lacks it (torch 2.4 has add_safe_globals, not the safe_globals context manager)
NEWER_TORCH_DOCTESTS = {"lodtensor.interop.torch.torch_safe_globals": ("torch.serialization", "safe_globals")}


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        needs = NEWER_TORCH_DOCTESTS.get(item.name)
        if needs is not None and not hasattr(importlib.import_module(needs[0]), needs[1]):
            item.add_marker(pytest.mark.skip(reason=f"shows {'.'.join(needs)}, which this torch lacks"))

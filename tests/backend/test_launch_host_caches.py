"""The CuPy launcher's host-side caches (``backend/cupy/_launch.py``) follow every setting they depend on.

The launch layout of a size is made once and shared; the launch sweep of ``make bench-gpu`` changes
``cuda.CHUNK_STEPS`` and ``_tuning`` values between calls, so each must give a new layout (a layout kept
past its setting would have timed the default under another row's name).
"""

import numpy as np
import pytest

from lodtensor.backend.cupy import _launch, _tuning
from lodtensor.backend.cupy import cuda as _cuda

CHANGES = [
    ("CHUNK_STEPS", _cuda, lambda v: v * 2, "chunk", lambda base, v: base * 2),
    ("PIECE_THREADS", _tuning, lambda v: 64, "threads", lambda base, v: 64),
    ("TILES_FIRST", _tuning, lambda v: not v, "tiles_first", lambda base, v: not base),
]


@pytest.mark.parametrize("name, where, change, attr, want", CHANGES, ids=[c[0] for c in CHANGES])
def test_the_layout_follows_the_settings(emulated, monkeypatch, name, where, change, attr, want):
    import cupy  # noqa: PLC0415 - the stub the fixture installed

    x = cupy.asarray(np.zeros((4096, 128), np.float32))
    base = _launch.layout(x, 64)
    assert _launch.layout(x, 64) is base  # made once per sizes and settings
    original = getattr(where, name)
    monkeypatch.setattr(where, name, change(original))
    changed = _launch.layout(x, 64)
    assert getattr(changed, attr) == want(getattr(base, attr), getattr(where, name))
    monkeypatch.setattr(where, name, original)
    assert _launch.layout(x, 64) is base

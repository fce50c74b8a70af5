"""Fixtures of the backend tests."""

import pytest


@pytest.fixture
def uncompiled():
    """The NumPy backend with its compiled segment kernel off: its NumPy-only kernels serve."""
    from lodtensor.backend import set_compiled_kernels

    saved = set_compiled_kernels(False)
    yield
    set_compiled_kernels(saved)

"""The fused LSTM and GRU steps (``backend/cupy/_steps.py``, ``cuda/rnn.cu``) for torch CUDA tensors.

With CuPy installed, the recurrences of ``_recurrent`` on CUDA tensors run each element-wise part
of a time step as one kernel, forward and backward, on torch's current stream and memory (the
tensors' addresses). :func:`steps` gives None where they cannot serve (no CuPy, not CUDA, under
tracing, a dtype or an activation the kernels lack, no cuBLAS binding in CuPy, a stream under CUDA graph
capture, ``_tuning.FUSED_STEPS`` off); the steps' GEMMs are cuBLAS calls on torch's handle; the results
are those of the unfused steps (tests: the emulated route, ``_cuda._EMULATED``).
"""

import torch

from ..cupy import _steps, _tuning
from . import _cuda

__all__ = ["steps"]

_DTYPES = {torch.float32: "float32", torch.float64: "float64"}


def steps(kind, x, acts, operands):
    """``_steps.LSTMSteps`` / ``GRUSteps`` (``kind`` "lstm" / "gru") for the recurrence over ``x``
    (its gates, step-major) with Paddle's ``acts``; ``operands``: every other tensor the steps read."""
    if not _tuning.FUSED_STEPS or x.dtype not in _DTYPES or not _cuda.fits(x):
        return None
    if not _steps.serves(_DTYPES[x.dtype], acts, operands) or any(
            t is not None and (t.device != x.device or _cuda.wrapped(t)) for t in operands):
        return None
    dev = _cuda._Device(x.device)
    if _steps.blas(dev.xp) is None:
        return None
    # torch's handle, asked on the device: its TF32 mode (CuPy's binding sets the stream, CuPy's current one: torch's
    # under ``launching()``; that leaves cuBLAS's default workspace on the handle)
    handle = torch.cuda.current_blas_handle if x.device.type == "cuda" else _NO_HANDLE  # (emulated: none)
    cls = _steps.LSTMSteps if kind == "lstm" else _steps.GRUSteps
    with dev.launching():  # the kernels looked up (and their module loaded) on the tensors' device
        if x.device.type == "cuda" and torch.cuda.is_current_stream_capturing():  # (that device's stream: CuPy's
            return None  # cuBLAS binding refuses a stream under capture)
        return cls(dev.xp, _DTYPES[x.dtype], acts, torch.Tensor.data_ptr, dev.launching, handle)


def _NO_HANDLE():  # noqa: N802 - a constant's role: the cupy stub's cuBLAS takes no handle
    return 0

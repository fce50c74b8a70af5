"""Paddle's learnable sequence layers: :mod:`lodtensor.nn.functional` (explicit parameters,
on every backend: NumPy, CuPy, torch on CPU or CUDA) and the matching ``torch.nn.Module`` s
(``lodtensor.nn.DynamicLSTM``, ...),
whose ``weight``/``bias`` Parameters have Paddle's shapes.

The modules need torch; they are loaded on first access, so ``import lodtensor.nn`` costs
only NumPy.
"""

from . import functional

__all__ = [
    "functional",
    "Embedding",
    "FC",
    "SequenceConv",
    "RowConv",
    "DynamicLSTM",
    "DynamicGRU",
    "LinearChainCRF",
    "CRFDecoding",
]

_MODULES = set(__all__) - {"functional"}


def __getattr__(name):
    if name in _MODULES:
        from . import modules  # noqa: PLC0415 - imports torch

        return getattr(modules, name)
    raise AttributeError(f"module 'lodtensor.nn' has no attribute {name!r}")

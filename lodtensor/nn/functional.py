"""Paddle's learnable sequence layers as functions with explicit parameters.

Parameters have Paddle's shapes and gate order, so the arrays of a Paddle
checkpoint (``lodtensor.fluid.io.load_program_state``) are passed unchanged.
Inputs are LoDTensors on any backend (NumPy and CuPy compute the forward pass; torch,
on CPU or CUDA, records autograd); outputs keep the lod and the input's backend and
device. ``act`` is a Paddle activation name (``sigmoid``, ``tanh``, ``relu``,
``softmax``, ``identity``/``linear``) or None.

>>> import numpy as np
>>> import lodtensor as lt
>>> from lodtensor.nn import functional as F
>>> words = lt.LoDTensor(np.array([[1], [2], [3]]), [[0, 2, 3]])
>>> emb = F.embedding(words, np.eye(4))
>>> F.sequence_conv_pool(emb, np.ones((12, 2)), np.zeros(2), 3, act=None).data.tolist()
[[2.0, 2.0], [1.0, 1.0]]
"""

from ._crf import crf_decoding, linear_chain_crf, warpctc
from ._layers import embedding, fc, row_conv, sequence_conv, sequence_conv_pool
from ._rnn import dynamic_gru, dynamic_lstm

__all__ = [
    "embedding",
    "fc",
    "sequence_conv",
    "row_conv",
    "dynamic_lstm",
    "dynamic_gru",
    "linear_chain_crf",
    "crf_decoding",
    "warpctc",
    "sequence_conv_pool",
]

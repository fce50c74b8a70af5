"""The sequence ops the torch.func tests (``test_torch_vmap.py``, ``test_torch_jvp.py``) differentiate and
vmap: each a function of the rows ``v`` of one LoD, returning a tensor."""

import numpy as np

import lodtensor as lt
from lodtensor import sequence as S


def sequence_ops(lod, outer):
    """``{name: f(v)}`` over one-level ``lod``; the two-level ops put ``outer`` (documents) above it."""
    two = [outer, lod[0]]
    lengths = np.diff(lod[0])

    def t(v, levels=lod):
        return lt.LoDTensor(v, levels)

    return {
        "sum": lambda v: S.sequence_pool(t(v), "sum").data,
        "average": lambda v: S.sequence_pool(t(v), "average").data,
        "max": lambda v: S.sequence_pool(t(v), "max").data,
        "min": lambda v: S.sequence_pool(t(v), "min").data,
        "sqrt": lambda v: S.sequence_pool(t(v), "sqrt").data,
        "last": lambda v: S.sequence_last_step(t(v)).data,
        "softmax": lambda v: S.sequence_softmax(t(v)).data,
        "pad": lambda v: S.sequence_pad(t(v), 0.0)[0].data,
        "unpad": lambda v: S.sequence_unpad(S.sequence_pad(t(v), -1.0)[0], lengths).data,
        "to_padded": lambda v: t(v).to_padded(pad_value=0.0)[0],
        "reverse": lambda v: S.sequence_reverse(t(v)).data,
        "two levels, max": lambda v: S.sequence_pool(t(v, two), "max").data,
        "two levels, max at level 0": lambda v: S.sequence_pool(t(v, two), "max", level=0).data,
    }

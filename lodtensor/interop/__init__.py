"""lodtensor.interop: hand LoDTensors to the rest of the ecosystem, sharing buffers.

A LoD is Arrow's list offsets, torch's jagged offsets, a CSR matrix's row
pointers and TensorFlow's row splits; each module here speaks one library's
dialect and imports that library only when first used:

- :mod:`.arrow`: ``t.to_arrow()`` / :func:`from_arrow`
- :mod:`.parquet`: :func:`write_parquet` / :func:`read_parquet`
- :mod:`.files`: :func:`save` / :func:`load` (Arrow IPC, memory-mapped)
- :mod:`.torch`: ``t.to_nested_jagged()`` / :func:`from_torch`, PackedSequence,
  EmbeddingBag and varlen-attention inputs
- :mod:`.sparse`: ``t.to_sparse_csr()`` / ``t.to_sparse_coo()`` / :func:`from_sparse` (torch, scipy)
- :mod:`.awkward`: ``t.to_awkward()`` / :func:`from_awkward`
- :mod:`.tf`: ``t.to_ragged_tensor()`` / :func:`from_ragged_tensor` (TensorFlow)
- :mod:`.dlpack`: ``t.__dlpack__()`` / :func:`from_dlpack`, and the ragged DLPack convention

The ``LoDTensor`` methods named in API.md section 5 are installed here with
``LoDTensor._attach`` and delegate to these modules.
"""

from ..tensor import LoDTensor
from .arrow import from_arrow, to_arrow
from .awkward import from_awkward, to_awkward
from .dlpack import dlpack, dlpack_device, dlpack_ragged, from_dlpack
from .files import load, save
from .parquet import read_parquet, write_parquet
from .sparse import from_sparse, to_sparse_coo, to_sparse_csr
from .tf import from_ragged_tensor, to_ragged_tensor
from .torch import (
    cu_seqlens,
    embedding_bag_inputs,
    from_packed_sequence,
    from_torch,
    to_nested_jagged,
    to_packed_sequence,
    torch_safe_globals,
)

LoDTensor._attach(
    to_arrow=to_arrow,
    to_nested_jagged=to_nested_jagged,
    to_packed_sequence=to_packed_sequence,
    embedding_bag_inputs=embedding_bag_inputs,
    cu_seqlens=cu_seqlens,
    __dlpack__=dlpack,
    __dlpack_device__=dlpack_device,
    __dlpack_ragged__=dlpack_ragged,
    to_sparse_csr=to_sparse_csr,
    to_sparse_coo=to_sparse_coo,
    to_awkward=to_awkward,
    to_ragged_tensor=to_ragged_tensor,
)

__all__ = [
    "from_arrow",
    "to_arrow",
    "read_parquet",
    "write_parquet",
    "save",
    "load",
    "from_torch",
    "to_nested_jagged",
    "to_packed_sequence",
    "from_packed_sequence",
    "embedding_bag_inputs",
    "cu_seqlens",
    "from_dlpack",
    "from_sparse",
    "to_sparse_csr",
    "to_sparse_coo",
    "from_awkward",
    "to_awkward",
    "from_ragged_tensor",
    "to_ragged_tensor",
    "torch_safe_globals",
]

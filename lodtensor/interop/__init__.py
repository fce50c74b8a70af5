"""lodtensor.interop: hand LoDTensors to the rest of the ecosystem, sharing buffers.

A LoD is Arrow's list offsets, torch's jagged offsets, a CSR matrix's row
pointers and TensorFlow's row splits; each module here speaks one library's
dialect and imports that library only when first used:

- :mod:`.arrow`: ``t.to_arrow()`` / :func:`from_arrow`
- :mod:`.parquet`: :func:`write_parquet` / :func:`read_parquet`
- :mod:`.files`: :func:`save` / :func:`load` (Arrow IPC, memory-mapped)

The ``LoDTensor`` methods named in API.md section 5 are installed here with
``LoDTensor._attach`` and delegate to these modules.
"""

from ..tensor import LoDTensor
from .arrow import from_arrow, to_arrow
from .files import load, save
from .parquet import read_parquet, write_parquet

LoDTensor._attach(to_arrow=to_arrow)

__all__ = ["from_arrow", "to_arrow", "read_parquet", "write_parquet", "save", "load"]

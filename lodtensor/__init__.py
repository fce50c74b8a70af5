"""lodtensor: variable-length and hierarchical tensors (PaddlePaddle-style LoD).

One flat data array plus a few int64 offset arrays, one per nesting level.
``import lodtensor`` costs only NumPy; torch, cupy and pyarrow load on first use.
"""

from . import interop, nested, sequence, text  # noqa: F401 - nested attaches LoDTensor.__torch_function__
from .backend import available_backends, backend_of, get_backend
from .backend._threads import get_num_threads, set_num_threads
from .errors import BackendMismatchError, LoDError
from .factories import (
    create_lod_tensor,
    create_random_int_lodtensor,
    from_nested_list,
    from_padded,
    from_padded_all,
)
from .interop import (
    from_arrow,
    from_awkward,
    from_dlpack,
    from_packed_sequence,
    from_ragged_tensor,
    from_sparse,
    from_torch,
    load,
    read_parquet,
    save,
    write_parquet,
)
from .lod import LoD
from .place import CPUPlace, CUDAPinnedPlace, CUDAPlace, Place
from .tensor import LoDTensor

__version__ = "0.1.0"

__all__ = [
    "LoDTensor",
    "LoD",
    "LoDError",
    "BackendMismatchError",
    "Place",
    "CPUPlace",
    "CUDAPlace",
    "CUDAPinnedPlace",
    "from_nested_list",
    "from_padded",
    "from_padded_all",
    "from_torch",
    "create_lod_tensor",
    "create_random_int_lodtensor",
    "backend_of",
    "get_backend",
    "available_backends",
    "get_num_threads",
    "set_num_threads",
    "sequence",
    "text",
    "interop",
    "from_arrow",
    "read_parquet",
    "write_parquet",
    "save",
    "load",
    "from_packed_sequence",
    "from_dlpack",
    "from_sparse",
    "from_awkward",
    "from_ragged_tensor",
]

"""layer_norm over whole components: a ``normalized_shape`` that takes in the ragged dim.

torch's jagged layout accepts ``normalized_shape=nt.shape[1:]`` (the ragged dim
and every dim after it) and normalises each component over all its elements,
without ``weight`` or ``bias`` (they would need the ragged shape). Here that is
four segment kernels over the flat buffer, whatever the raggedness: the
components are contiguous, so each is one segment of elements.
"""

import numpy as np

from ..backend import dtype_name
from ..errors import ShapeError
from ._broadcast import not_implemented
from ._dtypes import kind_of, resolve_dtype
from ._symbolic import RaggedSize

__all__ = ["covers_components", "whole_layer_norm"]


def covers_components(input, ns):
    """True when ``ns`` names every component dim of ``input`` (its own ragged sizes in their places);
    ShapeError when it names a ragged dim some other way."""
    st = input._struct
    if len(ns) != st.rank or st.outer or not any(isinstance(s, RaggedSize) for s in ns):
        return False
    own = tuple(input.shape[1:])
    for i, (want, have) in enumerate(zip(ns, own)):
        if isinstance(want, RaggedSize) != isinstance(have, RaggedSize) or want != have:
            raise ShapeError(
                f"The shape at dimension {i} of normalized_shape doesn't match the input: normalized_shape="
                f"{list(ns)}, component dims {list(own)}"
            )
    return True


def whole_layer_norm(input, eps, weight, bias, make):
    """Every component normalised over all its elements (biased variance, as layer_norm)."""
    if weight is not None or bias is not None:
        raise ShapeError("layer_norm(): weight and bias cannot be given when normalized_shape covers the ragged dim "
                         "(they would need its sizes); scale the result instead")
    st = input._struct
    be = input.backend
    buf = input._buffer
    kind = kind_of(buf.dtype)
    if kind not in "iuf":  # (torch's jagged layout refuses bool and complex data too)
        raise not_implemented("layer_norm", input, "integer or floating point")
    # integers give float32, as torch's; half precision is summed in float32 (a component of 2**16 elements
    # overflows float16's sums and counts), as torch's layer_norm accumulates
    half = kind == "f" and dtype_name(buf.dtype) in ("float16", "bfloat16")
    if kind != "f" or half:
        buf = be.astype(buf, resolve_dtype("float32", be.name))
    total = int(buf.shape[0])
    offsets = be.from_host(np.asarray(st.offsets, dtype=np.int64), like=buf, dtype=np.int64)
    ids = be.segment_ids(offsets, total=total)
    count = be.from_host(np.maximum(np.diff(st.offsets), 1).astype(np.float64), like=buf, dtype=buf.dtype)
    mean = be.segment_sum(buf, offsets) / count
    centered = buf - be.gather(mean, ids)
    var = be.segment_sum(centered * centered, offsets) / count
    std = be.pointwise("sqrt", "sqrt", var + float(eps))
    out = centered / be.gather(std, ids)
    return make(be.astype(out, input.dtype) if half else out, st, input._layout)

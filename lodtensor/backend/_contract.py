"""The kernel set every array backend implements.

Ops are written once against this interface and ``be.xp`` (the backend's array
namespace). Each backend module (``numpy``, ``cupy``, ``torch``) subclasses
:class:`Backend` and implements every kernel; quirks of one library stay in
its module. Offsets passed to kernels are int64, valid (checked on the host
before any kernel runs) and on the backend's device.
"""

from ._registry import get_backend

__all__ = ["Backend", "KERNELS"]

#: Names of the kernels a backend must implement.
KERNELS = (
    "asarray",
    "to_numpy",
    "device_of",
    "to_device",
    "apply_ufunc",
    "segment_ids",
    "repeat_interleave",
    "cumsum",
    "gather",
    "scatter",
    "scatter_add",
    "concat",
    "fill_rows",
    "astype",
    "arange",
    "segment_sum",
    "segment_mean",
    "segment_max",
    "segment_min",
    "segment_softmax",
    "place_rows",
    "pad",
    "unpad",
    "is_c_contiguous",
)


class Backend:
    """One array library's kernels.

    Attributes
    ----------
    name : str
        ``"numpy"``, ``"cupy"`` or ``"torch"``.
    xp : module
        The array namespace (``numpy``, ``cupy``, ``torch``).

    Notes
    -----
    The kernels, which take and return arrays of this backend::

        asarray(obj, dtype=None, *, copy=False)
        to_numpy(x)                                   host NumPy array (copy only when needed)
        device_of(x) -> str                           ``"cpu"``, ``"cuda:0"``
        to_device(x, device, *, copy=False)           the array on ``device``
        apply_ufunc(ufunc, method, *args, **kwargs)   a NumPy ufunc call, run with this library
        segment_ids(offsets, *, total)                row -> sequence index
        repeat_interleave(values, repeats, *, total=None)
        cumsum(x, *, exclusive=False)
        gather(data, index)                           rows ``data[index]``
        scatter(out, index, values)                   ``out[index] = values`` in place
        scatter_add(out, index, values)               ``out`` with ``values`` added at rows ``index``
                                                      (repeats accumulate); a new array
        concat(arrays)                                rows of all arrays, in order
        fill_rows(x, mask, value)                     ``x`` with the rows where the host bool
                                                      ``mask`` is True set to ``value``; a new array
        astype(x, dtype)                              dtype given as NumPy dtype or name
        arange(n, *, like)                            int64 ``0..n-1`` on ``like``'s device
        segment_sum(data, offsets, *, ids=None)       empty sequence -> 0
        segment_mean(data, offsets, *, empty=0, ids=None)
        segment_max(data, offsets, *, empty, ids=None)  empty sequence -> ``empty``
        segment_min(data, offsets, *, empty, ids=None)
        segment_softmax(data, offsets, *, ids=None)   softmax over the rows of each sequence
                                                      (``ids``: the segment id of every row, when
                                                      known; backends may ignore it)
        place_rows(data, index, shape, pad_value, *, out=None)
                                                      dense ``shape + row_shape`` filled with
                                                      ``pad_value``, row i written at flat index[i]
        pad(data, offsets, maxlen, pad_value, *, out=None, plan=None)
                                                      flat rows -> (B, maxlen, ...)
        unpad(padded, offsets, *, plan=None)          (B, L, ...) -> flat rows, inverse of pad
        is_c_contiguous(x) -> bool
    """

    name = "abstract"
    xp = None
    #: True when ``pad``/``unpad`` take a host ``plan`` (``LoD.pad_plan``); device backends compute their own.
    uses_host_plans = False
    #: True when the segment kernels use a precomputed ``ids`` (the LoD caches it per device).
    uses_segment_ids = False

    def __repr__(self):
        return f"<lodtensor backend {self.name!r}>"

    def __reduce__(self):
        return (get_backend, (self.name,))

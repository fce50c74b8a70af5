"""Row indices made from a LoD's offsets where the data live.

CPU data (the backends that take host plans: ``Backend.wants_host_plan``) keep the NumPy index made
on the host. Device data (CUDA, CuPy) get it on their device through the contract's
``repeat_interleave`` and ``arange``: a training step makes a new LoD per batch, and a host index
over its rows costs a NumPy pass and a host-to-device copy of 8 bytes per row that the kernels do
not need. Only per-sequence host arrays cross (``from_host``), and every size comes from the host
offsets, so nothing is read back from the device.

>>> import numpy as np
>>> import lodtensor as lt
>>> be = lt.get_backend("numpy")
>>> ranges(be, np.array([5, 0]), np.array([7, 3]), np.zeros(1)).tolist()
[5, 6, 0, 1, 2]
"""

from ..lod import concat_ranges, lengths_to_offsets

__all__ = ["on_host", "per_row", "ranges"]


def on_host(be, like):
    """Whether op code makes row indices for data ``like`` on the host (CPU data), not on their device."""
    return be.wants_host_plan(like)


def per_row(be, values, counts, like):
    """Host ``values[i]`` repeated ``counts[i]`` times (int64), on ``like``'s device.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> per_row(lt.get_backend("numpy"), np.array([7, 9]), np.array([2, 1]), np.zeros(1)).tolist()
    [7, 7, 9]
    """
    total = int(counts.sum())
    return be.repeat_interleave(be.from_host(values, like=like), be.from_host(counts, like=like), total=total)


def ranges(be, starts, stops, like):
    """``arange(starts[i], stops[i])`` for every ``i``, concatenated (int64), on ``like``'s device: made
    there from the per-range arrays for device data, by ``lod.concat_ranges`` on the host for CPU data."""
    if on_host(be, like):
        return be.from_host(concat_ranges(starts, stops)[0], like=like)
    counts = stops - starts
    return per_row(be, starts - lengths_to_offsets(counts)[:-1], counts, like) + be.arange(int(counts.sum()),
                                                                                          like=like)

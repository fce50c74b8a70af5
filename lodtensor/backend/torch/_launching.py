"""The launch context of the torch route's kernels on a CUDA device: torch's current stream made CuPy's
current stream, the tensors' device made current (``_cuda._Device.launching``).

A launch on the torch route runs on torch's current stream of the tensors' device, so that it is ordered
after the work torch queued there and before what torch queues next. The H100 run of 2026-11-28 timed the
old context (a generator over ``cupy.cuda.Device`` and a CuPy stream made from ``torch.cuda.current_stream``
on every call) at 12.8 us a call, as much as the rest of a small op's host code: here torch's stream is
asked for its handle alone, CuPy's stream of it is made once per handle and device, and the context is a
small class.
"""

import torch

__all__ = ["Launch", "stream_of"]

# The handle of torch's current stream on a device as an int, without a Stream object (torch's CUDA builds;
# inductor's ``get_raw_stream``): torch.cuda.current_stream took 5.4 us a call on the H100's host. Trusted
# only once its answers equal the Stream's handles on the current stream and on a side stream made for the
# check (the default stream's handle, 0, alone would prove little) (``_RAW_OK``: None until checked).
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_RAW_OK = None
_CURRENT_STREAM = torch.cuda.current_stream  # (module attributes: the tests stand in for them)
# (id(cuda module), stream handle, device index) -> CuPy's stream object of that stream, made once by
# ``_cupy_stream`` (the construction the device runs verified); a handle reused by a new torch stream is
# the same stream to CuPy's launches
_STREAMS = {}
_MAX_STREAMS = 64


def _side_stream(index):
    """A context with a new torch stream of device ``index`` current."""
    return torch.cuda.stream(torch.cuda.Stream(index))


_SIDE_STREAM = _side_stream


def _raw_matches(index, handle):
    """Whether the raw call gives the Stream's handle ``handle`` here and on a side stream's."""
    if _RAW_STREAM is None or _RAW_STREAM(index) != handle:
        return False
    with _SIDE_STREAM(index):
        side = _CURRENT_STREAM(index).cuda_stream
        return side != handle and _RAW_STREAM(index) == side


def _raw_stream(index):
    """The handle of torch's current stream on CUDA device ``index``."""
    global _RAW_OK  # noqa: PLW0603 - checked once per process
    if _RAW_OK:
        return _RAW_STREAM(index)
    handle = _CURRENT_STREAM(index).cuda_stream
    if _RAW_OK is None:
        try:
            _RAW_OK = _raw_matches(index, handle)
        except Exception:  # noqa: BLE001 - a torch whose raw-stream call differs: the Stream's handle serves
            _RAW_OK = False
    return handle


def stream_of(cuda, index):
    """CuPy's stream object of torch's current stream on CUDA device ``index``."""
    handle = _raw_stream(index)
    key = (id(cuda), handle, index)
    stream = _STREAMS.get(key)
    if stream is None:
        if len(_STREAMS) >= _MAX_STREAMS:  # (streams made and dropped by the caller: forget the old handles)
            _STREAMS.clear()
        with cuda.Device(index):  # (made as the device runs made it: with its device current)
            stream = _STREAMS[key] = _cupy_stream(cuda, _CURRENT_STREAM(index))
    return stream


def _cupy_stream(cuda, stream):
    """torch's ``stream`` as a CuPy stream: ``Stream.from_external`` (CuPy 14, the CUDA stream protocol)
    where it takes it, else ``ExternalStream`` of its handle."""
    make = getattr(cuda.Stream, "from_external", None)
    if make is not None:
        try:
            return make(stream)
        except (TypeError, AttributeError, ValueError):  # a torch without the stream protocol
            pass
    return cuda.ExternalStream(stream.cuda_stream)


class Launch:
    """The kernels' launch context on CUDA device ``index``: that device current (switched, and back after,
    only where another is), ``stream`` CuPy's current stream. A class rather than a generator context
    (the H100 run's pieces leave about 4 us of the old context's 12.8 to the generator and its
    ``with`` of two contexts); made per call, so threads never share one."""

    __slots__ = ("cuda", "index", "stream", "previous")

    def __init__(self, cuda, index, stream):
        self.cuda, self.index, self.stream, self.previous = cuda, index, stream, None

    def __enter__(self):
        runtime = self.cuda.runtime
        current = runtime.getDevice()
        if current != self.index:
            runtime.setDevice(self.index)
            self.previous = current
        try:
            self.stream.__enter__()
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.stream.__exit__(*exc)
        finally:
            self._restore()
        return False

    def _restore(self):
        if self.previous is not None:
            self.cuda.runtime.setDevice(self.previous)
            self.previous = None

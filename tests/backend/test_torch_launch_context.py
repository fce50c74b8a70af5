"""The torch route's launch context on a CUDA device (``backend/torch/_launching.Launch`` and ``stream_of``):
torch's current stream made CuPy's current stream, the device switched only where another is current and
switched back after, also when the launches raise; CuPy's stream object made once per stream handle and
device. Offline with a recording stand-in for ``cupy.cuda`` (the emulated route launches in no context);
on a GPU, tests/backend/test_gpu.py runs the kernels on a side stream."""

import contextlib
import types

import pytest

torch = pytest.importorskip("torch")

from lodtensor.backend.torch import _launching  # noqa: E402


class _Recorder:
    """A stand-in for ``cupy.cuda``: a current device, a ``Device`` context, and streams made as
    ``_cupy_stream`` makes them (``Stream.from_external`` of torch's stream) that record their entering."""

    def __init__(self, device=0):
        self.device, self.events, self.made = device, [], []
        self.runtime = types.SimpleNamespace(getDevice=lambda: self.device, setDevice=self._set)
        recorder = self

        class Stream:
            def __init__(self, ptr):
                self.ptr, self.device_id = ptr, recorder.device
                recorder.made.append((ptr, recorder.device))

            @classmethod
            def from_external(cls, stream):
                return cls(stream.cuda_stream)

            def __enter__(self):
                recorder.events.append(("enter", self.ptr, recorder.device))
                return self

            def __exit__(self, *exc):
                recorder.events.append(("exit", self.ptr, recorder.device))

        class Device:
            def __init__(self, index):
                self.index = index

            def __enter__(self):
                self.previous = recorder.device
                recorder.device = self.index

            def __exit__(self, *exc):
                recorder.device = self.previous

        self.Stream, self.Device = Stream, Device

    def _set(self, device):
        self.events.append(("device", device))
        self.device = device


@pytest.fixture
def recorder(monkeypatch):
    """The recorder, torch's current stream handle 0xA0 on device 0 and 0xB1 on device 1 (both ways of
    asking: the raw call and the Stream object), nothing cached."""
    rec = _Recorder()
    handles = {0: 0xA0, 1: 0xB1}
    rec.handles, rec.asked = handles, []

    def current(index):
        rec.asked.append(index)
        return types.SimpleNamespace(cuda_stream=handles[index])

    monkeypatch.setattr(_launching, "_CURRENT_STREAM", current)
    monkeypatch.setattr(_launching, "_RAW_STREAM", lambda index: handles[index])
    monkeypatch.setattr(_launching, "_RAW_OK", None)
    monkeypatch.setattr(_launching, "_STREAMS", {})

    @contextlib.contextmanager
    def side(index):  # a side stream current for the raw call's check: its own handle
        before = handles[index]
        handles[index] = 0x5E00 + index
        try:
            yield
        finally:
            handles[index] = before

    monkeypatch.setattr(_launching, "_SIDE_STREAM", side)
    return rec


def _context(rec, index):
    return _launching.Launch(rec, index, _launching.stream_of(rec, index))


def test_same_device_enters_the_stream_and_switches_nothing(recorder):
    with _context(recorder, 0):
        recorder.events.append("launch")
    assert recorder.events == [("enter", 0xA0, 0), "launch", ("exit", 0xA0, 0)]


def test_another_device_is_made_current_and_the_caller_s_comes_back(recorder):
    with _context(recorder, 1):
        recorder.events.append(("launch", recorder.device))
    assert recorder.events == [("device", 1), ("enter", 0xB1, 1), ("launch", 1), ("exit", 0xB1, 1), ("device", 0)]
    assert recorder.device == 0


def test_the_device_comes_back_when_a_launch_raises(recorder):
    with pytest.raises(ValueError, match="kernel"), _context(recorder, 1):
        raise ValueError("kernel failed")
    assert recorder.device == 0 and recorder.events[-2:] == [("exit", 0xB1, 1), ("device", 0)]


def test_the_device_comes_back_when_entering_the_stream_raises(recorder):
    context = _context(recorder, 1)

    def refuse():
        raise RuntimeError("stream of another device")

    context.stream.__enter__ = refuse  # (an instance attribute: __enter__ is looked up on the type by `with`)
    with pytest.raises(RuntimeError, match="another device"):
        context.__enter__()
    assert recorder.device == 0


def test_a_context_can_be_entered_again(recorder):
    context = _context(recorder, 1)
    for _ in range(2):
        with context:
            pass
    assert recorder.device == 0 and recorder.events.count(("device", 1)) == 2


def test_one_stream_object_per_handle_and_device(recorder):
    first = _launching.stream_of(recorder, 0)
    assert _launching.stream_of(recorder, 0) is first
    assert _launching.stream_of(recorder, 1) is not first
    assert recorder.made == [(0xA0, 0), (0xB1, 1)]  # each made with its own device current
    assert recorder.device == 0
    recorder.handles[0] = 0xC0  # torch's current stream changed (a `with torch.cuda.stream(s)`)
    assert _launching.stream_of(recorder, 0).ptr == 0xC0


def test_the_raw_handle_is_trusted_once_it_matched_the_stream_s(recorder):
    for _ in range(3):
        _launching.stream_of(recorder, 0)
    # the Stream object asked three times: on the current and a side stream for the check, and to make CuPy's
    # stream; the raw call alone after
    assert _launching._RAW_OK is True and recorder.asked == [0, 0, 0]
    assert recorder.handles[0] == 0xA0  # (the side stream of the check is no longer current)


@pytest.mark.parametrize("raw", [None, "raises", "differs"])
def test_a_raw_handle_that_is_missing_or_differs_is_never_used(recorder, monkeypatch, raw):
    def raising(index):
        raise TypeError("no device argument")

    monkeypatch.setattr(_launching, "_RAW_STREAM", {None: None, "raises": raising, "differs": lambda i: 0xDEAD}[raw])
    for _ in range(3):
        assert _launching.stream_of(recorder, 0).ptr == 0xA0
    assert _launching._RAW_OK is False and len(recorder.asked) == 4  # every call asks the Stream object


def test_the_stream_cache_is_bounded(recorder, monkeypatch):
    count = iter(range(1, 10**6))
    monkeypatch.setattr(_launching, "_CURRENT_STREAM", lambda index: types.SimpleNamespace(cuda_stream=next(count)))
    monkeypatch.setattr(_launching, "_RAW_OK", False)
    for _ in range(3 * _launching._MAX_STREAMS):
        _launching.stream_of(recorder, 0)
    assert len(_launching._STREAMS) <= _launching._MAX_STREAMS


def test_a_cupy_without_stream_from_external(recorder):
    class Old:
        def __init__(self, ptr):
            self.ptr = ptr

    recorder.Stream = types.SimpleNamespace()  # (no from_external: CuPy before 14)
    recorder.ExternalStream = Old
    assert _launching.stream_of(recorder, 0).ptr == 0xA0


def test_a_raw_call_matching_on_the_default_stream_alone_is_never_used(recorder, monkeypatch):
    """On the default stream the Stream's handle is 0, which a raw call that answers something else (a stream
    id, 0 there too) would match: the check also asks on a side stream, where the wrong answer shows, so the
    default stream alone never decides (a review's finding)."""
    ids = {0: 0, 0x5E00: 35, 0xB5: 36}  # handle -> what a wrong raw call would answer
    monkeypatch.setattr(_launching, "_RAW_STREAM", lambda index: ids[recorder.handles[index]])
    recorder.handles[0] = 0  # the default stream
    assert _launching._raw_stream(0) == 0 and _launching._RAW_OK is False
    recorder.handles[0] = 0xB5  # a side stream of the caller's: the Stream's handle, not the raw answer
    assert _launching._raw_stream(0) == 0xB5

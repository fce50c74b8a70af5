"""The torch route's launch context on a CUDA device (``backend/torch/_cuda._Launch`` and ``_stream_of``):
torch's current stream made CuPy's current stream, the device switched only where another is current and
switched back after, also when the launches raise; CuPy's stream object made once per stream handle and
device. Offline with a recording stand-in for ``cupy.cuda`` (the emulated route launches in no context);
on a GPU, tests/backend/test_gpu.py runs the kernels on a side stream."""

import types

import pytest

torch = pytest.importorskip("torch")

from lodtensor.backend.torch import _cuda  # noqa: E402


class _Recorder:
    """A stand-in for ``cupy.cuda``: a current device, and streams that record their entering."""

    def __init__(self, device=0):
        self.device, self.events, self.made = device, [], []
        self.runtime = types.SimpleNamespace(getDevice=lambda: self.device, setDevice=self._set)
        recorder = self

        class ExternalStream:
            def __init__(self, ptr, device_id=-1):
                self.ptr, self.device_id = ptr, device_id
                recorder.made.append((ptr, device_id))

            def __enter__(self):
                recorder.events.append(("enter", self.ptr, recorder.device))
                return self

            def __exit__(self, *exc):
                recorder.events.append(("exit", self.ptr, recorder.device))

        self.ExternalStream = ExternalStream

    def _set(self, device):
        self.events.append(("device", device))
        self.device = device


@pytest.fixture
def recorder(monkeypatch):
    rec = _Recorder()
    handles = {0: 0xA0, 1: 0xB1}
    monkeypatch.setattr(_cuda, "_RAW_STREAM", lambda index: handles[index])
    monkeypatch.setattr(_cuda, "_STREAMS", {})
    rec.handles = handles
    return rec


def _context(rec, index):
    return _cuda._Launch(rec, index, _cuda._stream_of(rec, index))


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
    first = _cuda._stream_of(recorder, 0)
    assert _cuda._stream_of(recorder, 0) is first
    assert _cuda._stream_of(recorder, 1) is not first
    assert recorder.made == [(0xA0, 0), (0xB1, 1)]
    recorder.handles[0] = 0xC0  # torch's current stream changed (a `with torch.cuda.stream(s)`)
    assert _cuda._stream_of(recorder, 0).ptr == 0xC0


def test_the_stream_cache_is_bounded(recorder, monkeypatch):
    monkeypatch.setattr(_cuda, "_RAW_STREAM", lambda index: len(recorder.made) + 1)
    for _ in range(3 * _cuda._MAX_STREAMS):
        _cuda._stream_of(recorder, 0)
    assert len(_cuda._STREAMS) <= _cuda._MAX_STREAMS


def test_a_cupy_whose_external_stream_takes_no_device(recorder):
    class Old:
        def __init__(self, ptr):
            self.ptr = ptr

    recorder.ExternalStream = Old
    assert _cuda._stream_of(recorder, 0).ptr == 0xA0

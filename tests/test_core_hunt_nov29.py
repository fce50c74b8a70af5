"""Findings of a probe of the core LoDTensor against NumPy and torch (2026-11-29).

Each test fails on the code before its fix: a self-holding list walked forever, ints past int64
refused where NumPy infers uint64, torch's lazy conjugate/negative views unreadable, a requires-grad
tensor's memory handed to NumPy writable, booleans taken as levels, a misleading error for devices
only torch reaches.
"""

import copy
import pickle
import time

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.errors import LoDError
from lodtensor.lod import MAX_LOD_LEVELS


def test_a_list_that_holds_itself_is_refused_at_once():
    y = []
    y.append(y)
    start = time.perf_counter()
    for nested, kw in ((y, {}), ([y, y], {}), ((y,), {}), (y, {"lod_level": 5})):
        with pytest.raises((LoDError, ValueError)):
            lt.from_nested_list(nested, **kw)
    assert time.perf_counter() - start < 5


def test_nesting_depth_limit_is_exact():
    deep = [1.0]
    for _ in range(MAX_LOD_LEVELS):
        deep = [deep]
    assert lt.from_nested_list(deep).lod_level == MAX_LOD_LEVELS
    with pytest.raises(LoDError, match=rf"has {MAX_LOD_LEVELS + 1} levels"):
        lt.from_nested_list([deep])
    with pytest.raises(LoDError, match="lod_level has 40 levels"):
        lt.from_nested_list([[1]], lod_level=40)


@pytest.mark.parametrize("nested", [[[2**63]], [[2**63, 1]], [[2**63, -1], [3]], [[2**64 - 1]]])
def test_ints_past_int64_infer_as_numpy(nested):
    t = lt.from_nested_list(nested)
    flat = [x for row in nested for x in row]
    want = np.array(flat)
    assert t.dtype == want.dtype
    np.testing.assert_array_equal(t.data, want)
    assert lt.create_lod_tensor(nested, [[len(r) for r in nested]], lt.CPUPlace()).dtype == want.dtype


def test_ints_past_uint64_are_refused_with_the_value_named():
    with pytest.raises(ValueError, match="does not fit"):
        lt.from_nested_list([[2**64]])


def test_booleans_are_not_levels_or_lengths():
    t = lt.LoDTensor(np.arange(3.0), [[0, 1, 3]])
    for call in (lambda: t.to_padded(level=True), lambda: t.offsets(True), lambda: t.lengths(np.True_),
                 lambda: t.to_padded(maxlen=True), lambda: lt.from_nested_list([[1], [2]], lod_level=True)):
        with pytest.raises(TypeError, match="bool"):
            call()
    assert t.to_padded(level=np.int64(0))[1].tolist() == [1, 2]


def test_set_none_names_none():
    t = lt.LoDTensor(np.arange(3.0), [[0, 3]])
    with pytest.raises(TypeError, match="NoneType None"):
        t.set(None, lt.CPUPlace())
    assert t.tolist() == [[0.0, 1.0, 2.0]]


@pytest.mark.parametrize("place", ["mps", "meta", "xpu"])
def test_host_data_to_a_torch_only_device_says_so(place):
    with pytest.raises(ValueError, match=f"cannot go to device '{place}'.*to_torch"):
        lt.LoDTensor(np.arange(2), [[0, 2]], place=place)


class TestTorchData:
    torch = pytest.importorskip("torch")

    def _views(self):
        torch = self.torch
        c = torch.tensor([1 + 2j, 3 - 1j, 0.5j])
        yield "conj", lt.LoDTensor(c.conj(), [[0, 2, 3]]), [1 - 2j, 3 + 1j, -0.5j]
        yield "conj of a slice", lt.LoDTensor(c[1:].conj(), [[0, 2]]), [3 + 1j, -0.5j]
        neg = torch.tensor([1 + 2j, 3 - 4j, 5 + 6j]).conj().imag
        yield "neg", lt.LoDTensor(neg, [[0, 1, 3]]), [-2.0, 4.0, -6.0]

    def test_lazy_conjugate_and_negative_views_read_as_their_values(self):
        c = self.torch.tensor([1 + 2j, 3 - 1j, 0.5j])
        got = np.conj(lt.LoDTensor(c, [[0, 2, 3]]))  # a ufunc's result is memory of its own, resolved
        assert not got.data.is_conj() and got.tolist() == [[1 - 2j, 3 + 1j], [-0.5j]]
        for name, t, want in self._views():
            assert t.data.is_conj() or t.data.is_neg(), name
            flat = [x for seq in t.tolist() for x in seq]
            assert flat == pytest.approx(want), name
            np.testing.assert_allclose(t.numpy(), want)
            for back in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
                np.testing.assert_allclose(back.numpy(), want)
                assert back.lod() == t.lod()
            with pytest.raises(ValueError, match="avoid copy"):
                np.array(t, copy=False)  # the values need a copy: NumPy's never-copy request is refused

    def test_requires_grad_memory_reaches_numpy_read_only(self):
        torch = self.torch
        x = torch.arange(3.0, requires_grad=True)
        t = lt.LoDTensor(x, [[0, 3]])
        view = np.asarray(t)
        assert np.shares_memory(view, x.detach().numpy())
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 100
        assert x.tolist() == [0.0, 1.0, 2.0]
        assert not np.array(t, copy=False).flags.writeable
        assert np.array(t).flags.writeable  # a copy is the caller's own
        assert t.numpy().flags.writeable and np.shares_memory(t.numpy(), view)  # the explicit twin, as nt.numpy()
        y = torch.arange(3.0)  # no autograd: the writable view stays
        assert np.asarray(lt.LoDTensor(y, [[0, 3]])).flags.writeable

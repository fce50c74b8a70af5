"""warpctc with label ids equal to the blank, on torch data: Paddle's rule, as the NumPy/CuPy recursion.

Paddle's warpctc accepts a label id equal to ``blank`` and allows no skip into it from the label before;
torch's ``ctc_loss`` (the torch backend's loss) takes no such target and allows that skip, which gave
smaller losses (2.396 against Paddle's 3.371 on ``tests/paddle``'s case). ``warpctc`` now finds such ids in
its label check (on the host, or in the one read of device labels) and the torch backend runs Paddle's
recursion in torch ops for them (``backend/torch/_ctc.py``). Compared here with the NumPy backend's
recursion (itself compared with real Paddle in ``tests/paddle/test_paddle_fluid_hunt2.py``) and, where no
id is the blank, with torch's own ``ctc_loss``, gradients included.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import get_backend  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

from .conftest import count_reads  # noqa: E402

C = 5  # classes, the blank included


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _batch(t_len, l_len, seed, blank, share=0.4):
    """Scores ``[T, C]`` and labels ``[L, 1]`` where about ``share`` of the ids are ``blank``."""
    rng = np.random.RandomState(seed)
    scores = rng.uniform(-2, 2, (int(sum(t_len)), C))
    labels = rng.randint(0, C, (int(sum(l_len)), 1))
    labels[rng.uniform(size=labels.shape) < share] = blank
    return scores, labels


def _warpctc(scores, labels, t_len, l_len, blank, wrap=np.asarray, dtype=None):
    x = lt.LoDTensor(wrap(scores) if dtype is None else wrap(scores).to(dtype), [_offsets(t_len)])
    return F.warpctc(x, lt.LoDTensor(labels, [_offsets(l_len)]), blank=blank)


CASES = {  # name -> (input lengths, label lengths)
    "two": ([4, 5], [2, 3]),
    "mixed": ([5, 0, 40, 1, 3, 12, 60, 2, 0, 2], [2, 0, 10, 1, 3, 4, 20, 0, 1, 3]),  # no rows, empty label, inf
    "too_short": ([2, 6], [4, 2]),  # no alignment for the first
    "all_blank_ids": ([7, 3], [3, 1]),
}


@pytest.mark.parametrize("blank", [0, 2, C - 1])
@pytest.mark.parametrize("case", sorted(CASES))
def test_torch_gives_the_numpy_recursion_for_blank_ids(case, blank):
    t_len, l_len = CASES[case]
    scores, labels = _batch(t_len, l_len, 3, blank, share=1.0 if case == "all_blank_ids" else 0.4)
    assert (labels == blank).any()
    want = _warpctc(scores, labels, t_len, l_len, blank)
    got = _warpctc(scores, labels, t_len, l_len, blank, wrap=torch.tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    for dtype, rtol in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)):
        low = _warpctc(scores, labels, t_len, l_len, blank, wrap=torch.tensor, dtype=dtype)
        assert low.dtype == dtype
        np.testing.assert_allclose(low.float().numpy(), want, rtol=rtol)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 4)), min_size=1, max_size=6),
       st.integers(0, C - 1), st.integers(0, 2 ** 16))
def test_property_torch_equals_numpy_with_blank_ids(pairs, blank, seed):
    t_len, l_len = [p[0] for p in pairs], [p[1] for p in pairs]
    scores, labels = _batch(t_len, l_len, seed, blank)
    want = _warpctc(scores, labels, t_len, l_len, blank)
    got = _warpctc(scores, labels, t_len, l_len, blank, wrap=torch.tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


def _loss_and_grad(scores, labels, t_len, l_len, blank, blank_labels):
    """The torch backend's ``ctc_loss`` with ``blank_labels`` forced, and the scores' gradient."""
    x = torch.tensor(scores, requires_grad=True)
    loss = get_backend("torch").ctc_loss(x, _offsets(t_len), labels.ravel(), _offsets(l_len), blank, blank_labels)
    weights = torch.tensor(np.random.RandomState(1).uniform(0.5, 1.5, loss.shape))
    (torch.where(torch.isfinite(loss), loss, 0.0) * weights).sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("case", ["two", "mixed", "too_short"])
def test_recursion_equals_torchs_ctc_loss_without_blank_ids(case):
    """Where no id is the blank both rules agree: the recursion's losses and gradients are torch's."""
    t_len, l_len = CASES[case]
    scores, labels = _batch(t_len, l_len, 5, blank=0, share=0.0)
    labels[labels == 0] = 1
    theirs = _loss_and_grad(scores, labels, t_len, l_len, 0, False)
    ours = _loss_and_grad(scores, labels, t_len, l_len, 0, True)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10)
    finite = np.repeat(np.isfinite(theirs[0]), t_len)  # torch's gradient of an infinite loss is not kept
    np.testing.assert_allclose(ours[1][finite], theirs[1][finite], rtol=1e-8, atol=1e-10)
    assert np.all(ours[1][~finite] == 0)  # no alignment: inf, and no gradient (not NaN)


def test_gradcheck_with_blank_ids():
    t_len, l_len = [4, 6, 1], [2, 3, 1]
    scores, labels = _batch(t_len, l_len, 9, blank=0, share=0.5)
    y = lt.LoDTensor(labels, [_offsets(l_len)])

    def loss(d):
        return F.warpctc(lt.LoDTensor(d, [_offsets(t_len)]), y)

    assert torch.autograd.gradcheck(loss, (torch.tensor(scores, requires_grad=True),))


def test_backend_finds_blank_ids_itself():
    """``blank_labels=None``: the torch backend looks at the labels (host, or a tensor on the logits' device)."""
    t_len, l_len = CASES["mixed"]
    scores, labels = _batch(t_len, l_len, 4, blank=2)
    be = get_backend("torch")
    want = _warpctc(scores, labels, t_len, l_len, 2).ravel()
    for ids in (labels.ravel(), torch.tensor(labels.ravel())):
        got = be.ctc_loss(torch.tensor(scores), _offsets(t_len), ids, _offsets(l_len), 2)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    differs = be.ctc_loss(torch.tensor(scores), _offsets(t_len), labels.ravel(), _offsets(l_len), 2, False)
    assert not np.allclose(differs.numpy(), want)  # torch's rule, had it been asked for


def test_device_labels_holding_the_blank_on_the_route(enter_route, monkeypatch):
    """Device labels: the blank ids counted in the label check's one read (five scalars), the recursion run
    on the device, the same numbers as on plain CPU tensors."""
    t_len, l_len = CASES["mixed"]
    scores, labels = _batch(t_len, l_len, 6, blank=0)

    def run(device):
        x = torch.tensor(scores, device=device, requires_grad=True)
        y = lt.LoDTensor(torch.tensor(labels, device=device), [_offsets(l_len)])
        loss = F.warpctc(lt.LoDTensor(x, [_offsets(t_len)]), y)
        torch.where(torch.isfinite(loss), loss, 0.0).sum().backward()
        return loss.detach().cpu().numpy(), x.grad.cpu().numpy()

    want = run("cpu")
    np.testing.assert_allclose(want[0], _warpctc(scores, labels, t_len, l_len, 0), rtol=1e-12)
    device = enter_route()
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = run(device)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)
    assert reads == [5], reads


def test_cupy_device_labels_holding_the_blank(emulated, monkeypatch):
    t_len, l_len = CASES["mixed"]
    scores, labels = _batch(t_len, l_len, 6, blank=0)
    want = _warpctc(scores, labels, t_len, l_len, 0)
    reads = count_reads(monkeypatch, emulated.be)
    got = F.warpctc(lt.LoDTensor(emulated.array(scores), [_offsets(t_len)]),
                    lt.LoDTensor(emulated.array(labels), [_offsets(l_len)]))
    assert reads == [5], reads
    np.testing.assert_allclose(emulated.numpy(got), want, rtol=1e-12)

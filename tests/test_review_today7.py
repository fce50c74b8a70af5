"""Second reading of the day's changes (2026-11-27, session 2): what the lead found reading them."""

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")

LIBS = {"numpy": np.zeros, "torch": torch.zeros}


def _sum(x):
    return float(np.asarray(x.detach() if hasattr(x, "detach") else x).sum())


@pytest.mark.parametrize("lib", sorted(LIBS))
@pytest.mark.parametrize("write", ["base add_", "base values()", "other view", "base component"])
def test_a_transposed_view_reads_writes_made_after_its_first_read(lib, write):
    """A transposed view cached its materialised components on first read and never saw later writes into
    its base (``nt.add_(1)``), through the base's ``values()``, another view or a component of ``unbind``;
    torch's view reads the storage each time."""
    zeros = LIBS[lib]
    nt = ln.nested_tensor([zeros((2, 3)), zeros((4, 3))])
    t = nt.transpose(1, 2)
    assert _sum(t.to_padded_tensor(0)) == 0  # the first read
    if write == "base add_":
        nt.add_(1)
    elif write == "base values()":
        nt.values()[...] = 1
    elif write == "other view":
        nt.transpose(1, 2).fill_(1)
    else:
        for c in nt.unbind():
            c[...] = 1
    assert _sum(t.to_padded_tensor(0)) == 18  # 6 rows of 3 ones
    assert _sum(t.sum(dim=1).to_padded_tensor(0)) == 18


def test_a_transposed_view_of_torch_data_reads_writes_like_torch():
    values = torch.zeros(6, 3)
    ref = torch.nested.nested_tensor_from_jagged(values.clone(), torch.tensor([0, 2, 6]))
    nt = ln.nested_tensor_from_jagged(values, torch.tensor([0, 2, 6]))
    t, rt = nt.transpose(1, 2), ref.transpose(1, 2)
    t.to_padded_tensor(0), rt.to_padded_tensor(0)
    nt.mul_(0).add_(2), ref.mul_(0).add_(2)
    # (components, not to_padded_tensor: torch 2.13 pads a transposed jagged tensor to its regular dim's size,
    # cutting a longer component's rows off)
    for ours, theirs in zip(t.unbind(), rt.unbind()):
        torch.testing.assert_close(torch.as_tensor(ours), theirs)
    assert [tuple(c.shape) for c in t.unbind()] == [(3, 2), (3, 4)]


@pytest.mark.parametrize("lib", sorted(LIBS))
@pytest.mark.parametrize("dims", [(1, 2), (1, 3), (2, 3)])
def test_to_padded_tensor_of_a_transposed_view_pads_the_components_as_they_read(lib, dims):
    """The padded copy of a transposed view comes from its storage padded and permuted (no materialised
    components): each component lands padded as it reads, ``output_size`` in the dims as they read."""
    rng = np.random.default_rng(0)
    comps = [rng.standard_normal((n, 3, 2)).astype(np.float32) for n in (2, 5, 0, 4)]
    nt = ln.nested_tensor(comps if lib == "numpy" else [torch.from_numpy(c) for c in comps])
    t = nt.transpose(*dims)
    parts = [np.asarray(c) for c in t.unbind()]
    shape = [max(p.shape[d] for p in parts) for d in range(3)]
    for size in (None, (5, *[s + 1 for s in shape])):
        want = np.full(size or (len(parts), *shape), -1.0, np.float32)
        for i, p in enumerate(parts):
            want[i][tuple(slice(0, s) for s in p.shape)] = p
        got = np.asarray(t.to_padded_tensor(-1.0, size))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("lib", sorted(LIBS))
@pytest.mark.parametrize("case", ["no row", "no component", "no column", "rows", "one column", "one row each"])
def test_is_contiguous_of_a_transposed_view_as_torch(lib, case):
    """A transposed view with no element, or whose moved dims have size 1, is contiguous (torch's answer, by
    the dense rule on its values()); it was always False."""
    values, offsets = {"no row": ((0, 3), [0, 0, 0]), "no component": ((0, 3), [0]), "no column": ((5, 0), [0, 2, 5]),
                       "rows": ((5, 3), [0, 2, 5]), "one column": ((5, 1), [0, 2, 5]),
                       "one row each": ((2, 3), [0, 1, 2])}[case]
    theirs = torch.nested.nested_tensor_from_jagged(torch.zeros(values), torch.tensor(offsets)).transpose(1, 2)
    data = np.zeros(values, np.float32) if lib == "numpy" else torch.zeros(values)
    ours = ln.nested_tensor_from_jagged(data, np.array(offsets) if lib == "numpy" else torch.tensor(offsets))
    assert ours.transpose(1, 2).is_contiguous() == theirs.is_contiguous()


def test_dlpack_of_reversed_data_is_refused_instead_of_crashing_torch():
    """``torch.from_dlpack`` of a capsule over negative strides (NumPy exports them) aborts the process;
    a LoDTensor over a reversed view refuses the export with a BufferError naming the cure, and leaves
    the data as it was."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    import lodtensor as lt  # noqa: PLC0415

    data = np.arange(6.0)[::-1]
    t = lt.LoDTensor(data, [[0, 2, 6]])
    with pytest.raises(BufferError, match="negative strides"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="negative strides"):
        t.__dlpack_ragged__()
    assert data.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    code = ("import numpy as np, torch, lodtensor as lt\n"
            "t = lt.LoDTensor(np.arange(6.0)[::-1], [[0, 2, 6]])\n"
            "try:\n    torch.from_dlpack(t)\nexcept BufferError:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "refused" in done.stdout, done.stderr[-2000:]
    copied = lt.LoDTensor(data.copy(), [[0, 2, 6]])
    assert torch.from_dlpack(copied).tolist() == data.tolist()

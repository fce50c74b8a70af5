"""The offline CUDA check (lodtensor.backend.cupy.cuda.check) passes on the package and can fail.

NVRTC and ptxas come from the nvidia-cuda-nvrtc-cu12 / nvidia-cuda-nvcc-cu12 wheels
(`make gpu-check` installs them); without them these tests skip.
"""

import pytest

pytest.importorskip("nvidia.cuda_nvrtc")
pytest.importorskip("nvidia.cuda_nvcc")

from lodtensor.backend.cupy import cuda  # noqa: E402
from lodtensor.backend.cupy.cuda import check  # noqa: E402

_GOOD = """
template <typename T> __global__ void __launch_bounds__(256, 4) scale(T* x, long long n, T a) {
    for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += 256LL * gridDim.x) x[i] *= a;
}
"""

_BROKEN = _GOOD.replace("x[i] *= a;", "x[i] *= a")  # a missing semicolon

# 64 values kept live across a barrier under a 32-register cap (1024 threads x 2 blocks per SM)
_SPILLING = """
__global__ void __launch_bounds__(1024, 2) spill(const float* x, float* out) {
    float v[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) v[i] = x[threadIdx.x + i * 1024];
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += v[i] * v[63 - i] + v[(i * 7) & 63];
    out[threadIdx.x] = s;
}
"""

# 48 KiB of shared memory per 256-thread block: 3 blocks per SM on sm_80, 37.5% occupancy
_HUNGRY = """
__global__ void __launch_bounds__(256) hungry(float* x) {
    __shared__ float tile[12288];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = tile[255 - threadIdx.x];
}
"""


@pytest.fixture(scope="module")
def package_check():
    return check.check()


def test_the_package_kernels_pass(package_check):
    rows, failures = package_check
    assert failures == []
    expected = {n for m in cuda.SOURCES for n in cuda.name_expressions(m) + list(cuda.EXTERN_C[m])}
    for arch in check.ARCHS:
        got = {r["kernel"] for r in rows if r["arch"] == arch}
        assert got == expected  # every instantiation the backend can launch, on both archs
    assert all(r["spill_stores"] == 0 == r["spill_loads"] for r in rows)
    assert min(r["occupancy"] for r in rows) >= check.OCCUPANCY_FLOOR


def test_a_good_source_passes():
    rows, failures = check.check_source(_GOOD, ["scale<float>", "scale<double>"])
    assert failures == [] and len(rows) == 4
    assert {r["kernel"] for r in rows} == {"scale<float>", "scale<double>"}


def test_a_broken_source_is_rejected():
    rows, failures = check.check_source(_BROKEN, ["scale<float>"], filename="broken.cu")
    assert rows == [] and len(failures) == len(check.ARCHS)
    assert "NVRTC could not compile broken.cu" in failures[0] and "expected a \";\"" in failures[0]


def test_a_spilling_kernel_is_rejected():
    rows, failures = check.check_source(_SPILLING, [], extern_c=(), filename="spill.cu")
    assert rows and all(r["spill_stores"] > 0 for r in rows)
    assert any("spill stores" in f for f in failures)


def test_low_occupancy_is_rejected():
    rows, failures = check.check_source(_HUNGRY, ["hungry"], filename="hungry.cu", archs=("sm_80",))
    assert rows[0]["smem"] == 49152 and rows[0]["occupancy"] == pytest.approx(0.375)
    assert failures and "under the floor 50%" in failures[0]


def test_main_prints_the_table(capsys, monkeypatch, package_check):
    monkeypatch.setattr(check, "check", lambda floor: package_check)
    assert check.main(["--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| `lt_segment_reduce<0, float, float, 4>` |" in out and "0 spills" in out


def test_docs_hold_the_current_table(package_check):
    """docs/gpu.md carries the checker's table (for the tool versions it names)."""
    import os  # noqa: PLC0415

    if check.tool_versions() != "NVRTC 12.9, ptxas V12.9.86":
        pytest.skip(f"registers depend on the compiler; docs/gpu.md is from 12.9, here {check.tool_versions()}")
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "gpu.md")
    with open(path, encoding="utf-8") as f:
        docs = f.read()
    table = check.format_table(package_check[0], markdown=True)
    assert table in docs, "docs/gpu.md: paste `python -m lodtensor.backend.cupy.cuda.check --markdown` into it"


def test_cupy_compiles_every_kernel_as_the_backend_asks(monkeypatch):
    """CuPy's own NVRTC path (its options, name-expression mapping), which RawModule takes on a GPU.

    Only the arch lookup needs a driver; it is pinned to compute_90 here.
    """
    compiler = pytest.importorskip("cupy.cuda.compiler")
    monkeypatch.setattr(compiler, "_get_arch_for_options_for_nvrtc", lambda arch=None: (f"-arch=compute_{arch}", "ptx"))
    for module in cuda.SOURCES:
        names = cuda.name_expressions(module)
        ptx, mapping = compiler._compile_using_nvrtc_no_warning(
            cuda.source_text(module), options=("-std=c++14",), arch="90", name_expressions=names)
        text = ptx.decode() if isinstance(ptx, bytes) else ptx
        assert set(mapping) == set(names)
        assert all(f".entry {mapping[n]}(" in text for n in names)
        for name in cuda.EXTERN_C[module]:
            assert f".entry {name}(" in text

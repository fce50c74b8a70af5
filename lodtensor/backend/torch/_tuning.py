"""Every tuned threshold of the torch backend, with where and how it was measured.

Read at call time (``_tuning.NAME``). "Measured" means: torch 2.13 (CPU build) on the project's
shared 2-core x86-64 VM, the workloads of ``bench/sequence.py`` (74K-2.7M rows, widths 1-256,
float32/float64), interleaved rounds; the CUDA rows on one NVIDIA H100 (``bench/gpu.py``).

>>> SPMM_MAX_ROW_BYTES
160
"""

#: CPU segment sums as one CSR x dense product (MKL's SpMM reads every row once, in order, on all
#: threads: 1.5x faster than ``index_add_`` at width 256 and 8x at width 16 on 2.7M rows) for
#: float rows of at least SPMM_MIN_ROW values (narrower rows are faster with ``index_add_``) and at
#: most SPMM_MAX_ROW_BYTES bytes: from about 192 bytes a row torch's product falls off a cliff, 2-2.6x
#: slower than ``index_add_`` at float32 width 64-256 on 74K-300K rows.
SPMM_MIN_ROW = 4
SPMM_MAX_ROW_BYTES = 160
#: The column indices and ones of the SpMM segment sums are kept for reuse up to this many bytes a dtype
#: (2.8M rows of float32, the largest batches of the benchmarks); more rows get their own for the call:
#: kept, one batch of 20M rows left 228 MiB held until the process ended (tests/test_memory_hunt.py).
SPMM_KEPT_BYTES = 32 << 20
#: CPU max/min: the NumPy kernel up to this many bytes a row (2x faster than ``scatter_reduce`` at
#: float32 width 16), ``scatter_reduce`` above it (2x faster at width 64-256) unless the compiled
#: kernel serves the width.
NUMPY_EXTREME_MAX_ROW_BYTES = 96
#: CPU rows of at least this many bytes are reduced by the NumPy backend's compiled kernel in the
#: autograd Functions' forward (one read: 0.8x of ``index_add_`` / ``scatter_reduce`` at width 256).
COMPILED_MIN_ROW_BYTES = 32
#: ``ReluCPU`` (the compiled relu with torch's bits) serves tensors of at least this many bytes:
#: glibc maps every allocation from 32 MiB afresh, so torch.relu's output pays page faults there,
#: which the buffer pool avoids (32 MiB: 1.9 against 13.3 ms; 48 MiB: 3.0 against 19.9 ms); below,
#: torch.relu on its threads is as fast or faster (8 MiB: 0.41 against 0.11 ms).
RELU_CPU_MIN_BYTES = 32 << 20
#: Multiply-adds of one time step's GEMM (active rows x hidden x gates x hidden) given to one torch
#: thread in the recurrences' per-step loops (``_recurrent.StepThreads``), forward and backward: below
#: ``threads x`` this, fewer threads run the loop. A step is one small GEMM and a few element-wise
#: ops, and with one thread per core every step pays OpenMP's fork and join. Calibrated on an idle
#: 16-core CPU (it tracks the best thread count within noise) and on the loaded 2-core VM, where 2
#: threads made a small LSTM 6-10x slower than 1 (docs/porting.md, "Speed").
STEP_WORK_PER_THREAD = 1 << 21
#: The recurrences' in-place tanh on CPU float32/float64 runs NumPy's tanh on the tensor's memory:
#: torch 2.13's CPU tanh took 500 us for a [600, 256] float32 block against NumPy's 26-86 us (one
#: thread; 1454 against 273 us in float64), measured on the 2-core VM (``tanh_`` was 15% of a
#: ``dynamic_lstm`` forward+backward under torch's profiler).
NUMPY_TANH = True
#: Values of one time step's element-wise ops (active rows x hidden) given to one torch thread in
#: the recurrences' per-step loops (``_recurrent.StepThreads``; the step's GEMMs follow
#: STEP_WORK_PER_THREAD): an op under about 4 MB of float32 is over before OpenMP's fork and join
#: pay off. On the loaded 2-core VM six element-wise ops of a [2266, 256] step took 0.62 ms on one
#: thread and 4.8 ms on two (medians of 60 interleaved rounds; p90 3.4 and 25.8 ms).
STEP_ELEMENTS_PER_THREAD = 1 << 20
#: A change of torch's thread count (``torch.set_num_threads``) slower than this makes the recurrences'
#: step loops keep torch's count (``_steps.switch_is_cheap``): a loop changes it twice a step when its
#: GEMMs and element-wise ops get different counts, and fewer threads saved a [2266, 256] step 4 ms on
#: the loaded 2-core VM (STEP_ELEMENTS_PER_THREAD). Measured there, a change took 1.5 us on torch 2.13
#: (CPU build), 0.15 ms on torch 2.8.0 and 14 ms on torch 2.4.1 (their PyPI CUDA wheels, on the CPU):
#: on 2.4.1 a small LSTM's gradcheck ran for minutes.
STEP_SWITCH_MAX_SECONDS = 1e-3

"""Every tuned threshold of the NumPy backend, with where and how it was measured.

The code reads these at call time (``_tuning.NAME``), so a test or a user
tuning for another machine can set one. Unless a line says otherwise, "measured"
means: the shared 2-core x86-64 VM of this project (AVX2/AVX-512, 24 GiB), NumPy 2
with its bundled OpenBLAS, the workloads of ``bench/sequence.py`` / ``bench/cpu.py``
(74K-8M rows, widths 1-1024, float32/float64), interleaved rounds, medians.

>>> MIN_PARALLEL_BYTES == 16 << 20
True
"""

# -- threads --------------------------------------------------------------------------------------
#: Outputs of at least this many bytes are moved (pad, unpad, softmax blocks) by several threads;
#: below, handing out the work costs more than it saves (a second thread gains 10-20% at 75-172 MB,
#: loses at 4.7 MB: 0.12 ms of hand-off).
MIN_PARALLEL_BYTES = 16 << 20

# -- segment reductions: the routes of numpy/_routes.py ---------------------------------------------
#: Max and min over rows of at least this many elements go by sorted blocks, not ``reduceat``
#: (the measured crossover of the two on widths 1-64).
WIDE_ROW = 16
#: ``reduceat`` serves rows of fewer than REDUCEAT_COLUMNS elements when the mean sequence has
#: REDUCEAT_LENGTH rows or more (one inner-loop call per sequence and column wins there).
REDUCEAT_COLUMNS = 8
REDUCEAT_LENGTH = 16
#: The sorted blocks gather about this many bytes of rows at a time (the scratch stays in L2).
BLOCK_BYTES = 1 << 20
#: Sums of rows of at least this many elements use SciPy's CSR product (one pass over the data)
#: when SciPy is installed and the compiled kernel is not.
CSR_ROW = 8
#: The chunk kernel (numpy/_chunks.py): a chunk holds about this many bytes of rows (its padded
#: scratch stays in L3; 1-8 MiB measured, 4 MiB at or near the best on every workload).
CHUNK_BYTES = 4 << 20
#: Sequences of a chunk are padded to the longest of their class: lengths within this factor.
CLASS_RATIO = 1.5
#: Chunked reductions share chunks among threads from this many input bytes (2x at 72 MiB, a loss
#: at 4.7 MiB).
CHUNK_PARALLEL_BYTES = 16 << 20
#: A long sequence is reduced viewed as rows of at least this many elements.
FOLD_ELEMENTS = 256
#: Block pieces (numpy/_pieces.py): rows per block (8-32 within 10% for the product on 64-byte
#: rows; 16 leaves 1.7% of the rows of 1-63-row sequences to gather).
PIECE_ROWS = 16
#: Row sizes in bytes that go by pieces (measured at 64 bytes: float32 x 16; at 1 KiB the stacked
#: product calls BLAS per block and loses to the chunk kernel).
PIECES_ROW_BYTES = (32, 64)
#: The pieces' product splits across threads from this many bytes of data (as the chunk kernel).
PIECES_PARALLEL_BYTES = 16 << 20

# -- the compiled kernels (numpy/_compiled.py, _csegment.c, _cpointwise.c) ---------------------------
#: Rows narrower than one SIMD vector go NumPy's way, except float rows of 4, 8 or 16 bytes with at
#: least NARROW_VALUES values per sequence on average: the kernel reads those as one run per
#: sequence, lanes folded per column (0.18-0.54x of NumPy's time for sums and for max/min of 2-4
#: values a row; shorter runs go a value at a time: up to 2.8x NumPy's time).
COMPILED_MIN_ROW_BYTES = 32
NARROW_VALUES = 64
#: Compiled reductions split among threads (the kernels' own pool) from this many input bytes: they are
#: memory-bound, and below it one thread is as fast (sum, 2026-11-27, 1 thread / 2 threads: 4 MB 53 / 69 us,
#: 16 MB 397 / 416 us, 64 MB rows of 256 2.29 / 1.12 ms, 128 MB 4.4-4.8 / 2.3-2.9 ms; the Python pool
#: they used before: 470 us at 16 MB, 2.5 ms at 128 MB).
COMPILED_PARALLEL_BYTES = 16 << 20
#: Pointwise outputs of at least this many bytes use streaming (non-temporal) stores: no line of
#: them would still be cached when read next, and a plain store reads each line first.
STREAM_BYTES = 16 << 20
#: Narrow rows broadcast onto many (a bias onto a linear layer's output) are done as rows of about
#: this many values (``_util.broadcast_row``: 16 columns x 74K rows 344 -> 16 us).
BROADCAST_ROW_VALUES = 4096
#: The compiled pointwise kernels split over threads of their own pool (_cparallel.h) from this many
#: bytes of output (relu: memory-bound), and the compiled GELU (about 0.27 ns a float32 value on one
#: AVX-512 core: about 4x relu's work a byte) from GELU_PARALLEL_BYTES. (The Python thread pool's
#: hand-off, which they used before, cost about 120 us on the 2-core VM: relu of 1 MB took 38 us on one
#: thread against 166 us on two, of 4 MB 92 against 165 us; threads the kernel started and joined per
#: call cost 35-50 us to start: relu of 4.7 MB took 96 us on two such threads against 76 us on one.)
RELU_PARALLEL_BYTES = 1 << 20
GELU_PARALLEL_BYTES = 256 << 10
#: From this many values the compiled relu beats NumPy's maximum, call costs included (1,024
#: values: 1.7 us for NumPy's loop, 0.6 us for the kernel).
RELU_MIN = 1024

# -- softmax, layer norm and other row-wise math ----------------------------------------------------
#: Wide-row segment softmax works through blocks of rows of about this many bytes.
SOFTMAX_BLOCK_BYTES = 256 * 1024
#: Narrow-row segment softmax splits over threads from this many bytes of output (2x at 2 MiB).
SOFTMAX_PARALLEL_BYTES = 1 << 20
#: Values spanning at most this share one softmax shift: exp(-span) stays normal, and rounding
#: x - shift adds at most span * eps / 2 relative error (float32: 1e-6). Derived, not timed.
SOFTMAX_SPAN = {"f": 16.0, "d": 64.0}
#: Softmax over the last axis runs in row blocks (threaded when large) from this many elements.
ROWWISE_MIN = 1 << 16
#: Elements per block of the arg-extreme key pass (three arrays of it stay in L2).
SEGMENT_BLOCK = 1 << 16
#: Elements per layer_norm block (fewer, larger blocks win: 2^20 over 2^19 by ~4%).
LN_BLOCK = 1 << 20
#: Elements per block of the NumPy special functions (erf, GELU, SiLU): a few float32 temporaries
#: of this size fit in L2 (measured best of 2^15-2^20).
SPECIAL_BLOCK = 1 << 17
#: Below this many elements the special functions run on one thread.
SPECIAL_PARALLEL_MIN = 1 << 18
#: Elementwise ufuncs split over threads from this many bytes of output, in blocks of this many
#: elements.
UFUNC_PARALLEL_BYTES = 16 << 20
UFUNC_BLOCK_ELEMENTS = 1 << 18

# -- linear (numpy/_blas.py) ----------------------------------------------------------------------
#: Results smaller than this many values take matmul then += bias: the ctypes call costs a few
#: microseconds, about what the bias pass costs there.
BLAS_MIN_VALUES = 1 << 15
#: The deepest inner dimension whose bias is folded into the GEMM (beta=1), where the probe GEMM
#: matches the two-step bits: OpenBLAS's block depth (GEMM_Q) is 256-384 on the x86-64 and arm64
#: cores it picks (384 for float32/float64 on this VM's); deeper products add blocks in another order.
BLAS_MAX_DEPTH = 256

# -- memory ---------------------------------------------------------------------------------------
#: Outputs of at least this many bytes come from the buffer pool (numpy/_pool.py); smaller ones
#: from np.empty, which the C allocator reuses well. glibc maps every allocation of 32 MiB or more
#: afresh, so large outputs would pay page faults on every call.
POOL_MIN_BYTES = 16 << 20
#: Pool block sizes are multiples of this (a huge page).
POOL_GRAIN = 2 << 20
#: The pool's default budget (``LODTENSOR_BUFFER_POOL`` overrides it).
POOL_DEFAULT_BYTES = 256 << 20
#: Per-thread scratch buffers up to this size are kept between calls; larger ones are not.
SCRATCH_KEPT_BYTES = 8 << 20
#: Bytes of host plans (block plans, CSR matrices, pieces) kept across calls, least recently used out.
PLAN_CACHE_BYTES = 256 << 20
#: ``unpad`` of padded data of at most this many bytes without a cached plan: NumPy's boolean index
#: (``padded[mask]``), where making the row index and the row views cost more than the copy (the
#: per-call cost of ``from_padded`` on 16 sequences: 17 -> 6 us, bench/overhead.py).
UNPAD_MASK_BYTES = 256 << 10

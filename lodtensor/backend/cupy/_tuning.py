"""Every tuned launch parameter of the CUDA kernels (CuPy and torch CUDA data alike).

The constants the ``.cu`` sources are written for (threads per block, the register cap, rows per
piece) live in ``cuda/__init__.py`` beside the sources, which ``make gpu-check`` compiles with them;
these are the host-side choices. "Measured" means one NVIDIA H100 80GB HBM3 (``bench/gpu.py``).

>>> COMBINE_BLOCKS
4096
"""

#: Blocks of the combine kernels, which stride over the sequences whose pieces they merge.
COMBINE_BLOCKS = 4096
#: The piece kernels stride over their pieces: at most this many blocks are launched (4 resident
#: blocks of 256 threads on each of an H100's 132 SMs make 528; beyond ~30 waves more blocks only
#: add launch work, and a loose bound on the pieces would launch mostly idle blocks). Measured
#: (bench/_gpu_sweep.py, H100, 2026-11-26): 2,112 or 528 blocks, each warp then striding over
#: several pieces, were 2-9% slower on the uniform [8M, 128] sum/max/softmax and equal on the
#: skewed D=128 and D=4096 sums. A piece -> sequence table that spared each warp its ballot search
#: of the plan was tried the same day and measured equal within noise (uniform sum 1.78 vs 1.79 ms,
#: D=4096 0.742 vs 0.719 ms): the search is not what separates the kernels from
#: torch.segment_reduce, so it was not kept.
MAX_PIECE_BLOCKS = 1 << 14
#: Threads per block of the piece kernels (a warp per piece: lt_segment_reduce, the softmax passes,
#: lt_segment_dot, lt_softmax_grad_apply, lt_unpad; they use no shared memory), a multiple of 32 up to
#: 256. A block's warp slots are freed only when its last warp is done: 8 warps on 8 sequences of
#: 1..159 rows are busy about 57% of the block's time (the expected longest of 8 lengths), 2 warps
#: about 75%. 256: as measured on the H100 (2026-11-26). Not yet measured smaller (bench/_gpu_sweep.py:
#: "64 threads a block", "128 threads a block"); MAX_PIECE_BLOCKS scales so the warps stay as many.
PIECE_THREADS = 256
#: The short kernels (a thread per sequence) stride over the sequences with at most this many blocks.
MAX_SHORT_BLOCKS = 1 << 16
#: Rows of at most this many bytes (float32 D <= 4, float64 D <= 2) are "narrow": there, sequences
#: of at most SHORT_ROWS rows go one per thread instead of one per warp (a warp over a sequence of
#: 8 single values leaves 24 of its 32 lanes idle, and planning 16.7M of them dominated: the skewed
#: D=1 workload ran at 2% of the copy's bandwidth).
SHORT_ROW_BYTES = 16
SHORT_ROWS = 32
#: Keep each LoD's piece plan (a count kernel and three scans) for the next op on it with the same
#: layout (``_launch.plan``: 24 bytes of device memory per sequence while the LoD lives);
#: bench/_gpu_sweep.py times both. False: a plan per call, as before 2026-11-26.
CACHE_PLANS = True
#: Fewer sequences than this: the plan is one launch of one block (``lt_piece_plan``: the counts and
#: their three scans, 2,048 sequences a round), not a count kernel and three ``cupy.cumsum`` calls (each
#: a few launches and allocations of host time). A training step's new LoD of a few thousand sequences
#: is planned on every call, so its launches, not its bytes, are the plan's cost. 0: the count kernel
#: and the scans always, as before 2026-11-28. Not yet measured on a device (bench/_gpu_sweep.py times
#: both: "plan by a count kernel and scans"); the model: a round of the block costs about what one
#: scan launch does, so up to 8 rounds (16,384 sequences) should cost no more device time.
PLAN_ONE_BLOCK = 1 << 14
#: Softmax by blocks (``_launch.segment_softmax``, ``lt_softmax_block``) where the sequences average
#: at least this many block steps of rows (a block step: 8 warps x 32 / cw rows; 8 rows for float32
#: D >= 128): the one-piece sequences then cross HBM once each way instead of twice in and once
#: out (the second read comes from L2). 0: three
#: passes always, as before 2026-11-26. Not yet measured on a device (bench/_gpu_sweep.py times
#: both); the model: the uniform [8M, 128] softmax moves 2/3 of the bytes it did, the 52% of the
#: copy's bandwidth measured for three passes could reach about 75%.
SOFTMAX_BLOCK_STEPS = 4
#: The LSTM and GRU recurrences run each element-wise part of a time step as one kernel, forward
#: and backward (``_steps``, ``cuda/rnn.cu``), beside the step's GEMMs, on CuPy arrays and on torch
#: CUDA tensors alike: on the H100 the unfused steps (a dozen element-wise launches each) made
#: ``dynamic_lstm`` / ``dynamic_gru`` forward+backward on torch CUDA 25.4 / 23.3 ms against cuDNN's
#: 5.64 / 7.18 ms on bench/gpu.py's batch, launch-bound. Fused, forward and backward make 4.2 (LSTM)
#: and 8.1 (GRU) launches a step instead of 27.1 and 19.0 (counted on the emulated route:
#: tests/backend/test_fused_steps_emulated.py). Timed on the H100 (2026-11-28, planned launches):
#: LSTM 8.90 against 20.8 ms unfused, GRU 14.9 against 22.4, the GRU then host-bound; its GEMMs are
#: cuBLAS calls planned with the launches since (``_steps._Steps.gemm``), not yet timed.
#: False: the unfused steps.
FUSED_STEPS = True
#: Segment softmax's backward on torch CUDA tensors as one kernel route (``_launch.segment_softmax_grad``:
#: by blocks or over the pieces, as the forward), reading grad and y once each from HBM and writing
#: once, where the unfused ops (a product, a segment sum, a gather by segment ids, a difference, a
#: product) read 7 and write 4 arrays of the data's size (the model: about 3.7x less traffic). Not
#: yet measured on a device (bench/gpu.py times both: "softmax forward+backward"). False: the
#: unfused ops.
FUSED_SOFTMAX_GRAD = True
#: Segment max's and min's backward on torch CUDA tensors as one kernel route
#: (``_launch.segment_extreme_grad``: count the rows equal to the result, then write each row's share),
#: reading the rows twice (the second time from L2 by blocks) and writing once, where the unfused ops
#: (a gather of the result, a comparison, a cast, a segment count, a division, a gather, a product)
#: read 6 and write 5 arrays of the data's size. Not yet measured on a device (bench/gpu.py times
#: both: "max forward+backward"). False: the unfused ops.
FUSED_EXTREME_GRAD = True
#: Rows wider than one column tile (float32 D > 128, 32 packs): the piece kernels' blocks go tiles
#: first (grid x over the tiles), so the blocks resident at one time read every tile of the same
#: rows, whole rows streamed; False: one tile of many rows per wave of blocks (a 512-byte stripe of
#: every 16 KiB row for float32 D = 4096, each row's DRAM pages opened once per tile), as measured
#: on the H100 (skewed D=4096 sum 0.737 ms against torch.segment_reduce's 0.539). Not yet measured
#: tiles first (bench/_gpu_sweep.py times both); rows of one tile launch the same grid either way.
TILES_FIRST = False
#: Segment sum/mean/max/min by blocks (``_launch.segment_reduce``, ``lt_segment_reduce_block``) where
#: the sequences average at least this many block steps of rows; 0: a warp per piece always. A block
#: per sequence needs no search of the plan and its warps end together, where 8 warps on 8
#: sequences of 1..159 rows hold their block until the longest is done. Measured on the H100 in two
#: runs (bench/_gpu_sweep.py, "sum and max by blocks"; docs/gpu.md): by blocks was the faster on the
#: uniform [8M, 128] sum and max each time (1.47 vs 1.49-1.50 ms; 1.43 vs 1.45-1.46 ms, under
#: torch.segment_reduce's 1.44) and on a small batch (512 sequences, D=256: 60 vs 67 us); the skewed
#: batches average fewer rows than 4 block steps and take the piece kernel either way.
REDUCE_BLOCK_STEPS = 4

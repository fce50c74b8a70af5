"""Every tuned launch parameter of the CUDA kernels (CuPy and torch CUDA data alike).

The constants the ``.cu`` sources are written for (threads per block, the register cap, rows per
piece) live in ``cuda/__init__.py`` beside the sources, which ``make gpu-check`` compiles with them;
these are the host-side choices. "Measured" means one NVIDIA H100 80GB HBM3 (``bench/gpu.py``).

>>> COMBINE_BLOCKS
4096
"""

#: Blocks of the combine kernels, which stride over the sequences whose pieces they merge.
COMBINE_BLOCKS = 4096
#: The piece kernels stride over their pieces: at most this many blocks are launched (8 resident
#: blocks of 256 threads on each of an H100's 132 SMs make 1,056; beyond ~16 waves more blocks only
#: add launch work, and a loose bound on the pieces would launch mostly idle blocks).
MAX_PIECE_BLOCKS = 1 << 14
#: The short kernels (a thread per sequence) stride over the sequences with at most this many blocks.
MAX_SHORT_BLOCKS = 1 << 16
#: Rows of at most this many bytes (float32 D <= 4, float64 D <= 2) are "narrow": there, sequences
#: of at most SHORT_ROWS rows go one per thread instead of one per warp (a warp over a sequence of
#: 8 single values leaves 24 of its 32 lanes idle, and planning 16.7M of them dominated: the skewed
#: D=1 workload ran at 2% of the copy's bandwidth).
SHORT_ROW_BYTES = 16
SHORT_ROWS = 32
#: The piece -> sequence table (``lt_piece_owner``) is written where the sequences are at most this
#: many (its kernel reads the plan of every sequence: 16.7M of them cost more than the search they
#: save, most having no piece beside the short kernel) ...
OWNER_MAX_SEQUENCES = 1 << 20
#: ... and the rows make at most this many chunks (a thread writes its sequence's pieces in turn, so
#: one sequence of a billion rows would leave one thread writing for long). With the table a warp
#: finds its piece's sequence in one load instead of a log32(n)-deep search, which for pieces of a
#: few rows (100K sequences of 1..159 rows; D = 4096 beside sequences of 0..16 rows) was a large
#: part of each warp's time.
OWNER_MAX_LONG_PIECES = 1 << 16

"""Every tuned launch parameter of the CUDA kernels (CuPy and torch CUDA data alike).

The constants the ``.cu`` sources are written for (threads per block, the register cap, rows per
piece) live in ``cuda/__init__.py`` beside the sources, which ``make gpu-check`` compiles with them;
these are the host-side choices. "Measured" means one NVIDIA H100 80GB HBM3 (``bench/gpu.py``).

>>> COMBINE_BLOCKS
4096
"""

#: Blocks of the combine kernels, which stride over the sequences whose pieces they merge.
COMBINE_BLOCKS = 4096

"""The CUDA C sources of the CuPy backend, and the table of their instantiations.

The kernels live as ``.cu`` files beside this module (shipped as package data),
so they can be compiled and resource-checked without a GPU
(``python -m lodtensor.backend.cuda.check``, run by ``make gpu-check``). The
CuPy backend (``lodtensor.backend.cupy``) loads them with ``cupy.RawModule``
and picks a template instantiation by name expression; both sides take the
names from :func:`name_expressions`, so the checker compiles exactly the
instantiations the backend can launch. Nothing here imports cupy.

>>> kernel_name("reduce", op="max", dtype="float32", pack=4)
'lt_segment_reduce<1, float, float, 4>'
>>> kernel_name("reduce", op="mean", dtype="int64")
'lt_segment_reduce<3, long long, double, 1>'
>>> kernel_name("reduce_short", op="sum", dtype="float64")
'lt_segment_reduce_short<0, double, double>'
>>> len(name_expressions("segment")) > 30 and "lt_pad<unsigned int>" in name_expressions("dense")
True

The launch constants here are the ones the sources are written for:

>>> text = source_text("segment")
>>> [int(re.search(rf"#define {name} (\\d+)", text).group(1)) for name in ("LT_BLOCK", "LT_MIN_BLOCKS")]
[256, 4]
>>> BLOCK, MIN_BLOCKS_PER_SM
(256, 4)
"""

import contextlib
import os
import re

import numpy as np

__all__ = [
    "BLOCK", "MIN_BLOCKS_PER_SM", "CHUNK_STEPS", "SOURCES", "NATIVE", "WORDS", "OPS", "EXTERN_C",
    "accumulator", "source_text", "include_dir", "kernel_name", "name_expressions", "compute_dtype",
    "lanes_log2", "pack_of", "softmax_pack", "RNN_KERNELS", "RNN_DTYPES", "RNN_ACTS", "GRAD_DTYPES",
]

#: Threads per block of every kernel (``LT_BLOCK`` in common.cuh).
BLOCK = 256
#: ``__launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)``: caps registers at 64 per thread.
MIN_BLOCKS_PER_SM = 4
#: Rows per piece of a segment reduction, in warp steps (a warp step covers 32 // cw rows). A host-side
#: choice (the kernels take the rows per piece as an argument). Measured on an H100 (2026-11-26, best
#: of 2 interleaved rounds of 12): 64 / 128 / 256 / 512 / 1024 steps gave the uniform [8M, 128] sum
#: 2.48 / 2.06 / 1.62 / 1.62 / 1.69 ms, the skewed D=4096 sum 0.772 / 0.730 / 0.724 / 0.723 / 0.749 ms
#: and the skewed D=1 sum 1.61 / 1.57 / 1.56 / 1.55 / 1.54 ms: 256 is at the optimum.
CHUNK_STEPS = 256
#: Source file of each module.
SOURCES = {"segment": "segment.cu", "softmax": "softmax.cu", "dense": "dense.cu", "rnn": "rnn.cu"}
#: dtypes the segment kernels take natively, with their C type.
NATIVE = {
    "float32": "float", "float64": "double", "int32": "int", "int64": "long long", "uint64": "unsigned long long",
}
#: C word of each itemsize for pad/unpad (pure copies, any dtype of that size).
WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
#: The fused recurrence steps (rnn.cu), and their dtypes.
RNN_KERNELS = ("lstm_step", "lstm_step_grad", "gru_step_gates", "gru_step_out", "gru_step_grad_out",
               "gru_step_grad_reset")
RNN_DTYPES = ("float32", "float64")
#: Paddle's activation names the fused steps compute -> their code in rnn.cu (lt_act).
RNN_ACTS = {"identity": 0, "linear": 0, "sigmoid": 1, "tanh": 2, "relu": 3}
#: dtypes of the backward kernels (softmax's: lt_segment_dot, lt_softmax_grad_*; max's and min's:
#: lt_segment_hits, lt_extreme_grad_*): floating data only.
GRAD_DTYPES = ("float32", "float64")
#: op name -> template code in segment.cu.
OPS = {"sum": 0, "max": 1, "min": 2, "mean": 3}

_COMPUTE = {}  # dtype as given -> compute_dtype's answer
_WIDEN = {"float16": "float32", "bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32",
          "uint16": "int32", "uint32": "int64"}


def compute_dtype(dtype, name="data"):
    """The native dtype a segment kernel computes ``dtype`` in (results are cast back).

    >>> compute_dtype("float16"), compute_dtype("int64")
    ('float32', 'int64')
    >>> compute_dtype("complex64")
    Traceback (most recent call last):
    ...
    TypeError: the CuPy segment kernels take float, int, uint and bool data; data has dtype complex64
    """
    try:
        return _COMPUTE[dtype]  # (once per dtype: NumPy makes a dtype's name in Python each time)
    except (KeyError, TypeError):
        pass
    key = np.dtype(dtype).name
    if key in NATIVE or key in _WIDEN:
        native = key if key in NATIVE else _WIDEN[key]
        with contextlib.suppress(TypeError):  # an unhashable spelling of a dtype: not kept
            _COMPUTE[dtype] = native
        return native
    raise TypeError(f"the CuPy segment kernels take float, int, uint and bool data; {name} has dtype {key}")


def accumulator(op, dtype):
    """Result dtype of ``op`` on native ``dtype``: mean and softmax of integers are float64."""
    if op in ("mean", "softmax") and dtype not in ("float32", "float64"):
        return "float64"
    return dtype


def pack_of(dtype):
    """Values per 16-byte pack of native ``dtype``: the widest load the segment kernels use.

    >>> pack_of("float32"), pack_of("float64"), pack_of("int32")
    (4, 2, 4)
    """
    return 16 // np.dtype(dtype).itemsize


def softmax_pack(dtype):
    """Values per load of the softmax piece kernels: float32's 4; 1 where the running (max, sum)
    pairs are double (their exp takes the registers: packs of them spill under the 64-register cap).

    >>> softmax_pack("float32"), softmax_pack("float64"), softmax_pack("int32")
    (4, 1, 1)
    """
    return pack_of(dtype) if accumulator("softmax", dtype) == "float32" else 1


def lanes_log2(width):
    """log2 of the columns a warp covers per step: min(32, next power of two >= width)."""
    width = max(int(width), 1)
    return min(5, (width - 1).bit_length())


def kernel_name(kind, *, op=None, dtype=None, itemsize=None, pack=1):
    """The name expression of one kernel instantiation (``pack``: values per load of the piece
    kernels, 1 or :func:`pack_of` the dtype)."""
    if kind in ("pad", "unpad"):
        return f"lt_{kind}<{WORDS[itemsize]}>"
    if kind == "counts":
        return "lt_piece_counts"
    if kind == "plan":
        return "lt_piece_plan"
    if kind in RNN_KERNELS:
        return f"lt_{kind}<{NATIVE[dtype]}>"
    if kind in ("dot", "hits"):
        return f"lt_segment_{kind}<{NATIVE[dtype]}, {pack}>"
    if kind in ("softmax_grad_apply", "softmax_grad_block", "extreme_grad_apply", "extreme_grad_block"):
        return f"lt_{kind}<{NATIVE[dtype]}, {pack}>"
    if kind in ("softmax_grad_short", "extreme_grad_short"):
        return f"lt_{kind}<{NATIVE[dtype]}>"
    if kind in ("reduce", "reduce_block", "combine", "reduce_short"):
        acc = NATIVE[accumulator(op, dtype)]
        if kind in ("reduce", "reduce_block"):
            suffix = "" if kind == "reduce" else "_block"
            return f"lt_segment_reduce{suffix}<{OPS[op]}, {NATIVE[dtype]}, {acc}, {pack}>"
        if kind == "reduce_short":
            return f"lt_segment_reduce_short<{OPS[op]}, {NATIVE[dtype]}, {acc}>"
        return f"lt_segment_combine<{OPS[op]}, {acc}>"
    acc = NATIVE[accumulator("softmax", dtype)]
    if kind == "softmax_combine":
        return f"lt_softmax_combine<{acc}>"
    if kind == "softmax_short":
        return f"lt_softmax_short<{NATIVE[dtype]}, {acc}>"
    return f"lt_{kind}<{NATIVE[dtype]}, {acc}, {pack}>"  # softmax_stats, softmax_apply, softmax_block


def name_expressions(module):
    """Every templated instantiation of ``module`` (a key of :data:`SOURCES`), in a fixed order."""
    names = []
    if module not in SOURCES:
        raise KeyError(f"no CUDA module {module!r}; the modules are {sorted(SOURCES)}")
    if module == "rnn":
        return [kernel_name(kind, dtype=dtype) for kind in RNN_KERNELS for dtype in RNN_DTYPES]
    if module == "dense":
        for kind in ("pad", "unpad"):
            names += [kernel_name(kind, itemsize=size) for size in WORDS]
        return names
    if module == "segment":
        for op in OPS:
            for dtype in NATIVE:
                for pack in (1, pack_of(dtype)):
                    names.append(kernel_name("reduce", op=op, dtype=dtype, pack=pack))
                    names.append(kernel_name("reduce_block", op=op, dtype=dtype, pack=pack))
                names.append(kernel_name("reduce_short", op=op, dtype=dtype))
                names.append(kernel_name("combine", op=op, dtype=dtype))
        for dtype in GRAD_DTYPES:
            for pack in (1, pack_of(dtype)):
                names += [kernel_name(kind, dtype=dtype, pack=pack)
                          for kind in ("dot", "hits", "extreme_grad_apply", "extreme_grad_block")]
            names.append(kernel_name("extreme_grad_short", dtype=dtype))
    else:  # softmax
        for dtype in NATIVE:
            for pack in (1, softmax_pack(dtype)):
                names.append(kernel_name("softmax_stats", dtype=dtype, pack=pack))
                names.append(kernel_name("softmax_apply", dtype=dtype, pack=pack))
                names.append(kernel_name("softmax_block", dtype=dtype, pack=pack))
            names.append(kernel_name("softmax_combine", dtype=dtype))
            names.append(kernel_name("softmax_short", dtype=dtype))
        for dtype in GRAD_DTYPES:
            for pack in (1, pack_of(dtype)):
                names.append(kernel_name("softmax_grad_apply", dtype=dtype, pack=pack))
                names.append(kernel_name("softmax_grad_block", dtype=dtype, pack=pack))
            names.append(kernel_name("softmax_grad_short", dtype=dtype))
    return list(dict.fromkeys(names))  # combine/softmax_combine repeat across input dtypes


#: Kernels declared extern "C" (found by their plain name, no name expression).
EXTERN_C = {"segment": ("lt_piece_counts", "lt_piece_plan"), "softmax": (), "dense": (), "rnn": ()}


def include_dir():
    """The folder of the sources (passed to NVRTC as ``-I``)."""
    return os.path.dirname(os.path.abspath(__file__))


def _read(name):
    with open(os.path.join(include_dir(), name), encoding="utf-8") as f:
        return f.read()


def source_text(module):
    """The CUDA C source of ``module``, its ``#include "..."`` of local headers expanded.

    Expanded so the text is the whole program: CuPy's kernel cache is keyed by the
    source text, and a header edit must not load a stale cached kernel.

    >>> '#include "common.cuh"' in source_text("dense"), "lt_warp_find_segment" in source_text("dense")
    (False, True)
    """
    lines = []
    for line in _read(SOURCES[module]).splitlines():
        match = _INCLUDE.match(line)
        if match and os.path.exists(os.path.join(include_dir(), match.group(1))):
            lines.append(_read(match.group(1)).replace("#pragma once\n", ""))
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


_INCLUDE = re.compile(r'^\s*#include "([^"]+)"\s*$')

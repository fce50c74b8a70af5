"""Compile every CUDA kernel of the CuPy backend offline and check its resources.

No GPU and no driver are needed: NVRTC (the ``nvidia-cuda-nvrtc-cu12`` wheel, loaded
with ctypes) compiles each source to PTX for every architecture, with every name
expression of :mod:`lodtensor.backend.cuda`, and ``ptxas -v`` (the
``nvidia-cuda-nvcc-cu12`` wheel) assembles the PTX and reports the registers,
spills and shared memory of every kernel. From those and the block size the
theoretical occupancy is computed as the CUDA occupancy calculator does. The
check fails on a compile error, on any spilled byte, and on an occupancy under
:data:`OCCUPANCY_FLOOR`::

    python -m lodtensor.backend.cuda.check             # the table, exit status 1 on failure
    python -m lodtensor.backend.cuda.check --markdown  # the table for docs/gpu.md

>>> occupancy(64, 0, 256, "sm_90")
(4, 0.5)
>>> occupancy(32, 0, 256, "sm_80")
(8, 1.0)
>>> occupancy(40, 48 * 1024, 256, "sm_80")  # shared memory: 3 blocks of 49 KiB in 164 KiB
(3, 0.375)
"""

import argparse
import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

from . import BLOCK, EXTERN_C, SOURCES, name_expressions, source_text

__all__ = ["ARCHS", "OCCUPANCY_FLOOR", "CheckError", "check", "check_source", "occupancy", "format_table",
           "tool_versions", "main"]

ARCHS = ("sm_80", "sm_90")
#: The lowest theoretical occupancy accepted (active warps / 64). The kernels are
#: bandwidth-bound; half the warps are enough to keep the loads in flight.
OCCUPANCY_FLOOR = 0.5

# Per-SM limits (CUDA C Programming Guide, compute capabilities 8.0 and 9.0).
_SM = {
    "sm_80": {"warps": 64, "blocks": 32, "regs": 65536, "smem": 167936},
    "sm_90": {"warps": 64, "blocks": 32, "regs": 65536, "smem": 233472},
}
_RESERVED_SMEM = 1024  # per block, from compute capability 8.0
_SMEM_UNIT = 128
_REG_UNIT = 256  # registers are allocated per warp in units of 256


class CheckError(RuntimeError):
    """NVRTC or ptxas could not be found or failed to compile a source."""


def occupancy(registers, smem, block, arch):
    """(blocks per SM, active warps / max warps) for a kernel's resources."""
    sm = _SM[arch]
    warps = -(-block // 32)
    per_warp = -(-max(registers, 1) * 32 // _REG_UNIT) * _REG_UNIT
    by_regs = (sm["regs"] // per_warp) // warps
    per_block_smem = -(-(smem + _RESERVED_SMEM) // _SMEM_UNIT) * _SMEM_UNIT
    by_smem = sm["smem"] // per_block_smem
    blocks = min(by_regs, by_smem, sm["warps"] // warps, sm["blocks"])
    return blocks, blocks * warps / sm["warps"]


# -- the tools --------------------------------------------------------------------------------
def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _nvrtc():
    candidates = []
    if os.environ.get("LT_NVRTC"):
        candidates.append(os.environ["LT_NVRTC"])
    try:
        folder = _package_dir("nvidia.cuda_nvrtc")
    except ModuleNotFoundError:
        folder = None
    if folder:
        candidates += [os.path.join(folder, "lib", f) for f in ("libnvrtc.so.12", "libnvrtc.so", "nvrtc64_120_0.dll")]
    candidates += ["libnvrtc.so.12", "libnvrtc.so"]
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise CheckError("NVRTC not found: pip install nvidia-cuda-nvrtc-cu12 (make gpu-check does), "
                     "or set LT_NVRTC to libnvrtc.so")


def _ptxas():
    try:
        folder = _package_dir("nvidia.cuda_nvcc")
    except ModuleNotFoundError:
        folder = None
    path = os.path.join(folder, "bin", "ptxas") if folder else None
    if path and os.path.exists(path):
        return path
    found = shutil.which("ptxas")
    if found:
        return found
    raise CheckError("ptxas not found: pip install nvidia-cuda-nvcc-cu12 (make gpu-check does)")


def _compile_ptx(lib, text, filename, names, arch):
    """PTX of ``text`` for ``arch`` and the lowered (mangled) name of every name expression."""
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), filename.encode(), 0, None, None):
        raise CheckError(f"nvrtcCreateProgram failed for {filename}")
    try:
        for name in names:
            lib.nvrtcAddNameExpression(prog, name.encode())
        opts = [f"--gpu-architecture=compute_{arch[3:]}", "-std=c++14"]  # as CuPy compiles: no include path
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        status = lib.nvrtcCompileProgram(prog, len(opts), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if status:
            raise CheckError(f"NVRTC could not compile {filename} for {arch}:\n{log.value.decode(errors='replace')}")
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, ptx)
        lowered = {}
        for name in names:
            out = ctypes.c_char_p()
            if lib.nvrtcGetLoweredName(prog, name.encode(), ctypes.byref(out)):
                raise CheckError(f"{filename}: no kernel for the name expression {name!r}")
            lowered[out.value.decode()] = name
        return ptx.value.decode(), lowered
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def _assemble(ptxas, ptx, arch, filename):
    """ptxas -v on ``ptx``: {function: {registers, smem, stack, spill_stores, spill_loads}}."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernels.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, f"-arch={arch}", "-v", "-O3", src, "-o", os.path.join(tmp, "k.cubin")],
                              capture_output=True, text=True, check=False)
    if done.returncode:
        raise CheckError(f"ptxas could not assemble {filename} for {arch}:\n{done.stderr}")
    funcs, entry, props = {}, None, None
    for line in done.stderr.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            funcs.setdefault(entry, {"entry": True})
        elif m := _PROPS.search(line):
            props = m.group(1)
            funcs.setdefault(props, {"entry": False})
        elif m := _SPILL.search(line):
            funcs[props].update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif m := _USED.search(line):
            smem = _SMEM.search(line)
            funcs[entry].update(registers=int(m.group(1)), smem=int(smem.group(1)) if smem else 0)
    return funcs


def check_source(text, names, *, extern_c=(), filename="kernels.cu", archs=ARCHS, block=BLOCK,
                 floor=OCCUPANCY_FLOOR):
    """Compile one source for every arch; return (rows, failures).

    ``names`` are the name expressions to instantiate, ``extern_c`` the kernels
    declared ``extern "C"``. A compile error is a failure (its log in the message).
    """
    lib, ptxas = _nvrtc(), _ptxas()
    rows, failures = [], []
    for arch in archs:
        try:
            ptx, lowered = _compile_ptx(lib, text, filename, names, arch)
            funcs = _assemble(ptxas, ptx, arch, filename)
        except CheckError as err:
            failures.append(str(err))
            continue
        lowered.update({name: name for name in extern_c})
        for fname, info in funcs.items():
            spilled = info.get("spill_stores", 0) + info.get("spill_loads", 0)
            if not info["entry"]:
                if spilled:
                    failures.append(f"{filename} {arch}: device function {fname} spills {spilled} bytes")
                continue
            kernel = lowered.get(fname, fname)
            blocks, occ = occupancy(info["registers"], info["smem"], block, arch)
            row = {"kernel": kernel, "arch": arch, "registers": info["registers"], "smem": info["smem"],
                   "stack": info.get("stack", 0), "spill_stores": info.get("spill_stores", 0),
                   "spill_loads": info.get("spill_loads", 0), "block": block, "blocks_per_sm": blocks,
                   "occupancy": occ}
            rows.append(row)
            if spilled:
                failures.append(f"{kernel} ({arch}): {row['spill_stores']} bytes spill stores, "
                                f"{row['spill_loads']} bytes spill loads; registers {info['registers']}")
            if occ < floor:
                failures.append(f"{kernel} ({arch}): occupancy {occ:.0%} under the floor {floor:.0%} "
                                f"({info['registers']} registers, {info['smem']} bytes smem, block {block})")
        missing = set(names) | set(extern_c)
        missing -= {r["kernel"] for r in rows if r["arch"] == arch}
        if missing:
            failures.append(f"{filename} {arch}: no SASS for {sorted(missing)}")
    return rows, failures


def tool_versions():
    """``"NVRTC 12.9, ptxas V12.9.86"``: the versions the figures depend on."""
    lib = _nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    done = subprocess.run([_ptxas(), "--version"], capture_output=True, text=True, check=False)
    ptxas = re.search(r"V[\d.]+", done.stdout)
    return f"NVRTC {major.value}.{minor.value}, ptxas {ptxas.group(0) if ptxas else '?'}"


def check(archs=ARCHS, floor=OCCUPANCY_FLOOR):
    """Check every module of the package: (rows, failures)."""
    rows, failures = [], []
    for module in SOURCES:
        r, f = check_source(source_text(module), name_expressions(module), extern_c=EXTERN_C[module],
                            filename=SOURCES[module], archs=archs, floor=floor)
        rows += r
        failures += f
    return rows, failures


def format_table(rows, *, markdown=False):
    """One line per kernel, the archs side by side: registers, spills, smem, occupancy."""
    archs = sorted({r["arch"] for r in rows})
    by_kernel = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], {})[r["arch"]] = r
    head = ["kernel"] + [f"{a} {col}" for a in archs for col in ("regs", "spill", "smem", "occ")]
    lines = []
    for kernel, per in sorted(by_kernel.items()):
        cells = [f"`{kernel}`" if markdown else kernel]
        for a in archs:
            r = per.get(a)
            cells += (["-"] * 4 if r is None else
                      [str(r["registers"]), str(r["spill_stores"] + r["spill_loads"]), str(r["smem"]),
                       f"{r['occupancy']:.0%}"])
        lines.append(cells)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c) + " |" for c in lines]
        return "\n".join(out)
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*head)] + [fmt.format(*c) for c in lines])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lodtensor.backend.cuda.check", description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--floor", type=float, default=OCCUPANCY_FLOOR, help="lowest occupancy accepted")
    args = parser.parse_args(argv)
    try:
        rows, failures = check(floor=args.floor)
    except CheckError as err:
        if sys.platform == "darwin":  # NVIDIA ships no NVRTC/ptxas wheels for macOS
            print(f"gpu-check: skipped on macOS ({err})")
            return 0
        print(f"gpu-check: {err}", file=sys.stderr)
        return 1
    print(format_table(rows, markdown=args.markdown))
    kernels = len({r["kernel"] for r in rows})
    if failures:
        print(f"\ngpu-check FAILED ({len(failures)}):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    worst = min(r["occupancy"] for r in rows)
    print(f"\ngpu-check: {kernels} kernels x {len(ARCHS)} archs ({', '.join(ARCHS)}) compiled with {tool_versions()}; "
          f"0 spills; lowest occupancy {worst:.0%} (floor {args.floor:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

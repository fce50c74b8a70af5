"""GPU: segment sum, max and softmax, and pad, on the CuPy and torch-CUDA backends.

Workload (issue 4): an ``[8M, 128]`` float32 batch in 100K sequences
(lengths 1..159, mean about 80), on one CUDA device. Contenders, each where
installed:

- a device-to-device copy of the input bytes (``cupy.copyto`` / ``Tensor.copy_``):
  the bandwidth limit the others are compared with;
- lodtensor on the CuPy backend and on the torch-CUDA backend;
- ``torch.segment_reduce`` (sum, max) and torch.nested with the jagged layout
  (``sum``/``amax`` over the ragged dim, ``softmax`` over it, ``to_padded_tensor``).

Each row's "x copy" is its time over the copy's; the table's notes give the
achieved bandwidth, ``(bytes read + bytes written) / time``, as a fraction of
the copy's ``2 * input bytes / time``. Goals: at least 50% of the copy's
bandwidth, and faster than ``torch.segment_reduce`` and torch.nested jagged.

A last part times the host-side launch choices of ``backend/cupy/_tuning.py`` side by side
(bench/_gpu_sweep.py). A second part (issue 14) runs sum, max and softmax on skewed LoDs: half the rows
in many sequences of 0..16 rows (empty ones included), half in 16 sequences of
thousands of rows, for row widths D = 1, 128 and 4096 (1 GiB of float32 each),
against the same copy and ``torch.segment_reduce``.

Without a CUDA device the module reports why and measures nothing;
``BENCH_GPU_DRY=1`` runs the same code on torch CPU tensors at 1/100 of the
size, with the torch backend's CPU-only kernels switched off (so the torch
code that CUDA runs is what is timed): it checks the harness, not the figures.
"""

import os

import _common
import numpy as np

TITLE = "GPU: segment sum, max, softmax and pad vs a device-to-device copy"

ROWS_PER_SEQUENCE = (1, 160)  # lengths drawn uniformly from [1, 160): mean ~80, 100K sequences -> ~8M rows
SEQUENCES = 100_000
WIDTH = 128
GPU = {"budget": min(0.5, _common.BUDGET), "min_repeat": 5}  # BENCH_BUDGET may shorten it
# The parts to run, in this order (BENCH_GPU_PARTS, e.g. "sweep" alone in a second device call)
PARTS = ("uniform", "skewed", "training", "sweep")


SKEWED_ELEMENTS = 1 << 28  # float32 elements per skewed workload: 1 GiB
# Issue 24's floors where they differ from 50%: single values in millions of short sequences (the
# per-sequence work dominates there) and the uniform softmax (three passes over the data).
SKEWED_FLOOR = {("sum", 1): 0.25, ("max", 1): 0.25, ("softmax", 1): 0.25}
UNIFORM_FLOOR = {"softmax": 0.6}
SKEWED_WIDTHS = (1, 128, 4096)
LONG_SEQUENCES = 16


def _skewed_workload(scale, width):
    """Half the rows in short sequences (0..16 rows), half in LONG_SEQUENCES long ones, shuffled."""
    g = _common.rng(71 + width)
    rows = max(64, SKEWED_ELEMENTS // scale // width)
    short = g.integers(0, 17, size=max(1, rows // 2 // 8))
    long_rows = max(LONG_SEQUENCES, rows - int(short.sum()))
    longs = np.full(LONG_SEQUENCES, long_rows // LONG_SEQUENCES)
    longs[: long_rows % LONG_SEQUENCES] += 1
    lengths = g.permutation(np.concatenate([short, longs])).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    data = g.standard_normal((int(offsets[-1]), width), dtype=np.float32)
    return data, lengths, offsets


def _skewed(report, lt, S, torch, cupy, device, where, scale, dry):
    """Sum, max, softmax on skewed LoDs for several row widths, against the copy and torch.segment_reduce."""
    for width in SKEWED_WIDTHS:
        data, lengths, offsets = _skewed_workload(scale, width)
        nbytes, n = data.nbytes, lengths.size
        workload = (f"[{data.shape[0]}, {width}] float32 in {n} sequences: {n - LONG_SEQUENCES} of 0..16 rows, "
                    f"{LONG_SEQUENCES} of ~{int(lengths.max())} rows; {_common.describe_sizes(nbytes)}"
                    + (" (dry run on CPU)" if dry else ""))
        ours = {}
        if cupy is not None:
            ours["cupy"] = lt.LoDTensor(cupy.asarray(data), [offsets])
        if torch is not None:
            ours["torch"] = lt.from_torch(torch.from_numpy(data).to(where), [offsets])
        toffsets = torch.from_numpy(offsets).to(where) if torch is not None else None
        tdata = ours["torch"].data if "torch" in ours else None
        fns = {"sum": lambda t: S.sequence_pool(t, "sum").data, "max": lambda t: S.sequence_pool(t, "max").data,
               "softmax": lambda t: S.sequence_softmax(t).data}
        moved = {"sum": nbytes + n * width * 4, "max": nbytes + n * width * 4, "softmax": 3 * nbytes}
        for op, fn in fns.items():
            table = report.table(f"skewed {op}, D={width}", workload, reference=f"lodtensor ({next(iter(ours))})",
                                 limit="device-to-device copy")
            if cupy is not None:
                src, dst = ours["cupy"].data, cupy.empty_like(ours["cupy"].data)
                table.add("device-to-device copy", device.timed(lambda s=src, d=dst: cupy.copyto(d, s)), **GPU)
            else:
                src, dst = tdata, torch.empty_like(tdata)
                table.add("device-to-device copy", device.timed(lambda s=src, d=dst: d.copy_(s)), **GPU)
            for name, t in ours.items():
                table.add(f"lodtensor ({name})", device.timed(lambda t=t, fn=fn: fn(t)), **GPU)
            if tdata is not None and op in ("sum", "max"):
                table.add("torch.segment_reduce", device.timed(
                    lambda op=op, x=tdata, o=toffsets: torch.segment_reduce(x, op, offsets=o, axis=0)), **GPU)
            table.finish()
            copy_s = table._best("device-to-device copy")
            for name in ours:
                mine = table._best(f"lodtensor ({name})")
                if mine is None or copy_s is None:
                    continue
                fraction = moved[op] / mine / (2 * nbytes / copy_s)
                floor = SKEWED_FLOOR.get((op, width), 0.5)
                report.goal(f"skewed {op} D={width} ({name}): at least {floor:.0%} of the copy bandwidth",
                            fraction >= floor, f"{fraction:.0%}")
                theirs = table._best("torch.segment_reduce")
                if width == max(SKEWED_WIDTHS) and theirs is not None:  # issue 24: wide rows
                    report.goal(f"skewed {op} D={width} ({name}): at or under torch.segment_reduce",
                                mine <= theirs, f"{theirs / mine:.2f}x")


RNN_SENTENCES, RNN_WIDTH = 2266, 256  # bench/paddle_layers.py's batch: 1..64 rows each, ~74K rows


def _recurrences(report, torch, device, where, dry):
    """Issue 24 item 3: dynamic_lstm / dynamic_gru forward+backward on CUDA against torch's cuDNN
    ``nn.LSTM`` / ``nn.GRU`` on a ``PackedSequence`` of the same batch (the same work: input
    projection and recurrence, hidden 256, no peepholes)."""
    import _seqdata  # noqa: PLC0415

    from lodtensor.nn import functional as F  # noqa: PLC0415

    g = _common.rng(90)
    count = RNN_SENTENCES // (20 if dry else 1)
    lengths = g.integers(1, 65, size=count).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    host = g.standard_normal((int(offsets[-1]), RNN_WIDTH), dtype=np.float32)
    import lodtensor as lt  # noqa: PLC0415

    x = lt.from_torch(torch.from_numpy(host).to(where), [offsets])
    workload = (f"{count} sequences of 1..64 rows, [{host.shape[0]}, {RNN_WIDTH}] float32, hidden {RNN_WIDTH}"
                + (" (dry run on CPU)" if dry else ""))
    for kind in ("lstm", "gru"):
        w = {k: torch.from_numpy(v).to(where).requires_grad_() for k, v in
             _seqdata.layer_weights(kind, RNN_WIDTH, RNN_WIDTH).items()}

        def ours(kind=kind, w=w):
            xg = x.with_data(x.data.detach().requires_grad_())
            proj = F.fc(xg, w["w_ih"])
            out = (F.dynamic_lstm(proj, w["w_hh"], w["bias"], use_peepholes=False)[0] if kind == "lstm"
                   else F.dynamic_gru(proj, w["w_hh"], w["bias"]))
            out.data.sum().backward()
            return out.data

        module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(RNN_WIDTH, RNN_WIDTH).to(where)
        packed = torch.nn.utils.rnn.pack_sequence(
            list(torch.split(torch.from_numpy(host).to(where), lengths.tolist())), enforce_sorted=False)

        def cudnn(module=module, packed=packed):
            out = module(packed._replace(data=packed.data.detach().requires_grad_()))[0]
            out.data.sum().backward()
            return out.data

        table = report.table(f"dynamic_{kind} forward+backward", workload, reference="lodtensor (torch)")
        table.add("lodtensor (torch)", device.timed(ours), **GPU)
        # the steps' element-wise ops one by one (before the fused step kernels)
        table.add("lodtensor (torch, unfused steps)", device.timed(_unfused(ours)), **GPU)
        table.add(f"torch nn.{kind.upper()} (cuDNN, PackedSequence)", device.timed(cudnn), **GPU)
        # the same precision on both sides: torch lets cuDNN's float32 RNNs use TF32 tensor cores by default
        # (torch.backends.cudnn.allow_tf32) but not its float32 GEMMs (torch.backends.cuda.matmul.allow_tf32)
        table.add(f"torch nn.{kind.upper()} (cuDNN, TF32 off)",
                  device.timed(_switched(cudnn, torch.backends.cudnn, "allow_tf32", False)), **GPU)
        table.add("lodtensor (torch, TF32 GEMMs)",
                  device.timed(_switched(ours, torch.backends.cuda.matmul, "allow_tf32", True)), **GPU)
        table.finish()
        for mine, theirs, precision in (("lodtensor (torch)", f"torch nn.{kind.upper()} (cuDNN, PackedSequence)",
                                         "torch's defaults"),
                                        ("lodtensor (torch)", f"torch nn.{kind.upper()} (cuDNN, TF32 off)", "float32"),
                                        ("lodtensor (torch, TF32 GEMMs)",
                                         f"torch nn.{kind.upper()} (cuDNN, PackedSequence)", "TF32")):
            mine, theirs = table._best(mine), table._best(theirs)
            if mine is not None and theirs is not None:
                report.goal(f"dynamic_{kind} forward+backward on CUDA ({precision}): at or under "
                            f"nn.{kind.upper()} (cuDNN)", mine <= theirs, f"{theirs / mine:.2f}x")


def _unfused(fn, switch="FUSED_STEPS"):
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    return _switched(fn, _tuning, switch, False)


def _switched(fn, owner, name, value):
    """``fn`` run with ``owner.name`` set to ``value`` (restored afterwards)."""
    def call():
        saved = getattr(owner, name)
        setattr(owner, name, value)
        try:
            return fn()
        finally:
            setattr(owner, name, saved)

    return call


def _softmax_training(report, lt, S, torch, device, tdata, offsets, lengths, workload):
    """Segment softmax forward+backward on torch CUDA (the fused backward beside the unfused ops,
    ``_tuning.FUSED_SOFTMAX_GRAD``) against torch.nested jagged's softmax over the ragged dim."""
    toffsets = torch.from_numpy(offsets).to(tdata.device)
    weights = torch.randn_like(tdata)

    def ours():
        x = tdata.detach().requires_grad_()
        (S.sequence_softmax(lt.LoDTensor(x, [offsets])).data * weights).sum().backward()
        return x.grad

    def njt():
        x = tdata.detach().requires_grad_()
        nt = torch.nested.nested_tensor_from_jagged(x, toffsets, min_seqlen=int(lengths.min()),
                                                    max_seqlen=int(lengths.max()))
        (torch.softmax(nt, dim=1).values() * weights).sum().backward()
        return x.grad

    _max_training(report, lt, S, torch, device, tdata, offsets, toffsets, workload)
    table = report.table("softmax forward+backward", workload, reference="lodtensor (torch)")
    table.add("lodtensor (torch)", device.timed(ours), **GPU)
    table.add("lodtensor (torch, unfused backward)", device.timed(_unfused(ours, "FUSED_SOFTMAX_GRAD")), **GPU)
    # (torch 2.13's jagged backward reduces over the last dim, not the ragged one: docs/nested.md)
    table.add("torch.nested jagged", device.timed(njt), note="its gradient is wrong on CPU in torch 2.13", **GPU)
    table.finish()
    mine, theirs = table._best("lodtensor (torch)"), table._best("torch.nested jagged")
    if mine is not None and theirs is not None:
        report.goal("softmax forward+backward (torch): at or under torch.nested jagged", mine <= theirs,
                    f"{theirs / mine:.2f}x")


def _fresh_pad(report, lt, torch, device, tdata, offsets, lengths, workload):
    """Pad forward+backward of a new LoD each call, as a training step meets every batch (no host plan
    on the device: wants_host_plan), beside the same LoD reused and torch.nested jagged's."""
    toffsets = torch.from_numpy(offsets).to(tdata.device)
    reused = lt.LoD([offsets])

    def step(lod):
        x = tdata.detach().requires_grad_()
        lt.LoDTensor(x, lod).to_padded(pad_value=0.0)[0].sum().backward()
        return x.grad

    def njt():
        x = tdata.detach().requires_grad_()
        nt = torch.nested.nested_tensor_from_jagged(x, toffsets, min_seqlen=int(lengths.min()),
                                                    max_seqlen=int(lengths.max()))
        torch.nested.to_padded_tensor(nt, 0.0).sum().backward()
        return x.grad

    table = report.table("pad forward+backward, a new LoD each call", workload, reference="lodtensor (torch)")
    table.add("lodtensor (torch)", device.timed(lambda: step([offsets])), **GPU)
    table.add("lodtensor (torch, one LoD reused)", device.timed(lambda: step(reused)), **GPU)
    table.add("torch.nested jagged", device.timed(njt), **GPU)
    table.finish()


def _max_training(report, lt, S, torch, device, tdata, offsets, toffsets, workload):
    """Segment max forward+backward on torch CUDA (the fused backward beside the unfused ops,
    ``_tuning.FUSED_EXTREME_GRAD``) against ``torch.segment_reduce``'s autograd."""
    weights = torch.randn((offsets.size - 1, tdata.shape[1]), device=tdata.device)

    def ours():
        x = tdata.detach().requires_grad_()
        (S.sequence_pool(lt.LoDTensor(x, [offsets]), "max").data * weights).sum().backward()
        return x.grad

    def theirs():
        x = tdata.detach().requires_grad_()
        (torch.segment_reduce(x, "max", offsets=toffsets, axis=0) * weights).sum().backward()
        return x.grad

    table = report.table("max forward+backward", workload, reference="lodtensor (torch)")
    table.add("lodtensor (torch)", device.timed(ours), **GPU)
    table.add("lodtensor (torch, unfused backward)", device.timed(_unfused(ours, "FUSED_EXTREME_GRAD")), **GPU)
    table.add("torch.segment_reduce", device.timed(theirs), **GPU)
    table.finish()
    mine, other = table._best("lodtensor (torch)"), table._best("torch.segment_reduce")
    if mine is not None and other is not None:
        report.goal("max forward+backward (torch): at or under torch.segment_reduce", mine <= other,
                    f"{other / mine:.2f}x")


def _workload(scale):
    g = _common.rng(70)
    n = max(2, SEQUENCES // scale)
    lengths = g.integers(*ROWS_PER_SEQUENCE, size=n).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    data = g.standard_normal((int(offsets[-1]), WIDTH), dtype=np.float32)
    return data, lengths, offsets


class _Device:
    """Copies host arrays to the device of one library and synchronises around timed calls."""

    def __init__(self, torch, cupy, dry):
        self.torch, self.cupy, self.dry = torch, cupy, dry

    def sync(self):
        if self.cupy is not None:
            self.cupy.cuda.Device().synchronize()
        if self.torch is not None and not self.dry:
            self.torch.cuda.synchronize()

    def timed(self, fn):
        def call():
            out = fn()
            self.sync()
            return out

        return call


def _bandwidth_note(read, written, seconds, copy_seconds, copy_bytes):
    if seconds is None or copy_seconds is None:
        return ""
    achieved = (read + written) / seconds
    limit = 2 * copy_bytes / copy_seconds
    return f"{achieved / 1e9:.0f} GB/s = {achieved / limit:.0%} of the copy"


def run(report):
    torch = _common.optional("torch")
    cupy = _common.optional("cupy")
    dry = os.environ.get("BENCH_GPU_DRY") == "1"
    has_cuda = torch is not None and torch.cuda.is_available()
    if cupy is not None:
        try:
            has_cuda = has_cuda or cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:  # noqa: BLE001 - cupy installed without a driver
            cupy = None
    if not has_cuda and not (dry and torch is not None):
        report.notes.append("no CUDA device (torch.cuda.is_available() is False and CuPy has no device): "
                            "nothing measured")
        return
    if dry:
        cupy = None
        # time the device-generic torch code that CUDA runs, not the CPU-only kernels
        from lodtensor.backend.torch import _backend as torch_backend  # noqa: PLC0415

        torch_backend._CPU_SHORTCUTS = False
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415

    scale = int(os.environ.get("BENCH_GPU_SCALE", "") or (100 if dry else 1))  # the workloads at 1/scale
    data, lengths, offsets = _workload(scale)
    rows, n = data.shape[0], lengths.size
    nbytes = data.nbytes
    device = _Device(torch if (has_cuda or dry) else None, cupy, dry)
    where = "cpu" if dry else "cuda"
    workload = (f"[{rows}, {WIDTH}] float32 in {n} sequences (lengths {ROWS_PER_SEQUENCE[0]}.."
                f"{ROWS_PER_SEQUENCE[1] - 1}), {_common.describe_sizes(nbytes)}" + (" (dry run on CPU)" if dry else ""))
    report.facts["gpu"] = {"rows": rows, "sequences": n, "width": WIDTH, "dry": dry,
                           "device": (torch.cuda.get_device_name() if torch is not None and has_cuda and not dry
                                      else where)}

    ours = {}
    if cupy is not None:
        ours["cupy"] = lt.LoDTensor(cupy.asarray(data), [offsets])
    if torch is not None:
        ours["torch"] = lt.from_torch(torch.from_numpy(data).to(where), [offsets])
    tdata = ours["torch"].data if "torch" in ours else None
    toffsets = torch.from_numpy(offsets).to(where) if torch is not None else None
    jagged = None
    if tdata is not None:
        jagged = torch.nested.nested_tensor_from_jagged(tdata, toffsets, min_seqlen=int(lengths.min()),
                                                        max_seqlen=int(lengths.max()))
    maxlen = int(lengths.max())
    padded_bytes = n * maxlen * WIDTH * 4
    out_bytes = {"sum": n * WIDTH * 4, "max": n * WIDTH * 4, "mean": n * WIDTH * 4, "softmax": nbytes,
                 "pad": padded_bytes}
    in_bytes = {"sum": nbytes, "max": nbytes, "mean": nbytes, "softmax": nbytes, "pad": nbytes}

    def ours_fn(op, t):
        if op in ("sum", "max"):
            return lambda: S.sequence_pool(t, op).data
        if op == "mean":
            return lambda: S.sequence_pool(t, "average").data
        if op == "softmax":
            return lambda: S.sequence_softmax(t).data
        return lambda: t.to_padded(pad_value=0.0)[0]

    torch_fns = {}
    if tdata is not None:
        torch_fns = {
            "sum": [("torch.segment_reduce", lambda: torch.segment_reduce(tdata, "sum", offsets=toffsets, axis=0)),
                    ("torch.nested jagged", lambda: jagged.sum(dim=1))],
            "max": [("torch.segment_reduce", lambda: torch.segment_reduce(tdata, "max", offsets=toffsets, axis=0)),
                    ("torch.nested jagged", lambda: jagged.amax(dim=1))],
            "mean": [("torch.segment_reduce", lambda: torch.segment_reduce(tdata, "mean", offsets=toffsets, axis=0)),
                     ("torch.nested jagged", lambda: jagged.mean(dim=1))],
            "softmax": [("torch.nested jagged", lambda: torch.softmax(jagged, dim=1))],
            "pad": [("torch.nested jagged", lambda: torch.nested.to_padded_tensor(jagged, 0.0))],
        }

    parts = os.environ.get("BENCH_GPU_PARTS", "").replace(",", " ").split() or PARTS
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"BENCH_GPU_PARTS: unknown part(s) {unknown}; expected some of {list(PARTS)}")
    for op in ("sum", "max", "mean", "softmax", "pad") if "uniform" in parts else ():
        table = report.table(f"{op}", workload, reference=f"lodtensor ({next(iter(ours))})",
                             limit="device-to-device copy")
        if cupy is not None:
            src, dst = ours["cupy"].data, cupy.empty_like(ours["cupy"].data)
            table.add("device-to-device copy", device.timed(lambda s=src, d=dst: cupy.copyto(d, s)),
                      note="cupy, input bytes", **GPU)
        else:
            src, dst = tdata, torch.empty_like(tdata)
            table.add("device-to-device copy", device.timed(lambda s=src, d=dst: d.copy_(s)),
                      note="torch, input bytes", **GPU)
        for name, t in ours.items():
            table.add(f"lodtensor ({name})", device.timed(ours_fn(op, t)), **GPU)
        for name, fn in torch_fns.get(op, []):
            table.add(name, device.timed(fn), **GPU)
        table.finish()
        copy_s = table._best("device-to-device copy")
        for row in table.rows:
            if row["name"] != "device-to-device copy" and row["best"] is not None:
                note = _bandwidth_note(in_bytes[op], out_bytes[op], row["best"], copy_s, nbytes)
                row["note"] = "; ".join(x for x in (row["note"], note) if x)
        for name in ours:
            mine = table._best(f"lodtensor ({name})")
            if mine is None or copy_s is None:
                continue
            fraction = (in_bytes[op] + out_bytes[op]) / mine / (2 * nbytes / copy_s)
            floor = UNIFORM_FLOOR.get(op, 0.5)
            report.goal(f"{op} ({name}): at least {floor:.0%} of the copy bandwidth", fraction >= floor,
                        f"{fraction:.0%}")
            for other, _ in torch_fns.get(op, []):
                theirs = table._best(other)
                if theirs is not None:  # issue 24: at or under torch's own ops
                    report.goal(f"{op} ({name}): at or under {other}", mine <= theirs, f"{theirs / mine:.2f}x")

    if "skewed" in parts:
        _skewed(report, lt, S, torch if (has_cuda or dry) else None, cupy, device, where, scale, dry)
    if "training" in parts and torch is not None and (dry or torch.cuda.is_available()):
        _recurrences(report, torch, device, where, dry)
        _softmax_training(report, lt, S, torch, device, tdata, offsets, lengths, workload)
        _fresh_pad(report, lt, torch, device, tdata, offsets, lengths, workload)

    if "sweep" in parts and cupy is not None:  # the host-side launch choices of _tuning.py, side by side
        import _gpu_sweep  # noqa: PLC0415

        workloads = [("uniform " + workload, ours["cupy"], tdata, toffsets, ("sum", "max", "softmax"))]
        for width, ops in ((4096, ("sum", "max")), (128, ("sum", "softmax"))):
            sdata, slengths, soffsets = _skewed_workload(scale, width)
            st = torch.from_numpy(sdata).to(where) if torch is not None else None
            so = torch.from_numpy(soffsets).to(where) if torch is not None else None
            st_cupy = lt.LoDTensor(cupy.asarray(sdata), [soffsets])
            workloads.append((f"skewed D={width}, {slengths.size} sequences", st_cupy, st, so, ops))
        # a training step's batch: few sequences, where the plan's launches (not its bytes) cost
        g = np.random.default_rng(5)
        blengths = g.integers(1, 129, 512)
        boffsets = _common.offsets_of(blengths)
        bdata = g.standard_normal((int(boffsets[-1]), 256), dtype=np.float32)
        bt = torch.from_numpy(bdata).to(where) if torch is not None else None
        bo = torch.from_numpy(boffsets).to(where) if torch is not None else None
        workloads.append((f"small batch [{boffsets[-1]}, 256], {blengths.size} sequences",
                          lt.LoDTensor(cupy.asarray(bdata), [boffsets]), bt, bo, ("sum", "softmax")))
        _gpu_sweep.sweep(report, S, cupy, torch, device, workloads, GPU)

#!/usr/bin/env bash
# The whole device run of issue 24, for a session lent a GPU (docs/gpu.md, "The runbook"):
#
#     bash bench/gpu_runbook.sh "$OUT"                      # every part: about 7 minutes on an H100 (2026-11-27)
#     bash bench/gpu_runbook.sh "$OUT" build test           # some parts (a device call is at most 10 min)
#
# Parts: build (the C kernels in place), test (make test-gpu), bench (make bench-gpu), memcheck
# (compute-sanitizer on bench/_gpu_sanitize.py), ncu (Nsight Compute on bench/_gpu_profile.py,
# where installed), trace (torch.profiler on bench/_gpu_trace.py: host- or device-bound), hostprof
# (bench/_gpu_hostprof.py: where a small call's host time goes; not in the default parts).
# Uses the machine's own interpreter (GPU_PYTHON, default python3: torch, CuPy,
# pytest and hypothesis installed, no package index needed). Writes each part's log, a summary
# and bench/results/gpu.json into the folder given. Each part has its own time limit (TEST_S,
# BENCH_S, SANITIZE_S, PROFILE_S, TRACE_S seconds), so a slow part cannot eat the others' time; the bench
# prints each table as it is measured, and what it measured by its limit stays in its log and JSON.
set -u
out=${1:-gpu-run}
shift
parts=${*:-build test bench memcheck ncu trace}
py=${GPU_PYTHON:-python3}
mkdir -p "$out"
summary="$out/summary.txt"
step() {  # step NAME SECONDS COMMAND...: run, log to $out/NAME.log, record the exit status and time
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    echo "$name: rc $rc, $((SECONDS - start)) s" >> "$summary"
    tail -n 4 "$out/$name.log" | sed 's/^/    /' >> "$summary"
}
wants() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  git log --oneline -1
  "$py" -c "import torch, cupy, numpy; print('torch', torch.__version__, 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
} >> "$summary" 2>&1
wants build && step build 60 "$py" setup.py -q build_ext --inplace
wants test && PYTEST_ADDOPTS="-rs --durations=25" step test-gpu "${TEST_S:-240}" make test-gpu PYTHON="$py"
if wants bench; then
    # each table is printed once measured; the bench stops itself 15 s before its limit (keeping
    # what it measured, and dumping every thread's stack if native code holds the main thread)
    PYTHONUNBUFFERED=1 BENCH_DEADLINE=$((${BENCH_S:-280} - 15)) BENCH_BUDGET=${BENCH_BUDGET:-0.3} \
        step bench-gpu "${BENCH_S:-280}" make bench-gpu PYTHON="$py"
    cp bench/results/gpu.json "$out/" 2>/dev/null
fi
wants memcheck && PYTHONPATH=. step memcheck "${SANITIZE_S:-90}" \
    compute-sanitizer --tool memcheck --error-exitcode 3 "$py" bench/_gpu_sanitize.py
if wants ncu; then
    if command -v ncu > /dev/null; then  # may need profiling permissions: then its log says so
        PYTHONPATH=.:bench step ncu "${PROFILE_S:-120}" ncu --section SpeedOfLight --section Occupancy \
            --section WarpStateStats --section MemoryWorkloadAnalysis -k 'regex:segment_reduce|lt_softmax' \
            "$py" bench/_gpu_profile.py
    else
        echo "ncu: not installed" >> "$summary"
    fi
fi
wants trace && PYTHONPATH=.:bench step trace "${TRACE_S:-60}" "$py" bench/_gpu_trace.py
wants hostprof && PYTHONPATH=.:bench step hostprof "${HOSTPROF_S:-90}" "$py" bench/_gpu_hostprof.py
cat "$summary"

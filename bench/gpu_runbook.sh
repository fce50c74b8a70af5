#!/usr/bin/env bash
# The whole device run of issue 24 in one go, for a session lent a GPU (docs/gpu.md, "The runbook"):
#
#     bash bench/gpu_runbook.sh "$OUT"
#
# Uses the machine's own interpreter (GPU_PYTHON, default python3: torch, CuPy, pytest and
# hypothesis installed, no package index needed). Writes the logs, bench/results/gpu.json and a
# summary into the folder given (default gpu-run/). Each part has its own time limit (TEST_S,
# BENCH_S, SANITIZE_S seconds), so a slow part cannot eat the others' time.
set -u
out=${1:-gpu-run}
py=${GPU_PYTHON:-python3}
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
step() {  # step NAME SECONDS COMMAND...: run, log to $out/NAME.log, record the exit status and time
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    echo "$name: rc $rc, $((SECONDS - start)) s" >> "$summary"
    tail -n 4 "$out/$name.log" | sed 's/^/    /' >> "$summary"
}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  git log --oneline -1
  "$py" -c "import torch, cupy, numpy; print('torch', torch.__version__, 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
} >> "$summary" 2>&1
step build 120 "$py" setup.py -q build_ext --inplace
PYTEST_ADDOPTS="-rs --durations=25" step test-gpu "${TEST_S:-240}" make test-gpu PYTHON="$py"
step bench-gpu "${BENCH_S:-280}" make bench-gpu PYTHON="$py"
cp bench/results/gpu.json "$out/" 2>/dev/null
PYTHONPATH=. step memcheck "${SANITIZE_S:-120}" compute-sanitizer --tool memcheck --error-exitcode 3 "$py" bench/_gpu_sanitize.py
# Nsight Compute on one call of each kernel the figures hinge on (optional: ncu may be missing or
# may need profiling permissions; then its log says so)
if command -v ncu > /dev/null; then
    PYTHONPATH=.:bench step ncu "${PROFILE_S:-150}" ncu --section SpeedOfLight --section Occupancy \
        --section WarpStateStats --section MemoryWorkloadAnalysis -k 'regex:segment_reduce|lt_softmax' \
        "$py" bench/_gpu_profile.py
else
    echo "ncu: not installed" >> "$summary"
fi
cat "$summary"

#!/usr/bin/env bash
# Differential tests against real PaddlePaddle 2.6.2, in a venv of their own
# (Paddle 2.6 needs numpy<2; the main venv has numpy 2).
#
#   bash tests/paddle/run.sh [python] [venvdir]      (what `make test-paddle` runs)
#
# Creates <venvdir> (default .venv-paddle) when missing, installs numpy<2,
# paddlepaddle==2.6.2, pytest, hypothesis, torch (CPU, optional) and this repo (editable, --no-deps),
# then runs tests/paddle. A stamp file in the venv skips the installs on later
# runs until this script, setup.cfg or pyproject.toml change. Where Paddle
# cannot be installed or imported (no wheel for this platform or Python, no
# network), it prints "skipped: ..." and exits 0.
set -u -o pipefail

PYTHON=${1:-python3}
VENV=${2:-.venv-paddle}
PADDLE_REQ="paddlepaddle==2.6.2"

# Resolve the venv against the caller's directory, then work from the repo root.
case "$VENV" in
    /*) ;;
    *) VENV="$PWD/$VENV" ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1

STAMP="$VENV/.lodtensor-paddle-stamp"
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip install -q --disable-pip-version-check)

skip() {
    echo "test-paddle skipped: $*"
    exit 0
}

fail() {
    echo "test-paddle error: $*" >&2
    exit 1
}

stamp_is_fresh() {
    [ -f "$STAMP" ] || return 1
    local f
    for f in tests/paddle/run.sh setup.cfg pyproject.toml; do
        if [ -e "$f" ] && [ "$f" -nt "$STAMP" ]; then
            return 1
        fi
    done
    return 0
}

if [ ! -x "$VPY" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || fail "python interpreter '$PYTHON' not found"
    echo "test-paddle: creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV" || fail "could not create the venv $VENV with $PYTHON"
    rm -f "$STAMP"
fi

if ! stamp_is_fresh; then
    echo "test-paddle: installing numpy<2 and $PADDLE_REQ into $VENV (once)"
    if ! "${PIP[@]}" "numpy<2" "$PADDLE_REQ"; then
        skip "could not install $PADDLE_REQ for $("$VPY" -c 'import platform, sys; print(f"Python {sys.version.split()[0]} on {platform.system()} {platform.machine()}")' 2>/dev/null) (no wheel for this platform or Python, or no network)"
    fi
    "${PIP[@]}" pytest hypothesis || fail "could not install pytest and hypothesis into $VENV"
    # torch (CPU) for the gradients of lodtensor.nn compared with Paddle's; optional
    # (the configured index first: it may hold the CPU build; then PyTorch's CPU index)
    "${PIP[@]}" "torch==2.13.0" \
        || "${PIP[@]}" "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
            --extra-index-url https://pypi.org/simple \
        || echo "test-paddle: torch not installed in $VENV; the layer tests (tests/paddle/test_paddle_layers.py) skip"
    # Offline, a venv with setuptools can still build the editable install without isolation.
    "${PIP[@]}" -e . --no-deps || "${PIP[@]}" --no-build-isolation -e . --no-deps \
        || fail "could not install this repo (pip install -e . --no-deps) into $VENV"
    touch "$STAMP"
fi

# Paddle may install but not import (missing system libraries, unsupported CPU).
if ! err=$("$VPY" -c "import paddle" 2>&1); then
    skip "paddle is installed in $VENV but does not import: $(printf '%s\n' "$err" | tail -n 1)"
fi

"$VPY" -m pytest -q -p no:cacheprovider tests/paddle
rc=$?
if [ "$rc" -eq 5 ]; then
    skip "pytest collected no tests in tests/paddle"
fi
exit "$rc"

"""The fuzz suite's CI profile: every target, in a subprocess (a crash or a hang fails the test).

``make fuzz`` runs the same targets for as long as it is told (``tests/fuzz/run.py``).
"""

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("LODTENSOR_FUZZ_EXAMPLES", "150"))
# Targets whose one example is a whole stress run get fewer examples.
FEWER = {"threads_and_set_num_threads": 3, "collective_pairs": 100}


# Address space of a fuzz subprocess. CPython's unpickler grows its memo to any index a
# (flipped) LONG_BINPUT names, touching every entry: without a limit, one corrupted pickle
# can take all the machine's memory before the OOM killer ends it; with one, it is a
# MemoryError like any other refused input.
MEMORY_LIMIT = 8 << 30


def _limit_memory():
    try:
        import resource  # noqa: PLC0415 - POSIX only

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass


def run_target(name, examples, seed, timeout):
    """``(returncode, output)`` of the driver on one target in a fresh interpreter."""
    cmd = [sys.executable, "-m", "tests.fuzz.driver", name, "--examples", str(examples), "--seed", str(seed),
           "--hang", str(max(10.0, timeout / 2))]
    try:
        done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                              preexec_fn=_limit_memory if os.name == "posix" else None)
    except subprocess.TimeoutExpired as err:
        return None, f"hung: no result after {timeout} s\n{err.stdout or ''}{err.stderr or ''}"
    return done.returncode, done.stdout + done.stderr


SEED = 20261124
_DONE = re.compile(r"^(\S+): (\d+) examples in ", re.M)


@functools.cache
def _one_interpreter_for_all():
    """The targets that keep the default count, run one after another in one fresh interpreter.

    Starting an interpreter (NumPy, torch, lodtensor) costs about as much as a target's 150
    examples, so sharing it halves the suite's time. The names that finished are returned; the
    rest (after a crash, a hang or a falsifying example) are run again one per interpreter by
    their tests, which then fail with their own output.
    """
    names = sorted(set(TARGETS) - set(FEWER))
    cmd = [sys.executable, "-m", "tests.fuzz.driver", *names, "--examples", str(EXAMPLES), "--seed", str(SEED),
           "--hang", "120"]
    try:
        done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=120 + 20 * len(names),
                              env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                              preexec_fn=_limit_memory if os.name == "posix" else None)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
    else:
        out = done.stdout
    return {m.group(1): int(m.group(2)) for m in _DONE.finditer(out)}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_target(name):
    if name not in FEWER and name in (shared := _one_interpreter_for_all()):
        assert shared[name] > 0, f"fuzz target {name} ran no example"
        return
    code, output = run_target(name, FEWER.get(name, EXAMPLES), seed=SEED, timeout=240)
    assert code == 0, f"fuzz target {name} failed (exit {code}; negative: killed by a signal):\n{output[-6000:]}"

"""TensorFlow: round trips against real tf.RaggedTensor, run in TensorFlow's own interpreter.

TensorFlow may live in another venv (``.venv-tf`` beside the test venv, or ``LODTENSOR_TF_PYTHON``);
the test skips cleanly when there is none.
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tf_python():
    candidates = [
        os.environ.get("LODTENSOR_TF_PYTHON"),
        os.environ.get("BENCH_TF_PYTHON"),
        os.path.join(ROOT, ".venv-tf", "bin", "python"),
        # beside the venv running the tests (the project keeps TensorFlow in .venv-tf, numpy 2 both)
        os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(sys.executable))), ".venv-tf", "bin", "python"),
        sys.executable,
    ]
    for python in candidates:
        if python and os.path.exists(python):
            return python
    return None


@pytest.mark.slow  # starts TensorFlow in a subprocess (about 10 s)
def test_ragged_tensor_round_trips():
    python = _tf_python()
    if python is None:
        pytest.skip("TensorFlow is not installed (pip install lodtensor[tf], or set LODTENSOR_TF_PYTHON)")
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    script = os.path.join(ROOT, "tests", "interop", "_tf_round_trip.py")
    proc = subprocess.run([python, script], check=False, capture_output=True, text=True, env=env, timeout=300)
    if "No module named 'tensorflow'" in proc.stderr:
        pytest.skip(f"TensorFlow is not installed for {python}")
    assert proc.returncode == 0 and "tf ok" in proc.stdout, proc.stderr[-3000:]

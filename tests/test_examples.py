"""Every script in examples/ runs to completion."""

import pathlib
import subprocess
import sys

import pytest

# (modules named _*.py are helpers the examples share, not examples)
EXAMPLES = sorted(p for p in (pathlib.Path(__file__).parent.parent / "examples").glob("*.py") if p.name[0] != "_")
# multi-process and cluster examples: `make test-slow`
SLOW = {"preprocess_corpus.py", "ddp_hierarchical_text.py"}


def _param(path):
    marks = [pytest.mark.slow] if path.name in SLOW else []
    return pytest.param(path, marks=marks, id=path.name)


@pytest.mark.parametrize("script", [_param(p) for p in EXAMPLES])
def test_example_runs(script):
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]

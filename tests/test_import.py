import subprocess
import sys


def test_import_costs_only_numpy():
    code = (
        "import sys, lodtensor, lodtensor.fluid; "
        "bad = [m for m in ('torch', 'cupy', 'pyarrow', 'scipy', 'awkward') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_public_names():
    import lodtensor

    for name in lodtensor.__all__:
        assert hasattr(lodtensor, name), name

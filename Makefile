# Every target sets up what it needs, on a fresh clone with only Python 3 and pip.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PADDLE_VENV := .venv-paddle
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check
# the compiled kernels (setup.py): an install rebuilds them when one changes
C_SOURCES := $(wildcard lodtensor/backend/numpy/*.c lodtensor/backend/numpy/*.h)

.PHONY: demo test test-slow test-gpu test-paddle fuzz bench docs lint clean gpu-check bench-gpu test-cupy-emulated

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo: setup.cfg setup.py pyproject.toml $(C_SOURCES) | $(BIN)/python
	$(PIP) -e ".[torch,arrow,text]"
	@touch $@

$(VENV)/.test: setup.cfg setup.py pyproject.toml $(C_SOURCES) | $(BIN)/python
	$(PIP) -e ".[test]"
	@touch $@

$(VENV)/.bench: setup.cfg setup.py pyproject.toml $(C_SOURCES) | $(BIN)/python
	$(PIP) -e ".[bench]"
	@touch $@

$(VENV)/.docs: setup.cfg setup.py pyproject.toml $(C_SOURCES) | $(BIN)/python
	$(PIP) -e ".[docs]"
	@touch $@

$(VENV)/.lint: setup.cfg pyproject.toml | $(BIN)/python
	$(PIP) ruff
	@touch $@

demo: $(VENV)/.demo
	$(BIN)/python examples/tour.py
	$(BIN)/python examples/hierarchical_text.py

# One pytest worker per core (pytest-xdist): the suite is CPU-bound, about 10 minutes on two cores.
TEST_WORKERS ?= auto

test: $(VENV)/.test gpu-check
	$(BIN)/python -m pytest -q -m "not slow" -n $(TEST_WORKERS)

# Every CUDA kernel compiled for sm_80 and sm_90 with NVRTC + ptxas (no GPU needed);
# fails on a compile error, a register spill or an occupancy under the floor.
$(VENV)/.gpucheck: setup.cfg setup.py pyproject.toml $(C_SOURCES) | $(BIN)/python
	$(PIP) -e ".[gpucheck]"
	@touch $@

gpu-check: $(VENV)/.gpucheck
	$(BIN)/python -m lodtensor.backend.cupy.cuda.check

# Multi-process, cluster and long end-to-end suites (CI runs them too).
test-slow: $(VENV)/.test
	$(BIN)/python -m pytest -q -m slow || [ $$? -eq 5 ]  # 5: none collected

# A GPU machine often has torch and CuPy installed but no package index: there test-gpu and bench-gpu
# use the interpreter that already imports them (GPU_PYTHON; by default $(PYTHON) when it imports
# torch, cupy, pytest and hypothesis), with the compiled kernels built in place; else they set up .venv.
GPU_PYTHON ?= $(shell $(PYTHON) -c "import torch, cupy, pytest, hypothesis" >/dev/null 2>&1 && echo $(PYTHON))

ifneq ($(GPU_PYTHON),)
test-gpu:
	-$(GPU_PYTHON) setup.py -q build_ext --inplace  # optional: without a C compiler the NumPy-only kernels serve
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) -m pytest -q -m gpu -rs -p no:cacheprovider
else
test-gpu: $(VENV)/.test gpu-check
	$(PIP) -e ".[test,cuda]"
	$(BIN)/python -m pytest -q -m gpu -rs
endif

# Every `cupy` case of the suite without a GPU: the real CUDA kernels run on the CPU behind a
# cupy stub (tests/backend/cuda_emu.py; needs g++). Checks results, not speed.
test-cupy-emulated: $(VENV)/.test
	LT_CUPY_EMULATED=1 $(BIN)/python -m pytest -q -m "not slow" -k cupy

# The GPU benchmark alone (bench/gpu.py; docs/gpu.md records its tables).
ifneq ($(GPU_PYTHON),)
bench-gpu:
	-$(GPU_PYTHON) setup.py -q build_ext --inplace  # optional: without a C compiler the NumPy-only kernels serve
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) bench/run.py gpu
else
bench-gpu: $(VENV)/.bench
	$(PIP) -e ".[cuda]"
	$(BIN)/python bench/run.py gpu
endif

# The fuzz suite for as long as FUZZ_MINUTES (its CI profile runs in `make test`).
FUZZ_MINUTES ?= 30
fuzz: $(VENV)/.test
	$(BIN)/python -m tests.fuzz.run --minutes $(FUZZ_MINUTES)

# Real PaddlePaddle 2.6.2 needs numpy<2, so it gets a venv of its own.
test-paddle:
	@bash tests/paddle/run.sh $(PYTHON) $(PADDLE_VENV)

bench: $(VENV)/.bench
	$(BIN)/python bench/run.py

docs: $(VENV)/.docs
	$(BIN)/python -m sphinx -W -b html docs docs/_build/html

lint: $(VENV)/.lint
	$(BIN)/python -m ruff check lodtensor tests examples bench

clean:
	rm -rf $(VENV) $(PADDLE_VENV) build *.egg-info docs/_build

# Two commands set up a fresh machine: `make demo` (the main job) and `make test` (the default test run).
# Both create .venv when missing and install what they need. torch is pinned to the CPU build that lies on
# this machine's disk; an unpinned torch would download a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.milepost-installed
TORCH ?= torch==2.13.0

.PHONY: demo test test-slow test-distributed lint bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[ml,serve,dev,web]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/milepost demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# Ray clusters and torchrun process groups: seconds to start each, so outside the default run (CI runs both).
test-distributed: $(STAMP)
	$(PY) -m pip install --quiet -e ".[ray]"
	$(PY) -m pytest -q -m distributed

lint: $(STAMP)
	$(VENV)/bin/ruff check milepost tests benchmarks
	$(VENV)/bin/ruff format --check milepost tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache

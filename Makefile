# Quick start:  make baselines   (set up, run the reference baselines, print the ranking)
#               make test        (set up, run the test suite)
VENV ?= .venv
PYTHON ?= python3
# The CPU build of PyTorch, installed before everything else so that nothing pulls a CUDA build.
# Elsewhere, point pip at PyTorch's CPU wheel index, e.g. make setup TORCH="torch==2.13.0 --index-url <cpu index>".
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup baselines test test-fast clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

# The main job: the reference baselines on the CPU tier (4 seeds each, about 20 minutes on two
# cores), then the leaderboard rebuilt from MLflow (leaderboard/results.json, LEADERBOARD.md).
baselines: setup
	$(BIN)/replaybench baselines
	$(BIN)/replaybench leaderboard build

test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

clean:
	rm -rf runs .pytest_cache

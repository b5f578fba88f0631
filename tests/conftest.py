import atexit
import dataclasses
import hashlib
import importlib.util
import os
import shutil
import tempfile

import pytest

# The suite checks behaviour, not bits across machines: it computes with the native kernels, about 1.6x faster than
# the portable ones runs pin by default (benchmark/kernels.py; tests/test_kernels.py checks the pinning itself).
os.environ.setdefault("REPLAYBENCH_KERNELS", "native")

# The suite never touches a user's store, whatever the shell exports (REPLAYBENCH_RUNS_DIR naming a campaign's
# store, MLFLOW_TRACKING_URI a team's server): the default store of every test process is a temp folder of its own,
# set before the engine reads it at import. A test that needs a store of its own still takes isolated_runs. A process
# a test starts (pytest-xdist's workers, a spawned run) imports this file again and keeps the store it was given.
if "REPLAYBENCH_TEST_STORE" not in os.environ:
    test_store = tempfile.mkdtemp(prefix="replaybench-test-store-")
    atexit.register(shutil.rmtree, test_store, ignore_errors=True)
    os.environ.update(REPLAYBENCH_TEST_STORE=test_store, REPLAYBENCH_RUNS_DIR=test_store,
                      MLFLOW_TRACKING_URI=f"sqlite:///{test_store}/mlflow.db")

import torch  # noqa: E402

# pytest-xdist's workers inherit COLUMNS=80, which rich fixes as the width of a console made at import (the command
# line's): every test starts from a pipe's width instead, and a test that needs another width sets it
os.environ.pop("COLUMNS", None)

from benchmark.engine.boundary import UNSANDBOXED_ENV, bwrap_works
from benchmark.grading.tasks import load_task
from benchmark.paths import REPO_ROOT
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model
from benchmark.workload import load_workload

# Isolated runs need bubblewrap's boundary; CI installs it and requires it (REPLAYBENCH_REQUIRE_SANDBOX=1). On a
# machine without it the suite runs the boxes without that layer, and the tests of the layer itself skip.
if not bwrap_works():
    if os.environ.get("REPLAYBENCH_REQUIRE_SANDBOX") == "1":
        raise RuntimeError("bubblewrap is required here (REPLAYBENCH_REQUIRE_SANDBOX=1): apt-get install bubblewrap")
    os.environ[UNSANDBOXED_ENV] = "1"

# A test of what the boundary itself holds: without bubblewrap there is no such boundary to test.
needs_bubblewrap = pytest.mark.skipif(os.environ.get(UNSANDBOXED_ENV) == "1",
                                      reason="no bubblewrap on this machine: apt-get install bubblewrap")

torch.set_num_threads(1)  # the runs' default: reproducible, and fast on small shared machines

# tests/vllm_engine/ needs vLLM, which has an environment of its own (`make test-vllm` builds .venv-vllm).
if importlib.util.find_spec("vllm") is None:
    collect_ignore = ["vllm_engine"]


@pytest.fixture(autouse=True)
def leaves_the_repository_runs_alone():
    """The repository's runs/ is the user's store: a test that makes it has named that folder by mistake (the
    default store is redirected above). The end-to-end journeys are watched too: they run the users' commands, but
    on a store of their own."""
    runs = REPO_ROOT / "runs"
    watched = not runs.exists()
    yield
    if watched and runs.exists():
        shutil.rmtree(runs, ignore_errors=True)  # it did not exist before this test: nothing of the user's is in it
        pytest.fail(f"this test made {runs}: use the isolated_runs fixture")


@pytest.fixture(scope="session")
def arith_task():
    return load_task("arith_tiny")


@pytest.fixture(scope="session")
def coin_task(arith_task):
    return coin_reward_task(arith_task)


def coin_reward_task(task):
    """The task with its reward replaced by a fixed function of the completion's text (about half of all
    texts score 1): the random-init tiny model then gets mixed groups, non-zero advantages, real gradient
    steps and non-zero evaluations, so that a result depends on the weights."""

    def process_results(doc, results):
        return {task.metric: float(hashlib.sha256(results[0].encode()).digest()[0] % 2)}

    return dataclasses.replace(task, process_results=process_results)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, arith_task):
    """A small random-init model saved like a real start checkpoint: fast, same code path."""
    folder = tmp_path_factory.mktemp("tiny_checkpoint")
    tokenizer = build_char_tokenizer("0123456789+=")
    model = build_tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, seed=0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def arith_tiny_v2(tmp_path):
    """arith-tiny as version 2 defined it, for a test whose made-up runs have its shape (helpers.arith_tiny_as_v2)."""
    from helpers import arith_tiny_as_v2

    with arith_tiny_as_v2(tmp_path / "workloads-v2"):
        yield


@pytest.fixture(scope="module")
def workloads_as_v2(tmp_path_factory):
    """arith_tiny_v2 for a whole module, whose module-scoped boards are made of such runs."""
    from helpers import arith_tiny_as_v2

    with arith_tiny_as_v2(tmp_path_factory.mktemp("workloads") / "workloads"):
        yield


@pytest.fixture
def isolated_runs(tmp_path, monkeypatch):
    """MLflow store and checkpoints in a temp folder, never the repository's runs/."""
    import benchmark.runner
    import benchmark.tracking

    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(benchmark.tracking, "RUNS_DIR", runs)
    monkeypatch.setattr(benchmark.runner, "RUNS_DIR", runs)
    monkeypatch.setenv("REPLAYBENCH_RUNS_DIR", str(runs))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{runs / 'mlflow.db'}")
    return runs


def small_workload(checkpoint, **overrides):
    return load_workload("arith-tiny", small_overrides(checkpoint, **overrides))


def small_overrides(checkpoint, **overrides):
    base = {
        "model.checkpoint": str(checkpoint),
        "budget": 60_000,
        "eval.every": 20_000,
        "eval.num_problems": 50,
        "eval.pass_k_problems": 10,
        "eval.pass_k_samples": 4,
        "grpo.batch_size": 16,
        "grpo.group_size": 4,
    }
    base.update(overrides)
    return base

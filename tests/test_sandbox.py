"""Untrusted strategies run in their own process: hostile ones end their run with the right
verdict, on record in MLflow, and the runs beside them complete."""

import base64
import dataclasses
import functools
import hashlib
import json
import pickle
import socket
import tempfile
from pathlib import Path

import pytest
from conftest import needs_bubblewrap, small_workload
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.engine.ledger import strategy_seed
from benchmark.engine.pipeline import Pipeline
from benchmark.engine.sandbox import IsolatedStrategy
from benchmark.runner import RunSpec, run
from benchmark.strategy import StrategyFailure, build_strategy, declared_params
from benchmark.tracking import digest, find_runs

REPO = Path(__file__).resolve().parent.parent
HOSTILE = Path(__file__).resolve().parent / "hostile"


TIGHT = {"limits.call_seconds": 2, "limits.memory_mb": 1024, "limits.reply_mb": 1}  # attacks fail fast
SMALL = {"rlep": {"pool_prompts": 10, "pool_samples": 4}}  # a pool that fits the small budget


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "baselines").glob("*.py")))
def test_isolated_strategy_makes_the_same_run_as_in_process(tiny_checkpoint, coin_task, name):
    # coin_task: mixed rewards, so that weights, priorities and replayed successes all come into play
    from benchmark.submission import load_baselines

    entry = load_baselines().entries.get(name)  # on_policy_repeat: the regime diagnostic's arm, not an entry
    path = REPO / "baselines" / f"{name}.py"
    small_buffer = {"buffer_size": 32} if "buffer_size" in declared_params(path) else {}
    params = {**(entry.strategy_params() if entry else {}), **small_buffer, **SMALL.get(name, {})}
    histories = []
    for isolated in (False, True):
        w = small_workload(tiny_checkpoint, **{"pipeline.workers": 5, "pipeline.trainers": 3})
        model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
        tok = AutoTokenizer.from_pretrained(tiny_checkpoint, padding_side="left")
        strategy = (IsolatedStrategy(path, params, rng_seed=strategy_seed(0)) if isolated
                    else build_strategy(path, params))
        p = Pipeline(w, coin_task, seed=0, policy=(model, tok, {}))
        p.attach(strategy, entry.track if entry else "buffer")
        p.start()
        metrics = [m for c in p.run() for m in c.metrics if not m[0].startswith("wall/")]
        use_count = p.strategy_usage()["use_count"]
        histories.append((p.eval_history, p.trainer_step, use_count, metrics))
        if isolated:
            state = strategy.state_dict()
            box_state = pickle.loads(base64.b64decode(state["box"]))  # the test reads the box's own bytes
            assert box_state["use_count"] == use_count  # the box's mirror kept up
            strategy.close()
    assert histories[0] == histories[1]


@pytest.mark.parametrize("file, verdict", [
    ("raises.py", "raised: sample() raised ValueError: boom"),
    ("hangs.py", "timeout: add() took longer than"),
    ("hogs_memory.py", "memory: add() exceeded the 1024 MB memory limit"),
    ("garbage.py", "garbage: sample() returned a int, not a Rollout"),
    ("fabricates.py", "fabricated: rollout 1000000000 was never produced"),
    ("tampers.py", "tampered: rollout 0 differs"),
    ("writes_outside.py", "forbidden: tried to write a file"),
    ("spawns.py", "forbidden: started a process (subprocess.Popen)"),
    ("connects.py", "forbidden: opened a network connection"),
    ("loads_native.py", "forbidden: loaded native code (ctypes)"),
    ("crashes.py", "crashed: the strategy process died during add() (exit code 3)"),
    ("smuggles_code.py", "garbage: sample() returned something that is not plain data"),
    ("writes_at_import.py", "forbidden: tried to write a file"),
    ("mutates_in_place.py", "tampered: rollout 0 differs"),
    ("huge_state.py", "garbage: state_dict() sent a reply over the 1 MB limit"),
])
@pytest.mark.slow
def test_hostile_strategy_ends_its_run_with_a_verdict(file, verdict, tiny_checkpoint, isolated_runs, monkeypatch,
                                                        tmp_path):
    reference_good_run(tiny_checkpoint)  # before the attack, with the default limits
    target = tmp_path / "escaped.txt"
    with socket.create_server(("127.0.0.1", 0)) as listener:  # what connects.py tries to reach
        listener.settimeout(0.2)
        offered = {"target": str(target), "port": listener.getsockname()[1]}  # where each attack aims
        params = {k: v for k, v in offered.items() if k in (declared_params(HOSTILE / file) or [])}
        spec = RunSpec(small_workload(tiny_checkpoint, **TIGHT), HOSTILE / file, params, seed=0, isolated=True)
        with pytest.raises(StrategyFailure) as failure:
            run(spec)
        with pytest.raises(TimeoutError):
            listener.accept()  # no connection came through
    assert str(failure.value).startswith(verdict)
    assert not (HOSTILE / file).with_suffix(".escaped").exists()
    [record] = find_runs("arith-tiny", f"tags.`replaybench.strategy` = '{Path(file).stem}'")
    assert record.info.status == "FAILED"
    assert record.data.tags["replaybench.status"] == f"failed: {failure.value}"
    assert not target.exists()
    # the suite goes on: a well-behaved run right after completes exactly as it does with no attack before it
    assert comparable(good_run(tiny_checkpoint)) == reference_good_run(tiny_checkpoint)


def good_run(checkpoint) -> dict:
    return run(RunSpec(small_workload(checkpoint), REPO / "baselines" / "fifo_uniform.py", {"buffer_size": 32},
                       seed=0, isolated=True))


def comparable(summary: dict) -> dict:
    # wall-clock values differ from run to run; `measured` holds the rest of them
    return {k: v for k, v in summary.items()
            if k not in ("wall_seconds", "strategy_ms_per_call", "mlflow_run_id", "measured")}


@functools.cache
def reference_good_run(checkpoint) -> dict:
    """The well-behaved run in a store of its own, before any attack of this module."""
    import benchmark.runner
    import benchmark.tracking

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        runs = Path(tmp)
        mp.setattr(benchmark.tracking, "RUNS_DIR", runs)
        mp.setattr(benchmark.runner, "RUNS_DIR", runs)
        mp.setenv("REPLAYBENCH_RUNS_DIR", str(runs))
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{runs / 'mlflow.db'}")
        return comparable(good_run(checkpoint))


def test_strategy_that_fails_to_construct_is_recorded(tiny_checkpoint, isolated_runs, tmp_path):
    path = tmp_path / "bad_init.py"
    path.write_text("from benchmark import ReplayStrategy\n\nclass BadInit(ReplayStrategy):\n"
                    "    def __init__(self):\n        raise RuntimeError('nope')\n"
                    "    def add(self, r, c):\n        pass\n    def sample(self, n, c):\n        return None\n")
    with pytest.raises(StrategyFailure, match="raised: .*RuntimeError.*nope"):
        run(RunSpec(small_workload(tiny_checkpoint), path, {}, seed=0, isolated=True))
    [record] = find_runs("arith-tiny", "tags.`replaybench.strategy` = 'bad_init'")
    assert record.info.status == "FAILED"


@pytest.mark.parametrize("file", ["raises.py", "garbage.py", "fabricates.py", "tampers.py", "mutates_in_place.py"])
def test_the_engines_own_checks_give_the_same_verdict_in_both_modes(file, tiny_checkpoint, isolated_runs):
    """What the engine checks itself is judged alike in process; what only the box can stop (writes, processes,
    memory, a call that never returns) needs --isolate."""
    verdicts = []
    for isolated in (False, True):
        with pytest.raises(StrategyFailure) as failure:
            run(RunSpec(small_workload(tiny_checkpoint, **TIGHT), HOSTILE / file, {}, seed=0, isolated=isolated))
        verdicts.append(str(failure.value))
    assert verdicts[0] == verdicts[1]
    if file == "mutates_in_place.py":
        assert verdicts[0].startswith("tampered: rollout 0 differs from the one the engine handed over")


def test_the_engine_never_unpickles_what_the_box_sends(monkeypatch):
    import pickle

    from benchmark.engine import sandbox

    def refuse(*args, **kwargs):
        raise AssertionError("the engine unpickled a reply")

    from multiprocessing.reduction import ForkingPickler

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(ForkingPickler, "loads", refuse)  # what Connection.recv() unpickles with
    strategy = sandbox.IsolatedStrategy(REPO / "baselines" / "fifo_uniform.py", {"buffer_size": 4}, rng_seed=0)
    try:
        state = strategy.state_dict()
        assert isinstance(state["box"], str)  # opaque bytes, as text: only the box loads them
        strategy.load_state_dict(state)
        assert strategy.pool_request() is None
    finally:
        strategy.close()


@pytest.mark.slow
@needs_bubblewrap
def test_the_box_sees_neither_the_store_the_home_other_entries_nor_the_engines_environment(
        tiny_checkpoint, isolated_runs, monkeypatch, tmp_path):
    from benchmark.paths import SUBMISSIONS_DIR

    secrets = [isolated_runs / "mlflow.db", Path.home() / ".bashrc", SUBMISSIONS_DIR / "example_entry" / "strategy.py"]
    (isolated_runs / "mlflow.db").touch()
    secrets = [p for p in secrets if p.is_file()]
    assert secrets and all(p.read_bytes() is not None for p in secrets)  # readable from the engine
    monkeypatch.setenv("REPLAYBENCH_TEST_SECRET", "a token the engine holds")
    params = {"secrets": [str(p) for p in secrets], "secret_variable": "REPLAYBENCH_TEST_SECRET"}
    summary = run(RunSpec(small_workload(tiny_checkpoint), HOSTILE / "reads_the_store.py", params, seed=0,
                          isolated=True))
    assert summary["trainer_steps"] > 0  # it ran to the end: nothing was readable
    [record] = find_runs("arith-tiny", "tags.`replaybench.strategy` = 'reads_the_store'")
    assert record.data.tags["replaybench.sandbox"] == "bwrap"


@pytest.mark.slow
@pytest.mark.parametrize("isolated", [False, True])
def test_a_run_has_a_total_budget_of_strategy_time_in_both_modes(tiny_checkpoint, isolated_runs, isolated):
    w = small_workload(tiny_checkpoint, **{"limits.strategy_seconds": 3})
    spec = RunSpec(w, HOSTILE / "sleeps_under_the_limit.py", {}, seed=0, isolated=isolated)
    with pytest.raises(StrategyFailure, match="^timeout: the strategy's calls took more than 3 s in this run"):
        run(spec)


@pytest.mark.parametrize("isolated", [False, True])
def test_a_call_over_the_limit_is_a_timeout_in_both_modes(tiny_checkpoint, isolated_runs, isolated):
    w = small_workload(tiny_checkpoint, **{"limits.call_seconds": 0.25})
    spec = RunSpec(w, HOSTILE / "sleeps_under_the_limit.py", {}, seed=0, isolated=isolated)
    # on a loaded machine the box's start() (importing the entry) can be the first call over 0.25 s of CPU
    over = r"^timeout: ((add|sample)\(\) took longer than|start\(\) used [\d.]+ s of CPU .* more than the) 0.25 s"
    with pytest.raises(StrategyFailure, match=over):
        run(spec)


def test_the_limits_are_the_workloads_and_part_of_the_runs_identity():
    from benchmark.tracking import RUN_IDENTITY_VERSION
    from benchmark.workload import LimitsConfig, load_workload

    assert load_workload("arith-tiny").limits == LimitsConfig()  # stated in the file, at the rules' values
    official, looser = (RunSpec(load_workload("arith-tiny", limits), REPO / "baselines" / "on_policy.py", {}, seed=0)
                        for limits in ({}, {"limits.strategy_seconds": 10_000}))
    assert official.resolved_config()["workload"]["limits"]["strategy_seconds"] == 900  # on record in MLflow
    config = official.resolved_config()
    del config["seed"]
    assert official.group_key() == digest({"identity_version": RUN_IDENTITY_VERSION, **config})[:16]
    assert looser.group_key() != official.group_key()
    assert dataclasses.replace(official, seed=1).group_key() == official.group_key()


@pytest.mark.slow
@needs_bubblewrap
def test_a_hostile_run_leaves_the_store_and_the_runs_before_it_as_they_were(tiny_checkpoint, isolated_runs):
    """The review's forgery: a box that remounts its root read-write, unmounts what hides the store and rewrites
    the summary.json of every earlier run of the store. The store is not in the box at all; the earlier run's
    artifacts are the same bytes after, and its summary still matches the digest it ended with."""
    from benchmark.tracking import client, summary_digest

    earlier = good_run(tiny_checkpoint)
    artifacts = Path(client().get_run(earlier["mlflow_run_id"]).info.artifact_uri.removeprefix("file://"))
    before = {p: p.read_bytes() for p in artifacts.iterdir()}
    # the strategy as it ran: logged before the box started, the bytes behind strategy.sha256
    [record] = find_runs("arith-tiny", f"attributes.run_id = '{earlier['mlflow_run_id']}'")
    assert hashlib.sha256((artifacts / "fifo_uniform.py").read_bytes()).hexdigest() == \
        record.data.params["strategy.sha256"]
    for attack in ("remount", "write_files"):
        aims = [str(artifacts / "summary.json"), str(isolated_runs / "mlflow.db"), str(isolated_runs / "forged.json")]
        spec = RunSpec(small_workload(tiny_checkpoint), HOSTILE / "escapes.py", {"attack": attack, "targets": aims},
                       seed=1, isolated=True)
        with pytest.raises(StrategyFailure, match="^raised: add\\(\\) raised RuntimeError: contained: "):
            run(spec)
    assert {p: p.read_bytes() for p in artifacts.iterdir()} == before
    assert not (isolated_runs / "forged.json").exists()
    summary = json.loads((artifacts / "summary.json").read_text())
    assert summary_digest(summary) == record.data.tags["replaybench.summary_sha256"]


@pytest.mark.parametrize("request_", [(200_000, 8), (1, 10**8), (10**30, 1), (-1, 4), (4.5, 2), (1, 1, float("nan"))])
def test_a_pool_request_is_checked_against_the_budget_before_any_work(request_):
    from benchmark.engine.ledger import checked_pool_request, most_pool_rollouts
    from benchmark.workload import load_workload

    with pytest.raises(StrategyFailure, match="^garbage: pool_request"):
        checked_pool_request(list(request_), most_pool_rollouts(load_workload("arith-tiny")))


@pytest.mark.slow
@pytest.mark.parametrize("isolated", [False, True])
def test_a_refused_pool_request_ends_the_run_failed_in_mlflow(tiny_checkpoint, isolated_runs, isolated):
    spec = RunSpec(small_workload(tiny_checkpoint), HOSTILE / "asks_a_huge_pool.py", {"request": [1, 10**8]}, seed=0,
                   isolated=isolated)
    with pytest.raises(StrategyFailure, match="^garbage: pool_request\\(\\) asks for 100,000,000 rollouts"):
        run(spec)
    [record] = find_runs("arith-tiny", "tags.`replaybench.strategy` = 'asks_a_huge_pool'")
    assert record.info.status == "FAILED"


@pytest.mark.slow
@pytest.mark.parametrize("isolated", [False, True])
def test_a_strategy_cannot_stretch_a_run_past_its_share_of_the_runs_time(tiny_checkpoint, isolated_runs, isolated):
    w = small_workload(tiny_checkpoint, **{"limits.floor_seconds": 1, "limits.wall_share": 0.01})
    spec = RunSpec(w, HOSTILE / "sleeps_under_the_limit.py", {}, seed=0, isolated=isolated)
    with pytest.raises(StrategyFailure, match="^timeout: the strategy's calls took .* more than their allowance of "
                                              "1 s \\+ 1% of the engine's own time"):
        run(spec)

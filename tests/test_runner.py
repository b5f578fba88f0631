"""Runs end to end through the runner and MLflow: reproducibility, kill and resume, one record per run."""

import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import small_overrides, small_workload
from helpers import FIFO, comparable, metric_histories

from benchmark.runner import RunSpec, run
from benchmark.tracking import FLUSH_KEY, client, find_runs

REPO = Path(__file__).resolve().parent.parent
TINY_RUN = {"budget": 20_000, "eval.every": 10_000, "eval.num_problems": 10, "eval.pass_k_problems": 0}


@pytest.mark.slow
def test_same_seed_and_config_give_identical_metrics_in_mlflow(tiny_checkpoint, isolated_runs, capsys):
    spec = RunSpec(small_workload(tiny_checkpoint), FIFO, {"buffer_size": 32}, seed=0)
    a, b = run(spec), run(spec)
    assert a["mlflow_run_id"] != b["mlflow_run_id"]
    ha, hb = metric_histories(a["mlflow_run_id"]), metric_histories(b["mlflow_run_id"])
    assert "eval/accuracy" in ha and "train/loss" in ha and "train/replay_ratio" in ha
    assert ha == hb
    assert comparable(a) == comparable(b)
    runs = find_runs("arith-tiny", f"tags.`replaybench.group` = '{spec.group_key()}'")
    assert len(runs) == 2 and {r.data.tags["replaybench.status"] for r in runs} == {"finished"}
    artifacts = {f.path for f in client().list_artifacts(a["mlflow_run_id"])}
    expected = {"summary.json", "config.json", "fifo_uniform.py", "eval_samples.json", "accuracy_vs_compute.svg",
                "distributions.svg"}
    assert expected <= artifacts
    # the paper's figure 2: every trained sample counted once in each distribution; "new" = first uses
    offpolicy, since_last = a["offpolicy_distribution"], a["since_last_use_distribution"]
    assert sum(offpolicy.values()) == sum(since_last.values()) == a["samples_trained"]
    assert since_last["new"] == round(a["rollouts_generated"] * (1 - a["rollouts_never_used_fraction"]))
    assert list(since_last)[0] == "new" and a["max_uses_of_a_rollout"] > 1 and len(since_last) > 1
    mean = sum(int(k) * v for k, v in offpolicy.items()) / a["samples_trained"]
    assert mean == pytest.approx(a["offpolicy_mean"])
    # the mu this machine gave the run, from its counters, and what measure-mu --from-runs makes of it
    measured = a["measured"]
    assert measured["mu"] > 0 and measured["tokens_trained"] > 0 and measured["rows_per_generate_call"] >= 1
    assert measured["tokens_trained"] > a["samples_trained"]  # prompt + completion tokens of every trained sample
    from benchmark.cli import main

    assert main(["measure-mu", "--from-runs"]) == 0
    table = capsys.readouterr().out
    expected = f"{statistics.median([a['measured']['mu'], b['measured']['mu']]):.3g}"
    assert "fifo_uniform (4,4)" in table and expected in table.split("all")[1]


@pytest.mark.parametrize("strategy, params, isolated", [
    ("prefer_unused", {"buffer_size": 32}, True),  # reads ctx.rng and ctx.use_count: the box restores both
    ("positive_bias", {"buffer_size": 32}, False),
])
@pytest.mark.slow
def test_interrupted_run_resumes_like_an_uninterrupted_one(strategy, params, isolated, tiny_checkpoint, coin_task,
                                                           isolated_runs, monkeypatch):
    import benchmark.workload

    # mixed rewards: the weights and the strategy's priorities change at every step
    monkeypatch.setattr(benchmark.workload.Workload, "load_task", lambda self, name=None: coin_task)
    spec = RunSpec(small_workload(tiny_checkpoint, **{"pipeline.workers": 5, "pipeline.trainers": 3}),
                   REPO / "baselines" / f"{strategy}.py", params, seed=0, isolated=isolated)
    straight = run(spec)
    assert run(spec, stop_after_evals=2) == {}
    interrupted = client().search_runs([client().get_experiment_by_name("replaybench/" + spec.workload.name)
                                        .experiment_id], order_by=["attributes.start_time DESC"], max_results=1)[0]
    assert (interrupted.info.status, interrupted.data.tags["replaybench.status"]) == ("KILLED", "interrupted")
    resumed = run(spec, resume=True)
    assert resumed["mlflow_run_id"] == interrupted.info.run_id
    assert client().get_run(interrupted.info.run_id).info.status == "FINISHED"
    assert straight["trainer_steps"] > 10
    assert comparable(resumed) == comparable(straight)
    assert metric_histories(resumed["mlflow_run_id"]) == metric_histories(straight["mlflow_run_id"])
    assert client().get_run(resumed["mlflow_run_id"]).data.tags["replaybench.resumed"] == "true"


def _cli(args, env):
    return [sys.executable, "-m", "benchmark.cli", "run", "--strategy", str(FIFO), "--seed", "0", *args]


@pytest.mark.slow
@pytest.mark.e2e
def test_sigkill_then_resume_ends_like_an_uninterrupted_run(tiny_checkpoint, isolated_runs, tmp_path):
    overrides = small_overrides(tiny_checkpoint, budget=120_000)  # 7 evaluations: killed after the third
    sets = [f"--set={k}={v}" for k, v in overrides.items()] + ["--set=buffer_size=32"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    straight_json = tmp_path / "straight.json"
    subprocess.run(_cli([*sets, "--summary-json", str(straight_json)], env), env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=600)

    proc = subprocess.Popen(_cli(sets, env), env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpt_dirs = isolated_runs / "checkpoints"
    saves, last_mtime, deadline = 0, None, time.time() + 300
    while saves < 3 and time.time() < deadline and proc.poll() is None:
        states = list(ckpt_dirs.glob("*/state.pt")) if ckpt_dirs.exists() else []
        if states:
            try:
                mtime = states[0].stat().st_mtime_ns
            except FileNotFoundError:
                continue
            if mtime != last_mtime:
                saves, last_mtime = saves + 1, mtime
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed: raise its budget"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    resumed_json = tmp_path / "resumed.json"
    done = subprocess.run(_cli([*sets, "--resume", "--summary-json", str(resumed_json)], env), env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    straight, resumed = json.loads(straight_json.read_text()), json.loads(resumed_json.read_text())
    assert comparable(resumed) == comparable(straight)

    runs = find_runs("arith-tiny", f"tags.`replaybench.group` = '{straight['group']}'")
    assert len(runs) == 2  # the uninterrupted one and the resumed one: no extra record
    resumed_run = client().get_run(resumed["mlflow_run_id"])
    assert resumed_run.info.status == "FINISHED" and resumed_run.data.tags["replaybench.resumed"] == "true"
    hr, hs = metric_histories(resumed["mlflow_run_id"]), metric_histories(straight["mlflow_run_id"])
    assert hr == hs


def start_run_at_once(barrier, spec):
    barrier.wait(timeout=120)
    run(spec)


@pytest.mark.slow
def test_two_runs_started_at_once_on_a_fresh_store_are_both_recorded_whole(tiny_checkpoint, isolated_runs, tmp_path):
    assert not (isolated_runs / "mlflow.db").exists()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)  # both reach the store within moments; MLflow's migration of it takes seconds
    workload = small_workload(tiny_checkpoint, **TINY_RUN)
    specs = [RunSpec(workload, FIFO, {"buffer_size": 32}, seed=seed) for seed in (0, 1)]
    processes = [context.Process(target=start_run_at_once, args=(barrier, spec)) for spec in specs]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
    assert [process.exitcode for process in processes] == [0, 0]

    runs = find_runs("arith-tiny")
    assert sorted(r.data.tags["replaybench.seed"] for r in runs) == ["0", "1"]
    for r in runs:
        assert r.info.status == "FINISHED" and r.data.tags["replaybench.status"] == "finished"
        summary = client().download_artifacts(r.info.run_id, "summary.json", str(tmp_path / r.info.run_id))
        summary = json.loads(Path(summary).read_text())
        histories = metric_histories(r.info.run_id)
        evaluations = len(summary["eval_curve"])
        # every flush landed, each with all its values
        assert [value for _, value in histories[FLUSH_KEY]] == [float(i) for i in range(1, evaluations + 1)]
        assert sorted(value for _, value in histories["eval/accuracy"]) == sorted(
            p["accuracy"] for p in summary["eval_curve"])
        assert [step for step, _ in histories["train/loss"]] == list(range(1, summary["trainer_steps"] + 1))


def test_resume_without_checkpoint_says_what_to_do(tiny_checkpoint, isolated_runs):
    from benchmark.runner import RunError

    spec = RunSpec(small_workload(tiny_checkpoint), FIFO, {"buffer_size": 32}, seed=5)
    with pytest.raises(RunError, match="run without --resume"):
        run(spec, resume=True)

"""Runs side by side (`--jobs N`): one MLflow store written by several processes at once, the same results as one
run after another, and Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import small_overrides, small_workload
from helpers import FIFO, comparable, metric_histories

from benchmark.cli import main
from benchmark.cli.parallel import run_parallel
from benchmark.runner import RunSpec
from benchmark.strategy import StrategyError
from benchmark.tracking import client, find_runs

REPO = Path(__file__).resolve().parent.parent
TINY = {"budget": 20_000, "eval.every": 10_000, "eval.num_problems": 10, "eval.pass_k_problems": 0}


@pytest.mark.slow
@pytest.mark.e2e
def test_baselines_with_two_jobs_records_what_one_job_records(tiny_checkpoint, isolated_runs, tmp_path, monkeypatch,
                                                              capsys):
    import benchmark.leaderboard.targets

    monkeypatch.setattr(benchmark.leaderboard.targets, "TARGETS_DIR", tmp_path / "targets")  # no ranking to print
    sets = [f"--set={k}={v}" for k, v in small_overrides(tiny_checkpoint, **TINY).items()]
    for jobs in ("1", "2"):
        assert main(["baselines", "--seeds", "0", "--jobs", jobs, *sets]) == 0
    err = capsys.readouterr().err
    assert "on_policy (6,2) seed 0" in err and "fifo_uniform (6,2) seed 0" in err  # a row for each run

    by_run = {}
    for r in find_runs("arith-tiny"):
        path = client().download_artifacts(r.info.run_id, "summary.json", str(tmp_path / r.info.run_id))
        summary = json.loads(Path(path).read_text())
        key = (r.data.tags["replaybench.strategy"], r.data.tags["replaybench.seed"])
        by_run.setdefault(key, []).append((comparable(summary), metric_histories(r.info.run_id)))
    assert sorted(by_run) == [("fifo_uniform", "0"), ("on_policy", "0")]
    for key, ((summary_a, metrics_a), (summary_b, metrics_b)) in by_run.items():
        assert summary_a["trainer_steps"] > 0
        assert summary_a == summary_b, key
        assert metrics_a == metrics_b, key


@pytest.mark.slow
def test_a_failing_strategy_is_its_runs_outcome_and_the_other_run_goes_on(tiny_checkpoint, isolated_runs):
    workload = small_workload(tiny_checkpoint, **TINY)
    runs = [(RunSpec(workload, REPO / "tests" / "hostile" / "garbage.py", {}, seed=0), "garbage"),
            (RunSpec(workload, FIFO, {"buffer_size": 32}, seed=0), "fifo")]
    failed, finished = run_parallel(runs, jobs=2)
    assert isinstance(failed, StrategyError) and "garbage: sample() returned a int" in str(failed)
    assert finished["strategy"] == "fifo_uniform" and finished["trainer_steps"] > 0
    assert sorted(r.data.tags["replaybench.status"][:7] for r in find_runs("arith-tiny")) == ["failed:", "finishe"]


@pytest.mark.slow
def test_a_user_error_in_a_worker_is_one_message_and_exit_2(tiny_checkpoint, isolated_runs, capsys):
    sets = [f"--set={k}={v}" for k, v in small_overrides(tiny_checkpoint, **TINY).items()]
    assert main(["baselines", "--seeds", "0", "--jobs", "2", *sets, "--budget", "5"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "error: the budget (5 units) ended before the first trainer step" in err and "raise --budget" in err
    assert "Traceback" not in err and err.count("error:") == 1


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_a_kill_stops_every_run_and_exits_cleanly(tiny_checkpoint, isolated_runs, stop):
    sets = [f"--set={k}={v}" for k, v in small_overrides(tiny_checkpoint, **{**TINY, "budget": 20_000_000}).items()]
    # four runs, two at a time: those still queued when the stop comes never start (none is recorded)
    command = [sys.executable, "-m", "benchmark.cli", "baselines", "--seeds", "0", "1", "--jobs", "2", *sets]
    # a session of its own: the test signals its whole process group, as a terminal's Ctrl-C does
    # PYTHONFAULTHANDLER: should it hang, SIGABRT makes every process print the stacks of all its threads
    # SIG_DFL: a suite started in the background (`cmd &` in a script) inherits SIGINT ignored, and a Python started
    # with it ignored never raises KeyboardInterrupt; a terminal's command starts with the default
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while len(list(isolated_runs.glob("checkpoints/*/run.json"))) < 2 and proc.poll() is None:
            assert time.time() < deadline, "the runs did not start"
            time.sleep(0.2)
        time.sleep(1)  # both are training
        os.killpg(proc.pid, stop)
        try:
            _, err = proc.communicate(timeout=120)  # usually seconds; once over 60 s on a clean clone's first run
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGABRT)
            _, err = proc.communicate(timeout=60)
            pytest.fail(f"no exit within 120 s of the stop; the stacks of every process:\n{err[-30000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "Traceback" not in err
    runs = find_runs("arith-tiny")
    # not failed, not left RUNNING: interrupted, and resumable
    assert len(runs) == 2 and {(r.info.status, r.data.tags["replaybench.status"]) for r in runs} == {
        ("KILLED", "interrupted")}


def test_a_sigterm_stops_a_worker_at_its_runs_next_progress_report_not_where_it_lands(monkeypatch):
    """Raised where the signal lands, the stop could break into a write to the store, whose sqlite lock then outlasts
    the other runs' wait to record their own stop (they failed with "database is locked")."""
    import multiprocessing

    from benchmark.cli import parallel

    for name in ("_terminated", "_stop", "_updates"):  # the worker's state, this process's again after the test
        monkeypatch.setattr(parallel, name, getattr(parallel, name))
    context = multiprocessing.get_context("spawn")
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        parallel._start_worker(context.Queue(), context.Event())
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here
        except KeyboardInterrupt:
            pytest.fail("the SIGTERM broke into whatever the worker was doing")
        with pytest.raises(KeyboardInterrupt):  # the next run never starts
            parallel._run_in_worker(0, spec=None)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_jobs_default_to_the_cpus_this_process_may_use():
    """A process pinned to one CPU (taskset, a scheduler's slot) runs one run at a time, whatever the machine has."""
    code = ("import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); "
            "from benchmark.cli.parallel import default_jobs; print(default_jobs())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "1"


def test_a_cgroup_cpu_quota_caps_the_jobs(tmp_path):
    from benchmark.cli.parallel import cgroup_cpu_quota

    (tmp_path / "cpu.max").write_text("150000 100000\n")  # a container given 1.5 CPUs
    assert cgroup_cpu_quota(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()  # cgroup v1
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) == 3.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(str(tmp_path)) is None

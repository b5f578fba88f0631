"""The Ray executor (`--executor ray`): the pipeline on real Ray actors, on a local 2-CPU Ray cluster.

Real asynchrony is not deterministic: which rollouts a step sees depends on the order in which
generations and steps really finish, so two runs with the same seed differ. The checks compare the
Ray run with the virtual-time pipeline in kind (the same order of magnitude), never bit for bit.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from benchmark import cli
from benchmark.runner import RunSpec, run
from benchmark.tracking import client
from benchmark.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
FIFO = REPO / "baselines" / "fifo_uniform.py"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason='ray is not installed: pip install -e ".[distributed]"')

# arith-tiny (its real start checkpoint), W = 2, T = 2, FIFO of 256, budget 200k, evaluations every 100k.
CONFIG = {"pipeline.devices": 4, "pipeline.workers": 2, "pipeline.trainers": 2, "budget": 200_000,
          "eval.every": 100_000, "eval.num_problems": 200, "eval.pass_k_problems": 20}
# The virtual-time pipeline on CONFIG, seed 0 (deterministic; rerun it to refresh): replay ratio
# close to mu*T/W = 5.28, mean off-policiness in trainer steps. A paced Ray run gave 4.74 and 10.9.
SIM_REPLAY_RATIO, SIM_OFFPOLICY_MEAN = 5.05, 11.4
# Wall seconds per normalised unit: the roles run at the workload's relative speeds (mu = 5.28)
# although this CPU's own mu is near 1; the real work fits inside the paced durations.
PACE = 5e-4


def test_without_ray_the_executor_names_the_extra(monkeypatch, isolated_runs, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = cli.main(["run", "--executor", "ray", "--strategy", str(FIFO)])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert 'pip install -e ".[distributed]"' in err and "Traceback" not in err


def test_resume_is_refused_on_ray(monkeypatch, isolated_runs, capsys):
    pytest.importorskip("ray", reason='ray is not installed: pip install -e ".[distributed]"')
    code = cli.main(["run", "--executor", "ray", "--resume", "--strategy", str(FIFO)])
    assert code == 2 and "virtual-time executor only" in capsys.readouterr().err


@needs_ray
@pytest.mark.slow
def test_ray_run_records_the_pipeline_metrics_and_agrees_in_kind(monkeypatch, isolated_runs):
    from benchmark.ray_executor import EXPERIMENT_PREFIX, RayOptions

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a throw-away local cluster needs no token
    spec = RunSpec(load_workload("arith-tiny", CONFIG), FIFO, {"buffer_size": 256}, seed=0, executor="ray")
    s = run(spec, ray_options=RayOptions(num_cpus=2, pace=PACE))

    # data-parallel trainers end with identical weights
    assert s["trainers_in_sync"] and len(s["trainer_weights_sha256"]) == 2
    # the evaluations sit at the scheduled compute points, with sane accuracies
    assert [p["compute"] for p in s["eval_curve"]] == [0, 100_000, 200_000]
    assert all(0 <= p["accuracy"] <= 1 and 0 <= p["pass_at_4"] <= 1 for p in s["eval_curve"])
    assert [p["trainer_step"] for p in s["eval_curve"]] == sorted(p["trainer_step"] for p in s["eval_curve"])
    assert s["compute_used"] >= 200_000 and s["trainer_steps"] > 10
    # the same dynamics in kind (the same order of magnitude) as the virtual-time pipeline on the same
    # config; unpaced, this CPU's own mu (about 1) would give a replay ratio near 1
    assert SIM_REPLAY_RATIO / 4 < s["replay_ratio"] < SIM_REPLAY_RATIO * 4
    assert SIM_OFFPOLICY_MEAN / 4 < s["offpolicy_mean"] < SIM_OFFPOLICY_MEAN * 4
    m = s["measured"]
    assert m["worker_busy_s"] > 0 and m["trainer_busy_s"] > 0 and 0 <= m["trainer_idle_frac"] <= 1
    assert m["compute_device_s"] == pytest.approx(4 * m["elapsed_s"])

    # one finished MLflow run, outside the experiments the leaderboard scores
    c = client()
    recorded = c.get_run(s["mlflow_run_id"])
    assert c.get_experiment(recorded.info.experiment_id).name == f"{EXPERIMENT_PREFIX}/arith-tiny"
    assert recorded.data.tags["replaybench.status"] == "finished"
    assert recorded.data.tags["replaybench.executor"] == "ray"
    metrics = set(recorded.data.metrics)
    pipeline_metrics = {"eval/accuracy", "eval/pass_at_4", "eval/compute", "train/loss", "train/clip_fraction",
                        "train/entropy", "train/grad_norm", "train/replay_ratio", "train/offpolicy_mean",
                        "train/steps_since_last_use", "train/trainer_idle_fraction", "train/worker_idle_fraction",
                        "train/compute", "train/rollouts_generated", "train/samples_trained",
                        "wall/generation_seconds", "wall/training_seconds"}
    measured = {"measured/worker_busy_s", "measured/worker_idle_s", "measured/trainer_busy_s",
                "measured/trainer_idle_s", "measured/trainer_idle_frac", "measured/worker_idle_frac",
                "measured/compute_device_s", "measured/mu"}
    assert pipeline_metrics | measured <= metrics, sorted((pipeline_metrics | measured) - metrics)
    accuracy = c.get_metric_history(s["mlflow_run_id"], "eval/accuracy")
    assert len(accuracy) == 3

"""What several test modules share: MLflow runs shaped like the runner's, without training, and the parts of a
run's record that are the same on every machine."""

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from benchmark.tracking import client, run_identity, summary_digest
from benchmark.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
FIFO = REPO / "baselines" / "fifo_uniform.py"


def metric_histories(run_id):
    c = client()
    keys = sorted(k for k in c.get_run(run_id).data.metrics if not k.startswith("wall/"))
    return {k: sorted((m.step, m.value) for m in c.get_metric_history(run_id, k)) for k in keys}


def comparable(summary):
    # wall-clock values differ from run to run; `measured` holds the rest of them
    return {k: v for k, v in summary.items()
            if k not in ("wall_seconds", "strategy_ms_per_call", "mlflow_run_id", "measured")}


WORKLOAD = "arith-tiny"


def fake_curve(budget, every, accs):
    points = [i * every for i in range(int(budget // every) + 1)]
    accs = list(accs) + [accs[-1]] * (len(points) - len(accs))
    return [{"compute": float(c), "trainer_step": 10 * i, "accuracy": a, "pass_at_1": a, "pass_at_4": min(1.0, a + 0.2)}
            for i, (c, a) in enumerate(zip(points, accs))]


def make_run(c, exp, strategy, seed, accs=None, workers=5, trainers=3, status="finished", overrides=None,
             entropy=None, track=None, params=None, replay_ratio=1.0, offpolicy_mean=0.5, workload=WORKLOAD,
             digest_tag=False):
    """One MLflow run shaped like the runner's: tags, summary.json artifact, train/entropy metric."""
    w = load_workload(workload, {"pipeline.workers": workers, "pipeline.trainers": trainers, **(overrides or {})})
    config = {"workload": w.to_dict(), "strategy": {"name": strategy, "path": f"baselines/{strategy}.py",
                                                    "sha256": f"sha-{strategy}", "params": params or {}},
              "seed": seed}
    group = run_identity(config)
    tags = {"replaybench.workload": workload, "replaybench.workload_version": w.version,
            "replaybench.strategy": strategy, "replaybench.group": group, "replaybench.seed": str(seed),
            "replaybench.status": status}
    if track:
        tags["replaybench.track"] = track
    run = c.create_run(exp, run_name=f"{strategy}-seed{seed}", tags=tags)
    rid = run.info.run_id
    if status == "finished":
        curve = fake_curve(w.budget, w.eval.every, accs)
        best = max(curve, key=lambda p: (p["accuracy"], -p["compute"]))
        summary = {"final": curve[-1], "best": best, "eval_curve": curve, "budget": w.budget,
                   "replay_ratio": replay_ratio, "offpolicy_mean": offpolicy_mean, "config": config,
                   "strategy": strategy, "seed": seed,
                   "mlflow_run_id": rid, "group": group, "workload": workload}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "summary.json"
            path.write_text(json.dumps(summary))
            c.log_artifact(rid, str(path))
        if digest_tag:  # as the runner ends a run
            c.set_tag(rid, "replaybench.summary_sha256", summary_digest(summary))
        if entropy is not None:
            c.log_metric(rid, "train/entropy", entropy, step=5)
        c.set_terminated(rid)
    elif status.startswith("failed"):
        c.set_terminated(rid, status="FAILED")
    return rid


ARITH_TINY_V2 = {"version": "2", "seeds": [0, 1, 2, 3], "target_seeds": [10, 11, 12, 13]}  # and no tuning budget


@contextlib.contextmanager
def arith_tiny_as_v2(folder: Path):
    """The workload files, arith-tiny as its version 2 defined it (4 scored seeds, target seeds 10-13, no tuning):
    the shape the scoring and page tests make up their runs and boards for, whatever version the published board
    puts in workloads/."""
    import benchmark.paths
    import benchmark.workload

    shutil.copytree(benchmark.paths.WORKLOADS_DIR, folder)
    data = yaml.safe_load((folder / "arith-tiny.yaml").read_text())
    data.pop("tuning", None)
    (folder / "arith-tiny.yaml").write_text(yaml.safe_dump({**data, **ARITH_TINY_V2}, sort_keys=False))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(benchmark.workload, "WORKLOADS_DIR", folder)
        patch.setattr(benchmark.paths, "WORKLOADS_DIR", folder)
        yield

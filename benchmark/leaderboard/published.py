"""The runs behind the published board, shipped with it: leaderboard/runs/<run id>/ holds each run's record
(run.json: its MLflow name, status, tags, params and latest metrics) and the artifacts scoring reads or a reader
checks (summary.json, config.json, the strategy file, submission.yaml). The page links every run id there.

`import_runs` loads such a folder into any MLflow store: one run per folder, with the same tags, params and
artifacts, tagged replaybench.published_run_id with the original id, which the scorer then reads as the run's
id, so a board built from the imported runs names the same runs as the published one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.files import write_atomic
from benchmark.tracking import EXPERIMENT_PREFIX, TAG

PUBLISHED_ID_TAG = f"{TAG}published_run_id"
SHIPPED_ARTIFACTS = ("summary.json", "config.json", "submission.yaml")  # and the strategy's .py file
RUNS_FOLDER = "runs"  # inside the published board's folder


def referenced_run_ids(results: dict) -> list[str]:
    """Every MLflow run id the board names: scored, reference (target), not ranked and excluded runs."""
    ids = {r for e in results["entries"] for w in e["workloads"].values() for r in w["run_ids"]}
    ids |= {r for w in results["workloads"].values() for r in w["reference_run_ids"]}
    ids |= {r for n in results["not_ranked"] for r in n["run_ids"]}
    ids |= {x["run_id"] for x in results["excluded_runs"]}
    return sorted(ids)


def export_runs(results: dict, board_dir: Path, mlflow_client=None) -> int:
    """Write board_dir/runs/<id>/ for every run the board names (and remove folders of runs it no longer names);
    the number of runs written."""
    from mlflow.exceptions import MlflowException

    from benchmark.tracking import client as make_client

    c = mlflow_client or make_client()
    folder = Path(board_dir) / RUNS_FOLDER
    wanted = referenced_run_ids(results)
    written = 0
    for run_id in wanted:
        try:
            run = c.get_run(run_id)
        except MlflowException:  # not in this store (a forced publish, imported runs): a folder shipped before stays
            continue
        written += 1
        out = folder / run_id
        out.mkdir(parents=True, exist_ok=True)
        record = {"run_id": run_id, "run_name": run.info.run_name, "status": run.info.status,
                  "experiment": c.get_experiment(run.info.experiment_id).name,
                  "start_time": run.info.start_time, "end_time": run.info.end_time,
                  "tags": {k: v for k, v in sorted(run.data.tags.items()) if not k.startswith("mlflow.")
                           or k == "mlflow.runName"},
                  "params": dict(sorted(run.data.params.items())),
                  "metrics": dict(sorted(run.data.metrics.items()))}
        write_atomic(out / "run.json", json.dumps(record, indent=1) + "\n")
        names = {a.path for a in c.list_artifacts(run_id)}
        for name in sorted(n for n in names if n in SHIPPED_ARTIFACTS or n.endswith(".py")):
            with tempfile.TemporaryDirectory() as tmp:
                shutil.copyfile(c.download_artifacts(run_id, name, tmp), out / name)
    for stale in folder.iterdir() if folder.is_dir() else []:
        if stale.is_dir() and stale.name not in wanted:
            shutil.rmtree(stale)
    return written


def import_runs(folder: Path, mlflow_client=None) -> tuple[int, int]:
    """Load every shipped run of `folder` into the MLflow store; (imported, already there)."""
    from mlflow.entities import Metric, Param, RunTag

    from benchmark.tracking import client as make_client
    from benchmark.tracking import experiment_id

    folder = Path(folder)
    records = sorted(folder.glob("*/run.json"))
    if not records:
        raise LeaderboardError(f"no shipped runs in {folder} (expected <run id>/run.json folders, as in "
                               f"leaderboard/{RUNS_FOLDER}/)")
    c = mlflow_client or make_client()
    experiments = [e.experiment_id for e in c.search_experiments()]
    present = {r.data.tags.get(PUBLISHED_ID_TAG) for r in (c.search_runs(experiments, max_results=50_000)
                                                           if experiments else [])} - {None}
    imported = 0
    for path in records:
        record = json.loads(path.read_text())
        if record["run_id"] in present:
            continue
        name = record["experiment"]
        exp = (experiment_id(c, name.removeprefix(EXPERIMENT_PREFIX)) if name.startswith(EXPERIMENT_PREFIX)
               else experiment_id(c, "", name))
        tags = {**record["tags"], PUBLISHED_ID_TAG: record["run_id"]}
        run = c.create_run(exp, start_time=record["start_time"], tags=tags, run_name=record["run_name"])
        rid = run.info.run_id
        params = [Param(k, str(v)) for k, v in record["params"].items()]
        for i in range(0, len(params), 100):  # MLflow's limit per batch
            c.log_batch(rid, params=params[i:i + 100])
        c.log_batch(rid, metrics=[Metric(k, v, record["end_time"] or 0, 0) for k, v in record["metrics"].items()],
                    tags=[RunTag("mlflow.runName", record["run_name"])])
        for artifact in sorted(p for p in path.parent.iterdir() if p.name != "run.json"):
            c.log_artifact(rid, str(artifact))
        c.set_terminated(rid, status=record["status"], end_time=record["end_time"])
        imported += 1
    return imported, len(records) - imported

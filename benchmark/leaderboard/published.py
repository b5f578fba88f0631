"""The runs behind the published board, shipped with it in leaderboard/runs/:

    runs/<run id>/run.json          the run's record: its MLflow name, status, tags, params and latest metrics,
                                    and where its artifacts that its folder does not hold come from (below)
    runs/<run id>/summary.json      the artifacts that are the run's own: summary.json, which scoring reads
    runs/by-sha256/<sha256>.py      each strategy file once, named by the SHA-256 of its bytes (the run's
                                    `strategy.sha256` param); submission.yaml likewise, as <sha256>.yaml

A baseline's seeds and splits all run one strategy file: stored once, not once per run. run.json's `by_sha256`
maps each such artifact's own name (`prioritized.py`, `submission.yaml`) to its SHA-256. config.json is not
shipped: the runner logs summary.json's "config" as it (tracking.json_artifact), so run.json's
`config_from_summary` says to recreate it from there, byte for byte. The page links every run id to its folder
and every entry to its strategy file.

`import_runs` loads such a folder into any MLflow store: one run per folder, with the same tags, params and
artifacts (under their own names, config.json included), tagged replaybench.published_run_id with the original
id, which the scorer then reads as the run's id, so a board built from the imported runs names the same runs as
the published one.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path, PurePosixPath

from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.files import write_atomic
from benchmark.tracking import EXPERIMENT_PREFIX, TAG, json_artifact

PUBLISHED_ID_TAG = f"{TAG}published_run_id"
SHIPPED_ARTIFACTS = ("summary.json", "config.json", "submission.yaml")  # and the strategy's .py file
RUNS_FOLDER = "runs"  # inside the published board's folder
BY_SHA256 = "by-sha256"  # inside RUNS_FOLDER: the artifacts runs share, one file per content


def shared_path(name: str, sha256: str) -> str:
    """Where, under the runs folder, an artifact stored by content lies: by-sha256/<sha256><its suffix>."""
    return f"{BY_SHA256}/{sha256}{PurePosixPath(name).suffix}"


def _stored_by_content(name: str) -> bool:
    return name.endswith(".py") or name == "submission.yaml"  # the strategy file, the submission: shared


def _config_text(summary: bytes) -> bytes | None:
    """config.json as the runner logged it, from the summary.json beside it (None when it holds no config)."""
    config = json.loads(summary).get("config")
    return None if config is None else json_artifact(config).encode()


def referenced_run_ids(results: dict) -> list[str]:
    """Every MLflow run id the board names: scored, reference (target), not ranked and excluded runs."""
    ids = {r for e in results["entries"] for w in e["workloads"].values() for r in w["run_ids"]}
    ids |= {r for w in results["workloads"].values() for r in w["reference_run_ids"]}
    ids |= {r for n in results["not_ranked"] for r in n["run_ids"]}
    ids |= {x["run_id"] for x in results["excluded_runs"]}
    return sorted(ids)


def run_key(config: dict, seed) -> tuple:
    """What makes two runs the same run of an entry: its strategy file, workload version, split, buffer size and
    seed (a run's resolved config, flattened as MLflow params hold it or nested as summary.json does)."""
    flat = config if "strategy.sha256" in config else {
        "strategy.sha256": config["strategy"].get("sha256"), "workload.name": config["workload"]["name"],
        "workload.version": config["workload"]["version"],
        "workload.pipeline.workers": config["workload"]["pipeline"]["workers"],
        "workload.pipeline.trainers": config["workload"]["pipeline"]["trainers"],
        "strategy.params.buffer_size": config["strategy"].get("params", {}).get(
            "buffer_size", config["workload"].get("strategy_defaults", {}).get("buffer_size"))}
    return tuple(str(flat.get(k)) for k in ("strategy.sha256", "workload.name", "workload.version",
                                             "workload.pipeline.workers", "workload.pipeline.trainers",
                                             "strategy.params.buffer_size")) + (str(seed),)


def shipped_runs(board_dir: Path, keys: set[tuple]) -> dict[tuple, dict]:
    """The published finished runs with these run_keys: each one's run.json with its summary.json under "summary"; of
    several with one key, a run the board scores is preferred to one it only ships, then the latest."""
    scored = set()
    if (board_dir / "results.json").is_file():
        results = json.loads((board_dir / "results.json").read_text())
        scored = {r for e in results["entries"] for w in e["workloads"].values() for r in w["run_ids"]}
    by_key: dict[tuple, list[tuple[dict, Path]]] = {}
    for path in sorted((board_dir / RUNS_FOLDER).glob("*/run.json")):
        run, summary = json.loads(path.read_text()), path.parent / "summary.json"
        if run["tags"].get(f"{TAG}status") != "finished" or not summary.is_file():
            continue
        key = run_key(run["params"], run["tags"].get(f"{TAG}seed"))
        if key in keys:
            by_key.setdefault(key, []).append((run, summary))
    chosen = {key: min(runs, key=lambda pair: (pair[0]["run_id"] not in scored, -pair[0]["start_time"]))
              for key, runs in by_key.items()}
    return {key: {**run, "summary": json.loads(summary.read_text())} for key, (run, summary) in chosen.items()}


def write_run(folder: Path, record: dict, artifacts: dict[str, Path]) -> None:
    """folder/<run id>/ for one run, from its record (run.json's fields but the two this adds) and its shipped
    artifacts (name -> file): a strategy file or submission.yaml goes to by-sha256/ (once), config.json is left
    out when summary.json recreates it byte for byte; other files of the run's folder are removed."""
    own = {name: path.read_bytes() for name, path in sorted(artifacts.items())}  # before any is overwritten
    by_sha256 = {}
    for name in [n for n in own if _stored_by_content(n)]:
        data = own.pop(name)
        by_sha256[name] = hashlib.sha256(data).hexdigest()
        target = folder / shared_path(name, by_sha256[name])
        if not target.is_file():  # the same name holds the same bytes
            write_atomic(target, data)
    from_summary = ("config.json" in own and "summary.json" in own
                    and own["config.json"] == _config_text(own["summary.json"]))
    if from_summary:
        del own["config.json"]
    out = folder / record["run_id"]
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "run.json", json.dumps({**record, "by_sha256": by_sha256, "config_from_summary":
                                                from_summary}, indent=1) + "\n")
    for name, data in own.items():
        (out / name).write_bytes(data)
    for stale in out.iterdir():
        if stale.name not in own and stale.name != "run.json":
            stale.unlink()


def remove_unreferenced(folder: Path) -> None:
    """Delete the files of folder/by-sha256/ that no shipped run names any more."""
    named = {shared_path(name, sha) for p in folder.glob("*/run.json")
             for name, sha in json.loads(p.read_text()).get("by_sha256", {}).items()}
    for path in (folder / BY_SHA256).iterdir() if (folder / BY_SHA256).is_dir() else []:
        if f"{BY_SHA256}/{path.name}" not in named:
            path.unlink()


MEASUREMENTS = "measurements"  # inside the published board's folder: measurements beside the board


def measurement_run_ids(board_dir: Path) -> set[str]:
    """The runs behind the board's measurements (a regime diagnostic, a tuning, a search): every id under a
    top-level `run_ids` (a list, or a mapping of lists) of the JSON files under board_dir/measurements/."""
    ids = set()
    for path in sorted((Path(board_dir) / MEASUREMENTS).rglob("*.json")):
        listed = json.loads(path.read_text()).get("run_ids") if path.stat().st_size < (16 << 20) else None
        for group in (listed.values() if isinstance(listed, dict) else [listed or []]):
            ids.update(i for i in group if isinstance(i, str))
    return ids


def export_runs(results: dict, board_dir: Path, mlflow_client=None) -> int:
    """Write board_dir/runs/<id>/ for every run the board or its measurements name (and remove the shared files no
    shipped run names); the number of runs written. A run once shipped stays, whatever board replaces the one that
    named it (a campaign's board replacing the board before it): nothing published is dropped."""
    wanted = set(referenced_run_ids(results)) | measurement_run_ids(board_dir)
    written = ship_runs(sorted(wanted), board_dir, mlflow_client)
    remove_unreferenced(Path(board_dir) / RUNS_FOLDER)
    return written


def ship_runs(run_ids: list[str], board_dir: Path, mlflow_client=None) -> int:
    """Write board_dir/runs/<id>/ for each of these runs the store holds (a run it lacks, e.g. imported: a folder
    shipped before stays); the number written. Removes nothing."""
    from mlflow.exceptions import MlflowException

    from benchmark.tracking import client as make_client

    c = mlflow_client or make_client()
    folder = Path(board_dir) / RUNS_FOLDER
    written = 0
    for run_id in run_ids:
        try:
            run = c.get_run(run_id)
        except MlflowException:
            continue
        written += 1
        record = {"run_id": run_id, "run_name": run.info.run_name, "status": run.info.status,
                  "experiment": c.get_experiment(run.info.experiment_id).name,
                  "start_time": run.info.start_time, "end_time": run.info.end_time,
                  "tags": {k: v for k, v in sorted(run.data.tags.items()) if not k.startswith("mlflow.")
                           or k == "mlflow.runName"},
                  "params": dict(sorted(run.data.params.items())),
                  "metrics": dict(sorted(run.data.metrics.items()))}
        names = {a.path for a in c.list_artifacts(run_id)}
        with tempfile.TemporaryDirectory() as tmp:
            write_run(folder, record, {name: Path(c.download_artifacts(run_id, name, tmp)) for name in names
                                       if name in SHIPPED_ARTIFACTS or name.endswith(".py")})
    return written


def restore_artifacts(run_dir: Path, record: dict, tmp: Path) -> list[Path]:
    """A shipped run's artifacts as files under their own names: its folder's, the shared ones copied out of
    by-sha256/ (checked against their hash), config.json recreated from summary.json."""
    files = [p for p in run_dir.iterdir() if p.name != "run.json"]
    for name, sha in record.get("by_sha256", {}).items():
        if PurePosixPath(name).name != name or name in ("", ".", ".."):  # a file name, never a path out of tmp
            raise LeaderboardError(f"{run_dir / 'run.json'} names an artifact {name!r}, not a file name")
        source = run_dir.parent / shared_path(name, sha)
        if not source.is_file():
            raise LeaderboardError(f"{source} is missing: shipped run {record['run_id']} names it as its {name} "
                                   f"(run.json's by_sha256); copy the runs folder whole, {BY_SHA256}/ with it "
                                   "(in a checkout: git checkout -- leaderboard/runs)")
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise LeaderboardError(f"{source} does not hash to its name: it was changed after it was shipped "
                                   "(in a checkout: git checkout -- leaderboard/runs)")
        (tmp / name).write_bytes(data)
        files.append(tmp / name)
    if record.get("config_from_summary"):
        (tmp / "config.json").write_bytes(_config_text((run_dir / "summary.json").read_bytes()))
        files.append(tmp / "config.json")
    return sorted(files, key=lambda p: p.name)


def _import_run(c, record: dict, artifacts: list[Path], experiments: dict[str, str]) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    from benchmark.tracking import experiment_id

    name = record["experiment"]
    if name not in experiments:
        experiments[name] = (experiment_id(c, name.removeprefix(EXPERIMENT_PREFIX))
                             if name.startswith(EXPERIMENT_PREFIX) else experiment_id(c, "", name))
    tags = {**record["tags"], PUBLISHED_ID_TAG: record["run_id"]}
    run = c.create_run(experiments[name], start_time=record["start_time"], tags=tags, run_name=record["run_name"])
    rid = run.info.run_id
    params = [Param(k, str(v)) for k, v in record["params"].items()]
    metrics = [Metric(k, v, record["end_time"] or 0, 0) for k, v in record["metrics"].items()]
    # as few batches as MLflow's limits allow (100 params, 1000 entries a batch): each is a database transaction
    first = 100 if len(metrics) + 100 < 1000 else 0
    c.log_batch(rid, params=params[:first], metrics=metrics, tags=[RunTag("mlflow.runName", record["run_name"])])
    for i in range(first, len(params), 100):
        c.log_batch(rid, params=params[i:i + 100])
    store = get_artifact_repository(run.info.artifact_uri)  # the run's folder, looked up once rather than per file
    for artifact in artifacts:
        store.log_artifact(str(artifact))
    c.set_terminated(rid, status=record["status"], end_time=record["end_time"])


def import_runs(folder: Path, mlflow_client=None) -> tuple[int, int]:
    """Load every shipped run of `folder` the MLflow store does not hold yet; (imported, already there)."""
    from benchmark.tracking import client as make_client

    folder = Path(folder)
    records = sorted(folder.glob("*/run.json"))
    if not records:
        raise LeaderboardError(f"no shipped runs in {folder} (expected <run id>/run.json folders, as in "
                               f"leaderboard/{RUNS_FOLDER}/)")
    c = mlflow_client or make_client()
    experiments = [e.experiment_id for e in c.search_experiments()]
    held = c.search_runs(experiments, max_results=50_000) if experiments else []
    # a run is there when it was imported before (its published id) or made in this store (its own id)
    present = {r.data.tags.get(PUBLISHED_ID_TAG) or r.info.run_id for r in held}
    imported, experiments = 0, {}
    with tempfile.TemporaryDirectory() as scratch:  # the restored artifacts, until MLflow has copied them
        for path in records:
            record = json.loads(path.read_text())
            if record["run_id"] not in present:
                tmp = Path(scratch) / record["run_id"]
                tmp.mkdir()
                # restored before the run exists: a missing file leaves no run half imported
                _import_run(c, record, restore_artifacts(path.parent, record, tmp), experiments)
                imported += 1
    return imported, len(records) - imported

"""Reading MLflow, the system of record: every run of the training experiments with its tags and summary.json."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from benchmark.leaderboard import LeaderboardError
from benchmark.submission import DEFAULT_TRACK
from benchmark.tracking import EXPERIMENT_PREFIX, TAG, experiment_name, tracking_uri


@dataclass
class RunRecord:
    run_id: str
    workload: str
    strategy: str
    group: str
    seed: int | None
    status: str  # the replaybench.status tag
    mlflow_status: str
    track: str
    workload_version: str | None
    start_time: int
    entropy: float | None
    name: str | None = None  # the entry's name (submission.yaml's, a baseline's), when the run carries one
    preview: bool = False  # `submit --preview`: a short run to look at, never ranked
    summary: dict | None = None
    problem: str | None = None  # why the summary could not be read
    summary_sha256: str | None = None  # the digest of summary.json the run ended with (runs since the tag exists)
    imported: bool = False  # loaded from a published board (`leaderboard import-runs`): somebody else's run
    code_version: str | None = None  # the engine's commit, +dirty when it had uncommitted changes
    campaign: str | None = None  # the campaign that made it, and what for: "v3/scored" (replaybench.campaign)
    kernels: str = "native"  # benchmark/kernels.py: "portable" or "native" (runs from before the record: native)


def _tag(run, name, default=None):
    return run.data.tags.get(f"{TAG}{name}", default)


def _search_all(client, experiment_ids: list[str]) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, max_results=5000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def read_summary(client, run) -> dict:
    """The run's summary.json artifact."""
    parsed = urlparse(run.info.artifact_uri)
    if parsed.scheme in ("file", ""):  # local store: read in place rather than copy
        return json.loads((Path(url2pathname(parsed.path)) / "summary.json").read_text())
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory() as tmp:
        return json.loads(Path(client.download_artifacts(run.info.run_id, "summary.json", tmp)).read_text())


def load_runs(workloads: list[str] | None = None, mlflow_client=None) -> list[RunRecord]:
    """Every run of the given workloads (default: every training experiment), summaries included."""
    from benchmark.tracking import client as make_client

    c = mlflow_client or make_client()
    exps = [e for e in c.search_experiments() if e.name.startswith(EXPERIMENT_PREFIX)]
    if workloads is not None:
        wanted = {experiment_name(w) for w in workloads}
        exps = [e for e in exps if e.name in wanted]
    if not exps:
        return []
    records, finished = [], []
    for run in _search_all(c, [e.experiment_id for e in exps]):
        seed = _tag(run, "seed")
        rec = RunRecord(
            # a run loaded from a published board (`leaderboard import-runs`) is known by its published id
            run_id=_tag(run, "published_run_id") or run.info.run_id, workload=_tag(run, "workload", ""),
            strategy=_tag(run, "strategy", "?"),
            group=_tag(run, "group", ""), seed=int(seed) if seed not in (None, "") else None,
            status=_tag(run, "status", ""), mlflow_status=run.info.status, track=_tag(run, "track", DEFAULT_TRACK),
            workload_version=_tag(run, "workload_version"), start_time=run.info.start_time or 0,
            entropy=run.data.metrics.get("train/entropy"), name=_tag(run, "name") or _tag(run, "submission"),
            preview=_tag(run, "preview") == "true", summary_sha256=_tag(run, "summary_sha256"),
            imported=_tag(run, "published_run_id") is not None, code_version=run.data.params.get("code_version"),
            campaign=_tag(run, "campaign"), kernels=run.data.params.get("kernels", "native"))
        records.append(rec)
        if rec.status == "finished":
            finished.append((rec, run))

    local = all(urlparse(r.info.artifact_uri).scheme in ("file", "") for _, r in finished)
    store_down: list[Exception] = []  # the store stopped answering mid-read: stop and report that instead

    def fetch(item):
        if store_down:
            return
        rec, run = item
        try:
            rec.summary = read_summary(c, run)
        except Exception as exc:  # a missing or unreadable artifact is reported, not fatal
            if not local:
                try:
                    c.search_experiments(max_results=1)
                except Exception as down:
                    store_down.append(down)
                    return
            rec.problem = f"summary.json unreadable: {type(exc).__name__}: {exc}"

    if local:
        for item in finished:
            fetch(item)
    else:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(fetch, finished))
    if store_down:
        raise store_down[0]
    return records


# MLflow's HTTP client retries a dead server for minutes by default; scoring only reads, so it fails
# fast instead (a user's own settings of these variables win).
FAIL_FAST_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def finished_runs(workload_name: str) -> list[RunRecord]:
    """The workload's finished runs that hold their summary.json, oldest first, from the configured store."""
    with reading_store(tracking_uri()):
        records = load_runs([workload_name])
    return sorted((r for r in records if r.status == "finished" and r.summary is not None),
                  key=lambda r: (r.start_time, r.run_id))


@contextlib.contextmanager
def reading_store(uri: str):
    """Fail fast on a remote store, and turn a store that cannot be read into a LeaderboardError."""
    import requests
    from mlflow.exceptions import MlflowException

    unset = [k for k in FAIL_FAST_HTTP if k not in os.environ]
    os.environ.update({k: FAIL_FAST_HTTP[k] for k in unset})
    try:
        yield
    except (MlflowException, requests.RequestException, OSError) as exc:
        fix = ("start the tracking server (or point MLFLOW_TRACKING_URI at a reachable one)"
               if urlparse(uri).scheme in ("http", "https") else "check that the store exists and is readable")
        raise LeaderboardError(f"cannot read the MLflow tracking store {uri} ({_root_cause(exc)}): {fix}, then "
                               "run the command again; no leaderboard file was changed") from exc
    finally:
        for k in unset:
            os.environ.pop(k, None)


def _root_cause(exc: BaseException) -> str:
    """The OS-level reason (e.g. "[Errno 111] Connection refused") when there is one, else the first line."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\][^'\")]*|Read timed out|Connection aborted", text)
    return found.group(0).strip() if found else text.splitlines()[0][:200] if text else type(exc).__name__

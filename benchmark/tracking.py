"""MLflow records: one MLflow run per training run, the system of record for the scorer.

Default store: a SQLite file under runs/ (embedded, no server). Set MLFLOW_TRACKING_URI to use
another store, e.g. a shared `mlflow server`.

Metrics reach MLflow in numbered flushes, one per evaluation checkpoint. Each flush ends with
the metric `replaybench/flush` = its number, in the same batch, so a resumed run can ask MLflow
which flushes already landed and never logs a value twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

from benchmark.errors import UserError
from benchmark.paths import REPO_ROOT

RUNS_DIR = Path(os.environ.get("REPLAYBENCH_RUNS_DIR") or REPO_ROOT / "runs")  # checkpoints and the default store
FLUSH_KEY = "replaybench/flush"
TAG = "replaybench."
EXPERIMENT_PREFIX = "replaybench/"  # training runs of workload W go to the experiment replaybench/W


def experiment_name(workload_name: str) -> str:
    return f"{EXPERIMENT_PREFIX}{workload_name}"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{RUNS_DIR / 'mlflow.db'}"


class TrackingError(UserError):
    """An MLflow store that cannot be used; the message names the store and the fix."""


def store_problem(uri: str | None = None) -> str | None:
    """What makes the store unusable before anything runs (None: nothing known). MLflow 3 refuses a folder
    store (MLFLOW_TRACKING_URI=./mlruns) unless MLFLOW_ALLOW_FILE_STORE is set, and would say so only when a
    command first writes, after its work is done."""
    uri = uri or tracking_uri()
    is_folder = "://" not in uri or uri.startswith("file:")
    if is_folder and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        folder = uri.removeprefix("file://")
        return (f"MLFLOW_TRACKING_URI={uri} is a folder store, which MLflow 3 no longer writes: use a database "
                f"store (export MLFLOW_TRACKING_URI=sqlite:///{folder.rstrip('/')}.db), or unset it for the default "
                "runs/mlflow.db; `mlflow migrate-filestore` converts an existing folder store")
    return None


def client():
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    if not uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=uri)
    path = Path(uri[len("sqlite:///"):])
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # a damaged file fails here, in one line, rather than deep inside the first write
        with _creation_lock(path):
            if not path.exists():
                _copy_empty_store(path, mlflow.__version__)
            mlflow_client = MlflowClient(tracking_uri=uri)
            mlflow_client.search_experiments(max_results=1)
    except Exception as exc:
        cause = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise TrackingError(f"the MLflow store {path} cannot be read ({cause}): move it aside "
                            f"(mv {path} {path}.broken) to start a new one, or set MLFLOW_TRACKING_URI to "
                            "another store") from None
    return mlflow_client


def _copy_empty_store(path: Path, mlflow_version: str) -> None:
    """A new store starts as a copy of an empty one that this MLflow version created and migrated (seconds of
    schema migrations each time otherwise), kept in the user's cache; where the cache cannot be written, MLflow
    creates the store itself."""
    import shutil
    import tempfile

    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replaybench"
        template = cache / f"empty-mlflow-{mlflow_version}.db"
        if not template.is_file():
            from mlflow.tracking import MlflowClient

            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as tmp:
                fresh = Path(tmp) / "store.db"
                MlflowClient(tracking_uri=f"sqlite:///{fresh}").search_experiments(max_results=1)
                os.replace(fresh, template)  # whole or not at all, for processes that make it at once
        shutil.copyfile(template, path)
    except (OSError, RuntimeError):  # RuntimeError: no home folder to find a cache in
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _creation_lock(store: Path):
    """Held while a process opens the SQLite store: MLflow creates and migrates a fresh store when a process
    first opens it, and two processes doing that at once collide (sqlite3.OperationalError: table
    _alembic_tmp_... already exists). A file of its own: closing any descriptor of the database file would drop
    the locks SQLite holds on it."""
    import fcntl

    with open(store.with_name(store.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


EXPERIMENT_KIND = "custom_model_development"


def experiment_id(mlflow_client, workload_name: str, experiment: str | None = None) -> str:
    """The id of the experiment `replaybench/<workload_name>` (or `experiment`, e.g. eval/math500), created if new."""
    name = experiment or experiment_name(workload_name)
    exp = mlflow_client.get_experiment_by_name(name)
    if exp is not None:
        if "mlflow.experimentKind" not in exp.tags:  # a store from before the kind was set
            mlflow_client.set_experiment_tag(exp.experiment_id, "mlflow.experimentKind", EXPERIMENT_KIND)
        return exp.experiment_id
    location = None
    if tracking_uri().startswith("sqlite:"):  # keep artifacts under runs/, not ./mlruns of the cwd
        location = (RUNS_DIR / "artifacts" / (experiment or workload_name)).as_uri()
    from mlflow.exceptions import MlflowException

    try:
        # the kind makes `mlflow ui` open on the runs (training), not on its GenAI traces view
        return mlflow_client.create_experiment(name, artifact_location=location,
                                               tags={"mlflow.experimentKind": EXPERIMENT_KIND})
    except MlflowException as exc:  # another process created it since the lookup
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return mlflow_client.get_experiment_by_name(name).experiment_id


def prepare_store(workload_name: str, experiment: str | None = None) -> None:
    """Open the store (created and migrated if new) and create the runs' experiment, once, before runs start in
    parallel: they then neither wait for one another's migration nor race to create the experiment."""
    experiment_id(client(), workload_name, experiment)


def code_version() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "benchmark", "tasks", "workloads"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=5).stdout.strip()
        return (sha or "unknown") + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def digest(obj) -> str:
    """SHA-256 of obj's canonical JSON: the same settings give the same digest."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


RUN_IDENTITY_VERSION = 2  # 2: the whole config; 1 left out settings at their defaults that runs before them lacked


def run_identity(config: dict) -> str:
    """The key every seed of one configuration shares (the replaybench.group tag): a digest of its resolved config
    but the seed. A run keeps the key it was recorded with; a change of what goes in bumps the version."""
    return digest({"identity_version": RUN_IDENTITY_VERSION, **{k: v for k, v in config.items() if k != "seed"}})[:16]


def summary_digest(summary: dict) -> str:
    """The digest of a run's summary as summary.json holds it (tuples as lists): the tag the run ends with,
    which the scorer checks the artifact against."""
    return digest(json.loads(json.dumps(summary, default=str)))


def json_artifact(obj) -> str:
    """The text of a JSON artifact as a run logs it (summary.json, config.json): `import-runs` recreates a
    run's config.json with it from its summary.json, so the shipped runs need not hold both."""
    return json.dumps(obj, indent=2, default=str) + "\n"


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


class RunRecorder:
    """Writes one run; `run_id` reopens an existing run (resume)."""

    def __init__(self, workload_name: str, run_name: str = "", tags: dict | None = None,
                 params: dict | None = None, run_id: str | None = None, experiment: str | None = None):
        from mlflow.entities import Param, RunTag

        self.client = client()
        if run_id is None:
            run = self.client.create_run(experiment_id(self.client, workload_name, experiment), run_name=run_name,
                                         tags={k: str(v) for k, v in (tags or {}).items()})
            self.run_id = run.info.run_id
            items = [Param(k, str(v)[:6000]) for k, v in flatten(params or {}).items()]
            for i in range(0, len(items), 100):  # MLflow takes at most 100 params per batch
                self.client.log_batch(self.run_id, params=items[i:i + 100])
        else:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
            self.client.log_batch(run_id, tags=[RunTag(f"{TAG}resumed", "true"), RunTag(f"{TAG}status", "running")])

    def flushed(self) -> int:
        history = self.client.get_metric_history(self.run_id, FLUSH_KEY)
        return int(max((m.value for m in history), default=0))

    def flush(self, index: int, metrics: list[tuple[str, float, int]]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, v, now, step) for k, v, step in metrics]
        items.append(Metric(FLUSH_KEY, float(index), now, index))
        # one call per flush when it fits, so the marker lands together with the values
        for i in range(0, len(items), 1000):
            self.client.log_batch(self.run_id, metrics=items[i:i + 1000])

    def set_tags(self, tags: dict) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_text(self, text: str, name: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text)
            self.client.log_artifact(self.run_id, str(path))

    def log_json(self, obj, name: str) -> None:
        self.log_text(json_artifact(obj), name)

    def log_curve_plot(self, curve: list[dict], title: str, name: str = "accuracy_vs_compute.svg") -> None:
        """The run's accuracy-vs-compute curve as an SVG artifact, so `mlflow ui` shows it."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([p["compute"] for p in curve], [p["accuracy"] for p in curve], marker="o", markersize=3)
        ax.set(xlabel="compute (normalised units)", ylabel="eval accuracy", title=title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            fig.savefig(path, format="svg", metadata={"Date": None})  # no timestamp: same run, same bytes
            self.client.log_artifact(self.run_id, str(path))
        plt.close(fig)

    def log_distributions_plot(self, summary: dict, name: str = "distributions.svg") -> None:
        """The paper's figure 2 for this run: trained samples by off-policiness and by steps since last use."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(8, 3))
        for ax, key, xlabel in ((axes[0], "offpolicy_distribution", "off-policiness (trainer steps behind)"),
                                (axes[1], "since_last_use_distribution", "steps since last use")):
            counts = summary.get(key) or {}
            total = max(sum(counts.values()), 1)
            ax.bar(range(len(counts)), [v / total for v in counts.values()])
            ticks = list(range(0, len(counts), max(1, len(counts) // 10)))
            ax.set_xticks(ticks, [list(counts)[i] for i in ticks])
            ax.set(xlabel=xlabel, ylabel="fraction of trained samples")
            ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            fig.savefig(path, format="svg", metadata={"Date": None})
            self.client.log_artifact(self.run_id, str(path))
        plt.close(fig)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)


def find_runs(workload_name: str, filter_string: str = "") -> list:
    """All MLflow runs of a workload, e.g. filter_string=\"tags.`replaybench.strategy` = 'fifo_uniform'\"."""
    c = client()
    exp = c.get_experiment_by_name(experiment_name(workload_name))
    if exp is None:
        return []
    return c.search_runs([exp.experiment_id], filter_string=filter_string, max_results=10_000)

"""One training run: workload + strategy + seed -> pipeline, checkpoints and an MLflow record.

A run checkpoints its whole state at every evaluation under runs/checkpoints/<run key>/;
`resume=True` continues from there and reopens the same MLflow run.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from benchmark import kernels
from benchmark.engine.boundary import sandbox_mode
from benchmark.engine.executor import RunError, executor_class
from benchmark.engine.ledger import StrategySpec
from benchmark.grading.tasks import load_task
from benchmark.rl.policy import set_threads
from benchmark.strategy import (
    StrategyError,
    StrategyFailure,
    check_params,
    declared_params,
    load_strategy_class,
    strategy_params,
)
from benchmark.submission import DEFAULT_TRACK
from benchmark.tracking import REPO_ROOT, RUNS_DIR, TAG, RunRecorder, code_version, run_identity, summary_digest
from benchmark.workload import Workload

__all__ = ["RunError", "RunSpec", "run"]


@dataclass
class RunSpec:
    workload: Workload
    strategy_path: Path
    strategy_params: dict
    seed: int
    isolated: bool = False  # run the strategy in its own process, under limits (official runs)
    tags: dict = field(default_factory=dict)  # extra replaybench.* tags, e.g. submission and track
    executor: str = "sim"  # "sim": the virtual-time pipeline (the reference); "ray": real Ray actors
    # None of these enters the config or the group key: how the run is shown, not what it is.
    name: str | None = None  # the entry's name (a submission's, a baseline's): MLflow run names and the board
    user_tags: dict = field(default_factory=dict)  # the user's own MLflow tags (`run --tag KEY=VALUE`), verbatim
    attachments: dict = field(default_factory=dict)  # artifact file name -> text, logged when the run starts
    # keys the strategy's RNG seed so that a box cannot invert it (ledger.strategy_seed); tagged in MLflow
    seed_secret: str | None = None
    # the regime diagnostic's measurements (engine/probe.py): they change nothing in the run; tagged
    probe: bool = False

    def __post_init__(self):
        self.strategy_path = Path(self.strategy_path)
        # A config error is the user's, found before any run is recorded; untrusted code runs only in its box.
        if self.isolated:
            if not self.strategy_path.is_file() or self.strategy_path.suffix != ".py":
                raise StrategyError(f"strategy file not found: {self.strategy_path} (pass the path of a .py file)")
            try:
                sandbox_mode()  # no operating-system boundary here: say how to get one, before anything runs
            except RuntimeError as exc:
                raise RunError(str(exc)) from None
            accepted = declared_params(self.strategy_path)
        else:
            accepted = list(strategy_params(load_strategy_class(self.strategy_path)))
        check_params(self.strategy_path, self.strategy_params, accepted)
        executor_class(self.executor)  # unknown, or not installed: one clear message before anything loads
        if self.probe and self.executor != "sim":
            raise RunError("the regime diagnostic's probe runs on the virtual-time executor: use --executor sim")

    @functools.cached_property
    def strategy_source(self) -> bytes:
        """The strategy file as read once: what the run hashes, logs and (isolated) hands to the box."""
        return self.strategy_path.read_bytes()

    @property
    def track(self) -> str:
        return self.tags.get("track", DEFAULT_TRACK)

    @property
    def strategy_name(self) -> str:
        return self.strategy_path.stem

    @property
    def display_name(self) -> str:
        return self.name or self.strategy_name

    @property
    def run_name(self) -> str:
        """The MLflow run's name: <name>-seed<k>, a preview's <name>-preview-seed<k> (never the scored run's)."""
        preview = "-preview" if self.tags.get("preview") == "true" else ""
        return f"{self.display_name}{preview}-seed{self.seed}"

    def resolved_config(self) -> dict:
        path = self.strategy_path.resolve()
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        config = {"workload": self.workload.to_dict(),
                  # workload.strategy_defaults fill in the hyperparameters the strategy takes and params omit
                  "strategy": {"name": self.strategy_name, "path": str(shown),
                               "sha256": hashlib.sha256(self.strategy_source).hexdigest(),
                               "params": dict(self.strategy_params)},
                  "seed": self.seed}
        if self.executor != "sim":  # only then: the reference runs' group keys stay as they were
            config["executor"] = self.executor
        return config

    def group_key(self) -> str:
        """Same for every seed of one configuration: how the scorer groups seeds (tracking.run_identity)."""
        return run_identity(self.resolved_config())

    def strategy_spec(self) -> StrategySpec:
        return StrategySpec(self.strategy_path, dict(self.strategy_params), self.workload.strategy_defaults,
                            self.isolated, self.track, self.strategy_source, self.seed_secret)

    def run_key(self) -> str:
        return f"{self.workload.name}-{self.strategy_name}-{self.group_key()}-seed{self.seed}"


def checkpoint_path(spec: RunSpec) -> Path:
    """Where a resumable run keeps its state between evaluations (removed when it finishes)."""
    return RUNS_DIR / "checkpoints" / spec.run_key() / "state.pt"


def _interrupted(recorder: RunRecorder) -> None:
    """An interrupted run is KILLED in MLflow (not left RUNNING); `--resume` reopens it."""
    recorder.set_tags({f"{TAG}status": "interrupted"})
    recorder.finish("KILLED")


def run(spec: RunSpec, resume: bool = False, summary_json: Path | None = None, progress=None,
        stop_after_evals: int | None = None, executor_options=None) -> dict:
    """Execute (or continue) a run and return its summary. progress(executor) is called as it goes.

    stop_after_evals: stop (without finishing the MLflow run) after that many evaluations, as a kill
    would. executor_options: e.g. a benchmark.engine.ray.options.RayOptions for executor "ray".
    """
    set_threads()
    w = spec.workload
    executor_cls = executor_class(spec.executor)
    if resume and not executor_cls.resumable:
        raise RunError(f"--resume works with resumable executors only: the {spec.executor} executor keeps no "
                       "checkpoints")
    if summary_json and not Path(summary_json).parent.is_dir():
        raise RunError(f"--summary-json: no folder {Path(summary_json).parent}; create it or write elsewhere")
    config = spec.resolved_config()
    task = w.load_task()
    # every task the run reads, with its version: the training task and the evaluated ones
    task_versions = {name: task.version if name == task.name else load_task(name).version
                     for name in dict.fromkeys([w.task] + [name for name, _ in w.eval_targets()])}
    task.require_verifier()  # e.g. no Lean for miniF2F: one clear error before anything starts
    ckpt = checkpoint_path(spec)
    if resume and not ckpt.is_file():
        raise RunError(f"nothing to resume for this configuration and seed (no {ckpt}); run without --resume")
    executor = executor_cls(w, task, spec.seed, executor_options)
    if spec.probe:
        executor.enable_probe()
    try:
        return _drive(spec, executor, config, task, task_versions, ckpt, resume, summary_json, progress,
                      stop_after_evals)
    finally:
        executor.close()


def _tags(spec: RunSpec, task) -> dict:
    w = spec.workload
    return {f"{TAG}workload": w.name, f"{TAG}workload_version": w.version, f"{TAG}strategy": spec.strategy_name,
            f"{TAG}group": spec.group_key(), f"{TAG}seed": spec.seed, f"{TAG}status": "running",
            f"{TAG}task_version": task.version, f"{TAG}isolated": spec.isolated, f"{TAG}executor": spec.executor,
            **({f"{TAG}sandbox": sandbox_mode()} if spec.isolated else {}),
            **({f"{TAG}name": spec.name} if spec.name else {}),
            **({f"{TAG}seed_secret": spec.seed_secret} if spec.seed_secret else {}),
            **({f"{TAG}probe": "true"} if spec.probe else {}),
            **{f"{TAG}{k}": v for k, v in spec.tags.items()}, **spec.user_tags}


def _recorder(spec: RunSpec, executor, tags: dict, params: dict, ckpt: Path, resume: bool) -> RunRecorder:
    """The run's MLflow record: reopened when resuming, else created with the strategy's bytes logged first."""
    w = spec.workload
    meta_path = ckpt.parent / "run.json"
    if resume:
        executor.load(ckpt)
        recorder = RunRecorder(w.name, run_id=json.loads(meta_path.read_text())["mlflow_run_id"])
        # The checkpoint holds the metrics of its evaluation; log them unless they landed before the kill.
        last = executor.last_checkpoint
        if recorder.flushed() < last.index:
            recorder.flush(last.index, last.metrics)
        return recorder
    recorder = RunRecorder(w.name, run_name=spec.run_name, tags=tags, params=params,
                           experiment=executor.experiment(w.name))
    # the strategy as it runs, logged before it starts: the very bytes behind strategy.sha256
    recorder.log_text(spec.strategy_source.decode(errors="replace"), spec.strategy_path.name)
    for file_name, text in spec.attachments.items():
        recorder.log_text(text, file_name)
    if executor.resumable:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps({"mlflow_run_id": recorder.run_id}) + "\n")
    return recorder


def _drive(spec: RunSpec, executor, config: dict, task, task_versions: dict, ckpt: Path, resume: bool,
           summary_json, progress, stop_after_evals) -> dict:
    w = spec.workload
    tags = _tags(spec, task)
    machine = kernels.in_force()
    tags.update({f"{TAG}cpu": machine["cpu"], f"{TAG}cpu_id": machine["cpu_id"],
                 f"{TAG}aten_capability": machine["aten_capability"],
                 f"{TAG}mkl_cbwr": machine["mkl_cbwr"]})
    params = {**config, "code_version": code_version(), "kernels": machine["kernels"],
              "start_checkpoint_sha256": executor.start_info["weights_sha256"],
              "task_version": task.version, "task_versions": task_versions}
    try:
        executor.open_strategy(spec.strategy_spec())
    except StrategyError as exc:  # a strategy that cannot even start is a failed run, on record
        failed = RunRecorder(w.name, run_name=spec.run_name,
                             tags={**tags, f"{TAG}status": f"failed: {exc}"[:5000]}, params=params,
                             experiment=executor.experiment(w.name))
        failed.finish("FAILED")
        raise
    recorder = _recorder(spec, executor, tags, params, ckpt, resume)
    try:
        if not resume:
            executor.start()  # inside: a strategy's pool request can fail it, and the run must end FAILED
        for checkpoint in executor.checkpoints(progress):
            if executor.resumable:
                executor.save(ckpt)  # first the state (with the checkpoint's metrics), then MLflow
            recorder.flush(checkpoint.index, checkpoint.metrics)
            if stop_after_evals is not None and checkpoint.index >= stop_after_evals:
                _interrupted(recorder)
                return {}
    except KeyboardInterrupt:
        _interrupted(recorder)
        raise
    except Exception as exc:
        verdict = str(exc) if isinstance(exc, StrategyFailure) else f"{type(exc).__name__}: {exc}"
        recorder.set_tags({f"{TAG}status": f"failed: {verdict}"[:5000]})
        recorder.finish("FAILED")
        raise
    return _finish(spec, executor, recorder, config, summary_json, ckpt)


def _finish(spec: RunSpec, executor, recorder: RunRecorder, config: dict, summary_json, ckpt: Path) -> dict:
    """The run's end on record: its summary and artifacts, or a failure when it never trained."""
    w = spec.workload
    if executor.trainer_step == 0:
        reason = (f"the budget ({w.budget:,.0f} units) ended before the first trainer step "
                  f"(compute used when it ended: {executor.compute_used:,.0f}): either the strategy never handed "
                  f"over a batch (a buffer smaller than one batch of {w.grpo.batch_size} rollouts never holds one: "
                  "raise buffer_size) or the budget is too small for one step (raise --budget)")
        recorder.set_tags({f"{TAG}status": f"failed: {reason}"})
        recorder.finish("FAILED")
        raise RunError(reason)
    summary = executor.summary()
    summary.update(config=config, start_checkpoint=executor.start_info, mlflow_run_id=recorder.run_id,
                   group=spec.group_key(), strategy=spec.strategy_name, workload=w.name, seed=spec.seed)
    recorder.log_json(summary, "summary.json")
    recorder.log_json(config, "config.json")
    recorder.log_json(executor.eval_samples, "eval_samples.json")
    recorder.log_curve_plot(summary["eval_curve"], f"{w.name}: {spec.strategy_name}, seed {spec.seed}")
    recorder.log_distributions_plot(summary)
    # the scorer checks summary.json against this digest: an artifact changed after the run is refused
    recorder.set_tags({f"{TAG}status": "finished", f"{TAG}best_accuracy": summary["best"]["accuracy"],
                       f"{TAG}summary_sha256": summary_digest(summary)})
    recorder.finish()
    if summary_json:
        Path(summary_json).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    ckpt.unlink(missing_ok=True)
    return summary

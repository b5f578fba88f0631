"""One training run: workload + strategy + seed -> pipeline, checkpoints and an MLflow record.

A run checkpoints its whole state at every evaluation under runs/checkpoints/<run key>/;
`resume=True` continues from there and reopens the same MLflow run.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmark.pipeline import Pipeline, derive_seed
from benchmark.policy import load_start_policy
from benchmark.sandbox import IsolatedStrategy
from benchmark.strategy import StrategyError, StrategyFailure, build_strategy, file_sha256, load_strategy_class
from benchmark.tasks import load_task
from benchmark.tracking import REPO_ROOT, RUNS_DIR, TAG, RunRecorder, code_version
from benchmark.workload import Workload


class RunError(Exception):
    """A run that cannot start or continue; the message names the fix."""


@dataclass
class RunSpec:
    workload: Workload
    strategy_path: Path
    strategy_params: dict
    seed: int
    isolated: bool = False  # run the strategy in its own process, under limits (official runs)
    tags: dict = field(default_factory=dict)  # extra replaybench.* tags, e.g. submission and track

    def __post_init__(self):
        self.strategy_path = Path(self.strategy_path)
        if self.isolated:  # untrusted code runs only inside its box, never in this process
            if not self.strategy_path.is_file():
                raise StrategyError(f"strategy file not found: {self.strategy_path}")
        else:
            load_strategy_class(self.strategy_path)  # fail before any model is loaded, with a clear message

    @property
    def strategy_name(self) -> str:
        return self.strategy_path.stem

    def resolved_config(self) -> dict:
        path = self.strategy_path.resolve()
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        return {"workload": self.workload.to_dict(),
                # workload.strategy_defaults fill in the hyperparameters the strategy takes and params omit
                "strategy": {"name": self.strategy_name, "path": str(shown),
                             "sha256": file_sha256(self.strategy_path), "params": dict(self.strategy_params)},
                "seed": self.seed}

    def group_key(self) -> str:
        """Same for every seed of one configuration: how the scorer groups seeds."""
        config = self.resolved_config()
        config.pop("seed")
        return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def run_key(self) -> str:
        return f"{self.workload.name}-{self.strategy_name}-{self.group_key()}-seed{self.seed}"


def set_threads() -> None:
    # A fixed thread count keeps CPU kernels' reduction order, hence the metrics, reproducible
    # on one machine. Tiny models gain little from more threads, and oversubscribed cores lose a lot.
    torch.set_num_threads(int(os.environ.get("REPLAYBENCH_THREADS", "1")))


def run(spec: RunSpec, resume: bool = False, summary_json: Path | None = None, progress=None,
        stop_after_evals: int | None = None) -> dict:
    """Execute (or continue) a run and return its summary. progress(pipeline) is called as it goes.

    stop_after_evals: stop (without finishing the MLflow run) after that many evaluations; for tests
    of interruption and resume.
    """
    set_threads()
    w = spec.workload
    config = spec.resolved_config()
    task = load_task(w.task)
    model, tokenizer, start_info = load_start_policy(w)
    tags = {f"{TAG}workload": w.name, f"{TAG}workload_version": w.version, f"{TAG}strategy": spec.strategy_name,
            f"{TAG}group": spec.group_key(), f"{TAG}seed": spec.seed, f"{TAG}status": "running",
            f"{TAG}task_version": task.version, f"{TAG}isolated": spec.isolated,
            **{f"{TAG}{k}": v for k, v in spec.tags.items()}}
    params = {**config, "code_version": code_version(), "start_checkpoint_sha256": start_info["weights_sha256"],
              "task_version": task.version}
    try:
        params, defaults = spec.strategy_params, w.strategy_defaults
        if spec.isolated:
            strategy = IsolatedStrategy(spec.strategy_path, params, rng_seed=derive_seed(spec.seed, "strategy"),
                                        defaults=defaults)
        else:
            strategy = build_strategy(spec.strategy_path, params, defaults)
    except StrategyError as exc:  # a strategy that cannot even start is a failed run, on record
        failed = RunRecorder(w.name, run_name=f"{spec.strategy_name}-seed{spec.seed}",
                             tags={**tags, f"{TAG}status": f"failed: {exc}"[:5000]}, params=params)
        failed.finish("FAILED")
        raise
    pipeline = Pipeline(w, task, model, tokenizer, strategy, spec.seed)

    ckpt_dir = RUNS_DIR / "checkpoints" / spec.run_key()
    ckpt = ckpt_dir / "state.pt"
    meta_path = ckpt_dir / "run.json"
    if resume:
        if not ckpt.is_file():
            raise RunError(f"nothing to resume for this configuration and seed (no {ckpt}); run without --resume")
        pipeline.load(ckpt)
        recorder = RunRecorder(w.name, run_id=json.loads(meta_path.read_text())["mlflow_run_id"])
        # The checkpoint holds the metrics of its evaluation; log them unless they landed before the kill.
        if recorder.flushed() <= pipeline.flushes:
            recorder.flush(pipeline.flushes + 1, pipeline.pending_metrics)
        pipeline.pending_metrics, pipeline.flushes = [], pipeline.flushes + 1
    else:
        recorder = RunRecorder(w.name, run_name=f"{spec.strategy_name}-seed{spec.seed}", tags=tags, params=params)
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps({"mlflow_run_id": recorder.run_id}) + "\n")
        pipeline.start()

    class Stop(Exception):
        pass

    def on_checkpoint(p: Pipeline) -> None:
        index = p.flushes + 1
        p.pending_metrics.extend((f"wall/{k}_seconds", v, p.trainer_step) for k, v in p.wall.items())
        p.save(ckpt)  # first the state (with the pending metrics), then MLflow
        recorder.flush(index, p.pending_metrics)
        p.pending_metrics, p.flushes = [], index
        if stop_after_evals is not None and p.evals_done >= stop_after_evals:
            raise Stop

    try:
        pipeline.run(on_checkpoint=on_checkpoint, on_progress=progress)
    except Stop:
        return {}
    except Exception as exc:
        verdict = str(exc) if isinstance(exc, StrategyFailure) else f"{type(exc).__name__}: {exc}"
        recorder.set_tags({f"{TAG}status": f"failed: {verdict}"[:5000]})
        recorder.finish("FAILED")
        raise
    finally:
        if isinstance(strategy, IsolatedStrategy):
            strategy.close()

    if pipeline.trainer_step == 0:
        reason = (f"the budget ({w.budget:,.0f} units) ended before the first trainer step "
                  f"(compute used when it ended: {pipeline.compute_used:,.0f}): raise --budget")
        recorder.set_tags({f"{TAG}status": f"failed: {reason}"})
        recorder.finish("FAILED")
        raise RunError(reason)
    summary = pipeline.summary()
    summary.update(config=config, start_checkpoint=start_info, mlflow_run_id=recorder.run_id,
                   group=spec.group_key(), strategy=spec.strategy_name, workload=w.name, seed=spec.seed)
    recorder.log_json(summary, "summary.json")
    recorder.log_json(config, "config.json")
    recorder.log_text(spec.strategy_path.read_text(), spec.strategy_path.name)
    recorder.log_json(pipeline.last_samples, "eval_samples.json")
    recorder.log_curve_plot(summary["eval_curve"], f"{w.name}: {spec.strategy_name}, seed {spec.seed}")
    recorder.set_tags({f"{TAG}status": "finished", f"{TAG}best_accuracy": summary["best"]["accuracy"]})
    recorder.finish()
    if summary_json:
        Path(summary_json).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    ckpt.unlink(missing_ok=True)
    return summary

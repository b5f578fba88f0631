"""The executor interface: what the runner drives, whichever executor runs the pipeline.

An executor is built for a workload, task and seed (it loads the start policy: `start_info`), is
given its strategy (`open_strategy`), then `start()`s and yields a `Checkpoint` after each
evaluation from `checkpoints()`, with every metric logged since the previous one. `summary()`
describes the finished run. A `resumable` executor also saves and loads its whole state, the last
checkpoint's metrics included, so that a resumed run logs what a kill may have lost.

Two executors implement it: `sim`, the virtual-time pipeline (`benchmark/engine/pipeline.py`, the
scoring reference), and `ray`, real Ray actors (`benchmark/engine/ray/driver.py`).
"""

from __future__ import annotations

import importlib
import os
import pickle
import statistics
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmark.engine.costs import CostModel, eval_points
from benchmark.engine.ledger import StrategySpec
from benchmark.errors import UserError

Metric = tuple[str, float, int]  # (name, value, trainer step)
WEIGHT_KEYS = ("model", "optimizer", "engine")  # the parts of an executor's state that hold tensors
EXECUTORS = {"sim": "benchmark.engine.pipeline:Pipeline", "ray": "benchmark.engine.ray.driver:RayPipeline"}


class RunError(UserError):
    """A run that cannot start or continue; the message names the fix."""


@dataclass
class Checkpoint:
    index: int  # 1 for the evaluation at compute 0, then 2, 3, ...
    metrics: list[Metric] = field(default_factory=list)  # everything logged since the previous checkpoint


def executor_class(name: str) -> type[Executor]:
    if name not in EXECUTORS:
        raise RunError(f"unknown executor {name!r}: use {' or '.join(EXECUTORS)}")
    module, _, cls = EXECUTORS[name].partition(":")
    executor = getattr(importlib.import_module(module), cls)
    executor.check_installed()
    return executor


def since_last_use_distribution(counts: dict[str, int]) -> dict[str, int]:
    """"new" first, then the steps in increasing order."""
    return {k: counts[k] for k in sorted(counts, key=lambda k: -1 if k == "new" else int(k))}


def effective_sample_fraction(ratio_mean: float, ratio_sq_mean: float) -> float:
    """Kish's effective sample size of the importance ratios as a fraction of the tokens: 1 when every ratio is
    the same (on-policy data), towards 0 when a few tokens carry the weight."""
    return ratio_mean ** 2 / ratio_sq_mean if ratio_sq_mean > 0 else 1.0


@dataclass
class RatioTotals:
    """The run's importance-ratio statistics over its trainer steps: sums of the clip fraction, the mean ratio and
    the effective sample size, and the largest ratio."""

    steps: int = 0
    clip_fraction: float = 0.0
    ratio_mean: float = 0.0
    ess_fraction: float = 0.0
    ratio_max: float = 0.0

    def add(self, stats: dict) -> None:
        if "ratio_mean" not in stats:
            return
        self.steps += 1
        self.clip_fraction += stats.get("clip_fraction", 0.0)
        self.ratio_mean += stats["ratio_mean"]
        self.ess_fraction += stats.get("ess_fraction", 1.0)
        self.ratio_max = max(self.ratio_max, stats.get("ratio_max", 0.0))

    def summary(self) -> dict:
        steps = max(self.steps, 1)
        return {"clip_fraction_mean": self.clip_fraction / steps, "ratio_mean": self.ratio_mean / steps,
                "ratio_max": self.ratio_max, "ess_fraction_mean": self.ess_fraction / steps, "steps": self.steps}


class Executor(ABC):
    """The run's clock, counters and evaluations; what each executor adds is its own."""

    name: str
    resumable = False

    def __init__(self, workload, seed: int):
        self.w, self.seed = workload, seed
        self.costs = CostModel.of(workload)
        self.trainer_step = self.rollouts_generated = self.samples_trained = 0
        self.ratio_totals = RatioTotals()
        self.eval_history: list[dict] = []
        self.eval_samples: list[dict] = []  # the last evaluation's logged samples
        self.start_info: dict = {}  # the start checkpoint: weights hash, source, how it was made
        self.last_checkpoint = Checkpoint(0)  # the last one yielded; a resumable executor keeps it in its state

    # ---- what each executor implements ----------------------------------------------------
    @classmethod
    def check_installed(cls) -> None:
        """Raise RunError naming what to install when the executor cannot run here."""
        return None

    @classmethod
    def experiment(cls, workload_name: str) -> str | None:
        """The MLflow experiment of its runs (None: the workload's own, which the leaderboard scores)."""
        return None

    @abstractmethod
    def open_strategy(self, spec: StrategySpec) -> None:
        """Load the strategy (StrategyError when it cannot start)."""

    @abstractmethod
    def start(self) -> None:
        """Begin a fresh run (not after `load`)."""

    @abstractmethod
    def checkpoints(self, progress=None) -> Iterator[Checkpoint]:
        """Run until the budget is spent, yielding after each evaluation. progress(self) is called as it goes."""

    @property
    @abstractmethod
    def clock(self) -> float:
        """Elapsed time in the cost model's units."""

    @abstractmethod
    def trainer_idle_fraction(self) -> float: ...

    @abstractmethod
    def worker_idle_fraction(self) -> float: ...

    @abstractmethod
    def strategy_usage(self) -> dict:
        """use_count, staleness_total, strategy_calls, strategy_seconds (see StrategyLedger.usage)."""

    @property
    @abstractmethod
    def wall(self) -> dict:
        """Wall-clock seconds by activity: measured and logged, never used for a decision."""

    def close(self) -> None:
        """Release processes and actors."""
        return None

    def state_dict(self) -> dict:
        raise RunError(f"the {self.name} executor keeps no checkpoints: run without --resume")

    def load_state_dict(self, state: dict) -> None:
        raise RunError(f"the {self.name} executor keeps no checkpoints: run without --resume")

    def enable_probe(self) -> None:
        """Measure the regime diagnostic's step sizes and divergences as the run goes (engine/probe.py)."""
        raise RunError(f"the regime diagnostic's probe runs on the virtual-time executor: use --executor sim, not "
                       f"{self.name}")

    # ---- shared -------------------------------------------------------------------------------
    def run(self, progress=None) -> list[Checkpoint]:
        """Run to the end of the budget; every checkpoint, in order."""
        return list(self.checkpoints(progress))

    @property
    def compute_used(self) -> float:
        return self.costs.compute(self.clock)

    def eval_points(self) -> list[float]:
        return eval_points(self.w.eval.every, self.w.budget)

    def train_metrics(self, stats: dict, usage: dict) -> list[Metric]:
        """The train/ metrics of the step just counted: the trainer's statistics, the batch's usage
        (StrategyLedger.record_step) and the run's counters at this point."""
        if "ratio_sq_mean" in stats:
            stats = {**stats, "ess_fraction": effective_sample_fraction(stats["ratio_mean"], stats["ratio_sq_mean"])}
        self.ratio_totals.add(stats)
        metrics = {
            **stats, **usage,
            "compute": self.compute_used,
            "rollouts_generated": self.rollouts_generated, "samples_trained": self.samples_trained,
            "replay_ratio": self.samples_trained / max(self.rollouts_generated, 1),
            "trainer_idle_fraction": self.trainer_idle_fraction(),
            "worker_idle_fraction": self.worker_idle_fraction(),
        }
        return [(f"train/{k}", float(v), self.trainer_step) for k, v in metrics.items()]

    def summary(self) -> dict:
        """The finished run: its evaluations, how rollouts were used and its counters."""
        usage, history = self.strategy_usage(), self.eval_history
        best = max(history, key=lambda p: (p["accuracy"], -p["compute"]))
        used = list(usage["use_count"].values())
        return {
            "final": history[-1],
            "best": best,
            "start_accuracy": history[0]["accuracy"],
            "eval_curve": history,
            "replay_ratio": self.samples_trained / max(self.rollouts_generated, 1),
            "offpolicy_mean": usage["staleness_total"] / max(self.samples_trained, 1),
            # with the share of trained samples whose behaviour the trainer took from the current policy
            # (Batch.recompute_behaviour: clipping is off for them)
            "ratio_statistics": {**self.ratio_totals.summary(), "recomputed_behaviour_fraction":
                                 usage.get("recomputed_total", 0) / max(self.samples_trained, 1)},
            "rollouts_never_used_fraction": 1 - len(used) / max(self.rollouts_generated, 1),
            "max_uses_of_a_rollout": max(used, default=0),
            "median_uses_of_used_rollouts": statistics.median(used) if used else 0,
            "compute_used": self.compute_used,
            "budget": self.w.budget,
            "virtual_time": self.clock,
            "trainer_steps": self.trainer_step,
            "rollouts_generated": self.rollouts_generated,
            "samples_trained": self.samples_trained,
            "trainer_idle_fraction": self.trainer_idle_fraction(),
            "worker_idle_fraction": self.worker_idle_fraction(),
            "wall_seconds": dict(self.wall),
            "strategy_calls": usage["strategy_calls"],
            "strategy_ms_per_call": 1000 * usage["strategy_seconds"] / max(usage["strategy_calls"], 1),
            # trained samples by off-policiness (trainer steps behind) and by steps since last use ("new": first use)
            "offpolicy_distribution": {str(k): v for k, v in usage.get("offpolicy_counts", {}).items()},
            "since_last_use_distribution": since_last_use_distribution(usage.get("since_last_use_counts", {})),
        }

    def save(self, path: Path) -> None:
        """Atomic: a kill during the write leaves the previous checkpoint intact. The state's weights go to
        torch's format; its Python objects (events, rollouts) are pickled in one piece, which is many times
        faster than torch.save's hook on every object once a run holds tens of thousands of rollouts."""
        state = self.state_dict()
        weights = {k: state.pop(k) for k in WEIGHT_KEYS if k in state}
        tmp = path.with_suffix(".tmp")
        torch.save({"weights": weights, "objects": pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)}, tmp)
        os.replace(tmp, path)

    def load(self, path: Path) -> None:
        saved = torch.load(path, weights_only=False)  # the engine's own file, never an entry's
        self.load_state_dict({**pickle.loads(saved["objects"]), **saved["weights"]})

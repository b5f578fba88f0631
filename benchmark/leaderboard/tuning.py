"""The tuning rule (leaderboard/README.md, "Tuning"): which of an entry's trials it is scored at, from the trials'
runs on the workload's tuning seeds. Pure functions over run summaries, no MLflow.

The reference's trial is the one with the highest median final accuracy (the mean of the curve over the last
FINAL_WINDOW of the budget): its target is frozen after, from its held-out seeds at that trial. Every other entry's
is the one with the least median compute to that target (rules v3's estimator, infinite when a seed never reaches
it), ties broken by the higher median final accuracy, then by the trial's order."""

from __future__ import annotations

import math

from benchmark.leaderboard.scoring import median
from benchmark.leaderboard.scoring_v3 import FINAL_WINDOW, compute_to_target


def final_accuracy(curve: list[dict], budget: float) -> float:
    """The mean accuracy over the evaluations in the last FINAL_WINDOW of the budget."""
    late = [p["accuracy"] for p in curve if (1 - FINAL_WINDOW) * budget * (1 - 1e-9) <= p["compute"] <= budget]
    return sum(late) / len(late) if late else 0.0


def trial_statistics(runs: list[dict], budget: float, target: float | None) -> dict:
    """A trial's medians over its seeds' run summaries."""
    out = {"seeds": len(runs), "final_accuracy": median([final_accuracy(r["eval_curve"], budget) for r in runs])}
    if target is not None:
        out["compute_to_target"] = median([compute_to_target(r["eval_curve"], target, budget) for r in runs])
    return out


def pick(trials: list[dict], reference: bool) -> int:
    """The index of the picked trial among `trials` (each trial_statistics' output, in trial order)."""
    def key(i: int):
        t = trials[i]
        if reference:
            return (-t["final_accuracy"], i)
        ctt = t.get("compute_to_target", math.inf)
        return (ctt, -t["final_accuracy"], i)
    return min(range(len(trials)), key=key)

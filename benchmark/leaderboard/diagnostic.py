"""The regime diagnostic's verdict from its runs (docs/protocols/regime-diagnostic.md): is a workload limited by
updates, are its steps small enough for 5-9 steps of staleness to stay inside the clip range, and has the
on-policy reference room to learn? Pure functions over run summaries, no MLflow."""

from __future__ import annotations

import math

from benchmark.leaderboard import comparisons
from benchmark.leaderboard.scoring import median
from benchmark.leaderboard.scoring_v3 import compute_to_target

CALIBRATION_SEEDS = (100, 101, 102, 103)  # never scored, never a target's
ARMS = {"A": 1, "B": 2}  # arm -> trainer steps per fresh batch (baselines/on_policy.py, on_policy_repeat.py)
LEVEL_FRACTION = 0.75  # L = start + LEVEL_FRACTION x (best_A - start)
CEILING = 1.0  # arith: every problem has one exact answer
THRESHOLDS = {"gain": 1.25, "gain_lower": 1.0, "clip_s9": 0.05, "best": 0.95, "learned": 0.15}
REPORTED = ("relative_update", "kl_s1", "clip_s1", "kl_s5", "clip_s5", "kl_s9", "clip_s9")


def fresh_data_curve(curve: list[dict], steps_per_batch: int) -> list[dict]:
    """Accuracy against the fresh data trained on (rollouts trained on for the first time), in the shape
    compute_to_target reads."""
    return [{"compute": p["samples_trained"] / steps_per_batch, "accuracy": p["accuracy"]} for p in curve]


def median_curve(curves: list[list[dict]]) -> list[float]:
    """The median accuracy at each scheduled evaluation, over the runs that have it."""
    longest = max(len(c) for c in curves)
    return [median([c[i]["accuracy"] for c in curves if i < len(c)]) for i in range(longest)]


def diagnose(arm_a: list[dict], arm_b: list[dict]) -> dict:
    """The three statistics and whether each holds, from the two arms' run summaries (each with `probe`)."""
    curves_a = [s["eval_curve"] for s in arm_a]
    start = curves_a[0][0]["accuracy"]
    best = max(median_curve(curves_a))
    level = start + LEVEL_FRACTION * (best - start)
    data = {arm: [compute_to_target(fresh_data_curve(s["eval_curve"], ARMS[arm]), level, math.inf) for s in runs]
            for arm, runs in (("A", arm_a), ("B", arm_b))}
    gain = comparisons.compare(data["A"], data["B"])
    update = {"level": level, "fresh_data_to_level": data, "gain": gain["median"], "ci95": gain["ci95"],
              "p_value": gain["p_value"]}
    update["holds"] = bool(gain["median"] >= THRESHOLDS["gain"] and gain["ci95"][0] > THRESHOLDS["gain_lower"])
    probes = [s.get("probe") or {} for s in arm_a]
    reported = {k: _median_of([p.get(k) for p in probes]) for k in REPORTED}
    step = {**reported, "measurements": [p.get("measurements", 0) for p in probes]}
    step["holds"] = reported["clip_s9"] is not None and reported["clip_s9"] <= THRESHOLDS["clip_s9"]
    headroom = {"start": start, "best": best, "ceiling": CEILING, "learned": best - start}
    headroom["holds"] = bool(best <= THRESHOLDS["best"] * CEILING and best - start >= THRESHOLDS["learned"])
    return {"update_limited": update, "step_size": step, "headroom": headroom, "thresholds": dict(THRESHOLDS),
            "passes": update["holds"] and step["holds"] and headroom["holds"]}


def _median_of(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None

"""Leaderboard scoring, rules version 3 (leaderboard/README.md has the rules): what changes from version 2
(`scoring.py`, whose curve helpers this module shares). Pure functions over evaluation curves, no MLflow.

- Compute-to-target: the first crossing of the target by the curve smoothed with a running median of 3,
  interpolated linearly between the evaluations around it. One noisy evaluation cannot move it past its
  neighbours, and speedups no longer sit on the evaluation grid.
- An entry reaches the target when a strict majority of its scored seeds do (a missing seed fails).
- Its speedup compares two samples, the reference's scored runs and its own (`comparisons.py`), with an interval
  whose coverage is tested (tests/test_comparisons.py), at the target and at each level of `LEVELS`.
- Final accuracy: the mean of the median curve over the evaluations in the last `FINAL_WINDOW` of the budget,
  not the maximum of a still-rising curve.
- Bands: an entry's band is the first whose leader its rank interval reaches, so no entry of a lower band
  reaches the leader of one above.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from benchmark.leaderboard import comparisons
from benchmark.leaderboard.scoring import (
    INF,
    SeedResult,
    WorkloadScore,
    best_point,
    curve_band,
    curve_fields,
    median,
    normalised_auc,
    scored_curves,
    summarise,
    within_budget,
)

RULES_VERSION = 3
LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # level sensitivity: targets at these fractions of the reference's best
FINAL_WINDOW = 0.2  # final accuracy: the evaluations at compute >= (1 - FINAL_WINDOW) x budget
# The seed count, from the power analysis (leaderboard/README.md): the pooled sd of log compute-to-target across
# seeds, measured under these rules on the shipped v2 runs (11 entries with 3+ seeds reaching, 33 degrees of
# freedom), and the fewest seeds per arm that resolve SMALLEST_CLAIMED_EFFECT with power POWER (simulated).
MEASURED_SD_LOG_CTT = 0.091
SMALLEST_CLAIMED_EFFECT = 1.10
POWER = 0.8
SCORED_SEEDS = 17  # per entry, and as many for the reference
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20263


def smoothed(accuracies: list[float]) -> list[float]:
    """Running median of 3; the first and last evaluations kept as they are."""
    a = list(accuracies)
    return a[:1] + [sorted(a[i - 1:i + 2])[1] for i in range(1, len(a) - 1)] + (a[-1:] if len(a) > 1 else [])


def compute_to_target(curve: list[dict], target: float, budget: float) -> float:
    """Where the smoothed curve first reaches `target`, interpolated from the evaluation before; inf if it never
    does within the budget. A target met at compute 0 counts as met at the next evaluation (as in version 2)."""
    points = within_budget(curve, budget)
    xs = [float(p["compute"]) for p in points]
    ys = smoothed([float(p["accuracy"]) for p in points])
    for i, (x, y) in enumerate(zip(xs, ys)):
        if y >= target:
            if i == 0:
                return xs[1] if len(xs) > 1 else float(budget)
            x0, y0 = xs[i - 1], ys[i - 1]
            return x0 + (target - y0) / (y - y0) * (x - x0)
    return INF


def reaches(ctt: list[float]) -> bool:
    """The majority rule: more than half of the scored seeds reach the target."""
    return bool(np.isfinite(ctt).sum() * 2 > len(ctt))


def final_accuracy(curves: list[list[dict]], budget: float, draws: np.ndarray) -> tuple[dict, np.ndarray]:
    """Mean of the median curve over the final window, with a percentile bootstrap interval over seeds from
    `draws` (draws_for: the same runs always give the same interval); and the resampled means themselves."""
    xs, acc = final_window(curves, budget)
    boot = np.median(acc[draws], axis=1).mean(axis=1)
    lo, hi = np.quantile(boot, [(1 - comparisons.LEVEL) / 2, (1 + comparisons.LEVEL) / 2])
    return ({"mean": float(np.median(acc, axis=0).mean()), "ci95": [float(lo), float(hi)], "window": [xs[0], xs[-1]],
             "evaluations": len(xs)}, boot)


def final_window(curves: list[list[dict]], budget: float) -> tuple[list[float], np.ndarray]:
    """The scheduled evaluations of the final window, and each seed's accuracy there: (seeds, evaluations)."""
    xs = [x for x in curve_band(curves, budget)["compute"] if x >= (1 - FINAL_WINDOW) * budget * (1 - 1e-9)]
    return xs, np.array([[_at(c, x, budget) for x in xs] for c in curves])


def _at(curve: list[dict], x: float, budget: float) -> float:
    """Accuracy at scheduled compute x: the last evaluation at or before it (a failed seed's curve is 0)."""
    points = within_budget(curve, budget)
    before = [p for p in points if float(p["compute"]) <= x * (1 + 1e-9)] or points[:1]
    return float(before[-1]["accuracy"])


def level_sensitivity(reference: list[list[dict]], entry: list[list[dict]], best_accuracy: float,
                      budget: float, levels=LEVELS) -> list[dict]:
    """The speedup at targets of each level x the reference's best (the median curve's maximum that froze the
    target): whether the entry reaches each one by the majority rule, and the two-arm speedup and interval."""
    out = []
    for level in levels:
        target = level * best_accuracy
        ref = [compute_to_target(c, target, budget) for c in reference]
        ent = [compute_to_target(c, target, budget) for c in entry]
        compared = comparisons.compare(ref, ent)
        reached = reaches(ent)
        out.append({"level": level, "target": target, "reached": reached,
                    "speedup": compared["median"] if reached else 0.0, "ci95": compared["ci95"],
                    "p_value": compared["p_value"]})
    return out


def rank_bands(point_ranks, intervals: list[tuple[int, int]]) -> list[int]:
    """Band per entry. Leaders are taken in point-rank order: an entry leads a new band when its rank interval
    lies wholly below every earlier leader's. Every entry then joins the first band whose leader its interval
    reaches. So an entry of band b reaches no leader of a band above b (version 2 compared each entry with its
    own band's leader only, and lower bounds are not monotone in point rank)."""
    order = sorted(range(len(point_ranks)), key=lambda i: (point_ranks[i], intervals[i]))
    leaders_hi: list[int] = []
    for i in order:
        if not leaders_hi or intervals[i][0] > max(leaders_hi):
            leaders_hi.append(intervals[i][1])
    return [1 + sum(hi < intervals[i][0] for hi in leaders_hi) for i in range(len(point_ranks))]


# ---- one (entry, workload) ----------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceArm:
    """The reference's scored runs on a workload: their compute-to-target (inf: never reached, a missing seed
    too) and curves, and the bootstrap draws of them that every entry's resamples share."""

    ctt: np.ndarray
    curves: list
    draws: np.ndarray  # (resamples, seeds): positions drawn


def draws_for(key: str, seeds: int, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """Independent resamples of one arm's seeds (seed effects are nil, so the arms are not paired), seeded by
    the arm's key: the same runs always give the same intervals."""
    stream = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng([BOOTSTRAP_SEED, stream]).integers(seeds, size=(resamples, seeds))


def reference_arm(runs: list[SeedResult], scored_seeds: list[int], target: float, budget: float, workload: str,
                  resamples: int = BOOTSTRAP_RESAMPLES) -> ReferenceArm:
    curves, ctt = _arm(runs, scored_seeds, target, budget)
    return ReferenceArm(ctt, curves, draws_for(f"reference/{workload}", len(scored_seeds), resamples))


def compute_to_target_by_seed(runs: list[SeedResult], seeds: list[int], target: float, budget: float) -> np.ndarray:
    """Each seed's compute to the target (inf for a seed without a run, or one that never reaches it)."""
    return _arm(runs, seeds, target, budget)[1]


def _arm(runs: list[SeedResult], scored_seeds: list[int], target: float, budget: float):
    """Each scored seed's curve (a missing seed: accuracy 0 throughout) and compute-to-target (inf if missing)."""
    _, by_seed, _, curves = scored_curves(runs, scored_seeds, budget)
    return curves, np.array([compute_to_target(c, target, budget) if s in by_seed else INF
                             for s, c in zip(scored_seeds, curves)])


def score_workload(runs: list[SeedResult], scored_seeds: list[int], target: float, budget: float,
                   reference: ReferenceArm | None, best_accuracy: float, key: str,
                   resamples: int = BOOTSTRAP_RESAMPLES) -> WorkloadScore:
    """All per-(entry, workload) statistics under rules v3; the fields of version 2's WorkloadScore (the page
    and the table read them) with the v3 ones in `extra`. reference None: the store has no reference runs,
    nothing is compared."""
    runs = sorted(runs, key=lambda r: (r.seed, r.run_id))
    curves, ctt = _arm(runs, scored_seeds, target, budget)
    n = len(scored_seeds)
    own = draws_for(f"entry/{key}", n, resamples)
    final, boot_final = final_accuracy(curves, budget, own)
    boot_reached = (np.isfinite(ctt[own]).sum(axis=1) * 2 > n)
    reached = reaches(ctt)
    if reference is not None:  # the test and its correction come with the board's claims (build.py)
        comparison = comparisons.speedup_interval(reference.ctt, ctt)
        boot_speedup = np.where(boot_reached, comparisons.hodges_lehmann(reference.ctt[reference.draws], ctt[own]), 0.0)
        levels = level_sensitivity(reference.curves, curves, best_accuracy, budget)
    else:
        comparison, boot_speedup, levels = {"median": None, "ci95": [None, None]}, np.zeros(resamples), []
    if not reached and comparison["median"] is not None:
        comparison = {**comparison, "median": 0.0}  # the majority fails: no speedup, whatever the pairs say
    ctt_of = dict(zip(scored_seeds, ctt))
    # each seed against the reference's median, for the table's spread (the interval is the two-arm one)
    per_seed = [] if reference is None else [
        median(reference.ctt) / ctt_of[r.seed] if np.isfinite(ctt_of[r.seed]) else 0.0 for r in runs]
    per_run = {}
    for r in runs:
        best = best_point(r.curve, budget)
        per_run[r.run_id] = {
            "seed": r.seed, "compute_to_target": float(ctt_of[r.seed]),
            "final_accuracy": float(final_window([r.curve], budget)[1].mean()),
            "auc": normalised_auc(r.curve, budget), "final_entropy": r.entropy,
            "best_accuracy": best["accuracy"], "best_compute": float(best["compute"])}
    return WorkloadScore(
        **curve_fields(runs, curves, scored_seeds, budget), reached=reached, compute_to_target=summarise(ctt),
        speedup={**(summarise(per_seed) if per_seed else {}), "median": comparison["median"],
                 "ci95": comparison["ci95"]},
        relative_best=final["mean"] / target, per_run=per_run,
        boot_reached=boot_reached, boot_speedup=boot_speedup, boot_relative_best=boot_final / target,
        extra={"rules_version": RULES_VERSION, "seeds_scored": n,
               "majority": {"seeds_reaching": int(np.isfinite(ctt).sum()), "of": n, "reached": reached},
               "interval_method": "Hodges-Lehmann speedup, distribution-free (Moses) interval inverting the "
                                  "Mann-Whitney test, reference and entry both sampled",
               "final_accuracy": final, "level_sensitivity": levels},
    )


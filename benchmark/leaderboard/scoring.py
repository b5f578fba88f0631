"""Leaderboard scoring: pure functions over evaluation curves, no MLflow (leaderboard/README.md has the rules).

Compute-to-target values are floats; "never reached" is math.inf. The median of compute-to-target
over seeds is the *lower* median (for an even count, the smaller of the two middle values: the
compute by which half of the seeds have reached the target). It is finite whenever at least half
the seeds reach the target, and makes the speedup `reference median / entry median` equal to the
median of the per-seed speedups (the upper one of the two middle values), hence exactly 1.0 for
the reference by construction.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

TARGET_FRACTION = 0.98  # target accuracy = this x the reference's median best accuracy
MIN_SEEDS = 4  # fewer seeds than this: the entry is flagged
TAU_MAX = 4.0  # performance profiles are integrated over tau in [1, TAU_MAX] (AlgoPerf's r_max)
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260  # fixed: the same runs always give the same intervals
INTERVAL = 0.95
INF = math.inf
_EPS = 1e-9


# ---- one run ------------------------------------------------------------------------------
def within_budget(curve: list[dict], budget: float) -> list[dict]:
    """The scheduled evaluations at compute <= budget, in compute order."""
    points = sorted((p for p in curve if p["compute"] <= budget * (1 + _EPS)), key=lambda p: p["compute"])
    if not points:
        raise ValueError("the evaluation curve has no point within the budget")
    return points


def compute_to_target(curve: list[dict], target: float, budget: float) -> float:
    """Compute of the first scheduled evaluation whose accuracy >= target; inf if none within budget.

    A target met already at compute 0 counts as met at the next scheduled evaluation (the resolution
    of the measurement), so that every speedup stays finite.
    """
    points = within_budget(curve, budget)
    for i, p in enumerate(points):
        if p["accuracy"] >= target:
            if p["compute"] <= 0:
                return float(points[i + 1]["compute"]) if i + 1 < len(points) else float(budget)
            return float(p["compute"])
    return INF


def best_point(curve: list[dict], budget: float) -> dict:
    """The evaluation with the highest accuracy within budget (the earliest one on a tie)."""
    return max(within_budget(curve, budget), key=lambda p: (p["accuracy"], -p["compute"]))


def normalised_auc(curve: list[dict], budget: float) -> float:
    """Trapezoid area under accuracy vs compute over [0, budget], divided by budget (in [0, 1]).

    The curve is held flat before its first and after its last point within the budget.
    """
    pts = within_budget(curve, budget)
    xs = [0.0] + [float(p["compute"]) for p in pts] + [float(budget)]
    ys = [pts[0]["accuracy"]] + [float(p["accuracy"]) for p in pts] + [pts[-1]["accuracy"]]
    area = sum((xs[i + 1] - xs[i]) * (ys[i + 1] + ys[i]) / 2 for i in range(len(xs) - 1))
    return area / budget


def pass_at_k(point: dict) -> dict[str, float]:
    """{"pass_at_4": ...} etc. of one evaluation point."""
    return {k: float(v) for k, v in point.items() if k.startswith("pass_at_")}


# ---- statistics over seeds ----------------------------------------------------------------
def median(values) -> float:
    """Ordinary median (mean of the two middle values for an even count); inf-aware."""
    v = sorted(values)
    if not v:
        return math.nan
    n = len(v)
    if n % 2:
        return float(v[n // 2])
    a, b = v[n // 2 - 1], v[n // 2]
    return float(b) if a == b else float((a + b) / 2)


def median_low(values) -> float:
    """Lower median: the smaller middle value for an even count (the compute-to-target median)."""
    v = sorted(values)
    return float(v[(len(v) - 1) // 2]) if v else math.nan


def quantile(values, q: float) -> float:
    """Linear-interpolation quantile (numpy's default, statistics' "inclusive"); inf-aware."""
    v = sorted(values)
    if not v:
        return math.nan
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    a, b = v[lo], v[hi]
    if lo == hi or a == b:
        return float(a)
    if math.isinf(b):
        return INF
    return float(a + (b - a) * (pos - lo))


def summarise(values, center=median) -> dict:
    """median, quartiles and IQR (None where undefined, e.g. both quartiles inf)."""
    q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
    iqr = None if (math.isinf(q1) and math.isinf(q3)) else q3 - q1
    return {"median": center(values), "q1": q1, "q3": q3, "iqr": iqr}


def curve_band(curves: list[list[dict]], budget: float) -> dict:
    """Median and quartiles of accuracy over seeds at each scheduled evaluation within budget.

    Seeds of one workload share the evaluation schedule; a point some seed lacks is summarised over
    the seeds that have it (n says how many)."""
    at: dict[float, list[float]] = {}
    for curve in curves:
        for p in within_budget(curve, budget):
            at.setdefault(float(p["compute"]), []).append(float(p["accuracy"]))
    xs = sorted(at)
    return {"compute": xs, "median": [median(at[x]) for x in xs], "q1": [quantile(at[x], 0.25) for x in xs],
            "q3": [quantile(at[x], 0.75) for x in xs], "n": [len(at[x]) for x in xs]}


def speedup(reference_ctt: float, ctt: float) -> float:
    """reference compute-to-target / compute-to-target: 0 when never reached."""
    if math.isinf(ctt):
        return 0.0
    if math.isinf(reference_ctt):
        raise ValueError("the reference compute-to-target is inf")
    return reference_ctt / ctt


def capped(ctt: float, budget: float) -> float:
    """AlgoPerf's treatment of "never reached": compute budget + 1, which gives a finite speedup."""
    return min(ctt, budget + 1.0)


def geometric_mean(values) -> float:
    v = list(values)
    if not v:
        return math.nan
    if len(v) == 1:
        return float(v[0])
    if any(x <= 0 for x in v):
        return 0.0
    return float(math.exp(sum(math.log(x) for x in v) / len(v)))


def stable_seed(*parts: str) -> int:
    """A bootstrap stream per (entry, workload) that no other entry's presence can shift."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "little")


def bootstrap_lower_medians(ctts, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """Lower medians of `resamples` resamples (with replacement, same size) of the seeds' values."""
    v = np.asarray(ctts, dtype=float)
    n = len(v)
    rng = np.random.default_rng([BOOTSTRAP_SEED, seed])
    idx = rng.integers(n, size=(resamples, n))
    return np.sort(v[idx], axis=1)[:, (n - 1) // 2]


def interval(samples: np.ndarray, level: float = INTERVAL) -> tuple[float, float]:
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


# ---- one (entry, workload) ----------------------------------------------------------------
@dataclass
class SeedResult:
    """One finished, compliant run, reduced to what the scorer needs."""

    run_id: str
    seed: int
    curve: list[dict]
    entropy: float | None = None


@dataclass
class WorkloadScore:
    n_seeds: int
    run_ids: list[str]
    seeds: list[int]
    compute_to_target: dict
    speedup: dict
    capped_speedup: float
    best_accuracy: dict
    auc: dict
    pass_at_k_at_best: dict
    final_entropy: float | None
    per_run: dict
    # bootstrap draws (not serialised): capped-speedup per resample, for ranks
    boot_capped: np.ndarray = field(repr=False, default=None)


def score_workload(runs: list[SeedResult], target: float, budget: float, reference_ctt: float,
                   stream: str, resamples: int = BOOTSTRAP_RESAMPLES) -> WorkloadScore:
    """All per-(entry, workload) statistics over seeds. stream names the entry's bootstrap stream."""
    runs = sorted(runs, key=lambda r: (r.seed, r.run_id))
    ctt = [compute_to_target(r.curve, target, budget) for r in runs]
    bests = [best_point(r.curve, budget) for r in runs]
    aucs = [normalised_auc(r.curve, budget) for r in runs]
    per_seed_speedup = [speedup(reference_ctt, c) for c in ctt]

    med_ctt = median_low(ctt)
    boot = bootstrap_lower_medians(ctt, stable_seed(stream), resamples)
    boot_speedup = np.where(np.isinf(boot), 0.0, reference_ctt / np.where(np.isinf(boot), 1.0, boot))
    boot_capped = reference_ctt / np.minimum(boot, budget + 1.0)

    keys = sorted({k for b in bests for k in pass_at_k(b)}, key=lambda k: int(k.rsplit("_", 1)[1]))
    entropies = [r.entropy for r in runs if r.entropy is not None and math.isfinite(r.entropy)]
    return WorkloadScore(
        n_seeds=len(runs), run_ids=[r.run_id for r in runs], seeds=[r.seed for r in runs],
        compute_to_target=summarise(ctt, median_low),
        speedup={**summarise(per_seed_speedup), "median": speedup(reference_ctt, med_ctt),
                 "ci95": list(interval(boot_speedup))},
        capped_speedup=reference_ctt / capped(med_ctt, budget),
        best_accuracy=summarise([b["accuracy"] for b in bests]),
        auc=summarise(aucs),
        pass_at_k_at_best={k: median([pass_at_k(b)[k] for b in bests if k in b]) for k in keys},
        final_entropy=median(entropies) if len(entropies) == len(runs) else None,
        per_run={r.run_id: {"seed": r.seed, "compute_to_target": c, "speedup": s, "best_accuracy": b["accuracy"],
                            "best_compute": float(b["compute"]), "auc": a, "final_entropy": r.entropy}
                 for r, c, s, b, a in zip(runs, ctt, per_seed_speedup, bests, aucs)},
        boot_capped=boot_capped,
    )


# ---- targets ------------------------------------------------------------------------------
def reference_target(curves: list[list[dict]], budget: float, fraction: float = TARGET_FRACTION) -> dict:
    """Target accuracy from the reference's runs, and the reference's compute-to-target."""
    best = [best_point(c, budget)["accuracy"] for c in curves]
    target = fraction * median(best)
    ctt = [compute_to_target(c, target, budget) for c in curves]
    return {"median_best_accuracy": median(best), "target_accuracy": target, "best_accuracy": best,
            "compute_to_target": ctt, "reference_compute_to_target": median_low(ctt)}


# ---- across workloads ---------------------------------------------------------------------
def performance_profile_scores(ctt: dict[str, dict[str, float]], workloads: list[str],
                               tau_max: float = TAU_MAX) -> dict[str, float]:
    """AlgoPerf's performance-profile score of each entry.

    ctt[entry][workload] = the entry's median compute-to-target (inf or missing: never reached).
    r = ctt / (the best entry's ctt on that workload); rho(tau) = fraction of workloads with r <= tau;
    score = integral of rho over [1, tau_max] / (tau_max - 1). Each workload contributes
    (tau_max - r) / (tau_max - 1) when r <= tau_max, else 0 (rho is a step function: exact integral).
    """
    best = {}
    for w in workloads:
        finite = [e[w] for e in ctt.values() if w in e and math.isfinite(e[w])]
        best[w] = min(finite) if finite else INF
    scores = {}
    for name, per in ctt.items():
        total = 0.0
        for w in workloads:
            c = per.get(w, INF)
            if math.isinf(c) or math.isinf(best[w]):
                continue
            r = c / best[w] if best[w] > 0 else (1.0 if c == 0 else INF)
            if r <= tau_max:
                total += (tau_max - max(r, 1.0)) / (tau_max - 1.0)
        scores[name] = total / len(workloads) if workloads else math.nan
    return scores


def competition_ranks(scores) -> np.ndarray:
    """1 + the number of strictly better scores ("1224" ranking: ties share the better rank)."""
    s = np.asarray(scores, dtype=float)
    if s.ndim == 1:
        return 1 + (s[None, :] > s[:, None]).sum(axis=1)
    order = np.sort(s, axis=1)  # rank of x in a row = 1 + count of values > x
    return 1 + (s.shape[1] - np.stack([np.searchsorted(order[i], s[i], side="right") for i in range(len(s))]))


def rank_bands(point_ranks, intervals: list[tuple[int, int]]) -> list[int]:
    """Band per entry: walking in point-rank order, an entry joins the current band when its rank
    interval overlaps the interval of any entry already in it; otherwise it opens the next band."""
    order = sorted(range(len(point_ranks)), key=lambda i: (point_ranks[i], intervals[i]))
    bands = [0] * len(point_ranks)
    band, reach = 0, -math.inf
    for i in order:
        lo, hi = intervals[i]
        if lo > reach:
            band += 1
        reach = max(reach, hi)
        bands[i] = band
    return bands


def rank_with_confidence(scores: list[float], boot_scores: np.ndarray,
                         level: float = INTERVAL) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Point ranks, bootstrap rank intervals and rank bands. boot_scores: (resamples, entries)."""
    point = [int(r) for r in competition_ranks(scores)]
    if len(scores) == 0:
        return [], [], []
    ranks = competition_ranks(boot_scores)
    lo = np.quantile(ranks, (1 - level) / 2, axis=0, method="inverted_cdf")
    hi = np.quantile(ranks, (1 + level) / 2, axis=0, method="inverted_cdf")
    intervals = [(int(min(a, p)), int(max(b, p))) for a, b, p in zip(lo, hi, point)]
    return point, intervals, rank_bands(point, intervals)

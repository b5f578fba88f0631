"""Leaderboard scoring, rules version 2: pure functions over evaluation curves, no MLflow
(leaderboard/README.md has the rules).

Compute-to-target values are floats; "never reached" is math.inf. The median of compute-to-target
over seeds is the *lower* median (for an even count, the smaller of the two middle values: the
compute by which half of the seeds have reached the target). It is finite whenever at least half
the seeds reach the target: then the entry's median run reaches it. An entry whose median run does
not reach it is ranked below every entry whose median run does, whatever its other numbers.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

RULES_VERSION = 2
TARGET_FRACTION = 0.98  # target accuracy = this x the maximum of the reference's median curve (horizon below)
MIN_SEEDS = 4  # fewer reference seeds than this: the frozen target is flagged
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
    return float((v[n // 2 - 1] + v[n // 2]) / 2)  # inf + inf halves to inf


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


def median_curve_best(curves: list[list[dict]], budget: float) -> dict:
    """The paper's best accuracy: the maximum of the median curve over seeds (the earliest on a tie), with
    the quartiles over seeds at that evaluation and the medians of pass@k there. Taking the maximum once,
    of the median, avoids the upward bias of the median of per-seed maxima over noisy evaluations."""
    band = curve_band(curves, budget)
    i = max(range(len(band["compute"])), key=lambda j: (band["median"][j], -band["compute"][j]))
    x = band["compute"][i]
    at = [p for c in curves for p in within_budget(c, budget) if float(p["compute"]) == x]
    keys = sorted({k for p in at for k in pass_at_k(p)}, key=lambda k: int(k.rsplit("_", 1)[1]))
    return {"median": band["median"][i], "compute": x, "q1": band["q1"][i], "q3": band["q3"][i],
            "iqr": band["q3"][i] - band["q1"][i],
            "pass_at_k": {k: median([pass_at_k(p)[k] for p in at if k in p]) for k in keys}}


def speedup(reference_ctt: float, ctt: float) -> float:
    """reference compute-to-target / compute-to-target: 0 when never reached."""
    if math.isinf(ctt):
        return 0.0
    if math.isinf(reference_ctt):
        raise ValueError("the reference compute-to-target is inf")
    return reference_ctt / ctt


def geometric_mean(values, axis: int = -1):
    """The geometric mean along `axis` (the one definition the board uses): 0 when any value is 0 or less;
    a float for a 1-D input, an array of the other axes otherwise."""
    v = np.asarray(values, dtype=float)
    if v.ndim == 1 and v.size == 0:
        return math.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.exp(np.log(np.maximum(v, 0.0)).mean(axis=axis))
    return float(mean) if v.ndim == 1 else mean


@dataclass(frozen=True)
class SeedDraws:
    """The paired bootstrap's resamples of a workload's scored seeds: index[r] = the positions (in the seed
    list) drawn by resample r. A resample is a multiset of seeds and there are few distinct ones (35 for 4
    seeds): what depends only on the multiset is computed once per distinct one (distinct[which[r]])."""

    index: np.ndarray  # (resamples, seeds)
    distinct: np.ndarray
    which: np.ndarray


def seed_draws(workload: str, n_seeds: int, resamples: int = BOOTSTRAP_RESAMPLES) -> SeedDraws:
    """Every entry is resampled with the same draws (seed k gives every entry the same prompt stream and
    evaluation draws, so the comparison is paired), and the draws depend on the workload alone."""
    stream = int.from_bytes(hashlib.sha256(workload.encode()).digest()[:8], "little")
    index = np.random.default_rng([BOOTSTRAP_SEED, stream]).integers(n_seeds, size=(resamples, n_seeds))
    distinct, which = np.unique(np.sort(index, axis=1), axis=0, return_inverse=True)
    return SeedDraws(index, distinct, which.reshape(-1))


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
    missing_seeds: list[int]
    reached: bool  # the median run reaches the target
    compute_to_target: dict
    speedup: dict
    relative_best: float  # best accuracy (median curve) / target accuracy: the order among entries not reaching it
    best_accuracy: dict
    auc: dict
    pass_at_k_at_best: dict
    final_entropy: float | None
    per_run: dict
    # paired-bootstrap draws (not serialised), one per resample: whether the median run reaches the target,
    # the speedup (0 when not) and the relative best accuracy
    boot_reached: np.ndarray = field(repr=False, default=None)
    boot_speedup: np.ndarray = field(repr=False, default=None)
    boot_relative_best: np.ndarray = field(repr=False, default=None)
    extra: dict = field(default_factory=dict)  # what a later rules version adds (scoring_v3.py)


def score_workload(runs: list[SeedResult], scored_seeds: list[int], target: float, budget: float,
                   reference_ctt: float, draws: SeedDraws) -> WorkloadScore:
    """All per-(entry, workload) statistics over the workload's scored seeds. A scored seed without a run
    is a failure: it never reaches the target and its accuracy is 0 at every evaluation. draws: seed_draws."""
    runs, by_seed, schedule, curves = scored_curves(runs, scored_seeds, budget)
    ctt = np.array([compute_to_target(c, target, budget) if s in by_seed else INF
                    for s, c in zip(scored_seeds, curves)])
    # accuracy per (seed, scheduled evaluation); a point some run lacks holds its last value
    acc = np.array([_accuracy_at(c, schedule, budget) for c in curves])

    med_ctt = median_low(ctt)
    best = median_curve_best(curves, budget)
    n = len(scored_seeds)
    boot_ctt = np.sort(ctt[draws.index], axis=1)[:, (n - 1) // 2]
    boot_reached = np.isfinite(boot_ctt)
    boot_speedup = np.where(boot_reached, reference_ctt / np.where(boot_reached, boot_ctt, 1.0), 0.0)
    boot_best = np.median(acc[draws.distinct], axis=1).max(axis=1)[draws.which]  # each median curve's maximum

    per_seed_speedup = [speedup(reference_ctt, c) for c in ctt[[s in by_seed for s in scored_seeds]]]
    per_run = {}
    for r in runs:
        b, c = best_point(r.curve, budget), compute_to_target(r.curve, target, budget)
        per_run[r.run_id] = {"seed": r.seed, "compute_to_target": c, "speedup": speedup(reference_ctt, c),
                             "best_accuracy": b["accuracy"], "best_compute": float(b["compute"]),
                             "auc": normalised_auc(r.curve, budget), "final_entropy": r.entropy}
    return WorkloadScore(
        **curve_fields(runs, curves, scored_seeds, budget), reached=bool(math.isfinite(med_ctt)),
        compute_to_target=summarise(ctt, median_low),
        speedup={**summarise(per_seed_speedup), "median": speedup(reference_ctt, med_ctt),
                 "ci95": list(interval(boot_speedup))},
        relative_best=best["median"] / target, per_run=per_run,
        boot_reached=boot_reached, boot_speedup=boot_speedup, boot_relative_best=boot_best / target,
    )


def scored_curves(runs: list[SeedResult], scored_seeds: list[int], budget: float):
    """(runs in seed order, runs by seed, the evaluation schedule, one curve per scored seed): a scored seed
    without a run is a failure, its accuracy 0 at every scheduled evaluation."""
    runs = sorted(runs, key=lambda r: (r.seed, r.run_id))
    by_seed = {r.seed: r for r in runs}
    schedule = sorted({float(p["compute"]) for r in runs for p in within_budget(r.curve, budget)}) or [0.0]
    failure = [{"compute": x, "accuracy": 0.0} for x in schedule]
    return runs, by_seed, schedule, [by_seed[s].curve if s in by_seed else failure for s in scored_seeds]


def curve_fields(runs: list[SeedResult], curves: list[list[dict]], scored_seeds: list[int], budget: float) -> dict:
    """The WorkloadScore fields every rules version computes alike: which runs, the median curve's best with
    pass@k there, the AUC, the entropy at the end."""
    best = median_curve_best(curves, budget)
    entropies = [r.entropy for r in runs if r.entropy is not None and math.isfinite(r.entropy)]
    return {"n_seeds": len(runs), "run_ids": [r.run_id for r in runs], "seeds": [r.seed for r in runs],
            "missing_seeds": [s for s in scored_seeds if s not in {r.seed for r in runs}],
            "best_accuracy": {k: best[k] for k in ("median", "compute", "q1", "q3", "iqr")},
            "auc": summarise([normalised_auc(c, budget) for c in curves]), "pass_at_k_at_best": best["pass_at_k"],
            "final_entropy": median(entropies) if entropies and len(entropies) == len(scored_seeds) else None}


def _accuracy_at(curve: list[dict], schedule: list[float], budget: float) -> np.ndarray:
    """Accuracy at each scheduled compute: the last evaluation at or before it (the first one before any)."""
    points = within_budget(curve, budget)
    xs = np.array([float(p["compute"]) for p in points])
    ys = np.array([float(p["accuracy"]) for p in points])
    return ys[np.maximum(np.searchsorted(xs, schedule, side="right") - 1, 0)]


# ---- targets ------------------------------------------------------------------------------
TARGET_HORIZON = 0.6  # the target is set from the reference's curve over this first fraction of the budget


def reference_target(curves: list[list[dict]], budget: float, fraction: float = TARGET_FRACTION,
                     horizon: float = TARGET_HORIZON) -> dict:
    """Target accuracy from the reference's held-out runs: fraction x the maximum of their median curve over
    the first `horizon` of the budget; and the reference's compute-to-target (lower median over those runs).
    The horizon keeps the target inside the budget: an accuracy curve that still creeps up at the budget's end
    would otherwise put the target there, where compute-to-target cannot resolve speedups, and leave a slower
    entry no room to reach it."""
    best = median_curve_best(curves, horizon * budget)
    target = fraction * best["median"]
    ctt = [compute_to_target(c, target, budget) for c in curves]
    return {"median_best_accuracy": best["median"], "target_accuracy": target,
            "best_accuracy": [best_point(c, budget)["accuracy"] for c in curves],
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


def entry_scores(reached: np.ndarray, speedups: np.ndarray, relative_bests: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """An entry's (tier, value) from its per-workload results (last axis: workloads; leading axes: resamples).
    tier = the number of workloads whose median run reaches the target: an entry that fails somewhere never
    ties with one that does not. value = the geometric mean over workloads of the speedup where the target
    is reached and of best accuracy / target where it is not (below 1: it orders the entries that fail)."""
    reached = np.asarray(reached, dtype=bool)
    value = geometric_mean(np.atleast_2d(np.where(reached, speedups, relative_bests)))
    return reached.sum(axis=-1), value.reshape(reached.shape[:-1])


@dataclass
class EntryScore:
    """One entry's place on the board: its score over every workload, with intervals, and its rank."""

    reached: bool  # the median run reaches the target on every workload
    workloads_reached: int
    speedup_geomean: float | None  # None when some workload is not reached
    ci95: list[float]
    best_vs_target: float
    best_vs_target_ci95: list[float]
    performance_profile: float
    rank: int
    rank_interval: list[int]
    band: int


def score_entries(per_entry: list[dict[str, WorkloadScore]], medians_ctt: list[dict[str, float]],
                  workloads: list[str], resamples: int = BOOTSTRAP_RESAMPLES, band_rule=None) -> list[EntryScore]:
    """Every entry's score across workloads, ranked together: per_entry[i][w] = score_workload of entry i on w
    (all from the same seed draws, so the bootstrap stays paired across entries)."""
    n, k = len(per_entry), len(workloads)

    def point(attr):  # (entries, workloads)
        return np.array([[getattr(pw[w], attr) for w in workloads] for pw in per_entry], dtype=float).reshape(n, k)

    def boot(attr):  # (resamples, entries, workloads)
        if not per_entry:
            return np.zeros((resamples, 0, k))
        return np.stack([np.stack([getattr(pw[w], attr) for w in workloads], axis=-1) for pw in per_entry], axis=1)

    speedups = np.array([[pw[w].speedup["median"] for w in workloads] for pw in per_entry]).reshape(n, k)
    tiers, values = entry_scores(point("reached").astype(bool), speedups, point("relative_best"))
    boot_best = boot("boot_relative_best")
    boot_tiers, boot_values = entry_scores(boot("boot_reached"), boot("boot_speedup"), boot_best)
    boot_speedup_geomean = np.where(boot_tiers == k, boot_values, 0.0)  # (resamples, entries)
    boot_best_geomean = geometric_mean(boot_best)
    profile = performance_profile_scores(dict(enumerate(medians_ctt)), workloads)
    ranks, intervals, bands = rank_with_confidence(values, boot_values, tiers, boot_tiers, band_rule=band_rule)
    return [EntryScore(reached=int(tiers[i]) == k, workloads_reached=int(tiers[i]),
                       speedup_geomean=float(values[i]) if int(tiers[i]) == k else None,
                       ci95=list(interval(boot_speedup_geomean[:, i])),
                       best_vs_target=geometric_mean([pw[w].relative_best for w in workloads]),
                       best_vs_target_ci95=list(interval(boot_best_geomean[:, i])),
                       performance_profile=profile[i], rank=ranks[i], rank_interval=list(intervals[i]),
                       band=bands[i])
            for i, pw in enumerate(per_entry)]


def competition_ranks(scores, tiers=None) -> np.ndarray:
    """1 + the number of strictly better (tier, score) pairs, compared tier first ("1224" ranking: ties share
    the better rank). 1-D: one ranking; 2-D (resamples, entries): a ranking per row."""
    s = np.asarray(scores, dtype=float)
    if tiers is not None and s.size:
        # one key with the same order: a tier step is larger than any score difference (scores are >= 0)
        s = np.asarray(tiers, dtype=float) * (np.max(s) + 1.0) + s
    rows = np.atleast_2d(s)
    ordered = np.sort(rows, axis=1)  # rank of x in a row = 1 + count of values > x
    ranks = 1 + rows.shape[1] - np.stack([np.searchsorted(o, r, side="right") for o, r in zip(ordered, rows)])
    return ranks if s.ndim == 2 else ranks[0]


def rank_bands(point_ranks, intervals: list[tuple[int, int]]) -> list[int]:
    """Band per entry: walking in point-rank order, an entry joins the current band when its rank interval
    overlaps the interval of the band's first entry (it is not separable from it); otherwise it opens the next
    band. Overlap with any member would chain: [1-1], [1-3], [3-9], [7-9] would make one band of entries whose
    intervals are disjoint."""
    order = sorted(range(len(point_ranks)), key=lambda i: (point_ranks[i], intervals[i]))
    bands = [0] * len(point_ranks)
    band, leader_hi = 0, -math.inf
    for i in order:
        lo, hi = intervals[i]
        if lo > leader_hi:
            band, leader_hi = band + 1, hi
        bands[i] = band
    return bands


def rank_with_confidence(scores: list[float], boot_scores: np.ndarray, tiers=None, boot_tiers=None,
                         level: float = INTERVAL, band_rule=None) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Point ranks, bootstrap rank intervals and rank bands (band_rule: a rules version's own, else rank_bands).
    boot_scores, boot_tiers: (resamples, entries)."""
    point = [int(r) for r in competition_ranks(scores, tiers)]
    if len(scores) == 0:
        return [], [], []
    ranks = competition_ranks(boot_scores, boot_tiers)
    lo = np.quantile(ranks, (1 - level) / 2, axis=0, method="inverted_cdf")
    hi = np.quantile(ranks, (1 + level) / 2, axis=0, method="inverted_cdf")
    intervals = [(int(min(a, p)), int(max(b, p))) for a, b, p in zip(lo, hi, point)]
    return point, intervals, (band_rule or rank_bands)(point, intervals)

"""Two-arm comparisons of compute-to-target (rules version 3): an entry's seeds against the reference's.

Both arms are samples: the reference's scored runs vary as much as the entry's, so both are inside every
interval. The effect is a shift in log compute-to-target (a speedup is a ratio of computes), estimated by
Hodges-Lehmann (the median of the m·n pairwise differences) with the distribution-free interval that inverts
the Mann-Whitney test (Moses; Hollander & Wolfe, *Nonparametric Statistical Methods*, §4.3): its coverage is at
least the nominal level for any continuous distribution of the runs, with no normality assumed and none of the
percentile bootstrap's undercoverage at 4-15 seeds. A run that never reaches the target has compute inf: it
ranks behind every run that does, and the estimate stays defined while half the pairs are finite.

SciPy gives the test (`scipy.stats.mannwhitneyu`) and the Benjamini-Hochberg correction
(`scipy.stats.false_discovery_control`) but not the interval, so the exact null distribution of U that the
interval needs is computed here (a short recursion).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

LEVEL = 0.95
ALPHA = 0.05  # two-sided; a claim is "resolved" when its corrected p-value is below it
_BIG = 1e300  # inf stands in for "never reached"; ranks need a finite stand-in


@lru_cache(maxsize=None)
def u_null_counts(m: int, n: int) -> tuple[int, ...]:
    """Number of orderings of m + n distinct values giving Mann-Whitney U = u, for u = 0..m·n (the
    coefficients of the Gaussian binomial [m + n choose m]_q)."""
    if m == 0 or n == 0:
        return (1,)
    # a sample's largest value is either one of the m (it beats all n: U grows by n) or one of the n
    a, b = u_null_counts(m - 1, n), u_null_counts(m, n - 1)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(a):
        counts[u + n] += c
    for u, c in enumerate(b):
        counts[u] += c
    return tuple(counts)


def moses_rank(m: int, n: int, level: float = LEVEL) -> int:
    """k such that [d_(k), d_(mn+1-k)] of the sorted pairwise differences covers the shift with probability
    >= level (the largest such k); 0 when no interval of order statistics reaches the level (too few runs)."""
    counts = np.array(u_null_counts(m, n), dtype=float)
    cdf = np.cumsum(counts) / counts.sum()
    # P(U <= k - 1) <= (1 - level) / 2, k as large as possible
    below = np.nonzero(cdf <= (1 - level) / 2 + 1e-12)[0]
    return int(below[-1]) + 1 if below.size else 0


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return np.where(np.isinf(v), _BIG, v)


def pairwise_log_ratios(reference_ctt, entry_ctt) -> np.ndarray:
    """Sorted log(reference ctt / entry ctt) over all pairs, per row of resampled arms ((rows, m), (rows, n);
    1-D arms: one row): > 0 where the entry is faster. A pair where both never reach counts as a tie (0); the
    entry never reaching: -inf; the reference never reaching: +inf."""
    ref, ent = np.atleast_2d(np.asarray(reference_ctt, dtype=float)), np.atleast_2d(np.asarray(entry_ctt, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.log(ref)[:, :, None] - np.log(ent)[:, None, :]
    return np.sort(np.where(np.isnan(d), 0.0, d).reshape(len(d), -1), axis=1)


def hodges_lehmann(reference_ctt, entry_ctt) -> np.ndarray:
    """The speedup per row: exp of the median pairwise log ratio."""
    return _median_speedup(pairwise_log_ratios(reference_ctt, entry_ctt))


def _median_speedup(d: np.ndarray) -> np.ndarray:
    """exp of each row's median of sorted log ratios (an infinite middle pair: the lower one)."""
    low, high = d[:, (d.shape[1] - 1) // 2], d[:, d.shape[1] // 2]
    with np.errstate(invalid="ignore"):
        return np.exp(np.where(np.isfinite(low) & np.isfinite(high), (low + high) / 2, low))


def compare(reference_ctt, entry_ctt, level: float = LEVEL) -> dict:
    """speedup_interval, with the Mann-Whitney p-value (two-sided) and the probability of improvement
    (P(entry ctt < reference ctt), ties counted half)."""
    return {**speedup_interval(reference_ctt, entry_ctt, level), "p_value": mann_whitney_p(reference_ctt, entry_ctt),
            "poi": probability_of_improvement(reference_ctt, entry_ctt)}


def speedup_interval(reference_ctt, entry_ctt, level: float = LEVEL) -> dict:
    """Hodges-Lehmann speedup of the entry over the reference and its interval. Speedup 0: the entry's median
    pair never reaches the target."""
    rows = pairwise_log_ratios(reference_ctt, entry_ctt)
    d, m, n = rows[0], len(reference_ctt), len(entry_ctt)
    k = moses_rank(m, n, level)
    lo, hi = (d[k - 1], d[m * n - k]) if k else (-math.inf, math.inf)
    return {"median": float(_median_speedup(rows)[0]),
            "ci95": [float(np.exp(lo)), float(np.exp(hi))], "method": "hodges-lehmann", "confidence": level}


PERMUTATIONS = 9999  # more arrangements than this: a fixed random sample of them (the p-value is then approximate)


def mann_whitney_p(a, b) -> float:
    """Two-sided Mann-Whitney p-value of arm a against arm b from the permutation distribution, which stays exact
    with ties (runs that never reach all tie at inf; the normal approximation is too small at 4 seeds a side);
    1.0 when every value is the same."""
    x, y = _finite(a), _finite(b)
    if np.unique(np.concatenate([x, y])).size == 1:
        return 1.0
    method = stats.PermutationMethod(n_resamples=PERMUTATIONS, rng=np.random.default_rng(0))
    return float(stats.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)


def probability_of_improvement(reference_ctt, entry_ctt) -> float:
    """P(a random entry run reaches the target with less compute than a random reference run); ties count
    half (rliable's probability of improvement, for a cost where lower is better)."""
    x, y = _finite(reference_ctt)[:, None], _finite(entry_ctt)[None, :]
    return float(((y < x).sum() + 0.5 * (y == x).sum()) / (x.size * y.size))


def adjusted_p_values(p_values) -> list[float]:
    """Benjamini-Hochberg over one family of claims (a table's rows)."""
    p = np.asarray(list(p_values), dtype=float)
    return [] if p.size == 0 else [float(v) for v in stats.false_discovery_control(p, method="bh")]


def oriented(claims: list[dict], first: str, second: str, workload: str) -> dict | None:
    """The claim about `first` against `second` on `workload`, whichever way round it is held (turned round: the
    speedup and its interval inverted, the probability of improvement complemented, faster and slower swapped)."""
    for c in claims:
        if c["workload"] != workload:
            continue
        if (c["first"], c["second"]) == (first, second):
            return c
        if (c["first"], c["second"]) == (second, first):
            lo, hi = c["ci95"]
            swap = {"resolved faster": "resolved slower", "resolved slower": "resolved faster"}
            return {**c, "first": first, "second": second, "first_run_ids": c["second_run_ids"],
                    "second_run_ids": c["first_run_ids"], "speedup": _inverse(c["speedup"]),
                    "ci95": [_inverse(hi), _inverse(lo)], "poi": 1 - c["poi"],
                    "verdict": swap.get(c["verdict"], c["verdict"])}
    return None


def _inverse(x: float) -> float:
    return math.inf if x == 0 else 1 / x


def verdict(speedup: float, adjusted_p: float, alpha: float = ALPHA) -> str:
    """The wording rule: a claim is resolved only when its corrected p-value is below alpha."""
    if adjusted_p < alpha and speedup > 1:
        return "resolved faster"
    if adjusted_p < alpha and speedup < 1:
        return "resolved slower"
    return "not resolved"


def power(sd: float, seeds: int, effect: float, simulations: int = 2000, rng_seed: int = 0) -> float:
    """P(the interval lies wholly above 1) for a true speedup `effect`, both arms of `seeds` runs with
    log-normal compute-to-target of spread `sd` (simulated; the same arguments give the same number)."""
    rng = np.random.default_rng(rng_seed)
    hits = 0
    for _ in range(simulations):
        reference, entry = np.exp(rng.normal(0, sd, seeds)), np.exp(rng.normal(0, sd, seeds)) / effect
        hits += speedup_interval(reference, entry)["ci95"][0] > 1
    return hits / simulations


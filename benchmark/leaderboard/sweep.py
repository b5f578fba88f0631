"""The sweep's summary, the paper's figure 1: per configuration (strategy, (W, T), buffer size N), the
compute it saves against the on-policy reference to reach each of several accuracy levels, with
paired-bootstrap intervals over seeds. Pure functions over evaluation curves, like scoring.py.

compute saved at level a = 1 - (the configuration's median compute to reach a) / (the reference's), medians
over seeds being lower medians (the compute by which half the seeds reach a). A seed without a finished run
never reaches a level; a configuration whose median run never reaches a level saves -inf there ("not
reached"). Levels are fractions of the reference's best accuracy (the maximum of its median curve).
"""

from __future__ import annotations

import math

import numpy as np

from benchmark.leaderboard import scoring

LEVELS = (0.8, 0.9, 0.95, 0.98)  # fractions of the reference's best accuracy


def _ctt_matrix(curves_by_seed: dict[int, list[dict]], seeds: list[int], levels: list[float],
                budget: float) -> np.ndarray:
    """(seeds, levels) compute to reach each level; inf for a seed without a run or that never reaches it."""
    return np.array([[scoring.compute_to_target(curves_by_seed[s], a, budget) if s in curves_by_seed else math.inf
                      for a in levels] for s in seeds]).reshape(len(seeds), len(levels))


def _lower_median(values: np.ndarray, axis: int) -> np.ndarray:
    n = values.shape[axis]
    return np.take(np.sort(values, axis=axis), (n - 1) // 2, axis=axis)


def _saved(config_ctt: np.ndarray, reference_ctt: np.ndarray) -> np.ndarray:
    """1 - config / reference; -inf where the configuration never reaches the level, nan where the reference
    does not (no baseline to save against)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        saved = 1.0 - config_ctt / reference_ctt
    saved = np.where(np.isinf(config_ctt), -np.inf, saved)
    return np.where(np.isinf(reference_ctt), np.nan, saved)


def compute_saved(reference: dict[int, list[dict]], config: dict[int, list[dict]], seeds: list[int],
                  budget: float, fractions=LEVELS, draws: scoring.SeedDraws | None = None) -> dict:
    """The figure-1 row of one configuration. reference, config: {seed: evaluation curve}."""
    best = scoring.median_curve_best([reference[s] for s in seeds if s in reference], budget)["median"]
    levels = [f * best for f in fractions]
    draws = draws or scoring.seed_draws("sweep", len(seeds))
    ref, cfg = _ctt_matrix(reference, seeds, levels, budget), _ctt_matrix(config, seeds, levels, budget)
    point = _saved(_lower_median(cfg, 0), _lower_median(ref, 0))
    # the same resampled seeds for both: seed k is one prompt stream for every configuration
    boot = _saved(_lower_median(cfg[draws.index], 1), _lower_median(ref[draws.index], 1))  # (resamples, levels)
    rows = []
    for j, (f, a) in enumerate(zip(fractions, levels)):
        finite = boot[:, j][~np.isnan(boot[:, j])]
        lo, hi = (np.quantile(finite, [(1 - scoring.INTERVAL) / 2, (1 + scoring.INTERVAL) / 2],
                              method="inverted_cdf") if finite.size else (math.nan, math.nan))
        rows.append({"fraction": f, "accuracy": a, "saved": float(point[j]), "ci95": [float(lo), float(hi)],
                     "reference_compute": float(_lower_median(ref, 0)[j]),
                     "compute": float(_lower_median(cfg, 0)[j])})
    curves = [config[s] for s in seeds if s in config]
    return {"levels": rows, "reference_best": best,
            "best_accuracy": scoring.median_curve_best(curves, budget) if curves else None,
            "missing_seeds": [s for s in seeds if s not in config]}


def format_saved(level: dict) -> str:
    """"-42% [-60%, -10%]", "not reached" or "-" (the reference does not reach it)."""
    def pct(x):
        return "∞" if math.isinf(x) and x < 0 else "-" if math.isnan(x) else f"{100 * x:+.0f}%"

    if math.isnan(level["saved"]):
        return "-"
    if math.isinf(level["saved"]):
        return "not reached"
    lo, hi = level["ci95"]
    return f"{pct(level['saved'])} [{'-∞' if math.isinf(lo) else pct(lo)}, {pct(hi)}]"

"""Rules version 3's statistics: the two-arm speedup interval holds its coverage, the bands their guarantee."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmark.leaderboard import comparisons, scoring, scoring_v3

ROOT = Path(__file__).resolve().parent.parent
SIMULATIONS = 2000


def reference_log_ctt() -> tuple[float, float]:
    """Mean and sd of log compute-to-target (rules v3) of the shipped reference runs: the board's scored
    reference runs and the runs that froze the target. The sd is the larger of theirs and the pooled sd over
    every shipped entry (scoring_v3's power analysis uses the pooled one)."""
    target = json.loads((ROOT / "leaderboard/targets/arith-tiny.json").read_text())
    results = json.loads((ROOT / "leaderboard/results.json").read_text())
    reference = next(e for e in results["entries"] if e["reference"])["workloads"]["arith-tiny"]
    logs = []
    for run_id in [*reference["run_ids"], *target["run_ids"]]:
        curve = json.loads((ROOT / "leaderboard/runs" / run_id / "summary.json").read_text())["eval_curve"]
        logs.append(math.log(scoring_v3.compute_to_target(curve, target["target_accuracy"], target["budget"])))
    return float(np.mean(logs)), max(float(np.std(logs, ddof=1)), scoring_v3.MEASURED_SD_LOG_CTT)


def simulate(effect: float, seeds: int, frozen_reference: bool = False, rng_seed: int = 0) -> dict:
    """Entries drawn from the reference's own run distribution (lognormal at its measured mean and sd),
    `effect` times faster, scored against a reference arm of as many runs (or, frozen: one constant, the lower
    median of 4 held-out runs, as rules v2 did)."""
    mean, sd = reference_log_ctt()
    rng = np.random.default_rng(rng_seed)
    above = covered = 0
    for _ in range(SIMULATIONS):
        if frozen_reference:
            reference = np.full(seeds, scoring.median_low(np.exp(rng.normal(mean, sd, 4))))
        else:
            reference = np.exp(rng.normal(mean, sd, seeds))
        entry = np.exp(rng.normal(mean, sd, seeds)) / effect
        lo, hi = comparisons.speedup_interval(reference, entry)["ci95"]
        above += lo > 1
        covered += lo <= effect <= hi
    return {"above": above / SIMULATIONS, "coverage": covered / SIMULATIONS}


def monte_carlo_margin(p: float) -> float:
    return 2 * math.sqrt(p * (1 - p) / SIMULATIONS)


@pytest.mark.parametrize("seeds", [4, 10])
def test_the_speedup_interval_has_its_stated_false_positive_rate_and_coverage(seeds):
    null = simulate(1.0, seeds)
    assert null["above"] <= 0.025 + monte_carlo_margin(0.025), null
    assert null["coverage"] >= 0.95 - monte_carlo_margin(0.95), null
    for effect in (1.1, 1.2):
        shifted = simulate(effect, seeds, rng_seed=1)
        assert shifted["coverage"] >= 0.95 - monte_carlo_margin(0.95), (effect, shifted)
        print(f"{seeds} seeds per arm: power to resolve a {effect - 1:.0%} speedup {shifted['above']:.2f}")


def test_a_frozen_reference_breaks_the_coverage_the_rules_promise():
    """The version-2 arrangement (the reference a constant from 4 held-out runs) fails the same check: its own
    error is left out of every interval."""
    frozen = simulate(1.0, 10, frozen_reference=True)
    assert frozen["above"] > 0.025 + monte_carlo_margin(0.025), frozen
    assert frozen["coverage"] < 0.95 - monte_carlo_margin(0.95), frozen


def geomean_interval(rng, sds: tuple[float, ...], seeds: int) -> tuple[float, float]:
    """A board of several workloads' interval for an entry with no effect anywhere, computed as build.py computes
    it: each workload's Hodges-Lehmann speedup over independent resamples of both arms (scoring_v3.draws_for), their
    geometric mean per resample, its percentile interval (scoring.interval)."""
    resamples = scoring_v3.BOOTSTRAP_RESAMPLES
    boots = []
    for sd in sds:
        reference, entry = np.exp(rng.normal(0, sd, seeds)), np.exp(rng.normal(0, sd, seeds))
        draws = rng.integers(seeds, size=(2, resamples, seeds))
        boots.append(comparisons.hodges_lehmann(reference[draws[0]], entry[draws[1]]))
    return scoring.interval(scoring.geometric_mean(np.stack(boots, axis=-1)))


@pytest.mark.e2e
@pytest.mark.parametrize("sds", [(0.091, 0.091), (0.091, 0.2)], ids=["same spread", "one workload twice as noisy"])
def test_the_score_interval_of_a_board_of_two_workloads_has_its_coverage(sds):
    """The ranked column's interval on a board of two workloads is a bootstrap one (on a board of one workload it is
    the Moses interval above). Hodges-Lehmann and the percentile
    interval are equivariant under a shift and a scale of log compute, so coverage at no effect is coverage at
    any common effect, and P(interval wholly above 1) at no effect is the false-positive rate."""
    rng = np.random.default_rng(7)
    intervals = np.array([geomean_interval(rng, sds, scoring_v3.SCORED_SEEDS) for _ in range(SIMULATIONS)])
    above = float(np.mean(intervals[:, 0] > 1))
    coverage = float(np.mean((intervals[:, 0] <= 1) & (intervals[:, 1] >= 1)))
    print(f"two workloads, sds {sds}: coverage {coverage:.3f}, P(wholly above 1 | no effect) {above:.3f}")
    assert above <= 0.025 + monte_carlo_margin(0.025), above
    assert coverage >= 0.95 - monte_carlo_margin(0.95), coverage


def test_the_interval_order_statistics_match_the_tabled_mann_whitney_critical_values():
    # Hollander & Wolfe's table, alpha = 0.05 two-sided: lower critical U = 23 for m = n = 10, 64 for 15
    assert comparisons.moses_rank(10, 10) == 24 and comparisons.moses_rank(15, 15) == 65
    assert comparisons.moses_rank(2, 2) == 0  # no 95% interval from 2 runs a side
    counts = comparisons.u_null_counts(4, 3)
    assert sum(counts) == math.comb(7, 3) and counts == counts[::-1]


def test_the_speedup_of_runs_that_never_reach_is_zero_and_the_interval_unbounded_below():
    reference = [2.6e6, 2.7e6, 2.8e6, 2.9e6]
    never = comparisons.compare(reference, [math.inf] * 4)
    assert never["median"] == 0.0 and never["ci95"][0] == 0.0
    half = comparisons.compare(reference, [1.3e6, 1.4e6, math.inf, math.inf])
    assert math.isfinite(half["median"]) and half["poi"] == 0.5


def test_probability_of_improvement_and_the_wording_rule():
    assert comparisons.probability_of_improvement([2.0, 2.0], [1.0, 3.0]) == 0.5
    assert comparisons.probability_of_improvement([2.0], [2.0]) == 0.5
    assert comparisons.verdict(1.2, 0.01) == "resolved faster"
    assert comparisons.verdict(0.8, 0.01) == "resolved slower"
    assert comparisons.verdict(1.2, 0.2) == "not resolved"
    # exact with ties: 4 runs a side all apart gives the permutation minimum 2/70 (the normal approximation: 0.019)
    assert comparisons.mann_whitney_p([8, 9, 8, 9], [2, 2, 2, 2]) == pytest.approx(2 / 70)
    p = comparisons.adjusted_p_values([0.01, 0.04, 0.03])
    assert p == pytest.approx([0.03, 0.04, 0.04])  # Benjamini-Hochberg


# The published board of bdaebf0 (leaderboard/results.json there): rank, rank interval and the v2 band, in
# board order. prefer_unused (6,2) N=360 sits in band 2 with [1, 4], reaching band 1's leader [1, 1].
PUBLISHED_BDAEBF0 = [
    (1, (1, 1), 1), (2, (1, 3), 1), (3, (3, 10), 2), (4, (3, 7), 2), (4, (1, 4), 2), (6, (2, 8), 2), (7, (7, 11), 2),
    (7, (4, 15), 2), (7, (4, 14), 2), (7, (5, 11), 2), (11, (7, 15), 2), (11, (8, 13), 2), (13, (5, 14), 2),
    (14, (7, 14), 2), (14, (13, 15), 3), (16, (13, 20), 3), (17, (15, 18), 3), (17, (16, 20), 4), (19, (18, 20), 4),
    (19, (18, 20), 4), (21, (21, 21), 5), (22, (22, 22), 6),
]


def leaders(ranks, intervals, bands) -> dict[int, tuple[int, int]]:
    """Each band's leader: its first entry in point-rank order."""
    out = {}
    for i in sorted(range(len(ranks)), key=lambda i: (ranks[i], intervals[i])):
        out.setdefault(bands[i], intervals[i])
    return out


def guarantee_broken(ranks, intervals, bands) -> list[int]:
    """Entries whose rank interval reaches the leader of a band above theirs."""
    lead = leaders(ranks, intervals, bands)
    return [i for i, b in enumerate(bands) if any(intervals[i][0] <= lead[a][1] for a in lead if a < b)]


def test_the_published_counterexample_breaks_v2_bands_and_holds_under_v3():
    ranks = [r for r, _, _ in PUBLISHED_BDAEBF0]
    intervals = [iv for _, iv, _ in PUBLISHED_BDAEBF0]
    assert [b for _, _, b in PUBLISHED_BDAEBF0] == scoring.rank_bands(ranks, intervals)
    assert guarantee_broken(ranks, intervals, scoring.rank_bands(ranks, intervals)) == [4]
    bands = scoring_v3.rank_bands(ranks, intervals)
    assert guarantee_broken(ranks, intervals, bands) == []
    assert bands[4] == 1 and bands[0] == 1 and bands[-1] == max(bands)


def test_v3_bands_hold_their_guarantee_on_random_boards():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 25))
        ranks = sorted(int(r) for r in rng.integers(1, n + 1, n))
        intervals = [(int(rng.integers(1, r + 1)), int(rng.integers(r, n + 1))) for r in ranks]
        bands = scoring_v3.rank_bands(ranks, intervals)
        assert guarantee_broken(ranks, intervals, bands) == []
        lead = leaders(ranks, intervals, bands)
        assert sorted(lead) == list(range(1, len(lead) + 1))  # bands numbered from 1 without gaps


def test_v3_compute_to_target_ignores_one_noisy_evaluation_and_interpolates():
    xs = [0, 100, 200, 300, 400, 500]
    curve = [{"compute": x, "accuracy": a} for x, a in zip(xs, [0.2, 0.4, 0.9, 0.5, 0.7, 0.9])]
    # v2 takes the spike at 200; smoothed, the curve is 0.2 0.4 0.5 0.7 0.7 0.9 and crosses 0.6 half-way
    # between 200 and 300
    assert scoring.compute_to_target(curve, 0.6, 500) == 200
    assert scoring_v3.compute_to_target(curve, 0.6, 500) == pytest.approx(250)
    assert scoring_v3.compute_to_target(curve, 0.95, 500) == math.inf


def test_the_majority_rule():
    assert scoring_v3.reaches([1.0, 2.0, math.inf])
    assert not scoring_v3.reaches([1.0, 2.0, math.inf, math.inf])  # 2 of 4 is not a majority
    assert scoring_v3.reaches([1.0, 2.0, 3.0, math.inf])


def test_final_accuracy_is_the_window_mean_of_the_median_curve_with_an_interval():
    xs = [0, 25, 50, 75, 80, 90, 100]
    curves = [[{"compute": x, "accuracy": x / 100 + d} for x in xs] for d in (0.0, 0.02, 0.04)]
    draws = scoring_v3.draws_for("e", len(curves))
    final, boot = scoring_v3.final_accuracy(curves, 100, draws)
    assert final["evaluations"] == 3 and final["window"] == [80, 100]
    assert final["mean"] == pytest.approx(0.92)
    assert final["ci95"][0] <= final["mean"] <= final["ci95"][1]
    assert final == scoring_v3.final_accuracy(curves, 100, scoring_v3.draws_for("e", len(curves)))[0]  # deterministic
    assert len(boot) == len(draws)


def test_the_seed_count_of_the_rules_follows_from_the_measured_spread():
    """The rules' measured spread is the v2 board's shipped runs' (pooled over entries with 3+ seeds reaching its
    target), and SCORED_SEEDS is the fewest seeds per arm with power >= 0.8 for the smallest claimed speedup."""
    v2 = ROOT / "leaderboard/replaced/v2/results.json"  # where the v2 board is kept once a campaign's replaces it
    results = json.loads((v2 if v2.is_file() else ROOT / "leaderboard/results.json").read_text())
    assert results["rules"]["version"] == 2
    target = results["workloads"]["arith-tiny"]
    sum_squares, dof = 0.0, 0
    for entry in results["entries"]:
        logs = []
        for run_id in entry["workloads"]["arith-tiny"]["run_ids"]:
            curve = json.loads((ROOT / "leaderboard/runs" / run_id / "summary.json").read_text())["eval_curve"]
            ctt = scoring_v3.compute_to_target(curve, target["target_accuracy"], target["budget"])
            if math.isfinite(ctt):
                logs.append(math.log(ctt))
        if len(logs) >= 3:
            sum_squares += float(np.var(logs, ddof=1)) * (len(logs) - 1)
            dof += len(logs) - 1
    assert round(math.sqrt(sum_squares / dof), 3) == scoring_v3.MEASURED_SD_LOG_CTT
    sd, effect, seeds = scoring_v3.MEASURED_SD_LOG_CTT, scoring_v3.SMALLEST_CLAIMED_EFFECT, scoring_v3.SCORED_SEEDS
    assert comparisons.power(sd, seeds, effect) >= scoring_v3.POWER > comparisons.power(sd, seeds - 1, effect)


def test_confirmation_verdicts_follow_the_committed_protocol():
    """docs/protocols/confirmation.md: replicated, not replicated, reversed, nothing to replicate; Holm over the
    resolved claims only; a confirmation seed without a run never reaches the target."""
    from types import SimpleNamespace

    from benchmark.leaderboard.confirmation import confirmation_verdicts, holm_adjusted

    assert holm_adjusted([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    seeds = list(range(30, 40))
    crossing = {"g0": range(60, 70), "g1": range(40, 50), "g2": range(60, 70), "g3": range(80, 90),
                "g4": range(40, 50)}

    def run(group, seed, c):  # the smoothed curve crosses 0.5 at compute c / 2
        curve = [{"compute": 0, "accuracy": 0.0}, {"compute": c, "accuracy": 1.0}, {"compute": 100, "accuracy": 1.0}]
        return SimpleNamespace(workload="w", group=group, run_id=f"{group}-{seed}", seed=seed,
                               summary={"eval_curve": curve})
    runs = [run(g, s, c) for g, cs in crossing.items() for s, c in zip(seeds, cs)]
    runs = [r for r in runs if r.run_id != "g1-39"]  # a confirmation run that failed
    labels = ["ref", "fast", "same", "slow", "unresolved"]
    entries = [{"reference": i == 0, "label": label, "workloads": {"w": {"group": f"g{i}"}}}
               for i, label in enumerate(labels)]
    claims = [{"first": label, "second": "ref", "workload": "w", "speedup": 1.4, "ci95": [1.2, 1.6], "poi": 0.9,
               "adjusted_p_value": 0.001 if label != "unresolved" else 0.3,
               "verdict": "resolved faster" if label != "unresolved" else "not resolved"} for label in labels[1:]]
    results = {"workloads": {"w": {"target_accuracy": 0.5, "budget": 100}}, "entries": entries, "claims": claims}
    rows = {r["entry"]: r for r in confirmation_verdicts(results, runs, {"w": seeds})}
    assert {e: r["verdict"] for e, r in rows.items()} == {
        "fast": "replicated", "same": "not replicated", "slow": "reversed", "unresolved": "nothing to replicate"}
    assert rows["fast"]["confirmation"]["speedup"] == pytest.approx(1.4, rel=0.1)
    assert rows["fast"]["confirmation"]["inside_scored_interval"] and len(rows["fast"]["run_ids"]) == 9
    assert rows["unresolved"]["confirmation"]["adjusted_p_value"] is None
    assert rows["same"]["confirmation"]["adjusted_p_value"] >= rows["same"]["confirmation"]["p_value"]

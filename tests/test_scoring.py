"""The scorer on synthetic curves whose answers are known by hand."""

import math

import numpy as np
import pytest

from benchmark.leaderboard import scoring
from benchmark.leaderboard.scoring import SeedResult

BUDGET = 1000.0
PINNED_DRAWS = [[1, 1, 1, 2], [0, 1, 0, 3], [2, 0, 3, 2], [1, 0, 2, 2], [3, 3, 3, 1]]  # seed_draws("arith-tiny", 4, 5)


def curve(*accs, every=250.0):
    """Evaluations at 0, every, 2*every, ... with the given accuracies."""
    return [{"compute": i * every, "trainer_step": i, "accuracy": a, "pass_at_1": a, "pass_at_4": min(1.0, 2 * a)}
            for i, a in enumerate(accs)]


def score(runs, target, reference_ctt, seeds=None, resamples=scoring.BOOTSTRAP_RESAMPLES):
    """score_workload over the runs' own seeds (or `seeds`), with the paired draws of a workload "w"."""
    seeds = sorted({r.seed for r in runs}) if seeds is None else seeds
    return scoring.score_workload(runs, seeds, target, BUDGET, reference_ctt,
                                  scoring.seed_draws("w", len(seeds), resamples))


def test_compute_to_target_first_scheduled_eval_at_or_above():
    c = curve(0.1, 0.3, 0.5, 0.4, 0.6)
    assert scoring.compute_to_target(c, 0.5, BUDGET) == 500.0  # >=, the first one
    assert scoring.compute_to_target(c, 0.45, BUDGET) == 500.0
    assert scoring.compute_to_target(c, 0.1, BUDGET) == 250.0  # met at the start: the next eval, never 0
    assert scoring.compute_to_target(c, 0.61, BUDGET) == math.inf


def test_points_past_the_budget_do_not_count():
    c = curve(0.1, 0.2, 0.3, 0.4, 0.5, 0.9)  # the last point is at 1250 > budget
    assert scoring.compute_to_target(c, 0.9, BUDGET) == math.inf
    assert scoring.best_point(c, BUDGET)["accuracy"] == 0.5


def test_best_point_ties_take_the_earliest():
    c = curve(0.1, 0.5, 0.2, 0.5, 0.3)
    best = scoring.best_point(c, BUDGET)
    assert best["compute"] == 250.0 and best["pass_at_4"] == 1.0


def test_normalised_auc_trapezoid():
    # 0 -> 1 linearly over the budget: area 1/2
    assert scoring.normalised_auc(curve(0.0, 0.25, 0.5, 0.75, 1.0), BUDGET) == pytest.approx(0.5)
    assert scoring.normalised_auc(curve(0.4, 0.4, 0.4, 0.4, 0.4), BUDGET) == pytest.approx(0.4)
    # (0.2+0.6)/2*250 + (0.6+0.6)/2*750 = 100 + 450 -> 0.55; the curve is held flat after its last point
    assert scoring.normalised_auc(curve(0.2, 0.6), BUDGET) == pytest.approx(0.55)


def test_medians_quartiles_and_infinity():
    inf = math.inf
    assert scoring.median([3, 1, 2]) == 2
    assert scoring.median([1, 2, 3, 4]) == 2.5
    assert scoring.median([1, 2, inf, inf]) == inf
    assert scoring.median_low([1, 2, 3, 4]) == 2
    assert scoring.median_low([100, 200, inf, inf]) == 200  # inf counts, half the seeds reached it by 200
    assert scoring.median_low([100, inf, inf, inf]) == inf
    assert scoring.quantile([1, 2, 3, 4, 5], 0.25) == 2
    assert scoring.quantile([1, 2, 3, 4], 0.75) == 3.25
    s = scoring.summarise([100, 200, inf, inf], scoring.median_low)
    assert s["median"] == 200 and s["q1"] == 175 and s["q3"] == inf and s["iqr"] == inf
    assert scoring.summarise([inf, inf, inf, inf])["iqr"] is None


def test_reference_target_from_the_maximum_of_the_median_curve():
    curves = [curve(0.1, 0.3, 0.5, 0.6, 0.6), curve(0.1, 0.2, 0.4, 0.5, 0.62),
              curve(0.1, 0.4, 0.55, 0.58, 0.59), curve(0.1, 0.1, 0.3, 0.45, 0.52)]
    # over the first 60% of the budget (0, 250, 500) the median curve peaks at 0.45
    assert scoring.reference_target(curves, BUDGET)["median_best_accuracy"] == pytest.approx(0.45)
    ref = scoring.reference_target(curves, BUDGET, horizon=1.0)
    # median curve: 0.1, 0.25, 0.45, 0.54, 0.595; its maximum, not the median of per-seed maxima (0.595 too
    # here), sets the target
    assert ref["median_best_accuracy"] == pytest.approx(0.595)
    assert ref["target_accuracy"] == pytest.approx(0.98 * 0.595)  # 0.5831
    assert ref["compute_to_target"] == [750.0, 1000.0, 1000.0, math.inf]
    assert ref["reference_compute_to_target"] == 1000.0
    runs = [SeedResult(f"r{i}", i, c) for i, c in enumerate(curves)]
    s = score(runs, ref["target_accuracy"], ref["reference_compute_to_target"])
    assert s.reached and s.speedup["median"] == 1.0  # the same runs: exactly 1, by construction


def test_best_accuracy_is_the_maximum_of_the_median_curve_not_the_median_of_maxima():
    # noisy seeds that each spike once, at different evaluations: every per-seed maximum is 0.8, yet the
    # median curve never exceeds 0.5
    curves = [curve(0.5, 0.8, 0.5, 0.5, 0.5), curve(0.5, 0.5, 0.8, 0.5, 0.5), curve(0.5, 0.5, 0.5, 0.8, 0.5),
              curve(0.5, 0.5, 0.5, 0.5, 0.8)]
    s = score([SeedResult(f"r{i}", i, c) for i, c in enumerate(curves)], 0.9, 500.0)
    assert s.best_accuracy["median"] == 0.5 and s.best_accuracy["compute"] == 0.0
    assert s.best_accuracy["q1"] == s.best_accuracy["q3"] == 0.5 and s.best_accuracy["iqr"] == 0.0
    assert all(r["best_accuracy"] == 0.8 for r in s.per_run.values())  # per run, its own maximum
    assert s.pass_at_k_at_best == {"pass_at_1": 0.5, "pass_at_4": 1.0}


@pytest.mark.parametrize("seed_ctts", [[100.0, 250.0, 400.0, 900.0], [120.0, 120.0, 500.0], [333.0, 777.0]])
def test_reference_speedup_is_one_for_any_seed_values(seed_ctts):
    ref = scoring.median_low(seed_ctts)
    runs = [SeedResult(f"r{i}", i, [{"compute": 0.0, "accuracy": 0.0},
                                     {"compute": c, "accuracy": 1.0}]) for i, c in enumerate(seed_ctts)]
    assert score(runs, 0.5, ref).speedup["median"] == 1.0


def test_speedup_median_equals_median_of_per_seed_speedups():
    ctts = [200.0, 400.0, 500.0, math.inf]
    runs = [SeedResult(f"r{i}", i, [{"compute": 0.0, "accuracy": 0.0}] +
                       ([{"compute": c, "accuracy": 1.0}] if math.isfinite(c) else [])) for i, c in enumerate(ctts)]
    s = score(runs, 0.5, 800.0)
    per_seed = sorted(v["speedup"] for v in s.per_run.values())
    assert per_seed == [0.0, 1.6, 2.0, 4.0]  # inf -> speedup 0, still counted
    assert s.speedup["median"] == 2.0 == per_seed[len(per_seed) // 2]  # upper median of per-seed speedups
    assert s.compute_to_target["median"] == 400.0 and s.reached


def test_never_reaching_has_no_speedup_and_is_ordered_by_best_accuracy():
    runs = [SeedResult(f"r{i}", i, curve(0.1, 0.1, 0.2, 0.4, 0.4)) for i in range(4)]
    s = score(runs, 0.5, 500.0)
    assert s.compute_to_target["median"] == math.inf and not s.reached
    assert s.speedup["median"] == 0.0 and s.speedup["ci95"] == [0.0, 0.0]
    assert s.relative_best == pytest.approx(0.4 / 0.5)


def test_a_missing_seed_counts_as_a_failure():
    runs = [SeedResult(f"r{i}", i, curve(0.1, 0.6, 0.6, 0.6, 0.6)) for i in range(2)]
    s = score(runs, 0.5, 500.0, seeds=[0, 1, 2, 3])
    # 2 of 4 reach it at 250 (the lower median is finite): reached; the missing seeds are failures, not ignored
    assert s.reached and s.compute_to_target["median"] == 250.0 and s.missing_seeds == [2, 3]
    assert s.compute_to_target["q3"] == math.inf
    # the median curve over 4 seeds, two of them 0 everywhere: (0.6 + 0) / 2
    assert s.best_accuracy["median"] == pytest.approx(0.3)
    one = score(runs[:1], 0.5, 500.0, seeds=[0, 1, 2, 3])
    assert not one.reached and one.missing_seeds == [1, 2, 3]


@pytest.mark.parametrize(("values", "geomean"), [([4.0, 1.0], 2.0), ([0.5, 2.0], 1.0), ([1.0, 2.0, 4.0], 2.0),
                                                 ([3.0], 3.0), ([2.0, 0.0], 0.0)])
def test_geometric_mean_over_workloads(values, geomean):
    # the first three differ from their arithmetic means (2.5, 1.25, 2.33)
    assert scoring.geometric_mean(values) == pytest.approx(geomean)
    assert math.isnan(scoring.geometric_mean([]))


def test_paired_draws_are_reproducible_and_shared_by_every_entry():
    a, b = scoring.seed_draws("w", 5).index, scoring.seed_draws("w", 5).index
    assert np.array_equal(a, b) and not np.array_equal(a, scoring.seed_draws("v", 5).index)
    assert a.shape == (scoring.BOOTSTRAP_RESAMPLES, 5) and a.min() == 0 and a.max() == 4
    draws = scoring.seed_draws("w", 4)
    assert len(draws.distinct) == 35  # multisets of 4 of 4 seeds
    assert np.array_equal(np.sort(draws.index, axis=1), draws.distinct[draws.which])
    ctts = [100.0, 150.0, 200.0, 300.0, 800.0]
    runs = [SeedResult(f"r{i}", i, [{"compute": 0.0, "accuracy": 0.0}, {"compute": c, "accuracy": 1.0}])
            for i, c in enumerate(ctts)]
    s1 = score(runs, 0.5, 200.0)
    s2 = score(list(reversed(runs)), 0.5, 200.0)
    assert s1.speedup["ci95"] == s2.speedup["ci95"]
    assert s1.speedup["ci95"][0] <= 1.0 <= s1.speedup["ci95"][1]


def test_the_paired_bootstrap_separates_consistent_differences_whose_spreads_overlap():
    # seed k is easy or hard for everyone alike: per seed, "fast" reaches the target one evaluation before "slow",
    # yet the spreads over seeds overlap widely (slow's best seed beats fast's worst)
    every = 50.0
    slow_k = [3, 6, 9, 12, 15, 18]

    def run(name, seed, k):
        return SeedResult(f"{name}{seed}", seed, [{"compute": i * every, "accuracy": 0.6 if i >= k else 0.1}
                                                   for i in range(21)])

    fast = score([run("f", s, k - 1) for s, k in enumerate(slow_k)], 0.5, 500.0)
    slow = score([run("s", s, k) for s, k in enumerate(slow_k)], 0.5, 500.0)
    assert fast.compute_to_target["q3"] > slow.compute_to_target["q1"]  # the spreads overlap
    values = np.stack([fast.boot_speedup, slow.boot_speedup], axis=1)
    point, intervals, bands = scoring.rank_with_confidence([fast.speedup["median"], slow.speedup["median"]], values)
    assert point == [1, 2] and intervals == [(1, 1), (2, 2)] and bands == [1, 2]
    # resampling each entry on its own draws (unpaired) cannot separate them
    other = scoring.score_workload([run("s", s, k) for s, k in enumerate(slow_k)], list(range(6)), 0.5, BUDGET,
                                   500.0, scoring.seed_draws("unpaired", 6))
    unpaired = np.stack([fast.boot_speedup, other.boot_speedup], axis=1)
    assert scoring.rank_with_confidence([fast.speedup["median"], slow.speedup["median"]], unpaired)[2] == [1, 1]


def test_an_entry_that_reaches_the_target_ranks_above_every_one_that_does_not():
    tiers, values = scoring.entry_scores(np.array([[True], [False], [True]]), np.array([[0.5], [0.0], [2.0]]),
                                         np.array([[1.01], [0.99], [1.1]]))
    assert tiers.tolist() == [1, 0, 1] and values.tolist() == pytest.approx([0.5, 0.99, 2.0])
    # a slow entry that reaches it (speedup 0.5) beats one that never does, whatever their numbers
    assert scoring.competition_ranks(values, tiers).tolist() == [2, 3, 1]
    # across workloads: reaching it on more workloads ranks first
    tiers, values = scoring.entry_scores(np.array([[True, True], [True, False]]),
                                         np.array([[0.25, 0.25], [9.0, 0.0]]), np.array([[1.0, 1.0], [1.0, 0.9]]))
    assert tiers.tolist() == [2, 1] and scoring.competition_ranks(values, tiers).tolist() == [1, 2]


def test_performance_profile_against_hand_computation():
    inf = math.inf
    ctt = {"a": {"w1": 100.0, "w2": 400.0, "w3": inf},
           "b": {"w1": 200.0, "w2": 100.0, "w3": 50.0},
           "c": {"w1": 500.0, "w2": inf, "w3": 100.0}}
    scores = scoring.performance_profile_scores(ctt, ["w1", "w2", "w3"], tau_max=4.0)
    # best: w1 100, w2 100, w3 50. ratios a: 1, 4, inf; b: 2, 1, 1; c: 5, inf, 2
    # per workload (4 - r)/3 when r <= 4: a: 1 + 0 + 0; b: 2/3 + 1 + 1; c: 0 + 0 + 2/3
    assert scores["a"] == pytest.approx(1 / 3)
    assert scores["b"] == pytest.approx((2 / 3 + 2) / 3)
    assert scores["c"] == pytest.approx((2 / 3) / 3)
    # the same by numerically integrating rho(tau) over [1, 4]
    taus = np.linspace(1, 4, 300001)
    for name, per in ctt.items():
        ratios = np.array([per[w] / min(e[w] for e in ctt.values()) for w in ("w1", "w2", "w3")])
        rho = (ratios[None, :] <= taus[:, None]).mean(axis=1)
        assert np.trapezoid(rho, taus) / 3 == pytest.approx(scores[name], abs=1e-4)


def test_ranks_ties_and_bands():
    assert list(scoring.competition_ranks([2.0, 3.0, 2.0, 1.0])) == [2, 1, 2, 4]
    assert list(scoring.competition_ranks([2.0, 3.0, 2.0, 1.0], [1, 0, 1, 1])) == [1, 4, 1, 3]
    boot = np.array([[2.0, 3.0, 2.0, 1.0], [3.0, 2.0, 2.0, 1.0]])
    assert scoring.competition_ranks(boot).tolist() == [[2, 1, 2, 4], [1, 2, 2, 4]]
    # intervals [1,2], [1,2], [3,3], [3,5], [5,5] -> bands 1, 1, 2, 2, 2 (4 overlaps 5 via [3,5])
    assert scoring.rank_bands([1, 2, 3, 4, 5], [(1, 2), (1, 2), (3, 3), (3, 5), (5, 5)]) == [1, 1, 2, 2, 3]
    # no chaining: the last entry's interval is disjoint from the first's, so it is not in the first's band
    assert scoring.rank_bands([1, 2, 3, 4], [(1, 1), (1, 3), (3, 9), (7, 9)]) == [1, 1, 2, 2]
    assert scoring.rank_bands([1, 2, 3], [(1, 1), (2, 2), (3, 3)]) == [1, 2, 3]


def test_rank_with_confidence_separates_clear_winners():
    rng = np.random.default_rng(0)
    boot = np.stack([rng.normal(10, 0.1, 500), rng.normal(5, 0.1, 500), rng.normal(5.05, 0.1, 500)], axis=1)
    point, intervals, bands = scoring.rank_with_confidence([10.0, 5.0, 5.05], boot)
    assert point == [1, 3, 2]
    assert intervals[0] == (1, 1)
    assert bands == [1, 2, 2]  # the two close entries share a band


def test_curve_band_median_and_quartiles_per_evaluation():
    band = scoring.curve_band([curve(0.1, 0.2, 0.9), curve(0.3, 0.4), curve(0.2, 0.6, 0.5, 0.7, 0.8, 1.0)], BUDGET)
    assert band["compute"] == [0.0, 250.0, 500.0, 750.0, 1000.0]  # the point past the budget is dropped
    assert band["median"][:2] == [0.2, 0.4] and band["n"] == [3, 3, 2, 1, 1]
    assert band["q1"][0] == pytest.approx(0.15) and band["q3"][0] == pytest.approx(0.25)
    assert band["median"][2] == pytest.approx(0.7) and band["q1"][4] == band["q3"][4] == 0.8


@pytest.mark.parametrize("n_seeds", [3, 4, 5])
def test_every_bootstrap_resample_is_the_point_statistic_of_that_resample(n_seeds):
    """The paired bootstrap's draws, one by one: resample r of the speedup, of whether the median run reaches the
    target and of the best accuracy is what the point statistic gives on the seeds that resample drew."""
    rng = np.random.default_rng(n_seeds)
    # the even seeds never reach the target: resamples whose median run reaches it and resamples whose does not
    runs = [SeedResult(f"r{s}", s, curve(*np.round(rng.uniform(0, 0.55 if s % 2 == 0 else 1.0, 5), 2)))
            for s in range(n_seeds)]
    target, reference = 0.6, 500.0
    seeds = list(range(n_seeds))
    draws = scoring.seed_draws("w", n_seeds, 200)
    result = scoring.score_workload(runs, seeds, target, BUDGET, reference, draws)
    assert not all(result.boot_reached) and any(result.boot_reached)  # both kinds of resample are checked
    for r, drawn in enumerate(draws.index):
        curves = [runs[i].curve for i in drawn]
        ctt = scoring.median_low([scoring.compute_to_target(c, target, BUDGET) for c in curves])
        assert result.boot_reached[r] == math.isfinite(ctt)
        assert result.boot_speedup[r] == (scoring.speedup(reference, ctt) if math.isfinite(ctt) else 0.0)
        best = scoring.median_curve_best(curves, BUDGET)["median"]
        assert result.boot_relative_best[r] == pytest.approx(best / target)


# ---- edge cases of each statistic (each pins a behaviour the board's numbers rest on) ------------------------
def test_an_evaluation_exactly_at_the_budget_counts_and_a_curve_past_it_is_an_error():
    assert scoring.within_budget(curve(0.1, 0.2, 0.3, 0.4, 0.5), BUDGET)[-1]["compute"] == BUDGET
    with pytest.raises(ValueError, match="^the evaluation curve has no point within the budget$"):
        scoring.within_budget([{"compute": 2 * BUDGET, "accuracy": 1.0}], BUDGET)


def test_a_target_met_at_the_start_counts_at_the_next_evaluation_or_else_at_the_budget():
    assert scoring.compute_to_target(curve(0.9), 0.5, BUDGET) == BUDGET  # no evaluation after the start
    assert scoring.compute_to_target(curve(0.9, 0.1), 0.5, BUDGET) == 250.0  # the next one, whatever it scores
    early = [{"compute": 0.0, "accuracy": 0.1}, {"compute": 0.5, "accuracy": 0.9}, {"compute": 1.0, "accuracy": 0.9}]
    assert scoring.compute_to_target(early, 0.5, BUDGET) == 0.5  # any compute above 0 counts as itself


def test_medians_and_quantiles_of_nothing_and_of_infinities():
    assert all(math.isnan(x) for x in (scoring.median([]), scoring.median_low([]), scoring.quantile([], 0.5)))
    assert scoring.median_low([4.0]) == 4.0 and scoring.median([4.0, 6.0]) == 5.0
    assert scoring.quantile([math.inf, math.inf], 0.5) == math.inf  # not inf - inf
    assert scoring.quantile([1.0, math.inf], 0.5) == math.inf
    assert scoring.quantile([1.0, 2.0, 4.0], 0.75) == 3.0


def test_pass_at_k_at_the_best_point_in_the_order_of_k():
    points = [{"compute": 0.0, "accuracy": 0.5, "pass_at_16": 0.9, "pass_at_1": 0.5, "pass_at_4": 0.7}]
    best = scoring.median_curve_best([points], BUDGET)
    assert list(best["pass_at_k"]) == ["pass_at_1", "pass_at_4", "pass_at_16"]


def test_a_reference_that_never_reaches_its_target_is_an_error():
    with pytest.raises(ValueError, match="^the reference compute-to-target is inf$"):
        scoring.speedup(math.inf, 100.0)


def test_the_paired_draws_are_pinned_and_their_distinct_multisets_complete():
    draws = scoring.seed_draws("arith-tiny", 4, 5)
    assert draws.index.tolist() == PINNED_DRAWS  # changing the draws would move every published interval
    for row, which in zip(draws.index, draws.which):
        assert sorted(row) == list(draws.distinct[which])


def test_a_workload_with_no_run_at_all_is_failure_on_every_seed():
    result = score([], target=0.5, reference_ctt=500.0, seeds=[0, 1])
    assert not result.reached and result.missing_seeds == [0, 1] and result.run_ids == []
    assert result.best_accuracy["median"] == 0.0 and result.best_accuracy["compute"] == 0.0
    assert not any(result.boot_reached) and result.final_entropy is None


def test_the_final_entropy_is_the_median_over_seeds_only_when_every_seed_has_one():
    runs = [SeedResult(f"r{s}", s, curve(0.2, 0.6), entropy=e) for s, e in enumerate([1.0, 3.0, 2.0])]
    assert score(runs, 0.5, 500.0).final_entropy == 2.0
    runs[1].entropy = None
    assert score(runs, 0.5, 500.0).final_entropy is None


def test_performance_profiles_at_the_edges():
    ws = ["a", "b"]
    # a workload nobody reaches gives nothing to anyone; a missing one is never reached
    assert scoring.performance_profile_scores({"x": {"a": 10.0, "b": math.inf}, "y": {"a": 20.0}}, ws) == \
        {"x": 0.5, "y": pytest.approx((4 - 2) / 3 / 2)}
    # a best of 0 (met at the start): an entry also at 0 has r = 1, one above it never ties
    assert scoring.performance_profile_scores({"x": {"a": 0.0}, "y": {"a": 5.0}}, ["a"]) == {"x": 1.0, "y": 0.0}
    # a best below 1 compute unit is a ratio like any other
    assert scoring.performance_profile_scores({"x": {"a": 0.5}, "y": {"a": 1.0}}, ["a"]) == \
        {"x": 1.0, "y": pytest.approx(2 / 3)}
    assert math.isnan(scoring.performance_profile_scores({"x": {}}, [])["x"])


def test_one_entry_has_rank_one_and_tiers_order_the_bootstrap_ranks_too():
    point, intervals, bands = scoring.rank_with_confidence([0.7], np.array([[0.7], [0.9]]))
    assert (point, intervals, bands) == ([1], [(1, 1)], [1])
    # by score alone b would lead in every resample; by tier (a reaches the target, b does not) a does
    boot_scores, boot_tiers = np.array([[0.5, 0.9]] * 10), np.array([[1, 0]] * 10)
    point, intervals, _ = scoring.rank_with_confidence([0.5, 0.9], boot_scores, [1, 0], boot_tiers)
    assert point == [1, 2] and intervals == [(1, 1), (2, 2)]


def test_rank_intervals_are_ranks_the_resamples_gave_not_interpolations():
    # 10 resamples: a is 1st in 8 and 2nd in 2; interpolating would put its upper end between 1 and 2
    boot = np.array([[0.9, 0.5]] * 8 + [[0.1, 0.5]] * 2)
    _, intervals, _ = scoring.rank_with_confidence([0.9, 0.5], boot)
    assert intervals[0] == (1, 2)
    # 100 resamples: b is 1st in 2 of them, 2.0% < 2.5%: its interval does not reach rank 1
    boot = np.array([[0.9, 0.5]] * 98 + [[0.1, 0.5]] * 2)
    _, intervals, _ = scoring.rank_with_confidence([0.9, 0.5], boot)
    assert intervals[1] == (2, 2)

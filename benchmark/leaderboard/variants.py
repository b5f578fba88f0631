"""A campaign's variants (an entry at another split or buffer size, for the findings, never ranked): each against the
reference's scored runs on the same seeds, by the board's statistic (Hodges-Lehmann speedup of compute to the
frozen target, Moses interval, Mann-Whitney), Benjamini-Hochberg over the variants as one family, worded by the
board's rule."""

from __future__ import annotations

import statistics

from benchmark.leaderboard import comparisons, scoring, scoring_v3


def label(summary: dict) -> str:
    """The variant by what the paper varies: its entry, split (W,T) and buffer size N."""
    config = summary["config"]
    pipeline, params = config["workload"]["pipeline"], config["strategy"].get("params", {})
    size = params.get("buffer_size", config["workload"].get("strategy_defaults", {}).get("buffer_size"))
    return f"{summary.get('name') or config['strategy']['name']} ({pipeline['workers']},{pipeline['trainers']})" + (
        f" N={size}" if size is not None else "")


def arm_ctt(runs: list, seeds: list[int], target: float, budget: float):
    """Each seed's compute to the target from finished RunRecords (inf: no run, or never reached)."""
    return scoring_v3.compute_to_target_by_seed(
        [scoring.SeedResult(r.run_id, r.seed, r.summary["eval_curve"]) for r in runs], seeds, target, budget)


def variant_claims(results: dict, variant_runs: list, scored_runs: list) -> list[dict]:
    """results: the campaign's scored board; variant_runs: the campaign's finished variant runs; scored_runs: its
    finished scored runs (the reference's arm comes from them). One row per variant and workload."""
    reference = next((e for e in results["entries"] if e["reference"]), None)
    rows = []
    for w, facts in sorted(results["workloads"].items()):
        if reference is None:
            continue
        at = {"seeds": facts["scored_seeds"], "target": facts["target_accuracy"], "budget": facts["budget"]}
        reference_runs = [r for r in scored_runs if r.workload == w and r.group == reference["workloads"][w]["group"]]
        reference_ctt = arm_ctt(reference_runs, **at)
        groups: dict[str, list] = {}
        for r in variant_runs:
            if r.workload == w:
                groups.setdefault(r.group, []).append(r)
        for group, runs in sorted(groups.items(), key=lambda kv: label(kv[1][0].summary)):
            ctt = arm_ctt(runs, **at)
            compared = comparisons.compare(reference_ctt, ctt)
            ratios = [r.summary["replay_ratio"] for r in runs if r.summary.get("replay_ratio") is not None]
            rows.append({
                "workload": w, "variant": label({**runs[0].summary, "name": runs[0].name}), "group": group,
                "strategy": runs[0].strategy, "reference": reference["label"],
                "speedup": compared["median"] if scoring_v3.reaches(ctt) else 0.0, "ci95": compared["ci95"],
                "p_value": compared["p_value"], "poi": compared["poi"],
                "best_accuracy": scoring.median_curve_best([r.summary["eval_curve"] for r in runs], at["budget"]),
                "replay_ratio": statistics.median(ratios) if ratios else None,
                "run_ids": sorted(r.run_id for r in runs),
                "reference_run_ids": sorted(r.run_id for r in reference_runs)})
    for row, p in zip(rows, comparisons.adjusted_p_values(r["p_value"] for r in rows)):
        row.update(adjusted_p_value=p, verdict=comparisons.verdict(row["speedup"], p))
    return rows

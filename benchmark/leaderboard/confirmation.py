"""Which verdicts of a campaign's board replicate on its confirmation seeds, by the rule committed before those runs
(docs/protocols/confirmation.md): the scored board's claim of each confirmed entry against the reference, tested
again on the confirmation runs alone with the same statistic, Holm-corrected over the claims that were resolved."""

from __future__ import annotations

import functools

import numpy as np

from benchmark.leaderboard import comparisons, scoring_v3
from benchmark.leaderboard.variants import arm_ctt

ALPHA = comparisons.ALPHA


def holm_adjusted(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the order given."""
    order = np.argsort(p_values, kind="stable")
    adjusted, running = [0.0] * len(p_values), 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - step) * p_values[i]))
        adjusted[i] = running
    return adjusted


def verdict(scored: str, speedup: float, adjusted_p: float | None) -> str:
    if scored == "not resolved":
        return "nothing to replicate"
    confirmed = comparisons.verdict(speedup, adjusted_p, ALPHA)
    if confirmed == scored:
        return "replicated"
    return "not replicated" if confirmed == "not resolved" else "reversed"


def confirmation_verdicts(results: dict, runs: list, seeds: dict[str, list[int]]) -> list[dict]:
    """results: the campaign's scored board (with its claims); runs: the campaign's finished confirmation runs
    (RunRecords); seeds: each workload's confirmation seeds (a seed without a run counts as never reaching the
    target, as on the scored board). One row per confirmed entry and workload."""
    reference = next((e for e in results["entries"] if e["reference"]), None)
    rows = []
    for w, facts in sorted(results["workloads"].items()):
        if reference is None or w not in seeds:
            continue
        by_group: dict[str, list] = {}
        for r in runs:
            if r.workload == w:
                by_group.setdefault(r.group, []).append(r)
        arm = by_group.get(reference["workloads"][w]["group"], [])
        ctt = functools.partial(arm_ctt, seeds=seeds[w], target=facts["target_accuracy"], budget=facts["budget"])
        reference_ctt = ctt(arm)
        for entry in results["entries"]:
            confirmed = by_group.get(entry["workloads"][w]["group"]) if entry is not reference else None
            claim = confirmed and comparisons.oriented(results["claims"], entry["label"], reference["label"], w)
            if not claim:
                continue
            confirmed_ctt = ctt(confirmed)
            compared = comparisons.compare(reference_ctt, confirmed_ctt)
            reached = scoring_v3.reaches(confirmed_ctt)
            rows.append({
                "workload": w, "entry": entry["label"], "reference": reference["label"],
                "scored": {k: claim[k] for k in ("speedup", "ci95", "poi", "adjusted_p_value", "verdict")},
                "confirmation": {"speedup": compared["median"] if reached else 0.0, "ci95": compared["ci95"],
                                 "poi": compared["poi"], "p_value": compared["p_value"], "seeds": seeds[w]},
                "run_ids": sorted(r.run_id for r in confirmed), "reference_run_ids": sorted(r.run_id for r in arm)})
    resolved = [row for row in rows if row["scored"]["verdict"] != "not resolved"]
    for row, p in zip(resolved, holm_adjusted([row["confirmation"]["p_value"] for row in resolved])):
        row["confirmation"]["adjusted_p_value"] = p
    for row in rows:
        c = row["confirmation"]
        c.setdefault("adjusted_p_value", None)
        lo, hi = row["scored"]["ci95"]
        c["inside_scored_interval"] = bool(lo <= c["speedup"] <= hi)
        row["verdict"] = verdict(row["scored"]["verdict"], c["speedup"], c["adjusted_p_value"])
    return rows

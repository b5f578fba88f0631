"""The leaderboard from MLflow: every compliant run scored against its workload's frozen target, entries
ranked, everything in one results dict (the content of results.json, which the table, LEADERBOARD.md and
index.html are rendered from), and `build`, which writes the three files."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import re
from pathlib import Path

from benchmark import tracking
from benchmark.campaign import PHASES
from benchmark.leaderboard import LeaderboardError, comparisons, scoring, scoring_v3
from benchmark.leaderboard.compliance import (
    RESUMABLE_STATUSES,
    compliance_problem,
    dedupe_seeds,
    exclusion_group,
    exclusion_reason,
    open_track_choices,
)
from benchmark.leaderboard.confirmation import confirmation_verdicts
from benchmark.leaderboard.diagnostic import read_diagnostics, with_diagnostic_table
from benchmark.leaderboard.files import json_values, plain_values, write_atomic
from benchmark.leaderboard.findings import findings_block, read_calibrations, with_findings
from benchmark.leaderboard.page import render_html
from benchmark.leaderboard.render import render_markdown, rules_version, setting_of, title, with_readme_results
from benchmark.leaderboard.replaced import replaced_board_files, targets_in_force_files
from benchmark.leaderboard.store import RunRecord, load_runs, reading_store
from benchmark.leaderboard.targets import REFERENCE, TARGETS_DIR, available_targets, load_target, target_path
from benchmark.leaderboard.variants import variant_claims
from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT
from benchmark.tracking import code_version, digest, experiment_name

SCHEMA = "replaybench-leaderboard/3"  # 2: per-seed curves, replay ratio, off-policiness; 3: rules v2


def _entry_identity(summary: dict, official: dict, name: str | None = None) -> tuple[str, dict]:
    strat = summary["config"]["strategy"]
    pipe = summary["config"]["workload"]["pipeline"]
    ident = {"strategy": strat["name"], "sha256": strat.get("sha256"), "params": strat.get("params", {}),
             "workers": pipe["workers"], "trainers": pipe["trainers"]}
    # only then: the keys of entries named as their strategy file (the baselines) or making no open-track choice
    # stay as they were
    if name and name != strat["name"]:
        ident["name"] = name
    if pipe.get("sync_every", 1) != official.get("pipeline.sync_every", 1):  # keys of entries at the default stay
        ident["sync_every"] = pipe["sync_every"]
    choices = open_track_choices(summary["config"]["workload"], official)
    if choices:
        ident["open_track"] = choices
    return f"{ident.get('name', strat['name'])}@{digest(ident)[:8]}", ident


def _campaign_key(ident: dict) -> str:
    """A campaign's entry is its name and strategy file, ranked once: the settings its tuning picked (split, buffer
    size, any other searched value) may differ from one workload to the next."""
    kept = {k: ident[k] for k in ("strategy", "sha256", "name") if k in ident}
    return f"{ident.get('name', ident['strategy'])}@{digest(kept)[:8]}"


def _setting(ident: dict) -> dict:
    """What an entry ran with on a workload, beyond its name and strategy file."""
    return {"workers": ident["workers"], "trainers": ident["trainers"], "params": ident["params"],
            "open_track": ident.get("open_track", {}), **({"sync_every": ident["sync_every"]}
                                                          if "sync_every" in ident else {})}


def _common_setting(settings: list[dict]) -> dict:
    """The values every workload's setting shares: the split, or None where the workloads' differ; the parameters
    and open-track choices they agree on."""
    first = settings[0]
    one_split = all((s["workers"], s["trainers"]) == (first["workers"], first["trainers"]) for s in settings)
    return {"workers": first["workers"] if one_split else None, "trainers": first["trainers"] if one_split else None,
            **{part: {k: v for k, v in first[part].items() if all(k in s[part] and s[part][k] == v for s in settings)}
               for part in ("params", "open_track")}}


def _labels(names: list[str], identities: list[dict], keys: list[str]) -> list[str]:
    """Each entry's name and its open-track choices; one name in several settings (a baseline at two splits) is
    told apart by its split and buffer size, and by its key where even those agree."""
    def setting(ident):
        n = ident["params"].get("buffer_size")
        return (f" ({ident['workers']},{ident['trainers']})" + ("" if n is None else f" N={n}")
                + (f" sync {ident['sync_every']}" if "sync_every" in ident else ""))

    def choices(ident):
        chosen = ident.get("open_track")
        return " (" + ", ".join(f"{k.split('.')[-1]} {v}" for k, v in chosen.items()) + ")" if chosen else ""

    labels = [(name if names.count(name) == 1 else name + setting(ident)) + choices(ident)
              for name, ident in zip(names, identities)]
    return [label if labels.count(label) == 1 else key + choices(ident)
            for label, key, ident in zip(labels, keys, identities)]


def scored_seeds(target: dict) -> list[int]:
    """The seeds every entry is scored over: the workload's pinned seeds, as frozen with its target."""
    return [int(x) for x in target["workload_config"]["seeds"]]


def _seed_problem(rec: RunRecord, target: dict) -> str | None:
    if rec.run_id in target["run_ids"] and rec.seed not in scored_seeds(target):
        return f"held out: a reference run that sets the target (seed {rec.seed}), never scored"
    if rec.seed not in scored_seeds(target):
        return (f"not a scored seed: seed {rec.seed}, the workload scores seeds "
                f"{', '.join(map(str, scored_seeds(target)))}")
    return None


def _workload_record(group: str, score: scoring.WorkloadScore, runs: list[RunRecord], budget: float) -> dict:
    """One entry's statistics on one workload, plus what the page plots: each seed's accuracy curve,
    replay ratio and mean off-policiness (from its summary.json) and the curves' median and IQR."""
    # the fields themselves, not dataclasses.asdict's deep copy (seconds on a large store)
    out = {"group": group, **{f.name: getattr(score, f.name) for f in dataclasses.fields(score)
                              if not f.name.startswith("boot_") and f.name != "extra"}, **score.extra}
    summaries = {r.run_id: r.summary for r in runs}
    for run_id, row in out["per_run"].items():
        s = summaries[run_id]
        points = scoring.within_budget(s["eval_curve"], budget)
        row.update(replay_ratio=s.get("replay_ratio"), offpolicy_mean=s.get("offpolicy_mean"),
                   curve={"compute": [float(p["compute"]) for p in points],
                          "accuracy": [float(p["accuracy"]) for p in points]})
    out["accuracy_curve"] = scoring.curve_band([summaries[i]["eval_curve"] for i in out["run_ids"]], budget)
    for key in ("replay_ratio", "offpolicy_mean"):
        values = [row[key] for row in out["per_run"].values() if row[key] is not None]
        out[key] = scoring.summarise(values) if values else None
    for key in ("offpolicy_distribution", "since_last_use_distribution"):
        out[key] = pooled_distribution([summaries[i].get(key) for i in out["run_ids"]])
    out["ratio_statistics"] = median_ratio_statistics([summaries[i].get("ratio_statistics") for i in out["run_ids"]])
    return out


def median_ratio_statistics(per_run: list[dict | None]) -> dict | None:
    """The median over seeds of each importance-ratio statistic of the runs' summaries; None when a run predates
    them."""
    if not per_run or any(r is None for r in per_run):
        return None
    return {k: scoring.median([r[k] for r in per_run]) for k in per_run[0] if k != "steps"}


def pooled_distribution(per_run: list[dict | None]) -> dict[str, float] | None:
    """The fraction of all the seeds' trained samples at each value ("new" first, then by value); None when a run
    predates the distributions."""
    if not per_run or any(d is None for d in per_run):
        return None
    pooled: dict[str, int] = {}
    for d in per_run:
        for k, v in d.items():
            pooled[k] = pooled.get(k, 0) + v
    total = sum(pooled.values()) or 1
    return {k: pooled[k] / total for k in sorted(pooled, key=lambda k: -1 if k == "new" else int(k))}


@dataclasses.dataclass
class SortedRuns:
    """The store's runs sorted for the board: each entry's compliant runs, and what is left out and why."""

    # key -> {"identity", "identities": {w: identity}, "runs": {w: [rec]}, "groups": {w: group}}
    entries: dict = dataclasses.field(default_factory=dict)
    excluded: list = dataclasses.field(default_factory=list)
    failed_groups: dict = dataclasses.field(default_factory=dict)  # (name, group) -> its excluded runs
    previews: list = dataclasses.field(default_factory=list)  # `submit --preview` runs: beside the board, unranked
    unscored: dict = dataclasses.field(default_factory=dict)  # workload without a frozen target -> its run ids

    def exclude(self, rec: RunRecord, reason: str) -> None:
        self.excluded.append({"run_id": rec.run_id, "workload": rec.workload, "strategy": rec.strategy,
                              "name": rec.name or rec.strategy, "group": rec.group, "seed": rec.seed,
                              "track": rec.track, "reason": reason, "why": exclusion_group(reason)})


def _preview(rec: RunRecord) -> dict:
    curve = rec.summary["eval_curve"]
    return {"workload": rec.workload, "name": rec.name or rec.strategy, "run_id": rec.run_id, "seed": rec.seed,
            "budget": rec.summary["config"]["workload"]["budget"],
            "best_accuracy": max(p["accuracy"] for p in curve),
            "accuracy_curve": {"compute": [p["compute"] for p in curve], "accuracy": [p["accuracy"] for p in curve]}}


def sort_runs(records: list[RunRecord], targets: dict[str, dict], track: str | None = None,
              tuned_per_workload: bool = False) -> SortedRuns:
    """Every run into its entry, or out with the reason (failed, not compliant, not a scored seed, a duplicate).
    tuned_per_workload: a campaign's board, whose entries are known by name (_campaign_key), each at one setting
    on each workload."""
    ref_ids = {rid for t in targets.values() for rid in t["run_ids"]}
    # the reference's configuration, every track measured against it: its scored seeds join any track's board
    ref_groups = {t["reference"].get("group") for t in targets.values()} - {None}
    out = SortedRuns()
    for rec in records:
        if track is not None and rec.track != track and rec.run_id not in ref_ids and rec.group not in ref_groups:
            continue
        if rec.preview and rec.workload in targets:  # beside the board: never an entry, nor one "not ranked"
            if rec.status == "finished" and rec.summary:
                out.previews.append(_preview(rec))
            else:
                out.exclude(rec, f"{exclusion_reason(rec)} ({rec.status or 'no status'})")
            continue
        if rec.workload not in targets:
            out.unscored.setdefault(rec.workload, []).append(rec.run_id)
            continue
        target = targets[rec.workload]
        reason = exclusion_reason(rec) or compliance_problem(rec, target) or _seed_problem(rec, target)
        if reason:
            out.exclude(rec, reason)
            out.failed_groups.setdefault((rec.name or rec.strategy, rec.group), []).append(rec)
            continue
        key, ident = _entry_identity(rec.summary, target["workload_config"], rec.name)
        if tuned_per_workload:
            key = _campaign_key(ident)
        entry = out.entries.setdefault(key, {"identity": ident, "identities": {}, "runs": {}, "groups": {}})
        held = entry["identities"].setdefault(rec.workload, ident)
        if held != ident:
            other = next(r.run_id for r in entry["runs"][rec.workload])
            raise LeaderboardError(f"the campaign's scored runs of {key.split('@')[0]} on {rec.workload} have two "
                                   f"settings (runs {other} and {rec.run_id}): its tuning picks one per workload; "
                                   "a store holding runs of another pick cannot make its board")
        entry["runs"].setdefault(rec.workload, []).append(rec)
        entry["groups"][rec.workload] = rec.group
    for entry in out.entries.values():
        for w, runs in entry["runs"].items():
            kept, dropped = dedupe_seeds(runs)
            entry["runs"][w] = kept
            for rec, reason in dropped:
                out.exclude(rec, reason)
    return out


def _unusable_configurations(runs: SortedRuns) -> list[dict]:
    """A configuration none of whose runs counts: listed as not ranked, with the reasons."""
    used_groups = {g for e in runs.entries.values() for g in e["groups"].values()}
    out = []
    for (strategy, group), recs in sorted(runs.failed_groups.items()):
        if group not in used_groups:
            ids = {r.run_id for r in recs}
            reasons = sorted({e["reason"] for e in runs.excluded if e["run_id"] in ids})
            out.append({"key": f"{strategy}/{group[:8]}", "strategy": strategy,
                        "reason": f"no usable run ({len(recs)} excluded): " + "; ".join(reasons)[:500],
                        "run_ids": sorted(r.run_id for r in recs)})
    return out


def _flags(entry: dict, per_w: dict, excluded: list[dict]) -> list[str]:
    flags = []
    for w, score in per_w.items():
        if score.missing_seeds:
            flags.append(f"no counting run of seed{'s' if len(score.missing_seeds) > 1 else ''} "
                         f"{', '.join(map(str, score.missing_seeds))} on {w}: counted as failed")
    left_out = [x for x in excluded if x["group"] in entry["groups"].values()
                and not x["reason"].startswith("held out")]  # the target's own runs are apart by design
    # a run stopped midway whose seed another run of the entry completed: a stopped campaign's, made again on resume
    counted = {(w, seed) for w, score in per_w.items() for seed in score.seeds}
    made_again = sum(1 for x in left_out if x["why"] == "interrupted" and (x["workload"], x["seed"]) in counted)
    if made_again:
        flags.append(f"{made_again} interrupted run(s) made again, see below")
    if len(left_out) > made_again:
        flags.append(f"{len(left_out) - made_again} run(s) excluded, see below")
    return flags


def _is_reference(entry: dict, per_w: dict, targets: dict[str, dict]) -> bool:
    """The frozen runs themselves, or the same reference configuration run again (e.g. on a fresh clone)."""
    return any(set(targets[w]["run_ids"]) & set(per_w[w].run_ids)
               or _reference_configuration(entry["identities"][w], targets[w]) for w in per_w)


def _reference_configuration(ident: dict, target: dict) -> bool:
    return ident["strategy"] == REFERENCE and "sync_every" not in ident and (ident["workers"], ident["trainers"]) == (
        target["reference"]["workers"], target["reference"]["trainers"])


def _entry_record(key: str, entry: dict, per_w: dict, score: scoring.EntryScore, name: str, label: str,
                  runs: SortedRuns, targets: dict[str, dict]) -> dict:
    ident = entry["identity"]
    if "sync_every" in ident and "sync" not in label:
        label += f" (sync every {ident['sync_every']})"
    settings = {w: _setting(entry["identities"][w]) for w in per_w}
    common = _common_setting(list(settings.values()))
    workloads = {w: _workload_record(entry["groups"][w], per_w[w], entry["runs"][w], targets[w]["budget"])
                 for w in per_w}
    if any(s != settings[next(iter(settings))] for s in settings.values()):  # a campaign's tuning picked apart
        for w, record in workloads.items():
            record["setting"] = settings[w]
    return {
        "rank": score.rank, "rank_interval": score.rank_interval, "band": score.band, "key": key, "label": label,
        "name": name, "strategy": ident["strategy"], "strategy_sha256": ident["sha256"], "params": common["params"],
        "workers": common["workers"], "trainers": common["trainers"], "open_track": common["open_track"],
        "reference": _is_reference(entry, per_w, targets),
        "score": {k: getattr(score, k) for k in ("reached", "workloads_reached", "speedup_geomean", "ci95",
                                                  "best_vs_target", "best_vs_target_ci95")},
        "performance_profile": score.performance_profile, "flags": _flags(entry, per_w, runs.excluded),
        "workloads": workloads,
    }


def _claims(entries: list[dict], workloads: list[str]) -> list[dict]:
    """Rules v3: every comparison the board makes, each pair of ranked entries on each workload (the findings'
    pairs and each entry against the reference among them), tested (Mann-Whitney) and corrected together as one
    family (Benjamini-Hochberg), worded by comparisons.verdict; a pair is held once, the entry above on the board
    first."""
    claims = []
    for w in workloads:
        for i, first in enumerate(entries):
            for second in entries[i + 1:]:
                a, b = first["workloads"][w], second["workloads"][w]
                compared = comparisons.compare(_scored_ctt(b), _scored_ctt(a))
                claims.append({"first": first["label"], "second": second["label"], "workload": w,
                               "speedup": compared["median"] if a["reached"] else 0.0, "ci95": compared["ci95"],
                               "p_value": compared["p_value"], "poi": compared["poi"],
                               "first_run_ids": a["run_ids"], "second_run_ids": b["run_ids"]})
    for claim, p in zip(claims, comparisons.adjusted_p_values(c["p_value"] for c in claims)):
        claim.update(adjusted_p_value=p, verdict=comparisons.verdict(claim["speedup"], p))
    return claims


def _with_claims(entries: list[dict], claims: list[dict], one_workload: bool) -> None:
    """Each entry's comparison with the reference as the claims hold it (p-value, probability of improvement,
    corrected p and verdict); on a one-workload board, rank intervals and bands from the claims' verdicts."""
    reference = next((e for e in entries if e["reference"]), None)
    for e in entries:
        for w, record in e["workloads"].items():
            c = reference and e is not reference and comparisons.oriented(claims, e["label"], reference["label"], w)
            if c:
                record["comparison"] = {k: c[k] for k in ("p_value", "poi", "adjusted_p_value", "verdict")}
    if one_workload:
        _ranks_from_claims(entries, claims)


def _ranks_from_claims(entries: list[dict], claims: list[dict]) -> None:
    """Rules v3, one workload: an entry's rank interval runs from 1 + the entries resolved faster than it to the
    board's size less those it is resolved faster than, so a difference the claims do not resolve never reads as
    an order; bands follow from these intervals."""
    faster = {(c["first"], c["second"]) for c in claims if c["verdict"] == "resolved faster"}
    faster |= {(c["second"], c["first"]) for c in claims if c["verdict"] == "resolved slower"}
    for e in entries:
        above = sum((x["label"], e["label"]) in faster for x in entries)
        below = sum((e["label"], x["label"]) in faster for x in entries)
        e["rank_interval"] = [min(1 + above, e["rank"]), max(len(entries) - below, e["rank"])]
    for e, band in zip(entries, scoring_v3.rank_bands([e["rank"] for e in entries],
                                                      [tuple(e["rank_interval"]) for e in entries])):
        e["band"] = band


def _scored_ctt(record: dict) -> list[float]:
    """An entry's compute-to-target per scored seed: its runs', and inf for each missing seed (a failure)."""
    return [r["compute_to_target"] for r in record["per_run"].values()] + [math.inf] * len(record["missing_seeds"])


def _rules(resamples: int, version: int = scoring.RULES_VERSION) -> dict:
    if version == 3:
        return {"version": 3, "reference": REFERENCE, "target_fraction": scoring.TARGET_FRACTION,
                "compute_to_target": "first crossing of the curve smoothed by a running median of 3, interpolated",
                "reached": "a strict majority of the scored seeds reach the target (a missing seed fails)",
                "speedup": "Hodges-Lehmann over the reference's and the entry's scored runs (both sampled)",
                "interval": "distribution-free (Moses), inverting the two-sided Mann-Whitney test at 95%",
                "claims": "every pair of ranked entries, Benjamini-Hochberg over all of them; 'resolved faster' "
                          f"or 'resolved slower' at a corrected p < {comparisons.ALPHA}, else 'not resolved'",
                "final_accuracy": f"mean of the median curve over the last {scoring_v3.FINAL_WINDOW:.0%} of the "
                                  "budget, percentile bootstrap interval over seeds",
                "levels": list(scoring_v3.LEVELS), "bands": "the first band whose leader the rank interval reaches",
                "bootstrap": "each arm resampled on its own (rank intervals, final accuracy)",
                "bootstrap_resamples": resamples, "bootstrap_seed": scoring_v3.BOOTSTRAP_SEED,
                "missing_seed": "a failure", "tau_max": scoring.TAU_MAX,
                "not_reached": "ranked below every entry that reaches the target, by final accuracy / target",
                "readme": "leaderboard/README.md"}
    return {"version": scoring.RULES_VERSION, "reference": REFERENCE,
            "target_fraction": scoring.TARGET_FRACTION, "tau_max": scoring.TAU_MAX,
            "bootstrap": "paired over the workload's scored seeds", "bootstrap_resamples": resamples,
            "bootstrap_seed": scoring.BOOTSTRAP_SEED, "interval": scoring.INTERVAL,
            "compute_to_target_median": "lower median", "missing_seed": "a failure",
            "not_reached": "ranked below every entry that reaches the target, by best accuracy / target",
            "best_accuracy": "maximum of the median curve over seeds",
            "readme": "leaderboard/README.md"}


def _workload_facts(targets: dict[str, dict], present: set[str]) -> dict:
    return {w: {"version": t["workload_version"], "budget": t["budget"], "scored_seeds": scored_seeds(t),
                "target_accuracy": t["target_accuracy"],
                "reference_compute_to_target": t["reference_compute_to_target"],
                "reference_run_ids": t["run_ids"], "target_created": t["created"],
                "target_file": f"leaderboard/targets/{w}.json",
                # the runs that set the target, absent from this store (e.g. a fresh clone's)
                "target_runs_missing": sorted(set(t["run_ids"]) - present)} for w, t in targets.items()}


def rules_in_force(targets: dict[str, dict]) -> int:
    """The rules a board is scored under: those its targets were frozen under (a workload version keeps the
    rules it was frozen with, so its published board re-scores exactly)."""
    versions = {int(t.get("rules_version", scoring.RULES_VERSION)) for t in targets.values()} or {scoring.RULES_VERSION}
    if len(versions) > 1:
        raise LeaderboardError(f"the targets were frozen under different rules versions ({sorted(versions)}): "
                               "pass --rules to score them together")
    return versions.pop()


def _reference_arms(runs: "SortedRuns", targets: dict[str, dict], resamples: int) -> dict:
    """Rules v3: each workload's reference arm, its scored runs (None where the store has none)."""
    arms = {}
    for w, t in targets.items():
        entry = next((e for e in runs.entries.values()
                      if w in e["runs"] and _reference_configuration(e["identities"][w], t)), None)
        arms[w] = None if entry is None else scoring_v3.reference_arm(
            [scoring.SeedResult(r.run_id, r.seed, r.summary["eval_curve"], r.entropy) for r in entry["runs"][w]],
            scored_seeds(t), t["target_accuracy"], t["budget"], w, resamples)
    return arms


def _score_workload(key: str, runs: list[RunRecord], workload: str, target: dict, rules: int, arm, draws,
                    resamples: int) -> scoring.WorkloadScore:
    """One entry on one workload, under the rules version in force."""
    seeds = [scoring.SeedResult(r.run_id, r.seed, r.summary["eval_curve"], r.entropy) for r in runs]
    if rules == 3:
        return scoring_v3.score_workload(seeds, scored_seeds(target), target["target_accuracy"], target["budget"],
                                         arm, target["median_best_accuracy"], f"{workload}/{key}", resamples)
    return scoring.score_workload(seeds, scored_seeds(target), target["target_accuracy"], target["budget"],
                                  target["reference_compute_to_target"], draws)


def build_results(records: list[RunRecord], targets: dict[str, dict], track: str | None = None,
                  resamples: int = scoring.BOOTSTRAP_RESAMPLES, tracking_uri: str | None = None,
                  rules: int | None = None, present: set[str] | None = None, tuned_per_workload: bool = False) -> dict:
    """The whole leaderboard as plain Python values (never reached: math.inf), every number traced to MLflow run
    ids. rules: the version to score under (default: rules_in_force). present: the run ids the store holds (default:
    those of `records`), the targets' runs checked against them. tuned_per_workload: a campaign's board (sort_runs)."""
    workloads = sorted(targets)
    rules = rules or rules_in_force(targets)
    runs = sort_runs(records, targets, track, tuned_per_workload)
    draws = {w: scoring.seed_draws(w, len(scored_seeds(targets[w])), resamples) for w in workloads}
    arms = _reference_arms(runs, targets, resamples) if rules == 3 else {}
    ranked, not_ranked = [], []
    for key, entry in sorted(runs.entries.items()):
        missing = [w for w in workloads if w not in entry["runs"]]
        if missing:
            not_ranked.append({"key": key, "strategy": entry["identity"].get("name", entry["identity"]["strategy"]),
                               "reason": f"incomplete: no finished compliant run on {', '.join(missing)}",
                               "run_ids": sorted(r.run_id for rs in entry["runs"].values() for r in rs)})
            continue
        per_w = {w: _score_workload(key, entry["runs"][w], w, targets[w], rules, arms.get(w), draws[w], resamples)
                 for w in workloads}
        ranked.append((key, entry, per_w))
    not_ranked += _unusable_configurations(runs)

    scores = scoring.score_entries([pw for _, _, pw in ranked],
                                   [{w: pw[w].compute_to_target["median"] for w in workloads} for _, _, pw in ranked],
                                   workloads, resamples, band_rule=scoring_v3.rank_bands if rules == 3 else None)
    if rules == 3 and len(workloads) == 1:  # one workload: the entry's interval is its tested two-arm one
        for score, (_, _, pw) in zip(scores, ranked):
            score.ci95 = list(pw[workloads[0]].speedup["ci95"])
    names = [e["identity"].get("name", e["identity"]["strategy"]) for _, e, _ in ranked]
    labels = _labels(names, [e["identity"] for _, e, _ in ranked], [key for key, _, _ in ranked])
    entries = [_entry_record(key, entry, per_w, score, name, label, runs, targets)
               for (key, entry, per_w), score, name, label in zip(ranked, scores, names, labels)]
    entries.sort(key=lambda e: (e["rank"], e["band"], -e["performance_profile"], e["label"]))

    runs.excluded.sort(key=lambda e: (e["workload"], e["strategy"], e["group"],
                                      e["seed"] if e["seed"] is not None else -1, e["run_id"]))
    results = plain_values({
        "schema": SCHEMA,
        "generated": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "code_version": code_version(),
        "mlflow": {"tracking_uri": tracking_uri, "experiments": [experiment_name(w) for w in workloads]},
        "track": track,
        "rules": _rules(resamples, rules),
        "workloads": _workload_facts(targets, present if present is not None else {rec.run_id for rec in records}),
        "entries": entries,
        "not_ranked": not_ranked,
        "previews": sorted(runs.previews, key=lambda p: (p["workload"], p["name"], p["run_id"])),
        "excluded_runs": runs.excluded,
        "unscored_workloads": {w: _unscored(w, sorted(ids)) for w, ids in sorted(runs.unscored.items())},
    })
    made_for = campaign_runs(records)
    if made_for:
        results["campaign_runs"] = made_for
        results["superseded_campaigns"] = superseded_campaigns()
    if rules == 3:
        results["claims"] = _claims(results["entries"], workloads)
        _with_claims(results["entries"], results["claims"], one_workload=len(workloads) == 1)
    return results


def superseded_campaigns() -> dict[str, dict]:
    """name -> the committed campaign that supersedes it and why."""
    from benchmark.campaign import superseded

    return {name: {"by": by["by"], "why": by["why"]} for name, by in superseded().items()}


def _unscored(workload: str, run_ids: list[str]) -> dict:
    """A workload with runs and no target: a workload of workloads/ waits for its target (frozen by the campaign
    that names it, if one does); any other (a search's candidate, loaded by path) is measured, never scored. Its runs
    are listed: the page links each one."""
    from benchmark.campaign import campaign_files
    from benchmark.paths import WORKLOADS_DIR

    superseded = superseded_campaigns()
    by_campaign = [campaign_file(None, c["path"]) for name, c in campaign_files().items()
                   if workload in (c.get("workloads") or {}) and name not in superseded]
    if by_campaign:
        return {"runs": len(run_ids), "run_ids": run_ids, "fix": None,
                "why": f"its target is frozen by the campaign that runs it ({', '.join(by_campaign)}), whose board "
                       "scores it"}
    if (WORKLOADS_DIR / f"{workload}.yaml").is_file():
        return {"runs": len(run_ids), "run_ids": run_ids,
                "fix": f"replaybench leaderboard freeze-target --workload {workload}"}
    return {"runs": len(run_ids), "run_ids": run_ids, "fix": None,
            "why": "measured, never scored (leaderboard/measurements/)"}


def campaign_runs(records: list[RunRecord]) -> dict[str, list[str]]:
    """Every run a campaign made, by what it was for ("v3/scored": its replaybench.campaign tag), counted and
    failed alike: the page lists them all, campaign by campaign, each one's phases in the order it runs them."""
    made_for: dict[str, list[str]] = {}
    for rec in records:
        if rec.campaign:
            made_for.setdefault(rec.campaign, []).append(rec.run_id)

    def in_order(tag: str) -> tuple[str, int]:
        name, _, phase = tag.partition("/")
        return name, PHASES.index(phase) if phase in PHASES else len(PHASES)
    return {k: sorted(made_for[k]) for k in sorted(made_for, key=in_order)}


def score_from_campaign(campaign, track: str | None = None, rules: int | None = None,
                        workload: str | None = None) -> dict:
    """A campaign's board: its scored runs (made on its release, with its kernels) against the targets it froze,
    and every run of every campaign the store holds listed by what it was for, those it supersedes included.
    workload: that one of the campaign's workloads only (a local view; the published board has them all)."""
    from benchmark.workload import load_workload

    targets_dir = campaign.targets_dir()
    names = [load_workload(w).name for w in campaign.workloads]
    if workload and workload not in names:
        raise LeaderboardError(f"{workload} is not a workload of the campaign {campaign.name}: pick one of "
                               f"{', '.join(names)}, or drop --workload")
    names = [workload] if workload else names
    targets = {w: load_target(w, targets_dir) for w in names if target_path(w, targets_dir).is_file()}
    if not targets:
        raise LeaderboardError(f"the campaign {campaign.name} has frozen no target yet (its phase target): "
                               f"`replaybench campaign status {campaign_file(campaign)}` says what is left")
    uri = tracking.tracking_uri()
    with reading_store(uri):
        records = load_runs(names)
    results = build_results([r for r in records if campaign.made(r, "scored")], targets, track=track,
                            tracking_uri=uri, rules=rules, present={r.run_id for r in records},
                            tuned_per_workload=True)
    for w, facts in results["workloads"].items():
        facts["target_file"] = campaign_file(campaign, target_path(w, targets_dir))
    results["campaign_runs"] = campaign_runs(records)
    def finished(phase):
        return [r for r in records if campaign.made(r, phase) and r.status == "finished" and r.summary]
    if finished("variants") and results.get("claims") is not None:
        results["variants"] = variant_claims(results, finished("variants"), finished("scored"))
    confirmed = finished("confirmation")
    if confirmed and results.get("claims") is not None:
        seeds = {load_workload(w).name: c.confirmation_seeds for w, c in campaign.workloads.items()}
        results["confirmation"] = confirmation_verdicts(results, confirmed, seeds)
    made = [r for r in records if campaign.made(r)]
    results["campaign"] = {
        "name": campaign.name, "file": campaign_file(campaign), "release": campaign.release,
        "kernels": campaign.kernels, "rules": campaign.rules, "seeds_per_arm": campaign.seeds_per_arm,
        "supersedes": campaign.supersedes, "runs_made": len(made),
        "runs_finished": sum(r.status == "finished" for r in made),
        # runs tagged with the campaign but not made as it says (another engine, other kernels): never scored
        "runs_foreign": sorted(r.run_id for r in records
                               if (r.campaign or "").startswith(f"{campaign.name}/") and not campaign.made(r))}
    return results


def campaign_file(campaign, path: Path | None = None) -> str:
    """A campaign's file (or a path beside it) as the board names it: relative to the repository, when inside it."""
    path = Path(path or campaign.file()).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def score_from_mlflow(workload: str | None = None, track: str | None = None,
                      targets_dir: Path | None = None, rules: int | None = None) -> dict:
    if workload:
        targets = {workload: load_target(workload, targets_dir)}
    else:
        names = available_targets(targets_dir)
        if not names:
            raise LeaderboardError(
                f"no frozen targets in {Path(targets_dir or TARGETS_DIR)}: run "
                "`replaybench leaderboard freeze-target --workload W` for each workload once its reference runs "
                "are in MLflow")
        targets = {w: load_target(w, targets_dir) for w in names}
    uri = tracking.tracking_uri()
    with reading_store(uri):
        records = load_runs(None if not workload else [workload])
    results = build_results(records, targets, track=track, tracking_uri=uri, rules=rules)
    attach_published_reference(results)
    excluded = {x["run_id"] for x in results["excluded_runs"]}
    resumable = sorted(r.run_id for r in records
                       if r.status in RESUMABLE_STATUSES and not r.imported and r.run_id in excluded)
    if resumable:  # the store's own runs only: an imported one is somebody else's to finish
        results["resumable_run_ids"] = resumable
    return results


def published_reference(workload: str, target_created: str) -> dict | None:
    """The reference's median curve on the published board (leaderboard/results.json) when that board scores
    `workload` against the same frozen target; else None."""
    try:
        published = json.loads((LEADERBOARD_DIR / "results.json").read_text())
        w = published["workloads"][workload]
        if w["target_created"] != target_created:
            return None
        ref = next(e for e in published["entries"] if e["reference"])
        setting = setting_of(ref, workload)
        return {"label": ref["label"], "workers": setting["workers"], "trainers": setting["trainers"],
                "accuracy_curve": ref["workloads"][workload]["accuracy_curve"],
                "run_ids": ref["workloads"][workload]["run_ids"], "source": "leaderboard/results.json"}
    except (OSError, ValueError, KeyError, StopIteration):
        return None


def attach_published_reference(results: dict) -> None:
    """A store without the runs behind a target (a newcomer's) gets the published reference curve to compare
    with, taken from the published board and marked as such."""
    for w, d in results["workloads"].items():
        if d.get("target_runs_missing") and not any(e["reference"] for e in results["entries"]):
            ref = published_reference(w, d["target_created"])
            if ref:
                d["published_reference"] = ref


def results_json(results: dict) -> str:
    """results.json's text: indented, but each list of plain values (a curve, run ids) on one line;
    infinity as the string "inf"."""
    text = json.dumps(json_values(results), indent=2, allow_nan=False)
    # JSON strings hold no raw newline, so only the layout between a flat list's items is rewritten
    return re.sub(r"\[\n\s+([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]",
                  text) + "\n"


def local_board_dir() -> Path:
    """Where a plain `leaderboard build` writes: beside the store's runs, never over the published board."""
    return tracking.RUNS_DIR / "leaderboard"


def refuse_on_the_published_board(rules: int | None, highlight: str | None, campaign_workload: str | None) -> None:
    """What a local board may do and the published one may not, each refused with its fix."""
    if rules:
        raise LeaderboardError("the published board is scored under the rules its targets were frozen with: drop "
                               "--rules, or write the preview elsewhere with --out")
    if highlight:
        raise LeaderboardError("the published board is everyone's: it highlights no entry; build your local board "
                               "with --highlight (drop --publish; it goes to runs/leaderboard/)")
    if campaign_workload:
        raise LeaderboardError("the published board of a campaign scores every workload it names: drop --workload, "
                               "or write the one workload's board elsewhere with --out")


def drop_the_builders_store(results: dict) -> None:
    """What only the builder's own store means leaves a published board: its address (a reader has the shipped
    runs instead) and the runs it would advise finishing."""
    results["mlflow"].pop("tracking_uri", None)
    results.pop("resumable_run_ids", None)


def build(out_dir: Path | None = None, workload: str | None = None, track: str | None = None,
          targets_dir: Path | None = None, force: bool = False, highlight: str | None = None,
          rules: int | None = None, campaign=None) -> dict:
    """Write results.json, LEADERBOARD.md and index.html, each atomically, all three rendered from the
    same results before any is written. The default folder is the local board (runs/leaderboard/); the published
    one (leaderboard/) is written only from a store that holds the runs behind its targets, or with force.
    highlight: the entry the page marks as "yours" (never in results.json, never on the published board).
    rules: score under another rules version than the targets' (a preview of a new version; not published).
    campaign: a benchmark.campaign.Campaign whose board this is (score_from_campaign)."""
    out_dir = Path(out_dir or local_board_dir())
    if out_dir.resolve() == LEADERBOARD_DIR.resolve():
        refuse_on_the_published_board(rules, highlight, workload if campaign is not None else None)
    results = (score_from_campaign(campaign, track, rules, workload) if campaign is not None
               else score_from_mlflow(workload, track, targets_dir, rules))
    missing = {w: d["target_runs_missing"] for w, d in results["workloads"].items() if d["target_runs_missing"]}
    if missing and not force and out_dir.resolve() == LEADERBOARD_DIR.resolve():
        raise LeaderboardError(
            "this MLflow store lacks the reference runs that set the published target ("
            + "; ".join(f"{w}: {len(ids)} of {len(results['workloads'][w]['reference_run_ids'])}"
                        for w, ids in missing.items())
            + f"), so a board built from it would replace {LEADERBOARD_DIR} with one that cannot be checked: "
            "build the local board (drop --publish; it goes to runs/leaderboard/), or load the published runs first "
            "(leaderboard/README.md), or pass --force; no leaderboard file was changed")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LeaderboardError(f"cannot write the leaderboard into {out_dir} ({exc.strerror}): pass --out with a "
                               "folder you can write") from None
    published = out_dir.resolve() == LEADERBOARD_DIR.resolve()
    kept_files = {}  # the board in force when this one replaces it, and a campaign's targets, now in force
    if published:  # the published board ships the runs it names
        drop_the_builders_store(results)
        from benchmark.leaderboard.published import RUNS_FOLDER, export_runs

        replaced, kept_files = replaced_board_files(results, out_dir)  # before anything is written
        kept_files.update(targets_in_force_files(results, campaign, out_dir))
        export_runs(results, out_dir)
        results["runs_folder"] = RUNS_FOLDER
        if replaced:
            results["replaced_boards"] = replaced
    files = {**kept_files, out_dir / "results.json": results_json(results),
             out_dir / "LEADERBOARD.md": render_markdown(results),
             out_dir / "index.html": render_html(results, highlight=highlight)}
    readme = out_dir.parent / "README.md"  # the checkout's, beside its published board
    if published and readme.is_file():  # and the README's results, generated from the same results
        files[readme] = with_readme_results(readme.read_text(), results)
    if rules_version(results) == 3 and not published:  # a preview's findings, beside it
        files[out_dir / "FINDINGS.md"] = (
            f"# Findings under scoring rules v3 ({title(results)})\n\n"
            + findings_block(results, read_calibrations(LEADERBOARD_DIR),
                             os.path.relpath(LEADERBOARD_DIR, out_dir.resolve()) + "/"))
    findings = out_dir.parent / "docs" / "findings.md"  # the papers' findings beside the same results
    if published and findings.is_file():
        files[findings] = with_findings(findings.read_text(), results, read_calibrations(out_dir))
    workloads_doc = out_dir.parent / "docs" / "workloads.md"  # the workloads' regime diagnostics, as measured
    if published and workloads_doc.is_file():
        files[workloads_doc] = with_diagnostic_table(workloads_doc.read_text(), read_diagnostics(out_dir))
    for path, text in files.items():
        write_atomic(path, text)
    return results



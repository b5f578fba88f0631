"""The regime diagnostic's verdict from its runs (docs/protocols/regime-diagnostic.md): is a workload limited by
updates, are its steps small enough for 5-9 steps of staleness to stay inside the clip range, and has the
on-policy reference room to learn? Pure functions over run summaries, no MLflow."""

from __future__ import annotations

import math

from benchmark.leaderboard import comparisons
from benchmark.leaderboard.scoring import median
from benchmark.leaderboard.scoring_v3 import compute_to_target

CALIBRATION_SEEDS = (100, 101, 102, 103)  # never scored, never a target's
ARMS = {"A": 1, "B": 2}  # arm -> trainer steps per fresh batch (baselines/on_policy.py, on_policy_repeat.py)
LEVEL_FRACTION = 0.75  # L = start + LEVEL_FRACTION x (best_A - start)
CEILING = 1.0  # arith: every problem has one exact answer
THRESHOLDS = {"gain": 1.25, "gain_lower": 1.0, "clip_s9": 0.05, "best": 0.95, "learned": 0.15}
REPORTED = ("relative_update", "kl_s1", "clip_s1", "kl_s5", "clip_s5", "kl_s9", "clip_s9")


def fresh_data_curve(curve: list[dict], steps_per_batch: int) -> list[dict]:
    """Accuracy against the fresh data trained on (rollouts trained on for the first time), in the shape
    compute_to_target reads."""
    return [{"compute": p["samples_trained"] / steps_per_batch, "accuracy": p["accuracy"]} for p in curve]


def median_curve(curves: list[list[dict]]) -> list[float]:
    """The median accuracy at each scheduled evaluation, over the runs that have it."""
    longest = max(len(c) for c in curves)
    return [median([c[i]["accuracy"] for c in curves if i < len(c)]) for i in range(longest)]


def diagnose(arm_a: list[dict], arm_b: list[dict]) -> dict:
    """The three statistics and whether each holds, from the two arms' run summaries (each with `probe`)."""
    curves_a = [s["eval_curve"] for s in arm_a]
    start = curves_a[0][0]["accuracy"]
    best = max(median_curve(curves_a))
    level = start + LEVEL_FRACTION * (best - start)
    data = {arm: [compute_to_target(fresh_data_curve(s["eval_curve"], ARMS[arm]), level, math.inf) for s in runs]
            for arm, runs in (("A", arm_a), ("B", arm_b))}
    gain = comparisons.compare(data["A"], data["B"])
    update = {"level": level, "fresh_data_to_level": data, "gain": gain["median"], "ci95": gain["ci95"],
              "p_value": gain["p_value"]}
    update["holds"] = bool(gain["median"] >= THRESHOLDS["gain"] and gain["ci95"][0] > THRESHOLDS["gain_lower"])
    probes = [s.get("probe") or {} for s in arm_a]
    reported = {k: _median_of([p.get(k) for p in probes]) for k in REPORTED}
    step = {**reported, "measurements": [p.get("measurements", 0) for p in probes]}
    step["holds"] = reported["clip_s9"] is not None and reported["clip_s9"] <= THRESHOLDS["clip_s9"]
    headroom = {"start": start, "best": best, "ceiling": CEILING, "learned": best - start}
    headroom["holds"] = bool(best <= THRESHOLDS["best"] * CEILING and best - start >= THRESHOLDS["learned"])
    return {"update_limited": update, "step_size": step, "headroom": headroom, "thresholds": dict(THRESHOLDS),
            "passes": update["holds"] and step["holds"] and headroom["holds"]}


def _median_of(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


DIAGNOSTICS = "measurements/regime-diagnostic"  # under the published board's folder: one JSON per workload
TABLE_START = ("<!-- regime diagnostic: written by `replaybench leaderboard build --publish` from "
               "leaderboard/measurements/regime-diagnostic/*.json -->")
TABLE_END = "<!-- end of regime diagnostic -->"


def read_diagnostics(board_dir) -> list[dict]:
    """The published diagnostics (`replaybench diagnose --out`): the workloads', then a search's candidates (version
    "search"), each in the order of their file names."""
    import json
    from pathlib import Path

    found = [json.loads(p.read_text()) for p in sorted((Path(board_dir) / DIAGNOSTICS).glob("*.json"))]
    return sorted(found, key=lambda d: d.get("version") == "search")


def diagnostic_table(diagnostics: list[dict], to_runs: str = "../leaderboard/runs/") -> str:
    """One row per diagnosed workload: the three statistics, each with whether it holds, the verdict, and the
    runs behind them."""
    head = ("| workload | update-limited gain [95%] | clip share at 9 steps | relative update per step | KL at 1 / 5 / "
            "9 steps | best (learned) | in the paper's regime | runs |\n|---|---|---|---|---|---|---|---|")
    rows = []
    for d in diagnostics:
        u, s, h = d["update_limited"], d["step_size"], d["headroom"]
        mark = {True: "yes", False: "no"}
        kl = " / ".join("-" if s[k] is None else f"{s[k]:.2g}" for k in ("kl_s1", "kl_s5", "kl_s9"))
        runs = " ".join(f"[{arm}{i + 1}]({to_runs}{rid}/run.json)" for arm, ids in d["run_ids"].items()
                        for i, rid in enumerate(ids))
        clip = "-" if s["clip_s9"] is None else f"{s['clip_s9']:.3f}"
        update = "-" if s["relative_update"] is None else f"{s['relative_update']:.1e}"
        name = f"{d['workload']} (search candidate)" if d["version"] == "search" else f"{d['workload']} v{d['version']}"
        rows.append(f"| {name} | {u['gain']:.2f} [{u['ci95'][0]:.2f}, {u['ci95'][1]:.2f}] "
                    f"({mark[u['holds']]}) | {clip} ({mark[s['holds']]}) | {update} | {kl} | "
                    f"{h['best']:.3f} (+{h['learned']:.3f}) ({mark[h['holds']]}) | **{mark[d['passes']]}** | {runs} |")
    thresholds = diagnostics[0]["thresholds"] if diagnostics else THRESHOLDS
    return "\n".join([head, *rows, "", f"Thresholds (fixed before any run): gain ≥ {thresholds['gain']} with the "
                      f"interval's lower end > {thresholds['gain_lower']}; clip share at 9 steps ≤ "
                      f"{thresholds['clip_s9']}; best ≤ {thresholds['best']} and learned ≥ {thresholds['learned']}. "
                      "Runs: A = one step per fresh batch, B = two.", ""])


def with_diagnostic_table(doc: str, diagnostics: list[dict]) -> str:
    from benchmark.leaderboard.render import replace_between

    return replace_between(doc, TABLE_START, TABLE_END, diagnostic_table(diagnostics))

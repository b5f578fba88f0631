"""The frozen targets, leaderboard/targets/<workload>.json: each workload's target accuracy and the reference's
compute to reach it, computed once from the reference's runs and never recomputed."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

from benchmark import tracking
from benchmark.leaderboard import LeaderboardError, scoring
from benchmark.leaderboard.compliance import canonical_workload, dedupe_seeds, differing_settings
from benchmark.leaderboard.files import json_values, write_atomic
from benchmark.leaderboard.store import RunRecord, load_runs, reading_store
from benchmark.paths import LEADERBOARD_DIR
from benchmark.tracking import code_version, digest

TARGET_SCHEMA = "replaybench-target/2"  # 2: rules v2, from held-out reference seeds
READABLE_SCHEMAS = ("replaybench-target/1", TARGET_SCHEMA)
TARGETS_DIR = LEADERBOARD_DIR / "targets"
REFERENCE = "on_policy"  # the strategy whose runs set the target, and whose speedup is 1 by construction


def target_path(workload: str, targets_dir: Path | None = None) -> Path:
    return Path(targets_dir or TARGETS_DIR) / f"{workload}.json"


def load_target(workload: str, targets_dir: Path | None = None) -> dict:
    path = target_path(workload, targets_dir)
    if not path.is_file():
        raise LeaderboardError(
            f"no frozen target for workload {workload} ({path} is missing): run "
            f"`replaybench leaderboard freeze-target --workload {workload}` once the reference runs "
            f"({REFERENCE}, >= {scoring.MIN_SEEDS} seeds) are in MLflow")
    try:
        target = json.loads(path.read_text())
    except (ValueError, OSError) as exc:
        raise LeaderboardError(f"{path} cannot be read ({exc}): restore it (`git checkout -- {path}`), or freeze "
                               f"it again with `replaybench leaderboard freeze-target --workload {workload} --force`"
                               ) from None
    if not isinstance(target, dict) or target.get("schema") not in READABLE_SCHEMAS:
        schema = target.get("schema") if isinstance(target, dict) else None
        raise LeaderboardError(f"{path}: unknown schema {schema!r}, expected {TARGET_SCHEMA}")
    return target


def available_targets(targets_dir: Path | None = None) -> list[str]:
    folder = Path(targets_dir or TARGETS_DIR)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def freeze_target(workload, records: list[RunRecord] | None = None, targets_dir: Path | None = None,
                  group: str | None = None, force: bool = False, workload_config: dict | None = None,
                  rules: int = scoring.RULES_VERSION) -> dict:
    """Compute the workload's target from the reference's finished runs and write it, once. workload: a name, the
    path of a workload file, or a loaded Workload (a campaign's, its overrides applied: version and seeds)."""
    from benchmark.workload import load_workload

    w = load_workload(workload) if isinstance(workload, (str, Path)) else workload
    path = target_path(w.name, targets_dir)
    if path.exists() and not force:
        old = json.loads(path.read_text())
        raise LeaderboardError(
            f"{path} is already frozen ({old.get('created')}, from {len(old.get('run_ids', []))} runs); targets are "
            "not recomputed. Pass --force to replace it (this changes every score on the workload)")
    config = workload_config if workload_config is not None else w.to_dict()
    canonical = canonical_workload(config)
    if records is None:
        with reading_store(tracking.tracking_uri()):
            records = load_runs([w.name])
    candidates = [r for r in records if r.workload == w.name and r.strategy == REFERENCE and r.status == "finished"
                  and r.summary is not None and str(r.workload_version) == str(w.version)
                  and not differing_settings(canonical_workload(r.summary["config"]["workload"]), canonical)]
    if group:
        candidates = [r for r in candidates if r.group == group]
    seeds = w.target_seeds or w.seeds
    candidates = [r for r in candidates if r.seed in seeds]
    groups: dict[str, list[RunRecord]] = {}
    for r in candidates:
        groups.setdefault(r.group, []).append(r)
    if not groups:
        raise LeaderboardError(
            f"no finished {REFERENCE} runs of workload {w.name} version {w.version} with the workload's own settings "
            f"(budget {w.budget:,.0f}) on seeds {', '.join(map(str, seeds))} in MLflow: run `replaybench baselines "
            f"--workload {w.name} --strategies {REFERENCE} --seeds {' '.join(map(str, seeds))}` first")
    if len(groups) > 1:
        listing = "; ".join(f"{g} ({len(rs)} runs)" for g, rs in sorted(groups.items()))
        raise LeaderboardError(f"several {REFERENCE} configurations on {w.name}: {listing}; choose one with --group")
    (ref_group, runs), = groups.items()
    runs = dedupe_seeds(runs)[0]
    runs.sort(key=lambda r: r.seed)
    ref = scoring.reference_target([r.summary["eval_curve"] for r in runs], w.budget)
    if math.isinf(ref["reference_compute_to_target"]):  # cannot happen with the lower median; guard anyway
        raise LeaderboardError("the reference's median compute-to-target is inf; add reference seeds")
    target = {
        "schema": TARGET_SCHEMA,
        "workload": w.name,
        "workload_version": str(w.version),
        "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "code_version": code_version(),
        "reference": {"strategy": REFERENCE, "group": ref_group,
                      "workers": runs[0].summary["config"]["workload"]["pipeline"]["workers"],
                      "trainers": runs[0].summary["config"]["workload"]["pipeline"]["trainers"]},
        "budget": float(w.budget),
        "rules_version": rules,
        "target_fraction": scoring.TARGET_FRACTION,
        "target_horizon": scoring.TARGET_HORIZON,
        "target_seeds": list(seeds),
        "median_best_accuracy": ref["median_best_accuracy"],
        "target_accuracy": ref["target_accuracy"],
        "reference_compute_to_target": ref["reference_compute_to_target"],
        "run_ids": [r.run_id for r in runs],
        "per_run": {r.run_id: {"seed": r.seed, "best_accuracy": b, "compute_to_target": json_values(c)}
                    for r, b, c in zip(runs, ref["best_accuracy"], ref["compute_to_target"])},
        "flags": ([f"{len(runs)} reference seeds (< {scoring.MIN_SEEDS})"] if len(runs) < scoring.MIN_SEEDS else []),
        "workload_config_sha256": digest(canonical),
        "workload_config": canonical,
    }
    write_atomic(path, json.dumps(target, indent=2) + "\n")
    return target

"""The leaderboard: reads MLflow (the system of record), scores with benchmark.scoring, prints a ranked
table and writes leaderboard/results.json, leaderboard/LEADERBOARD.md and the page leaderboard/index.html
(benchmark/leaderboard_page.py). Rules: leaderboard/README.md.

    replaybench leaderboard [--workload W] [--track T]      ranked table in the terminal
    replaybench leaderboard build                             write results.json, LEADERBOARD.md, index.html
    replaybench leaderboard serve [--port N]                  serve leaderboard/ on 127.0.0.1
    replaybench leaderboard freeze-target --workload W        freeze W's target from the reference runs
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np

from benchmark import scoring
from benchmark.tracking import REPO_ROOT, TAG, code_version, flatten

SCHEMA = "replaybench-leaderboard/2"  # 2: per-seed curves, replay ratio, off-policiness
TARGET_SCHEMA = "replaybench-target/1"
LEADERBOARD_DIR = REPO_ROOT / "leaderboard"
TARGETS_DIR = LEADERBOARD_DIR / "targets"
REFERENCE = "on_policy"
DEFAULT_TRACK = "main"
ENTRY_FIELDS = ("pipeline.workers", "pipeline.trainers")  # workload fields an entry chooses itself
# How the trainer fits its batch in memory: the same update up to float rounding, so a run may set them
# for its hardware and stay compliant.
MEMORY_FIELDS = ("grpo.micro_batch_size", "grpo.gradient_checkpointing")


class LeaderboardError(Exception):
    """Scoring cannot proceed; the message names the fix."""


# ---- what MLflow holds -----------------------------------------------------------------------
@dataclass
class RunRecord:
    run_id: str
    workload: str
    strategy: str
    group: str
    seed: int | None
    status: str  # the replaybench.status tag
    mlflow_status: str
    track: str
    workload_version: str | None
    start_time: int
    entropy: float | None
    summary: dict | None = None
    problem: str | None = None  # why the summary could not be read


def _tag(run, name, default=None):
    return run.data.tags.get(f"{TAG}{name}", default)


def _search_all(client, experiment_ids: list[str]) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, max_results=5000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _read_summary(client, run) -> dict:
    parsed = urlparse(run.info.artifact_uri)
    if parsed.scheme in ("file", ""):  # local store: read in place rather than copy
        return json.loads((Path(url2pathname(parsed.path)) / "summary.json").read_text())
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory() as tmp:
        return json.loads(Path(client.download_artifacts(run.info.run_id, "summary.json", tmp)).read_text())


def load_runs(workloads: list[str] | None = None, mlflow_client=None) -> list[RunRecord]:
    """Every run of the given workloads (default: every replaybench/* experiment), summaries included."""
    from benchmark.tracking import client as make_client

    c = mlflow_client or make_client()
    exps = [e for e in c.search_experiments() if e.name.startswith("replaybench/")]
    if workloads is not None:
        exps = [e for e in exps if e.name[len("replaybench/"):] in workloads]
    if not exps:
        return []
    records, finished = [], []
    for run in _search_all(c, [e.experiment_id for e in exps]):
        seed = _tag(run, "seed")
        rec = RunRecord(
            run_id=run.info.run_id, workload=_tag(run, "workload", ""), strategy=_tag(run, "strategy", "?"),
            group=_tag(run, "group", ""), seed=int(seed) if seed not in (None, "") else None,
            status=_tag(run, "status", ""), mlflow_status=run.info.status, track=_tag(run, "track", DEFAULT_TRACK),
            workload_version=_tag(run, "workload_version"), start_time=run.info.start_time or 0,
            entropy=run.data.metrics.get("train/entropy"))
        records.append(rec)
        if rec.status == "finished":
            finished.append((rec, run))

    local = all(urlparse(r.info.artifact_uri).scheme in ("file", "") for _, r in finished)
    store_down: list[Exception] = []  # the store stopped answering mid-read: stop and report that instead

    def fetch(item):
        if store_down:
            return
        rec, run = item
        try:
            rec.summary = _read_summary(c, run)
        except Exception as exc:  # a missing or unreadable artifact is reported, not fatal
            if not local:
                try:
                    c.search_experiments(max_results=1)
                except Exception as down:
                    store_down.append(down)
                    return
            rec.problem = f"summary.json unreadable: {type(exc).__name__}: {exc}"

    if local:
        for item in finished:
            fetch(item)
    else:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(fetch, finished))
    if store_down:
        raise store_down[0]
    return records


# MLflow's HTTP client retries a dead server for minutes by default; scoring only reads, so it fails
# fast instead (a user's own settings of these variables win).
FAIL_FAST_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


@contextlib.contextmanager
def reading_store(uri: str):
    """Fail fast on a remote store, and turn a store that cannot be read into a LeaderboardError."""
    import requests
    from mlflow.exceptions import MlflowException

    unset = [k for k in FAIL_FAST_HTTP if k not in os.environ]
    os.environ.update({k: FAIL_FAST_HTTP[k] for k in unset})
    try:
        yield
    except (MlflowException, requests.RequestException, OSError) as exc:
        fix = ("start the tracking server (or point MLFLOW_TRACKING_URI at a reachable one)"
               if urlparse(uri).scheme in ("http", "https") else "check that the store exists and is readable")
        raise LeaderboardError(f"cannot read the MLflow tracking store {uri} ({_root_cause(exc)}): {fix}, then "
                               "run the command again; no leaderboard file was changed") from exc
    finally:
        for k in unset:
            os.environ.pop(k, None)


def _root_cause(exc: BaseException) -> str:
    """The OS-level reason (e.g. "[Errno 111] Connection refused") when there is one, else the first line."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\][^'\")]*|Read timed out|Connection aborted", text)
    return found.group(0).strip() if found else text.splitlines()[0][:200] if text else type(exc).__name__


# ---- targets ------------------------------------------------------------------------------
def canonical_workload(config: dict) -> dict:
    """A run's workload config without the fields an entry chooses (W, T), flattened."""
    flat = {k: v for k, v in flatten(config).items() if k not in ENTRY_FIELDS}
    return json.loads(json.dumps(flat, sort_keys=True, default=str))  # as stored in JSON: tuples -> lists


def differing_settings(run: dict, official: dict) -> list[str]:
    """Keys whose values differ. A key the run lacks is a field added to the workload after the run,
    whose default keeps the old behaviour (the rule for adding fields), so it does not count; a key the
    official config lacks (a field added after the target was frozen) counts unless the run holds its default.
    MEMORY_FIELDS never count."""
    from benchmark.workload import Workload

    defaults = canonical_workload(Workload(name="", task="").to_dict())
    return sorted(k for k in run if k not in MEMORY_FIELDS and run[k] != official.get(k, defaults.get(k)))


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def target_path(workload: str, targets_dir: Path | None = None) -> Path:
    return Path(targets_dir or TARGETS_DIR) / f"{workload}.json"


def load_target(workload: str, targets_dir: Path | None = None) -> dict:
    path = target_path(workload, targets_dir)
    if not path.is_file():
        raise LeaderboardError(
            f"no frozen target for workload {workload} ({path} is missing): run "
            f"`replaybench leaderboard freeze-target --workload {workload}` once the reference runs "
            f"({REFERENCE}, >= {scoring.MIN_SEEDS} seeds) are in MLflow")
    target = json.loads(path.read_text())
    if target.get("schema") != TARGET_SCHEMA:
        raise LeaderboardError(f"{path}: unknown schema {target.get('schema')!r}, expected {TARGET_SCHEMA}")
    return target


def available_targets(targets_dir: Path | None = None) -> list[str]:
    folder = Path(targets_dir or TARGETS_DIR)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def write_atomic(path: Path, text: str) -> None:
    """Write a temp file next to path, then rename: a failure leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; these are published files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def freeze_target(workload: str, records: list[RunRecord] | None = None, targets_dir: Path | None = None,
                  group: str | None = None, force: bool = False, workload_config: dict | None = None) -> dict:
    """Compute the workload's target from the reference's finished runs and write it, once."""
    from benchmark.workload import load_workload

    path = target_path(workload, targets_dir)
    if path.exists() and not force:
        old = json.loads(path.read_text())
        raise LeaderboardError(
            f"{path} is already frozen ({old.get('created')}, from {len(old.get('run_ids', []))} runs); targets are "
            "not recomputed. Pass --force to replace it (this changes every score on the workload)")
    w = load_workload(workload)
    config = workload_config if workload_config is not None else w.to_dict()
    canonical = canonical_workload(config)
    if records is None:
        from benchmark.tracking import tracking_uri

        with reading_store(tracking_uri()):
            records = load_runs([w.name])
    candidates = [r for r in records if r.workload == w.name and r.strategy == REFERENCE and r.status == "finished"
                  and r.summary is not None and str(r.workload_version) == str(w.version)
                  and not differing_settings(canonical_workload(r.summary["config"]["workload"]), canonical)]
    if group:
        candidates = [r for r in candidates if r.group == group]
    groups: dict[str, list[RunRecord]] = {}
    for r in candidates:
        groups.setdefault(r.group, []).append(r)
    if not groups:
        raise LeaderboardError(
            f"no finished {REFERENCE} runs of workload {w.name} version {w.version} with the workload's own settings "
            f"(budget {w.budget:,.0f}) in MLflow: run `replaybench baselines --workload {w.name}` first")
    if len(groups) > 1:
        listing = "; ".join(f"{g} ({len(rs)} runs)" for g, rs in sorted(groups.items()))
        raise LeaderboardError(f"several {REFERENCE} configurations on {w.name}: {listing}; choose one with --group")
    (ref_group, runs), = groups.items()
    runs = _dedupe_seeds(runs)[0]
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
        "target_fraction": scoring.TARGET_FRACTION,
        "median_best_accuracy": ref["median_best_accuracy"],
        "target_accuracy": ref["target_accuracy"],
        "reference_compute_to_target": ref["reference_compute_to_target"],
        "run_ids": [r.run_id for r in runs],
        "per_run": {r.run_id: {"seed": r.seed, "best_accuracy": b, "compute_to_target": _jsonable(c)}
                    for r, b, c in zip(runs, ref["best_accuracy"], ref["compute_to_target"])},
        "flags": ([f"{len(runs)} reference seeds (< {scoring.MIN_SEEDS})"] if len(runs) < scoring.MIN_SEEDS else []),
        "workload_config_sha256": _digest(canonical),
        "workload_config": canonical,
    }
    write_atomic(path, json.dumps(target, indent=2) + "\n")
    return target


# ---- scoring ------------------------------------------------------------------------------
def _jsonable(obj):
    """inf -> "inf" (JSON has no infinity), nan -> null, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
    return obj


def _entry_identity(summary: dict) -> tuple[str, dict]:
    strat = summary["config"]["strategy"]
    pipe = summary["config"]["workload"]["pipeline"]
    ident = {"strategy": strat["name"], "sha256": strat.get("sha256"), "params": strat.get("params", {}),
             "workers": pipe["workers"], "trainers": pipe["trainers"]}
    return f"{strat['name']}@{_digest(ident)[:8]}", ident


def _dedupe_seeds(runs: list[RunRecord]) -> tuple[list[RunRecord], list[tuple[RunRecord, str]]]:
    """The first finished run of each seed counts; later reruns are reported, never silently used."""
    keep: dict[int, RunRecord] = {}
    dropped = []
    for r in sorted(runs, key=lambda r: (r.start_time, r.run_id)):
        if r.seed in keep:
            dropped.append((r, f"duplicate of seed {r.seed}: the first finished run ({keep[r.seed].run_id}) counts"))
        else:
            keep[r.seed] = r
    return list(keep.values()), dropped


def _compliance_problem(rec: RunRecord, target: dict) -> str | None:
    s = rec.summary
    if s.get("mlflow_run_id") not in (None, rec.run_id):
        return f"non-compliant: summary.json names run {s.get('mlflow_run_id')}"
    if str(rec.workload_version) != str(target["workload_version"]):
        return (f"non-compliant: workload version {rec.workload_version}, the target is for version "
                f"{target['workload_version']}")
    try:
        canonical = canonical_workload(s["config"]["workload"])
        s["eval_curve"]
    except (KeyError, TypeError) as exc:
        return f"non-compliant: summary.json lacks {exc}"
    keys = differing_settings(canonical, target["workload_config"])
    if keys:
        shown = ", ".join(f"{k}={canonical.get(k)!r} (official {target['workload_config'].get(k)!r})"
                          for k in keys[:3])
        return f"non-compliant: workload settings differ from the official ones: {shown}" + (
            f" and {len(keys) - 3} more" if len(keys) > 3 else "")
    return None


def _exclusion_reason(rec: RunRecord) -> str | None:
    if rec.status == "finished":
        if rec.summary is None:
            return "incomplete: " + (rec.problem or "summary.json missing")
        return None
    if rec.status.startswith("failed"):
        return rec.status
    if rec.status == "running":
        return (f"incomplete: still running or interrupted (MLflow status {rec.mlflow_status}); "
                "finish it with `replaybench run ... --resume`")
    return f"incomplete: status {rec.status or '(no replaybench.status tag)'}"


def _workload_record(group: str, score: scoring.WorkloadScore, runs: list[RunRecord], budget: float) -> dict:
    """One entry's statistics on one workload, plus what the page plots: each seed's accuracy curve,
    replay ratio and mean off-policiness (from its summary.json) and the curves' median and IQR."""
    out = {"group": group, **{k: v for k, v in dataclasses.asdict(score).items() if k != "boot_capped"}}
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
    return out


def build_results(records: list[RunRecord], targets: dict[str, dict], track: str | None = None,
                  resamples: int = scoring.BOOTSTRAP_RESAMPLES, tracking_uri: str | None = None) -> dict:
    """The whole leaderboard as a JSON-ready dict; every number traces to MLflow run ids."""
    workloads = sorted(targets)
    ref_ids = {rid for t in targets.values() for rid in t["run_ids"]}
    excluded, unscored = [], {}
    by_entry: dict[str, dict] = {}  # key -> {"identity", "runs": {workload: [RunRecord]}}
    failed_groups: dict[tuple, list] = {}

    def exclude(rec, reason):
        excluded.append({"run_id": rec.run_id, "workload": rec.workload, "strategy": rec.strategy,
                         "group": rec.group, "seed": rec.seed, "track": rec.track, "reason": reason})

    for rec in records:
        if track is not None and rec.track != track and rec.run_id not in ref_ids:
            continue
        if rec.workload not in targets:
            unscored[rec.workload] = unscored.get(rec.workload, 0) + 1
            continue
        reason = _exclusion_reason(rec) or _compliance_problem(rec, targets[rec.workload])
        if reason:
            exclude(rec, reason)
            failed_groups.setdefault((rec.strategy, rec.group), []).append(rec)
            continue
        key, ident = _entry_identity(rec.summary)
        entry = by_entry.setdefault(key, {"identity": ident, "runs": {}, "groups": {}})
        entry["runs"].setdefault(rec.workload, []).append(rec)
        entry["groups"][rec.workload] = rec.group

    for entry in by_entry.values():
        for w, runs in entry["runs"].items():
            kept, dropped = _dedupe_seeds(runs)
            entry["runs"][w] = kept
            for rec, reason in dropped:
                exclude(rec, reason)

    ranked, not_ranked = [], []
    for key, entry in sorted(by_entry.items()):
        missing = [w for w in workloads if w not in entry["runs"]]
        if missing:
            not_ranked.append({"key": key, "strategy": entry["identity"]["strategy"],
                               "reason": f"incomplete: no finished compliant run on {', '.join(missing)}",
                               "run_ids": sorted(r.run_id for rs in entry["runs"].values() for r in rs)})
            continue
        per_w = {}
        for w in workloads:
            t = targets[w]
            seeds = [scoring.SeedResult(r.run_id, r.seed if r.seed is not None else r.summary.get("seed"),
                                        r.summary["eval_curve"], r.entropy) for r in entry["runs"][w]]
            per_w[w] = scoring.score_workload(seeds, t["target_accuracy"], t["budget"],
                                              t["reference_compute_to_target"], f"{key}\x1f{w}", resamples)
        ranked.append((key, entry, per_w))

    used_groups = {g for e in by_entry.values() for g in e["groups"].values()}
    for (strategy, group), recs in sorted(failed_groups.items()):
        if group not in used_groups:  # a configuration with no usable run at all
            reasons = sorted({e["reason"] for e in excluded if e["run_id"] in {r.run_id for r in recs}})
            not_ranked.append({"key": f"{strategy}/{group[:8]}", "strategy": strategy,
                               "reason": f"no usable run ({len(recs)} excluded): " + "; ".join(reasons)[:500],
                               "run_ids": sorted(r.run_id for r in recs)})

    scores = [scoring.geometric_mean(pw[w].capped_speedup for w in workloads) for _, _, pw in ranked]
    if ranked:
        logs = np.stack([np.stack([np.log(pw[w].boot_capped) for w in workloads]).mean(axis=0)
                         for _, _, pw in ranked], axis=1)
        boot = np.exp(logs)  # (resamples, entries)
    else:
        boot = np.zeros((resamples, 0))
    profile = scoring.performance_profile_scores(
        {key: {w: pw[w].compute_to_target["median"] for w in workloads} for key, _, pw in ranked}, workloads)
    point, intervals, bands = scoring.rank_with_confidence(scores, boot)

    names = [e["identity"]["strategy"] for _, e, _ in ranked]
    entries = []
    for i, (key, entry, per_w) in enumerate(ranked):
        ident = entry["identity"]
        label = ident["strategy"] if names.count(ident["strategy"]) == 1 else key
        flags = []
        for w in workloads:
            if per_w[w].n_seeds < scoring.MIN_SEEDS:
                flags.append(f"{per_w[w].n_seeds} seeds on {w} (< {scoring.MIN_SEEDS})")
        n_excl = sum(1 for x in excluded if x["group"] in entry["groups"].values())
        if n_excl:
            flags.append(f"{n_excl} run(s) excluded, see below")
        # the frozen runs themselves, or the same reference configuration run again (e.g. on a fresh clone)
        is_ref = any(set(targets[w]["run_ids"]) & set(per_w[w].run_ids) or (
            ident["strategy"] == REFERENCE and (ident["workers"], ident["trainers"]) == (
                targets[w]["reference"]["workers"], targets[w]["reference"]["trainers"])) for w in workloads)
        entries.append({
            "rank": point[i], "rank_interval": list(intervals[i]), "band": bands[i], "key": key, "label": label,
            "strategy": ident["strategy"], "strategy_sha256": ident["sha256"], "params": ident["params"],
            "workers": ident["workers"], "trainers": ident["trainers"], "reference": is_ref,
            "score": {"speedup_geomean": scores[i], "ci95": list(scoring.interval(boot[:, i]))},
            "performance_profile": profile[key], "flags": flags,
            "workloads": {w: _workload_record(entry["groups"][w], per_w[w], entry["runs"][w], targets[w]["budget"])
                          for w in workloads},
        })
    entries.sort(key=lambda e: (e["rank"], -e["performance_profile"], e["label"]))
    excluded.sort(key=lambda e: (e["workload"], e["strategy"], e["group"], e["seed"] if e["seed"] is not None else -1,
                                 e["run_id"]))
    return _jsonable({
        "schema": SCHEMA,
        "generated": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "code_version": code_version(),
        "mlflow": {"tracking_uri": tracking_uri, "experiments": [f"replaybench/{w}" for w in workloads]},
        "track": track,
        "rules": {"reference": REFERENCE, "target_fraction": scoring.TARGET_FRACTION, "min_seeds": scoring.MIN_SEEDS,
                  "tau_max": scoring.TAU_MAX, "bootstrap_resamples": resamples,
                  "bootstrap_seed": scoring.BOOTSTRAP_SEED, "interval": scoring.INTERVAL,
                  "never_reached_cap": "budget + 1", "compute_to_target_median": "lower median",
                  "readme": "leaderboard/README.md"},
        "workloads": {w: {"version": t["workload_version"], "budget": t["budget"],
                          "target_accuracy": t["target_accuracy"],
                          "reference_compute_to_target": t["reference_compute_to_target"],
                          "reference_run_ids": t["run_ids"], "target_created": t["created"],
                          "target_file": f"leaderboard/targets/{w}.json"} for w, t in targets.items()},
        "entries": entries,
        "not_ranked": not_ranked,
        "excluded_runs": excluded,
        "unscored_workloads": {w: {"runs": n, "fix": f"replaybench leaderboard freeze-target --workload {w}"}
                               for w, n in sorted(unscored.items())},
    })


# ---- rendering (the terminal table and the markdown come from the same rows) --------------
def _num(x, fmt="{:.3f}"):
    if x is None:
        return "-"
    if x == "inf" or (isinstance(x, float) and math.isinf(x)):
        return "∞"
    return fmt.format(x)


def _compute(x):
    if x is None:
        return "-"
    if x == "inf":
        return "∞"
    return f"{x / 1e6:.2f}M" if abs(x) >= 1e6 else f"{x / 1e3:.0f}k" if abs(x) >= 1e3 else f"{x:.0f}"


def table_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    workloads = sorted(results["workloads"])
    one = workloads[0] if len(workloads) == 1 else None
    header = ["band", "rank [95%]", "entry", "(W,T)", "seeds", "speedup (geo-mean) [95% CI]", "perf. profile"]
    if one:
        header += ["compute-to-target (median [IQR])", "best acc (median ± IQR)", "AUC", "pass@k at best",
                   "entropy"]
    else:
        header += [f"speedup {w}" for w in workloads]
    header.append("flags")
    rows = []
    for e in results["entries"]:
        lo, hi = e["rank_interval"]
        s = e["score"]
        name = e["label"] + (" (reference)" if e["reference"] else "")
        row = [str(e["band"]), f"{e['rank']} [{lo}–{hi}]", name, f"({e['workers']},{e['trainers']})",
               "/".join(str(e["workloads"][w]["n_seeds"]) for w in workloads),
               f"{_num(s['speedup_geomean'])} [{_num(s['ci95'][0])}, {_num(s['ci95'][1])}]",
               _num(e["performance_profile"])]
        if one:
            d = e["workloads"][one]
            c = d["compute_to_target"]
            pk = ", ".join(f"{k.rsplit('_', 1)[1]}: {v:.3f}" for k, v in d["pass_at_k_at_best"].items())
            row += [f"{_compute(c['median'])} [{_compute(c['q1'])}, {_compute(c['q3'])}]",
                    f"{_num(d['best_accuracy']['median'])} ± {_num(d['best_accuracy']['iqr'])}",
                    _num(d["auc"]["median"]), pk or "-", _num(d["final_entropy"])]
        else:
            row += [_num(e["workloads"][w]["speedup"]["median"]) for w in workloads]
        row.append("; ".join(e["flags"]))
        rows.append(row)
    return header, rows


def _title(results: dict) -> str:
    ws = ", ".join(f"{w} v{d['version']} (target acc {d['target_accuracy']:.3f})"
                   for w, d in sorted(results["workloads"].items()))
    track = f", track {results['track']}" if results["track"] else ""
    return f"ReplayBench leaderboard: {ws}{track}"


def print_leaderboard(results: dict, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    # a wide table: never squeeze it into an 80-column pipe (lines may wrap in a narrow terminal instead)
    console = console or Console(width=max(Console().width, 170))
    header, rows = table_rows(results)
    table = Table(title=_title(results),
                  caption="speedup = reference compute-to-target / entry's (median over seeds); ranked by it; "
                          "entries in one band are not separable at 95%")
    for col in header:
        table.add_column(col, justify="left" if col in ("entry", "flags") else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if results["not_ranked"]:
        t = Table(title="not ranked")
        for col in ("entry", "reason", "runs"):
            t.add_column(col)
        for n in results["not_ranked"]:
            t.add_row(n["key"], n["reason"], str(len(n["run_ids"])))
        console.print(t)
    if results["excluded_runs"]:
        t = Table(title="excluded runs")
        for col in ("workload", "strategy", "seed", "run id", "reason"):
            t.add_column(col)
        for x in results["excluded_runs"]:
            t.add_row(x["workload"], x["strategy"], str(x["seed"]), x["run_id"], x["reason"])
        console.print(t)
    for w, info in results["unscored_workloads"].items():
        console.print(f"[yellow]workload {w}: {info['runs']} runs not scored (no target); run `{info['fix']}`[/]")


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(results: dict) -> str:
    header, rows = table_rows(results)
    out = [f"# {_title(results)}", "",
           f"Generated {results['generated']} from MLflow (code {results['code_version']}) by "
           "`replaybench leaderboard build`; every number is in `results.json` with the MLflow run ids it comes "
           "from. Rules: [README.md](README.md).", "",
           "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    out += ["", "## Not ranked", ""]
    if results["not_ranked"]:
        out += ["| entry | reason | runs |", "|---|---|---|"]
        out += [f"| {_md_cell(n['key'])} | {_md_cell(n['reason'])} | {len(n['run_ids'])} |"
                for n in results["not_ranked"]]
    else:
        out.append("None.")
    out += ["", "## Excluded runs", ""]
    if results["excluded_runs"]:
        out += ["| workload | strategy | seed | MLflow run | reason |", "|---|---|---|---|---|"]
        out += [f"| {x['workload']} | {_md_cell(x['strategy'])} | {x['seed']} | `{x['run_id']}` | "
                f"{_md_cell(x['reason'])} |" for x in results["excluded_runs"]]
    else:
        out.append("None.")
    if results["unscored_workloads"]:
        out += ["", "## Workloads without a target", ""]
        out += [f"- {w}: {i['runs']} runs; `{i['fix']}`" for w, i in results["unscored_workloads"].items()]
    return "\n".join(out) + "\n"


# ---- entry points -----------------------------------------------------------------------
def score_from_mlflow(workload: str | None = None, track: str | None = None,
                      targets_dir: Path | None = None) -> dict:
    from benchmark.tracking import tracking_uri

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
    uri = tracking_uri()
    with reading_store(uri):
        records = load_runs(None if not workload else [workload])
    return build_results(records, targets, track=track, tracking_uri=uri)


def results_json(results: dict) -> str:
    """results.json's text: indented, but each list of plain values (a curve, run ids) on one line."""
    text = json.dumps(results, indent=2, allow_nan=False)
    # JSON strings hold no raw newline, so only the layout between a flat list's items is rewritten
    return re.sub(r"\[\n\s+([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]",
                  text) + "\n"


def build(out_dir: Path | None = None, workload: str | None = None, track: str | None = None,
          targets_dir: Path | None = None) -> dict:
    """Write results.json, LEADERBOARD.md and index.html, each atomically, all three rendered from the
    same results before any is written."""
    from benchmark.leaderboard_page import render_html

    out_dir = Path(out_dir or LEADERBOARD_DIR)
    results = score_from_mlflow(workload, track, targets_dir)
    files = {"results.json": results_json(results),
             "LEADERBOARD.md": render_markdown(results),
             "index.html": render_html(results)}
    for name, text in files.items():
        write_atomic(out_dir / name, text)
    return results


def run_cli(args) -> int:
    """Handler of `replaybench leaderboard ...` (see benchmark/cli.py)."""
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True)
    action = getattr(args, "leaderboard_command", None)
    targets_dir = getattr(args, "targets", None)
    try:
        if action == "freeze-target":
            t = freeze_target(args.workload, targets_dir=targets_dir, group=args.group, force=args.force)
            err.print(f"froze {target_path(args.workload, targets_dir)}: target accuracy {t['target_accuracy']:.4f} "
                      f"(= {t['target_fraction']} x median best {t['median_best_accuracy']:.4f} of {len(t['run_ids'])} "
                      f"{REFERENCE} runs), reference compute-to-target {t['reference_compute_to_target']:,.0f}"
                      + (f"; [yellow]{'; '.join(t['flags'])}[/]" if t["flags"] else ""))
            return 0
        if action == "build":
            out = Path(args.out) if getattr(args, "out", None) else LEADERBOARD_DIR
            results = build(out, args.workload, args.track, targets_dir)
            print_leaderboard(results)
            err.print(f"wrote {out / 'results.json'}, {out / 'LEADERBOARD.md'} and {out / 'index.html'} "
                      "(open it, or `replaybench leaderboard serve`)")
            return 0
        if action == "serve":
            from benchmark.leaderboard_page import serve

            return serve(Path(args.dir) if args.dir else LEADERBOARD_DIR, args.port)
        print_leaderboard(score_from_mlflow(args.workload, args.track, targets_dir))
        return 0
    except LeaderboardError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 2


def add_arguments(parser) -> None:
    """The `leaderboard` subcommand's options and its build / freeze-target subcommands."""
    import argparse

    parser.add_argument("--workload", help="score this workload only (default: every workload with a target)")
    parser.add_argument("--track", help="only runs tagged replaybench.track=TRACK (untagged runs are 'main')")
    parser.add_argument("--targets", type=Path, help=argparse.SUPPRESS)  # tests: another targets folder
    sub = parser.add_subparsers(dest="leaderboard_command")
    p = sub.add_parser("build", help="write leaderboard/results.json, LEADERBOARD.md and index.html")
    p.add_argument("--workload", default=argparse.SUPPRESS)
    p.add_argument("--track", default=argparse.SUPPRESS)
    p.add_argument("--targets", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="output folder (default: leaderboard/)")
    p = sub.add_parser("serve", help="serve the leaderboard page on http://127.0.0.1:PORT (Ctrl-C stops)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--dir", type=Path, help="folder to serve (default: leaderboard/)")
    p = sub.add_parser("freeze-target", help="freeze a workload's target accuracy from its reference runs (once)")
    p.add_argument("--workload", required=True)
    p.add_argument("--group", help="the reference configuration (replaybench.group) when there are several")
    p.add_argument("--force", action="store_true", help="replace an existing target (changes every score)")
    p.add_argument("--targets", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)

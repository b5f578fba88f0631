"""How long the leaderboard takes on a large MLflow store.

    python benchmarks/leaderboard_scale.py [--runs 10000] [--seeds 4] [--resamples 2000] [--keep DIR]

Builds a throw-away MLflow store (SQLite + local artifacts, like runs/) with synthetic finished
runs of arith-tiny (summary.json with a 21-point evaluation curve, the runner's tags, a
train/entropy metric; 1% of the runs failed), freezes the target from the on_policy runs, then
times each stage of `replaybench leaderboard build`: reading MLflow (search + summaries), the
scoring itself (benchmark.leaderboard.build.build_results: per-seed statistics, bootstrap, ranks), and
rendering the table, the markdown, the JSON and the page. Creating the store is timed too but is not what is
measured (the target is scoring <= 5 s at 10,000 runs). By default the store is filled by copying
one MlflowClient-made run's rows straight into SQLite (seconds for 10,000 runs); --api makes every
run through MlflowClient instead (about 50 ms a run on two busy cores).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np

WORKLOAD = "arith-tiny"


def synthetic_runs(n_runs: int, seeds: int, rng: np.random.Generator):
    """(tags, summary without its run id, entropy, failed) per run; entry 0 is the on_policy reference."""
    from benchmark.workload import load_workload

    base = {}
    for e in range(max(2, n_runs // seeds)):
        strategy = "on_policy" if e == 0 else f"synthetic_{e:05d}"
        wt = (6, 2) if e == 0 else (5, 3)
        if wt not in base:
            base[wt] = load_workload(WORKLOAD, {"pipeline.workers": wt[0], "pipeline.trainers": wt[1]})
        w = base[wt]
        points = np.arange(0, w.budget + 1, w.eval.every)
        rate = 1.0 if e == 0 else float(rng.lognormal(0.0, 0.5))  # entry quality
        group = f"g{e:015d}"
        # the reference also runs the workload's held-out target seeds, from which the target is frozen
        for seed in [*range(seeds), *(w.target_seeds if e == 0 else [])]:
            failed = e > 0 and rng.random() < 0.01
            tags = {"replaybench.workload": WORKLOAD, "replaybench.workload_version": w.version,
                    "replaybench.strategy": strategy, "replaybench.group": group, "replaybench.seed": str(seed),
                    "replaybench.status": "failed: StrategyError: synthetic failure" if failed else "finished"}
            x = points / w.budget
            # the reference reaches its target at ~40% of the budget
            acc = 0.1 + 0.5 * (1 - np.exp(-10 * rate * x)) + rng.normal(0, 0.01, len(x))
            curve = [{"compute": float(p), "trainer_step": int(i * 40), "accuracy": float(a), "pass_at_1": float(a),
                      "pass_at_4": float(min(1.0, a + 0.15))} for i, (p, a) in enumerate(zip(points, acc))]
            best = max(curve, key=lambda p: (p["accuracy"], -p["compute"]))
            summary = {"final": curve[-1], "best": best, "eval_curve": curve, "budget": w.budget,
                       "replay_ratio": 1.0, "offpolicy_mean": 0.5, "strategy": strategy, "seed": seed,
                       "group": group, "workload": WORKLOAD,
                       "config": {"workload": w.to_dict(), "strategy": {"name": strategy, "path": f"{strategy}.py",
                                                                        "sha256": f"sha-{e}", "params": {}},
                                  "seed": seed}}
            yield tags, summary, float(rng.uniform(0.5, 2.0)), failed


def create_store(n_runs: int, seeds: int, rng: np.random.Generator, api: bool = False) -> dict:
    """api: every run through MlflowClient (~50 ms a run on 2 busy cores); default: one template run
    through MlflowClient, the rest as copies of its rows written straight into the SQLite store."""
    import sqlite3
    import uuid

    from mlflow.entities import Metric

    from benchmark.tracking import client, experiment_id, tracking_uri

    c = client()
    exp = experiment_id(c, WORKLOAD)
    counts = {"entries": max(2, n_runs // seeds), "finished": 0, "failed": 0}
    template = c.create_run(exp, run_name="template", tags={"replaybench.status": "template"})
    c.set_terminated(template.info.run_id)
    art_root = Path(url2pathname(urlparse(template.info.artifact_uri).path)).parent.parent
    db = sqlite3.connect(tracking_uri()[len("sqlite:///"):])
    cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    row = dict(zip(cols, db.execute("SELECT * FROM runs WHERE run_uuid = ?", (template.info.run_id,)).fetchone()))
    db.execute("DELETE FROM tags WHERE run_uuid = ?", (template.info.run_id,))
    db.execute("DELETE FROM runs WHERE run_uuid = ?", (template.info.run_id,))
    runs, tags, metrics = [], [], []
    now = int(time.time() * 1000)
    for i, (run_tags, summary, entropy, failed) in enumerate(synthetic_runs(n_runs, seeds, rng)):
        counts["failed" if failed else "finished"] += 1
        if api:
            run = c.create_run(exp, run_name=f"{summary['strategy']}-seed{summary['seed']}", tags=run_tags)
            rid, folder = run.info.run_id, Path(url2pathname(urlparse(run.info.artifact_uri).path))
            if not failed:
                c.log_batch(rid, metrics=[Metric("train/entropy", entropy, now, 100)])
            c.set_terminated(rid, status="FAILED" if failed else "FINISHED")
        else:
            rid = uuid.uuid4().hex
            folder = art_root / rid / "artifacts"
            runs.append({**row, "run_uuid": rid, "name": f"{summary['strategy']}-seed{summary['seed']}",
                         "status": "FAILED" if failed else "FINISHED", "start_time": now + i, "end_time": now + i,
                         "artifact_uri": folder.as_uri()})
            tags += [(k, v, rid) for k, v in {**run_tags, "mlflow.runName": runs[-1]["name"]}.items()]
            if not failed:
                metrics.append(("train/entropy", entropy, now, 100, 0, rid))
        if not failed:  # local artifact store: summary.json where log_artifact puts it
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "summary.json").write_text(json.dumps({**summary, "mlflow_run_id": rid}))
    if runs:
        db.executemany(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                       [tuple(r[k] for k in cols) for r in runs])
        db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", tags)
        db.executemany("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                       "VALUES (?, ?, ?, ?, ?, ?)", metrics)
        db.executemany("INSERT INTO metrics (key, value, timestamp, step, is_nan, run_uuid) VALUES (?, ?, ?, ?, ?, ?)",
                       metrics)
    db.commit()
    db.close()
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--keep", help="build (or reuse) the store in this folder and keep it")
    parser.add_argument("--api", action="store_true", help="create every run through MlflowClient (slow)")
    args = parser.parse_args()

    tmp = args.keep or tempfile.mkdtemp(prefix="replaybench-lbscale-")
    os.environ["REPLAYBENCH_RUNS_DIR"] = tmp
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlflow.db"
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from benchmark.leaderboard.build import build_results, results_json
    from benchmark.leaderboard.page import render_html
    from benchmark.leaderboard.render import print_leaderboard, render_markdown
    from benchmark.leaderboard.store import load_runs
    from benchmark.leaderboard.targets import freeze_target, load_target

    rows = []
    try:
        reuse = args.keep and (Path(tmp) / "mlflow.db").exists()
        t = time.perf_counter()
        made = {"entries": "reused", "finished": "-", "failed": "-"} if reuse else \
            create_store(args.runs, args.seeds, np.random.default_rng(0), args.api)
        rows.append(("create store (not scored)", time.perf_counter() - t, f"{made}"))

        t = time.perf_counter()
        records = load_runs([WORKLOAD])
        rows.append(("read MLflow: search + summary.json", time.perf_counter() - t, f"{len(records)} runs"))

        targets_dir = Path(tmp) / "targets"
        t = time.perf_counter()
        freeze_target(WORKLOAD, records, targets_dir, force=True)
        rows.append(("freeze-target", time.perf_counter() - t, ""))
        targets = {WORKLOAD: load_target(WORKLOAD, targets_dir)}

        t = time.perf_counter()
        results = build_results(records, targets, resamples=args.resamples)
        scoring_s = time.perf_counter() - t
        rows.append(("scoring (build_results)", scoring_s,
                     f"{len(results['entries'])} ranked, {len(results['not_ranked'])} not ranked, "
                     f"{len(results['excluded_runs'])} excluded; {args.resamples} resamples"))

        t = time.perf_counter()
        from rich.console import Console

        print_leaderboard(results, Console(file=io.StringIO(), width=250))
        rows.append(("rich table", time.perf_counter() - t, ""))
        t = time.perf_counter()
        md = render_markdown(results)
        payload = results_json(results)
        sizes = f"{len(md) / 1e6:.1f} MB + {len(payload) / 1e6:.1f} MB"
        rows.append(("markdown + JSON", time.perf_counter() - t, sizes))

        t = time.perf_counter()
        page = render_html(results)
        rows.append(("index.html (plots of the first entries, every run listed)", time.perf_counter() - t,
                     f"{len(page) / 1e6:.1f} MB"))
        ref = next(e for e in results["entries"] if e["reference"])
        # scored on seeds apart from the target's: close to 1, not 1 by construction
        assert ref["score"]["reached"] and 0.5 < ref["workloads"][WORKLOAD]["speedup"]["median"] < 2
        assert results["entries"][0]["score"]["reached"]
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"leaderboard at scale: {args.runs} runs requested, {args.seeds} seeds per entry, {os.cpu_count()} CPUs")
    print("stage | seconds | notes")
    print("--- | --- | ---")
    for name, sec, note in rows:
        print(f"{name} | {sec:.2f} | {note}")
    print(f"scoring target <= 5 s: {'met' if scoring_s <= 5 else 'MISSED'} ({scoring_s:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

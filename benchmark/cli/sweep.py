"""`replaybench sweep`: baselines x (W, T) splits x buffer sizes x seeds on one workload, in parallel and
resumable (a run already finished in MLflow is not run again), then the paper's figure-1 summary: the compute
each configuration saves against the on-policy reference to reach several accuracy levels."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from benchmark.cli.options import console
from benchmark.cli.runs import add_jobs_option, jobs_of, positive_int, run_all, track_tags
from benchmark.leaderboard.files import json_values, write_atomic
from benchmark.leaderboard.scoring import median
from benchmark.leaderboard.store import finished_runs
from benchmark.leaderboard.sweep import LEVELS, compute_saved, format_saved
from benchmark.leaderboard.targets import REFERENCE
from benchmark.submission import load_baselines
from benchmark.workload import WorkloadError, split_overrides

if TYPE_CHECKING:  # the engine (torch) loads when a run starts, not when the command line is parsed
    from benchmark.runner import RunSpec


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="baselines x (W,T) x buffer sizes x seeds, resumable, then the "
                                            "compute each saves against the on-policy reference")
    p.add_argument("--workload", default="arith-tiny", help="workload name or path of a workload .yaml")
    p.add_argument("--strategies", nargs="+", default=["fifo_uniform"],
                   help=f"baseline names from baselines/baselines.yaml (default: fifo_uniform); the reference "
                        f"{REFERENCE} always runs, at its own split")
    p.add_argument("--splits", nargs="+", type=split_pair, metavar="W,T",
                   help="(W, T) splits, e.g. 6,2 5,3 4,4 3,5 2,6 (default: each baseline's own)")
    p.add_argument("--buffer-sizes", nargs="+", type=positive_int, metavar="N",
                   help="buffer sizes N of the strategies that take one (default: each baseline's own)")
    p.add_argument("--seeds", type=int, nargs="+", help="default: the workload's seeds")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a workload field for every run of the sweep, the reference's too (grpo.lr=5e-5)")
    p.add_argument("--levels", nargs="+", type=float, default=list(LEVELS), metavar="F",
                   help="accuracy levels, as fractions of the reference's best accuracy (default: 0.8 0.9 0.95 0.98)")
    p.add_argument("--summary-only", action="store_true", help="run nothing: summarise the finished runs")
    p.add_argument("--out", type=Path, help="also write the summary (with every MLflow run id) to this JSON file")
    add_jobs_option(p)
    p.set_defaults(func=cmd_sweep, executor="sim")


def split_pair(text: str) -> tuple[int, int]:
    import argparse

    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"a split is W,T with whole numbers >= 1, e.g. 5,3; not {text!r}")
    return int(parts[0]), int(parts[1])


@dataclasses.dataclass
class Config:
    strategy: str
    workers: int
    trainers: int
    buffer_size: int | None
    specs: list[RunSpec]

    @property
    def label(self) -> str:
        n = "" if self.buffer_size is None else f" N={self.buffer_size}"
        return f"{self.strategy} ({self.workers},{self.trainers}){n}"


def plan(args) -> list[Config]:
    """Every configuration of the sweep, the reference first, each with a run spec per seed; every config is
    checked before anything runs."""
    from benchmark.runner import RunSpec

    baselines = load_baselines()
    unknown = [n for n in args.strategies if n not in baselines.entries]
    if unknown:
        raise WorkloadError(f"unknown baseline(s) {', '.join(unknown)}; known: {', '.join(baselines.entries)}")
    overrides, params = split_overrides(args.set or [])
    if args.buffer_sizes and "buffer_size" in params:
        raise WorkloadError("give buffer sizes with --buffer-sizes or --set buffer_size=N, not both")
    wanted = [(REFERENCE, None, None)]
    for name in args.strategies:
        entry = baselines.entries[name]
        sizes = (args.buffer_sizes or [entry.buffer_size]) if entry.buffer_size is not None else [None]
        wanted += [(name, split, n) for split in (args.splits or [None]) for n in sizes]
    configs, seen = [], set()
    for name, split, n in wanted:
        entry = baselines.entries[name]
        w, t = split or (entry.workers, entry.trainers)
        entry = dataclasses.replace(entry, workers=w, trainers=t, buffer_size=n or entry.buffer_size)
        if (name, w, t, entry.buffer_size) in seen:
            continue
        seen.add((name, w, t, entry.buffer_size))
        workload = entry.workload_for(args.workload, None, overrides)
        seeds = args.seeds if args.seeds is not None else workload.seeds
        specs = [RunSpec(workload, entry.strategy, {**entry.strategy_params(), **params}, s, name=name,
                         tags=track_tags(entry.track))
                 for s in seeds]
        configs.append(Config(name, w, t, entry.buffer_size, specs))
    return configs


def finished_by_group(workload_name: str) -> dict[tuple[str, int], dict]:
    """(group, seed) -> the first finished run's summary (with its run id), from MLflow."""
    done = {}
    for r in finished_runs(workload_name):
        done.setdefault((r.group, r.seed), {**r.summary, "mlflow_run_id": r.run_id})
    return done


def cmd_sweep(args) -> int:
    configs = plan(args)
    workload = configs[0].specs[0].workload
    done = finished_by_group(workload.name)
    todo = [(spec, f"{c.label} seed {spec.seed}") for c in configs for spec in c.specs
            if (spec.group_key(), spec.seed) not in done]
    total = sum(len(c.specs) for c in configs)
    console.print(f"sweep on {workload.name}: {len(configs)} configurations, {total} runs, "
                  f"{total - len(todo)} already finished in MLflow, {len(todo)} to run")
    failures = 0
    if todo and not args.summary_only:
        failures = sum(isinstance(o, Exception) for o in run_all(todo, jobs_of(args)))
        done = finished_by_group(workload.name)
    summary = summarise(configs, done, args.levels)
    print_summary(summary, workload.name)
    if args.out:
        write_atomic(args.out, json.dumps(json_values(summary), indent=1) + "\n")
        console.print(f"wrote {args.out}")
    return 1 if failures else 0


def summarise(configs: list[Config], done: dict, levels) -> dict:
    reference = configs[0]
    seeds = [s.seed for s in reference.specs]
    budget = reference.specs[0].workload.budget

    def runs_of(c: Config) -> dict[int, dict]:
        return {s.seed: done[(s.group_key(), s.seed)] for s in c.specs if (s.group_key(), s.seed) in done}

    ref_runs = runs_of(reference)
    rows = []
    for c in configs:
        runs = runs_of(c)
        row = {"config": c.label, "strategy": c.strategy, "workers": c.workers, "trainers": c.trainers,
               "buffer_size": c.buffer_size, "group": c.specs[0].group_key(),
               "run_ids": {s: r["mlflow_run_id"] for s, r in sorted(runs.items())},
               "replay_ratio": _median([r["replay_ratio"] for r in runs.values()]),
               "offpolicy_mean": _median([r["offpolicy_mean"] for r in runs.values()])}
        if ref_runs and runs:
            row.update(compute_saved({s: r["eval_curve"] for s, r in ref_runs.items()},
                                     {s: r["eval_curve"] for s, r in runs.items()}, seeds, budget, levels))
        rows.append(row)
    return {"workload": reference.specs[0].workload.name, "budget": budget, "seeds": seeds,
            "batch_size": reference.specs[0].workload.grpo.batch_size, "levels": list(levels),
            "reference": reference.label, "configs": rows}


def _median(values):
    return median(values) if values else None


def print_summary(summary: dict, workload_name: str) -> None:
    rows = summary["configs"]
    first = next((r for r in rows if "levels" in r), None)
    table = Table(title=f"{workload_name}: compute saved against {summary['reference']} to reach each accuracy "
                        f"(median over seeds {', '.join(map(str, summary['seeds']))} [95% paired bootstrap])")
    for col in ("configuration", "seeds", "N/B", "replay ratio", "best acc [IQR]"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for level in (first or {}).get("levels", []):
        table.add_column(f"saved at {level['accuracy']:.3f}", justify="right")
    for r in rows:
        best = r.get("best_accuracy")
        cells = [r["config"], f"{len(r['run_ids'])}/{len(summary['seeds'])}",
                 "-" if r["buffer_size"] is None else f"{r['buffer_size'] / summary['batch_size']:.1f}",
                 "-" if r["replay_ratio"] is None else f"{r['replay_ratio']:.2f}",
                 "-" if not best else f"{best['median']:.3f} [{best['q1']:.3f}, {best['q3']:.3f}]"]
        cells += [format_saved(level) for level in r.get("levels", [])] or (
            ["-"] * len((first or {}).get("levels", [])))
        table.add_row(*cells)
    from rich.console import Console

    Console(width=max(Console().width, 160)).print(table)  # the command's output: stdout, never squeezed

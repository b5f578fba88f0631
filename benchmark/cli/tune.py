"""`replaybench tune`: the same tuning budget for every entry (leaderboard/README.md, "Tuning"). On a workload with
`tuning.trials` > 0, each named entry, the reference included, runs at most that many points of the search space
it declares (`tuning:` in its submission.yaml or baselines.yaml entry), each on the workload's tuning seeds,
resumable (a run already finished in MLflow is not run again); then the rule picks each entry's trial."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from benchmark.cli.options import console
from benchmark.cli.runs import add_jobs_option, jobs_of, run_all, track_tags
from benchmark.cli.sweep import finished_by_group
from benchmark.errors import UserError
from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.files import json_values, write_atomic
from benchmark.leaderboard.targets import REFERENCE, load_target
from benchmark.leaderboard.tuning import pick, trial_statistics
from benchmark.submission import load_baselines, load_submission, submission_folder


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("tune", help="the same tuning budget for every entry: each one's trials on the "
                                           "workload's tuning seeds, resumable, then each one's pick")
    p.add_argument("--workload", required=True, help="a workload with tuning (tuning.trials > 0)")
    p.add_argument("--entries", nargs="+", default=[REFERENCE], metavar="NAME_OR_FOLDER",
                   help="baseline names (baselines/baselines.yaml) or submission folders")
    p.add_argument("--summary-only", action="store_true", help="run nothing: pick from the finished runs")
    p.add_argument("--out", type=Path, help="also write every trial and pick (with their MLflow run ids) here")
    add_jobs_option(p)
    p.set_defaults(func=cmd_tune, executor="sim")


def entry_of(name_or_folder: str):
    """A baseline by name, or a submission by folder; its runs are isolated when it is a submission."""
    baselines = load_baselines().entries
    if name_or_folder in baselines:
        return baselines[name_or_folder], False
    folder = submission_folder(name_or_folder)
    if folder is not None:
        return load_submission(folder), True
    raise UserError(f"{name_or_folder} is neither a baseline ({', '.join(baselines)}) nor a submission folder")


def trial_specs(entry, isolated: bool, workload_name: str, overrides: dict | None = None) -> list[tuple]:
    """Per trial, the entry at it and a run spec per tuning seed (overrides: workload settings, e.g. a campaign's)."""
    from benchmark.runner import RunSpec

    trials = entry.tuning_trials(entry.workload_for(workload_name, overrides=overrides).tuning.trials)
    specs = []
    for trial in trials:
        workload = trial.workload_for(workload_name, overrides=overrides)
        specs.append((trial, [RunSpec(workload, trial.strategy, trial.strategy_params(), seed, isolated=isolated,
                                      name=entry.name, tags=track_tags(entry.track))
                              for seed in workload.tuning.seeds]))
    return specs


def cmd_tune(args) -> int:
    entries = [(name, *entry_of(name)) for name in args.entries]
    workload = entries[0][1].workload_for(args.workload)
    if workload.tuning.trials < 1 or not workload.tuning.seeds:
        raise UserError(f"{workload.name} declares no tuning (tuning.trials and tuning.seeds): its entries are "
                        "scored at their own settings (reference-tuned)")
    plans = {name: (entry, trial_specs(entry, isolated, args.workload)) for name, entry, isolated in entries}
    done = finished_by_group(workload.name)
    specs = [(s, f"{name} trial {i + 1} seed {s.seed}") for name, (_, trials) in plans.items()
             for i, (_, trial) in enumerate(trials) for s in trial]
    todo = [(s, label) for s, label in specs if (s.group_key(), s.seed) not in done]
    console.print(f"tuning on {workload.name}: {len(plans)} entries, at most {workload.tuning.trials} trials each on "
                  f"seeds {', '.join(map(str, workload.tuning.seeds))}: {len(specs)} runs, {len(todo)} to run")
    failures = 0
    if todo and not args.summary_only:
        failures = sum(isinstance(o, Exception) for o in run_all(todo, jobs_of(args)))
        done = finished_by_group(workload.name)
    try:
        target = load_target(workload.name)["target_accuracy"]
    except LeaderboardError:
        target = None  # the reference's pick comes first; the target is frozen from it
    picks = {name: picked(entry, trials, done, workload.budget, target) for name, (entry, trials) in plans.items()}
    print_picks(picks, workload.name)
    if args.out:
        write_atomic(args.out, json.dumps(json_values({"workload": workload.name, "target": target,
                                                       "entries": picks}), indent=1) + "\n")
        console.print(f"wrote {args.out}")
    return 1 if failures else 0


def picked(entry, trials: list[tuple], done: dict, budget: float, target: float | None) -> dict:
    """Each trial's settings, run ids and statistics, and the pick (None until every run is in, or, for an entry
    other than the reference, until the target is frozen)."""
    keys = list(entry.tuning)
    rows = []
    for point, specs in trials:
        runs = [done[(s.group_key(), s.seed)] for s in specs if (s.group_key(), s.seed) in done]
        row = {"settings": {k: _setting(point, k) for k in keys}, "group": specs[0].group_key(),
               "run_ids": [r["mlflow_run_id"] for r in runs]}
        if len(runs) == len(specs):
            row.update(trial_statistics(runs, budget, None if entry.name == REFERENCE else target))
        rows.append(row)
    ready = all("final_accuracy" in r for r in rows) and (entry.name == REFERENCE or target is not None)
    return {"trials": rows, "picked": pick(rows, entry.name == REFERENCE) if ready else None}


def _setting(trial, key: str):
    if key == "split":
        return f"{trial.workers},{trial.trainers}"
    if key == "buffer_size":
        return trial.buffer_size
    return trial.grpo[key[5:]] if key.startswith("grpo.") else trial.hyperparameters[key]


def print_picks(picks: dict, workload_name: str) -> None:
    table = Table(title=f"{workload_name}: each entry's trials and the one the tuning rule picks (*)")
    for col in ("entry", "trial", "settings", "seeds", "final accuracy", "compute to target"):
        table.add_column(col, justify="left" if col in ("entry", "settings") else "right")
    for name, p in picks.items():
        for i, t in enumerate(p["trials"]):
            ctt = t.get("compute_to_target")
            table.add_row(name, f"{i + 1}{' *' if p['picked'] == i else ''}",
                          ", ".join(f"{k}={v}" for k, v in t["settings"].items()) or "(its own)",
                          str(len(t["run_ids"])), "-" if "final_accuracy" not in t else f"{t['final_accuracy']:.3f}",
                          "-" if ctt is None else ("never" if ctt == float("inf") else f"{ctt / 1e6:.2f}M"))
    from rich.console import Console

    Console(width=max(Console().width, 140)).print(table)

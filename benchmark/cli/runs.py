"""Commands that train and record in MLflow: `run`, `baselines`, `validate` and `submit`, and the progress bar
they share."""

from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmark.cli.options import add_executor_option, add_workload_options, console, workload_from_args
from benchmark.cli.parallel import (
    RunRows,
    default_jobs,
    last_accuracy,
    progress_bar,
    run_parallel,
)
from benchmark.errors import UserError
from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.build import score_from_mlflow
from benchmark.leaderboard.render import (
    format_compute,
    format_number,
    lacks_reference,
    print_leaderboard,
    verdict_words,
)
from benchmark.strategy import StrategyError
from benchmark.submission import DEFAULT_TRACK, TRACKS, load_baselines, load_submission
from benchmark.tracking import TAG
from benchmark.workload import WorkloadError, load_workload, split_overrides

if TYPE_CHECKING:  # the engine (torch) loads when a run starts, not when the command line is parsed
    from benchmark.runner import RunSpec


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("run", help="one training run, recorded in MLflow")
    add_workload_options(p)
    add_executor_option(p)
    p.add_argument("--strategy", required=True, help="path of a strategy file, e.g. baselines/fifo_uniform.py")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: prompt stream, sampling, init (default: 0)")
    p.add_argument("--name", help="the entry's name on the board and in MLflow run names <name>-seed<k> "
                                  "(default: the strategy file's name)")
    p.add_argument("--tag", action="append", type=user_tag, metavar="KEY=VALUE", default=[],
                   help="an MLflow tag of your own on the run (repeatable), e.g. --tag team=blue")
    p.add_argument("--resume", action="store_true", help="continue the interrupted run of this config and seed")
    p.add_argument("--track", choices=TRACKS, default=DEFAULT_TRACK,
                   help="whose rules the strategy follows (docs/sandbox.md): buffer (default), open or prompt")
    p.add_argument("--probe", action="store_true",
                   help="also measure the regime diagnostic's step sizes and divergences (the run is unchanged)")
    p.add_argument("--seed-secret", metavar="HEX",
                   help="the secret that keyed a submitted run's strategy RNG (its MLflow tag replaybench.seed_secret),"
                        " to make that run again exactly")
    p.add_argument("--summary-json", type=Path, help="also write the run's final summary here")
    p.add_argument("--ray-pace", type=float, metavar="SECONDS",
                   help="with --executor ray: wall seconds per compute unit, so that generation and training "
                        "run at the workload's relative speeds (mu) on hardware whose own mu differs")
    p.add_argument("--ray-engine", default="hf", metavar="NAME",
                   help="with --executor ray: the workers' engine, hf (transformers), vllm or module:factory "
                        "(vllm is benchmark.rl.vllm_engine:vllm_engine)")
    p.add_argument("--ray-gpus-per-actor", type=float, metavar="F",
                   help="with --executor ray: GPUs of each worker and trainer actor (default: 1 when the Ray "
                        "cluster has GPUs, else 0 = CPUs only; 0.5 puts two actors on each GPU)")
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("baselines",
                              help="the reference baselines x seeds, then the leaderboard's ranking of the workload")
    add_workload_options(p)
    add_executor_option(p)
    p.add_argument("--seeds", type=int, nargs="+", help="default: the workload's seeds")
    p.add_argument("--strategies", nargs="+",
                   help="baseline names from baselines/baselines.yaml (default: the reference pair)")
    add_jobs_option(p)
    p.set_defaults(func=cmd_baselines)

    p = subparsers.add_parser("validate", help="check a submission: schema, then a short sandboxed dry run")
    p.add_argument("entry", help="the submission folder, e.g. submissions/example_entry")
    p.add_argument("--workload", default="arith-tiny", help="workload name or .yaml path (default: arith-tiny)")
    p.set_defaults(func=cmd_validate)

    p = subparsers.add_parser("submit",
                              help="run a submission over the workload's pinned seeds, sandboxed, into MLflow")
    p.add_argument("entry", help="the submission folder")
    p.add_argument("--workload", default="arith-tiny", help="workload name or .yaml path (default: arith-tiny)")
    p.add_argument("--seeds", type=int, nargs="+", help="default: the workload's pinned seeds")
    p.add_argument("--preview", action="store_true",
                   help="a short run on one seed, never ranked, printed and plotted beside the published reference "
                        "(a few minutes)")
    p.add_argument("--budget", type=float, metavar="UNITS",
                   help=f"with --preview: its compute budget "
                        f"(default: {PREVIEW_FRACTION * 100:.0f}%% of the workload's)")
    add_executor_option(p)
    add_jobs_option(p)
    p.set_defaults(func=cmd_submit)


def add_jobs_option(p) -> None:
    p.add_argument("--jobs", type=positive_int, metavar="N",
                   help=f"runs at once, each in a process of its own (default: the CPUs this process may use, "
                        f"{default_jobs()} here; "
                        "1: one after another in this process; with --executor ray, 1)")


def positive_int(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def jobs_of(args) -> int:
    from benchmark.runner import RunError

    if args.executor == "ray":  # one Ray run already spreads its actors over the machine
        if args.jobs not in (None, 1):
            raise RunError("--executor ray runs one run at a time: drop --jobs (or use --jobs 1)")
        return 1
    return args.jobs or default_jobs()


def run_with_progress(spec: RunSpec, resume: bool = False, summary_json=None, executor_options=None) -> dict:
    from benchmark.runner import run

    with progress_bar() as bar:
        rows = RunRows(bar, [(spec, f"{spec.display_name} seed {spec.seed}")])

        def progress(p):
            rows.show(0, p.compute_used, p.trainer_step, last_accuracy(p))

        return run(spec, resume=resume, summary_json=summary_json, progress=progress, executor_options=executor_options)


def wall_seconds_per_unit(workloads, kernels: str) -> dict[tuple[str, str | None], list[float]]:
    """(workload, strategy) and (workload, None) -> the wall seconds per compute unit of each finished run in this
    store made with these CPU kernels (benchmark/kernels.py: the portable ones take about twice the native ones'
    time); of the runs made with other kernels where the workload has none with these."""
    from benchmark.tracking import find_runs

    rates: dict[tuple[str, str | None], list[float]] = {}
    for name in workloads:
        same_kernels: dict[tuple[str, str | None], list[float]] = {}
        every: dict[tuple[str, str | None], list[float]] = {}
        for r in find_runs(name, f"tags.`{TAG}status` = 'finished'"):
            seconds, budget = r.data.metrics.get("wall/total_seconds"), r.data.params.get("workload.budget")
            if seconds and budget and float(budget) > 0:
                rate, same = seconds / float(budget), r.data.params.get("kernels", "native") == kernels
                for key in ((name, r.data.tags.get(f"{TAG}strategy")), (name, None)):
                    every.setdefault(key, []).append(rate)
                    if same:
                        same_kernels.setdefault(key, []).append(rate)
        rates |= same_kernels or every
    return rates


def time_estimate(runs: list[tuple[RunSpec, str]], jobs: int) -> str:
    """"8 runs, 2 at a time: about 25 minutes (...)", from the wall time per compute unit of the finished runs of
    the same workload (and strategy, where there are some) in this store, made with this process's CPU kernels
    where there are some; no guess where there are none."""
    import statistics

    from benchmark import kernels

    rates = wall_seconds_per_unit({spec.workload.name for spec, _ in runs}, kernels.in_force()["kernels"])
    at_once = min(jobs, len(runs))
    head = f"{len(runs)} run{'s' if len(runs) > 1 else ''}, {at_once} at a time"
    per_run = []
    for spec, _ in runs:
        known = rates.get((spec.workload.name, spec.strategy_name)) or rates.get((spec.workload.name, None))
        if not known:
            return f"{head} (no finished run of {spec.workload.name} in this store to estimate the time from)"
        per_run.append(statistics.median(known) * spec.workload.budget)
    minutes = max(max(per_run), sum(per_run) / at_once) / 60
    n = len(rates.get((runs[0][0].workload.name, None), []))
    about = "under a minute" if minutes < 1 else f"about {minutes:.0f} minute{'s' if round(minutes) != 1 else ''}"
    return f"{head}: {about} (from the wall times of {n} finished runs in this store)"


def run_all(runs: list[tuple[RunSpec, str]], jobs: int) -> list[dict | StrategyError]:
    """Each run's summary, or the StrategyError it failed with (recorded in MLflow as failed; the other runs go
    on), in the order of `runs` (spec, label): `jobs` at a time in worker processes, or with one job one after
    another in this process."""
    console.print(time_estimate(runs, jobs if len(runs) > 1 else 1))
    if jobs > 1 and len(runs) > 1:
        outcomes = run_parallel(runs, jobs)
        for (_, label), outcome in zip(runs, outcomes):
            if isinstance(outcome, StrategyError):
                console.print(f"[red]{label} failed:[/] {outcome}")
        return outcomes
    from benchmark.runner import run

    outcomes = []
    with progress_bar() as bar:
        rows = RunRows(bar, runs)
        for index, (spec, label) in enumerate(runs):
            def progress(p, index=index):
                rows.show(index, p.compute_used, p.trainer_step, last_accuracy(p))

            try:
                outcomes.append(run(spec, progress=progress))
                rows.finished(index, outcomes[-1])
            except StrategyError as exc:
                rows.failed(index, "failed")
                console.print(f"[red]{label} failed:[/] {exc}")
                outcomes.append(exc)
    return outcomes


def track_tags(track: str) -> dict:
    """A run's track tag; untagged runs are the default track, so the reference runs' tags stay as they were."""
    return {} if track == DEFAULT_TRACK else {"track": track}


def submission_specs(sub, workload_name: str, seeds: list[int] | None = None, budget: float | None = None):
    """An entry's official runs: its settings on the workload, isolated, over the pinned seeds (or `seeds`)."""
    from benchmark.runner import RunSpec

    workload = sub.workload_for(workload_name, budget)
    sub.check_strategy_params()  # before RunSpec's own check: this one's hint names the entry's fields
    return [RunSpec(workload, sub.strategy, sub.strategy_params(), seed, isolated=True)
            for seed in (seeds if seeds is not None else workload.seeds)]


def user_tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    if key.strip().startswith(TAG) or key.strip().startswith("mlflow."):
        raise argparse.ArgumentTypeError(f"{key!r}: tags named {TAG}* and mlflow.* are the benchmark's own")
    return key.strip(), value


def cmd_run(args) -> int:
    from benchmark.runner import RunSpec

    workload, strategy_params = workload_from_args(args)
    spec = RunSpec(workload, Path(args.strategy), strategy_params, args.seed, isolated=args.isolate,
                   tags=track_tags(args.track), executor=args.executor,
                   name=args.name, user_tags=dict(args.tag), seed_secret=args.seed_secret, probe=args.probe)
    options = None
    if args.ray_pace or args.ray_engine != "hf" or args.ray_gpus_per_actor is not None:
        from benchmark.engine.ray.options import RayOptions

        options = RayOptions(pace=args.ray_pace, engine=args.ray_engine, gpus_per_actor=args.ray_gpus_per_actor)
    summary = run_with_progress(spec, resume=args.resume, summary_json=args.summary_json, executor_options=options)
    console.print(
        f"[bold]{escape(spec.display_name)}[/] seed {spec.seed}: start {summary['start_accuracy']:.3f} -> "
        f"best {summary['best']['accuracy']:.3f} at compute {summary['best']['compute']:,.0f}, "
        f"final {summary['final']['accuracy']:.3f}; replay ratio {summary['replay_ratio']:.2f}; "
        f"MLflow run {summary['mlflow_run_id']}"
    )
    return 0


def cmd_baselines(args) -> int:
    from benchmark.runner import RunSpec

    baselines = load_baselines()
    names = args.strategies or baselines.default
    unknown = [n for n in names if n not in baselines.entries]
    if unknown:
        raise WorkloadError(f"unknown baseline(s) {', '.join(unknown)}; known: {', '.join(baselines.entries)}")
    jobs = jobs_of(args)
    runs = []  # every run's config is checked before the first one starts
    for name in names:
        entry = baselines.entries[name]
        entry = dataclasses.replace(entry, workers=args.workers or entry.workers,
                                    trainers=args.trainers or entry.trainers)
        overrides, strategy_params = split_overrides(args.set or [])
        workload = entry.workload_for(args.workload, args.budget, overrides)
        tags = track_tags(entry.track)
        for seed in args.seeds if args.seeds is not None else workload.seeds:
            spec = RunSpec(workload, entry.strategy, {**entry.strategy_params(), **strategy_params}, seed,
                           isolated=args.isolate, tags=tags, executor=args.executor, name=name)
            runs.append((spec, f"{name} ({workload.pipeline.workers},{workload.pipeline.trainers}) seed {seed}"))
    outcomes = run_all(runs, jobs)
    print_workload_ranking(workload.name)
    print_reproduction([o for o in outcomes if isinstance(o, dict)])
    failures = [(label, outcome) for (_, label), outcome in zip(runs, outcomes) if isinstance(outcome, StrategyError)]
    for label, verdict in failures:
        console.print(f"[red]failed[/] {label}: {verdict}")
    return 1 if failures else 0


def reproduction_rows(summaries: list[dict], board_dir: Path) -> list[dict]:
    """Each run beside the published run of its configuration and seed: whether their evaluation curves are the
    same digit for digit, and if not from which evaluation on; with the kernels and CPU each was made with."""
    from benchmark import kernels
    from benchmark.leaderboard.published import run_key, shipped_runs

    here = kernels.in_force()
    matchable = [s for s in summaries if {"config", "seed", "eval_curve"} <= s.keys()]  # others: nothing to match
    published = shipped_runs(board_dir, {run_key(s["config"], s["seed"]) for s in matchable})
    rows = []
    for s in matchable:
        shipped = published.get(run_key(s["config"], s["seed"]))
        row = {"run": f"{s['strategy']} seed {s['seed']}",
               "mine": machine_label(here["kernels"], here["cpu"], here["cpu_id"])}
        if shipped is None:
            rows.append({**row, "same": None, "published": "no published run of this configuration and seed"})
            continue
        ours = [(p["compute"], p["accuracy"]) for p in s["eval_curve"]]
        theirs = [(p["compute"], p["accuracy"]) for p in shipped["summary"]["eval_curve"]]
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        if first is None and len(ours) != len(theirs):
            first = min(len(ours), len(theirs))
        rows.append({**row, "same": first is None, "first_difference": first, "evaluations": len(theirs),
                     "published_run_id": shipped["run_id"],
                     "published": machine_label(shipped["params"].get("kernels", "native"),
                                                shipped["tags"].get(TAG + "cpu", "CPU not recorded"),
                                                shipped["tags"].get(TAG + "cpu_id", ""))})
    return rows


def machine_label(kernels: str, cpu: str, cpu_id: str) -> str:
    return f"{kernels} kernels, {cpu}" + (f" ({cpu_id})" if cpu_id else "")


def print_reproduction(summaries: list[dict]) -> None:
    """Whether this machine's runs reproduce the published ones of the same configuration and seed."""
    from benchmark.paths import LEADERBOARD_DIR

    rows = reproduction_rows(summaries, LEADERBOARD_DIR)
    compared = [r for r in rows if r["same"] is not None]
    if not compared:
        return
    same = sum(r["same"] for r in compared)
    console.print(f"against the published runs of the same configuration and seed: {same} of {len(compared)} "
                  "identical digit for digit")
    for r in compared:
        if not r["same"]:
            console.print(f"  {r['run']}: differs from evaluation {r['first_difference'] + 1} of {r['evaluations']} "
                          f"on (here: {r['mine']}; published run {r['published_run_id']}: {r['published']})",
                          soft_wrap=True)
    if same < len(compared):
        console.print("  Runs made with other CPU kernels, or on another kind of CPU with the native ones, drift "
                      "apart: such a run is a valid draw of its seed, not a copy (docs/running.md, "
                      "\"Reproducibility\").", soft_wrap=True)


def print_workload_ranking(workload_name: str) -> None:
    """The leaderboard's ranking of the workload, from every run MLflow holds for it; when it cannot rank
    (no frozen target, a store it cannot read), the reason and its fix in one line."""
    try:
        results = score_from_mlflow(workload_name)
    except LeaderboardError as exc:
        console.print(f"[yellow]no ranking:[/] {escape(str(exc))}", soft_wrap=True)
        return
    print_leaderboard(results)


def cmd_validate(args) -> int:
    """Schema, then a short sandboxed dry run on the CPU workload in a throw-away MLflow store."""
    import os
    import subprocess
    import tempfile

    sub = load_submission(args.entry)
    workload = sub.workload_for(args.workload)
    submission_specs(sub, args.workload, seeds=[0])  # the hyperparameters' names against the constructor, read not run
    console.print(f"[green]ok[/] {sub.folder / 'submission.yaml'}: {sub.name}, track {sub.track}, "
                  f"(W,T) = ({sub.workers},{sub.trainers}), hyperparameters {escape(str(sub.hyperparameters))}, "
                  f"{escape(sub.buffer_size_in_words(workload))}", soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="replaybench-validate-") as tmp:
        # COLUMNS: the child's rich console must not wrap its error message at 80 columns
        env = {**os.environ, "REPLAYBENCH_RUNS_DIR": tmp, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db",
               "COLUMNS": "10000", "NO_COLOR": "1"}
        budget = workload.eval.every  # a few trainer steps, one evaluation in the middle
        command = [sys.executable, "-m", "benchmark.cli", "run", "--workload", args.workload, "--isolate",
                   "--strategy", str(sub.strategy), "--workers", str(sub.workers), "--trainers", str(sub.trainers),
                   "--budget", str(budget), "--set", f"eval.every={budget / 2}", "--set", "eval.num_problems=50",
                   "--set", "eval.pass_k_problems=0", "--set", f"grpo.loss={sub.loss}", "--track", sub.track]
        command += [f"--set={k}={v}" for k, v in sub.strategy_params().items()]
        command += ["--summary-json", f"{tmp}/summary.json"]
        console.print(f"dry run: {budget:,.0f} compute units of {args.workload} with the strategy in its sandbox "
                      "(about 30 s on a laptop core)")
        with console.status("dry run: training and evaluating"):
            result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            console.print(f"[red]dry run failed:[/] {escape(dry_run_error(result.stderr))}", soft_wrap=True)
            return 1
        summary = json.loads(Path(tmp, "summary.json").read_text())
    console.print(f"[green]ok[/] sandboxed dry run on {args.workload} ({budget:,.0f} compute units): "
                  f"{summary['trainer_steps']} trainer steps, replay ratio {summary['replay_ratio']:.2f}, "
                  f"{summary['strategy_ms_per_call']:.2f} ms per strategy call")
    return 0


PREVIEW_FRACTION = 0.25  # of the workload's budget: a few minutes on the CPU tier


def submit_preview(sub, args, tags: dict) -> int:
    """One seed at a short budget, tagged a preview (never ranked), then its curve beside the published
    reference's: a table here and a plot in runs/previews/."""
    from benchmark import tracking
    from benchmark.leaderboard.build import published_reference
    from benchmark.leaderboard.plots import preview_plot
    from benchmark.leaderboard.targets import load_target

    workload = sub.workload_for(args.workload)
    budget = args.budget or PREVIEW_FRACTION * workload.budget
    seed = (args.seeds or workload.seeds)[0]
    (spec,) = submission_specs(sub, args.workload, [seed], budget=budget)
    spec.tags, spec.executor, spec.name = {**tags, "preview": "true"}, args.executor, sub.name
    spec.attachments = {"submission.yaml": (sub.folder / "submission.yaml").read_text()}
    console.print(f"preview of {sub.name}: seed {seed}, {budget:,.0f} of {workload.budget:,.0f} compute units; "
                  "never ranked")
    (outcome,) = run_all([(spec, f"{sub.name} preview seed {seed}")], 1)
    if isinstance(outcome, StrategyError):
        return 1
    try:
        target = load_target(workload.name)
        reference = published_reference(workload.name, target["created"])
    except LeaderboardError:
        target, reference = None, None
    curve = outcome["eval_curve"]
    table = Table(title=f"{sub.name}: preview (seed {seed}), not ranked")
    for col in ("compute", sub.name, "reference median (published)" if reference else "reference: no published "
                "board for this workload"):
        table.add_column(col, justify="right")
    ref_at = dict(zip(reference["accuracy_curve"]["compute"], reference["accuracy_curve"]["median"])) if reference \
        else {}
    for point in curve:
        theirs = ref_at.get(point["compute"])
        table.add_row(f"{point['compute']:,.0f}", f"{point['accuracy']:.3f}",
                      "-" if theirs is None else f"{theirs:.3f}")
    Console().print(table)
    out = tracking.RUNS_DIR / "previews" / f"{sub.name}-{workload.name}.svg"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(preview_plot(sub.name, curve, reference, target["target_accuracy"] if target else None, budget)
                   + "\n")
    console.print(f"plot: {out}; MLflow run {outcome['mlflow_run_id']} (tagged {TAG}preview, never ranked); "
                  f"the ranked run: `replaybench submit {args.entry}`")
    return 0


def dry_run_error(stderr: str) -> str:
    """The message of the child's last `error: ...` with its continuation lines, or else (a crash) the last
    lines it wrote."""
    lines = stderr.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("error:")]
    if not starts:
        return "\n".join(lines[-3:])
    return "\n".join(lines[starts[-1]:]).removeprefix("error:").strip()


def cmd_submit(args) -> int:
    sub = load_submission(args.entry)
    tags = {"submission": sub.name, "submission_sha256": sub.content_sha256(), "track": sub.track}
    if args.budget is not None and not args.preview:
        raise WorkloadError("--budget goes with --preview: a ranked submission runs the workload's own budget")
    if args.preview:
        return submit_preview(sub, args, tags)
    jobs = jobs_of(args)
    runs = []
    for spec in submission_specs(sub, args.workload, args.seeds):
        spec.tags, spec.executor, spec.name = tags, args.executor, sub.name
        spec.seed_secret = secrets.token_hex(16)  # the box cannot invert its RNG seed to the run's seed
        spec.attachments = {"submission.yaml": (sub.folder / "submission.yaml").read_text()}
        runs.append((spec, f"{sub.name} seed {spec.seed}"))
    outcomes = run_all(runs, jobs)
    console.print(f"recorded in MLflow with tags replaybench.submission={sub.name}, track {sub.track}")
    print_where_it_landed(sub.name, args.workload, {o["mlflow_run_id"] for o in outcomes if isinstance(o, dict)})
    return 1 if any(isinstance(outcome, StrategyError) for outcome in outcomes) else 0


def print_seeds(entry: dict, run_ids: set[str]) -> None:
    """Each of these runs as the board scored it: one row a seed. Rules v2 give each seed a speedup; rules v3
    compare the entry's runs with the reference's as two samples, so its speedup is the line after the table."""
    rows = [(w, run_id, r) for w, record in sorted(entry["workloads"].items())
            for run_id, r in sorted(record["per_run"].items(), key=lambda item: item[1]["seed"]) if run_id in run_ids]
    per_seed = any("speedup" in r for _, _, r in rows)
    table = Table(title=f"{entry['label']}: its runs, as scored")
    for col in ("workload", "seed", "compute to target", *(["speedup"] if per_seed else []), "best accuracy",
                "replay ratio", "MLflow run"):
        table.add_column(col, justify="left" if col in ("workload", "MLflow run") else "right")
    for w, run_id, r in rows:
        table.add_row(w, str(r["seed"]), format_compute(r["compute_to_target"]),
                      *([format_number(r.get("speedup"))] if per_seed else []), format_number(r["best_accuracy"]),
                      format_number(r.get("replay_ratio"), "{:.2f}"), run_id)
    console.print(table)


def print_where_it_landed(name: str, workload: str, run_ids: set[str]) -> None:
    """submit's last line: the entry these runs count for, scored as the local board scores it, in words."""
    board = (f"`replaybench leaderboard --workload {workload} --highlight {name}`, your curve on the page: "
             f"`replaybench leaderboard build --highlight {name}`")
    try:
        results = score_from_mlflow(load_workload(workload).name)
    except UserError as exc:  # e.g. no frozen target: the runs stand, the verdict waits
        console.print(f"[yellow]not scored:[/] {escape(str(exc))}", soft_wrap=True)
        return
    entry = next((e for e in results["entries"]
                  if run_ids & {r for w in e["workloads"].values() for r in w["run_ids"]}), None)
    if entry is None:  # every run failed, or another workload still lacks one: the board says why
        console.print(f"{escape(name)} is not ranked yet; {board} says why", soft_wrap=True)
        return
    print_seeds(entry, run_ids)
    compared = not lacks_reference(results)
    console.print(f"{escape(entry['label'])}: {escape(verdict_words(entry['score'], compared))}"
                  + (f"; band {entry['band']}, rank {entry['rank']}; the board: {board}" if compared else ""),
                  soft_wrap=True)

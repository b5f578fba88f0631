"""Commands around the runs: `workloads`, `schema`, `warmstart`, `grade` and `measure-mu`."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmark.cli.options import add_workload_options, console, workload_from_args
from benchmark.leaderboard.render import format_compute
from benchmark.workload import WorkloadError, list_workloads, load_workload, split_overrides


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("workloads", help="list the workloads")
    p.add_argument("--check", action="store_true", help="exit non-zero if any workload does not validate")
    p.set_defaults(func=cmd_workloads)

    p = subparsers.add_parser("schema", help="print the JSON Schema of a workload file or of a submission.yaml "
                                             "(e.g. for an editor's YAML completion)")
    p.add_argument("kind", choices=("workload", "submission"))
    p.set_defaults(func=cmd_schema)

    p = subparsers.add_parser("warmstart", help="(re)build a tiny workload's start checkpoint",
                              epilog="example: replaybench warmstart --workload arith-tiny --out /tmp/ckpt")
    add_workload_options(p, run_options=False)
    p.add_argument("--out", help="output folder (default: the workload's model.checkpoint)")
    p.set_defaults(func=cmd_warmstart)

    p = subparsers.add_parser("grade", help='grade lines of {"gold": ..., "completion": ...} with a task\'s verifier')
    p.add_argument("--task", required=True, help="task name, e.g. math500")
    p.add_argument("file", type=Path, help="input .jsonl")
    p.add_argument("--out", type=Path, help="output .jsonl, one verdict per line (default: stdout)")
    p.add_argument("--timeout", type=float,
                   help="seconds per item, past it graded incorrect (default: the verifier's: math 5, Lean 300)")
    p.add_argument("--workers", type=int, default=2, help="grading processes")
    p.set_defaults(func=cmd_grade)

    p = subparsers.add_parser("measure-mu",
                              help="measure mu (training / generation throughput per device) on this machine")
    p.add_argument("--workload", default="arith-tiny", help="workload name or path of a workload .yaml")
    p.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="generation engine (vllm: the gpu extra)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats; the median is reported")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a workload field, e.g. model.source=tiny to try a paper workload with the CPU model")
    p.add_argument("--write", action="store_true",
                   help="write pipeline.mu and pipeline.mu_source into the workload file")
    p.add_argument("--prompts-per-call", type=int, metavar="P",
                   help="prompts per timed generation call (x group_size samples); default: the median the store's "
                        "runs of the workload generated per call, else one batch's worth (batch_size / group_size)")
    p.add_argument("--from-runs", action="store_true",
                   help="time nothing: the mu each finished run of the workload saw (its counters: seconds per "
                        "generated token / seconds per trained token), per configuration, and their median, as the "
                        "paper estimates it (appendix D.4)")
    p.set_defaults(func=cmd_measure_mu)


def cmd_workloads(args) -> int:
    table = Table(title="workloads")
    for col in ("name", "task", "W+T", "budget"):  # name: the column users copy, never folded
        table.add_column(col, no_wrap=True)
    table.add_column("model", overflow="fold")  # a hub id folds at any character, not word by word
    # below the table, one line each: in a column beside the others a sentence wraps a word a line at 80 columns
    descriptions = []
    failures = 0
    for name in list_workloads():
        try:
            w = load_workload(name)
        except WorkloadError as exc:
            failures += 1
            table.add_row(name, "-", "-", "-", "-")
            descriptions.append(f"[bold]{name}[/]: [red]invalid: {escape(str(exc))}[/]")
            continue
        first_sentence = w.description.split("; ")[0].split(". ")[0].rstrip(".")
        table.add_row(w.name, w.task, str(w.pipeline.devices), format_compute(w.budget), w.model.source)
        descriptions.append(f"[bold]{w.name}[/]: {escape(first_sentence)}")
    out = Console()
    out.print(table)
    for line in descriptions:
        out.print(line)
    return 1 if (failures and args.check) else 0


def cmd_schema(args) -> int:
    import json

    from benchmark.submission import EntryFields
    from benchmark.workload import Workload

    model = {"workload": Workload, "submission": EntryFields}[args.kind]
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0


def cmd_warmstart(args) -> int:
    from benchmark.grading.tasks import load_task
    from benchmark.rl.policy import checkpoint_dir, set_threads
    from benchmark.rl.warmstart import warm_start

    workload, _ = workload_from_args(args)
    set_threads()
    if workload.model.source != "tiny":
        raise WorkloadError(f"workload {workload.name} uses model {workload.model.source}; "
                            "warmstart builds tiny models only")
    out = Path(args.out) if args.out else checkpoint_dir(workload)
    info = warm_start(workload, load_task(workload.task), out, log=console.print)
    console.print(f"start checkpoint written to {out}: greedy accuracy {info['greedy_accuracy']:.3f} after "
                  f"{info['steps']} steps, sha256 {info['weights_sha256'][:16]}")
    return 0


def cmd_grade(args) -> int:
    from benchmark.grading.grade_file import GradingError, grade_file

    try:
        s = grade_file(args.task, args.file, args.out, timeout=args.timeout, workers=args.workers)
    except (GradingError, OSError) as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    console.print(f"graded {s['graded']}: {s['correct']} correct, {s['timeouts']} timed out"
                  + (f", {s['crashed']} crashed (Lean ended without a verdict)" if s["crashed"] else "")
                  + (f"; verdicts in {args.out}" if args.out else ""))
    return 0


def measured_by_runs(workload_name: str, key: str) -> tuple[dict[str, list[float]], list[float]]:
    """What each finished run of the workload measured (its summary's measured[key]: mu, rows_per_generate_call),
    by configuration (strategy (W,T)), and all of it."""
    from benchmark.leaderboard.store import finished_runs

    by_config: dict[str, list[float]] = {}
    for rec in finished_runs(workload_name):
        value = (rec.summary.get("measured") or {}).get(key)
        if value:
            pipe = rec.summary["config"]["workload"]["pipeline"]
            by_config.setdefault(f"{rec.name or rec.strategy} ({pipe['workers']},{pipe['trainers']})", []).append(
                value)
    return by_config, [v for values in by_config.values() for v in values]


def cmd_measure_mu_from_runs(args) -> int:
    import statistics

    from benchmark.engine.measure_mu import write_mu
    from benchmark.workload import workload_path

    workload = load_workload(args.workload)
    by_config, every = measured_by_runs(workload.name, "mu")
    if not every:
        raise WorkloadError(f"no finished run of {workload.name} in this store records the mu it saw (runs record it "
                            "since this release): run some, or time batches with `replaybench measure-mu` instead")
    table = Table(title=f"{workload.name}: mu seen by its runs (seconds per generated / per trained token)")
    for col in ("configuration", "runs", "median", "min", "max"):
        table.add_column(col, justify="left" if col == "configuration" else "right", no_wrap=True)
    for config, values in sorted(by_config.items()):
        table.add_row(config, str(len(values)), f"{statistics.median(values):.3g}", f"{min(values):.3g}",
                      f"{max(values):.3g}")
    mu = statistics.median(every)
    table.add_row("all", str(len(every)), f"{mu:.3g}", f"{min(every):.3g}", f"{max(every):.3g}")
    Console().print(table)
    console.print(f"workload file says mu = {workload.pipeline.mu}")
    if args.write:
        path = workload_path(args.workload)
        write_mu(path, mu, f"measured: replaybench measure-mu --from-runs, median over {len(every)} runs")
        console.print(f"wrote pipeline.mu = {mu:.3g} and pipeline.mu_source into {path}")
    return 0


def cmd_measure_mu(args) -> int:
    from benchmark.engine.measure_mu import measure, write_mu
    from benchmark.workload import workload_path

    if args.from_runs:
        if args.set:
            raise WorkloadError("--from-runs reads the runs as they were made: drop --set")
        return cmd_measure_mu_from_runs(args)

    fields, top_level = split_overrides(args.set or [])  # every pair is a workload field here
    overrides = {**fields, **top_level}
    if overrides and args.write:
        raise WorkloadError("--write records mu in the workload file: measure the workload as it is, without --set")
    workload = load_workload(args.workload, overrides)
    prompts = args.prompts_per_call
    if prompts is None:
        import statistics

        _, rows = measured_by_runs(workload.name, "rows_per_generate_call")
        if rows:
            prompts = max(1, round(statistics.median(rows) / workload.grpo.group_size))
            console.print(f"timing calls of {prompts} prompts x {workload.grpo.group_size} samples: the median of "
                          f"{len(rows)} runs of {workload.name} in this store (--prompts-per-call to choose)")
    m = measure(workload, engine=args.engine, repeats=args.repeats, log=console.print, prompts_per_call=prompts)
    table = Table(title=f"{workload.name}: mu measured on {m.device} ({m.engine} engine)")
    for col in ("", "median", "per repeat"):
        table.add_column(col, justify="right" if col else "left")
    table.add_row("generation tok/s (one device)", f"{m.generation_tokens_per_second:,.0f}",
                  " ".join(f"{n / s:,.0f}" for n, s in zip(m.tokens, m.generation_seconds)))
    table.add_row("training tok/s (one device)", f"{m.training_tokens_per_second:,.0f}",
                  " ".join(f"{n / s:,.0f}" for n, s in zip(m.tokens, m.training_seconds)))
    table.add_row("mu = training / generation", f"{m.mu:.3g}",
                  " ".join(f"{g / t:.3g}" for g, t in zip(m.generation_seconds, m.training_seconds)))
    Console().print(table)
    console.print(f"workload file says mu = {workload.pipeline.mu}")
    if args.write:
        path = workload_path(args.workload)
        write_mu(path, m.mu, m.source_note())
        console.print(f"wrote pipeline.mu = {m.mu:.3g} and pipeline.mu_source into {path}")
    return 0

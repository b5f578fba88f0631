"""The `replaybench` command line."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmark.grading.tasks import TaskError
from benchmark.paths import REPO_ROOT
from benchmark.rl.generation import EngineError
from benchmark.rl.policy import PolicyError, set_threads
from benchmark.runner import RunError, RunSpec, run
from benchmark.strategy import StrategyError
from benchmark.submission import SubmissionError
from benchmark.workload import WorkloadError, list_workloads, load_workload, split_overrides

USER_ERRORS = (WorkloadError, StrategyError, TaskError, PolicyError, RunError, SubmissionError, EngineError)
console = Console(stderr=True)


def _workload(args):
    overrides, strategy_params = split_overrides(args.set or [])
    if getattr(args, "budget", None) is not None:
        overrides["budget"] = args.budget
    for key in ("workers", "trainers"):
        if getattr(args, key, None) is not None:
            overrides[f"pipeline.{key}"] = getattr(args, key)
    return load_workload(args.workload, overrides), strategy_params


def _run_with_progress(spec: RunSpec, resume: bool = False, summary_json=None, label: str = "",
                       executor_options=None) -> dict:
    budget = spec.workload.budget
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False) as bar:
        job = bar.add_task(label or f"{spec.strategy_name} seed {spec.seed}", total=budget, status="")

        def progress(p):
            acc = p.eval_history[-1]["accuracy"] if p.eval_history else float("nan")
            bar.update(job, completed=min(p.compute_used, budget),
                       status=f"{p.compute_used / budget:4.0%} of budget  step {p.trainer_step}  acc {acc:.3f}")

        return run(spec, resume=resume, summary_json=summary_json, progress=progress, executor_options=executor_options)


def cmd_run(args) -> int:
    workload, strategy_params = _workload(args)
    spec = RunSpec(workload, Path(args.strategy), strategy_params, args.seed, isolated=args.isolate,
                   executor=args.executor)
    options = None
    if args.ray_pace or args.ray_engine != "hf" or args.ray_gpus_per_actor is not None:
        from benchmark.engine.ray.options import RayOptions

        options = RayOptions(pace=args.ray_pace, engine=args.ray_engine, gpus_per_actor=args.ray_gpus_per_actor)
    summary = _run_with_progress(spec, resume=args.resume, summary_json=args.summary_json, executor_options=options)
    console.print(
        f"[bold]{spec.strategy_name}[/] seed {spec.seed}: start {summary['start_accuracy']:.3f} -> "
        f"best {summary['best']['accuracy']:.3f} at compute {summary['best']['compute']:,.0f}, "
        f"final {summary['final']['accuracy']:.3f}; replay ratio {summary['replay_ratio']:.2f}; "
        f"MLflow run {summary['mlflow_run_id']}"
    )
    return 0


def _iqr(values):
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def load_baselines() -> dict:
    """baselines/baselines.yaml: name -> strategy file, its (W, T) and hyperparameters."""
    return yaml.safe_load((REPO_ROOT / "baselines" / "baselines.yaml").read_text())


def cmd_baselines(args) -> int:
    registry = load_baselines()
    names = args.strategies or [name for name, entry in registry.items() if entry.get("main", True)]
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise WorkloadError(f"unknown baseline(s) {', '.join(unknown)}; known: {', '.join(registry)}")
    results, failures = {}, []
    for name in names:
        entry = registry[name]
        overrides, strategy_params = split_overrides(args.set or [])
        overrides["pipeline.workers"] = args.workers or entry["workers"]
        overrides["pipeline.trainers"] = args.trainers or entry["trainers"]
        if args.budget is not None:
            overrides["budget"] = args.budget
        workload = load_workload(args.workload, overrides)
        params = {**entry.get("params", {}), **strategy_params}
        for seed in args.seeds if args.seeds is not None else workload.seeds:
            spec = RunSpec(workload, REPO_ROOT / "baselines" / entry["strategy"], params, seed, isolated=args.isolate,
                           executor=args.executor)
            label = f"{name} ({workload.pipeline.workers},{workload.pipeline.trainers}) seed {seed}"
            try:
                results.setdefault(name, []).append(_run_with_progress(spec, label=label))
            except StrategyError as exc:  # recorded in MLflow as failed; the other runs go on
                console.print(f"[red]{label} failed:[/] {exc}")
                failures.append((label, str(exc)))
    print_ranking(args.workload, {k: v for k, v in results.items() if v})
    for label, verdict in failures:
        console.print(f"[red]failed[/] {label}: {verdict}")
    return 1 if failures else 0


def print_ranking(workload_name: str, results: dict[str, list[dict]]) -> None:
    """Entries ranked by median (over seeds) best accuracy within budget."""
    rows = []
    for name, summaries in results.items():
        best = [s["best"]["accuracy"] for s in summaries]
        rows.append((statistics.median(best), name, summaries, best))
    rows.sort(key=lambda r: -r[0])
    table = Table(title=f"{workload_name}: best accuracy within budget (median over seeds)")
    for col in ("rank", "strategy", "seeds", "best acc (median)", "IQR", "start acc", "compute at best (median)",
                "replay ratio"):
        table.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=col == "strategy")
    for rank, (median, name, summaries, best) in enumerate(rows, 1):
        table.add_row(
            str(rank), name, str(len(summaries)), f"{median:.3f}", f"{_iqr(best):.3f}",
            f"{statistics.median(s['start_accuracy'] for s in summaries):.3f}",
            f"{statistics.median(s['best']['compute'] for s in summaries):,.0f}",
            f"{statistics.median(s['replay_ratio'] for s in summaries):.2f}",
        )
    Console().print(table)


def cmd_workloads(args) -> int:
    table = Table(title="workloads")
    for col in ("name", "task", "model", "W+T", "budget", "description"):
        table.add_column(col)
    failures = 0
    for name in list_workloads():
        try:
            w = load_workload(name)
        except WorkloadError as exc:
            failures += 1
            table.add_row(name, "-", "-", "-", "-", f"[red]invalid: {exc}[/]")
            continue
        table.add_row(w.name, w.task, w.model.source, str(w.pipeline.devices), f"{w.budget:,.0f}", w.description)
    Console().print(table)
    return 1 if (failures and args.check) else 0


def cmd_warmstart(args) -> int:
    from benchmark.grading.tasks import load_task
    from benchmark.rl.policy import checkpoint_dir
    from benchmark.rl.warmstart import warm_start

    workload, _ = _workload(args)
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
                  + (f"; verdicts in {args.out}" if args.out else ""))
    return 0


def cmd_doctor(args) -> int:
    from benchmark.cli.doctor import run_doctor

    return run_doctor()


def cmd_measure_mu(args) -> int:
    from benchmark.engine.measure_mu import run_cli

    return run_cli(args, console)


def cmd_leaderboard(args) -> int:
    from benchmark.leaderboard.cli import run_cli

    return run_cli(args)


def cmd_validate(args) -> int:
    """Schema, then a short sandboxed dry run on the CPU workload in a throw-away MLflow store."""
    import os
    import subprocess
    import tempfile

    from benchmark.submission import load_submission

    sub = load_submission(args.entry)
    workload = sub.workload_for(args.workload)
    console.print(f"[green]ok[/] {sub.folder / 'submission.yaml'}: {sub.name}, track {sub.track}, "
                  f"(W,T) = ({sub.workers},{sub.trainers}), params {sub.strategy_params()}")
    with tempfile.TemporaryDirectory(prefix="replaybench-validate-") as tmp:
        env = {**os.environ, "REPLAYBENCH_RUNS_DIR": tmp, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db"}
        budget = workload.eval.every  # a few trainer steps, one evaluation in the middle
        command = [sys.executable, "-m", "benchmark.cli", "run", "--workload", args.workload, "--isolate",
                   "--strategy", str(sub.strategy), "--workers", str(sub.workers), "--trainers", str(sub.trainers),
                   "--budget", str(budget), "--set", f"eval.every={budget / 2}", "--set", "eval.num_problems=50",
                   "--set", "eval.pass_k_problems=0", "--set", f"grpo.loss={sub.loss}"]
        command += [f"--set={k}={v}" for k, v in sub.strategy_params().items()]
        command += ["--summary-json", f"{tmp}/summary.json"]
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
            console.print(f"[red]dry run failed:[/] {' '.join((errors or result.stderr.splitlines() or [''])[-3:])}")
            return 1
        summary = json.loads(Path(tmp, "summary.json").read_text())
    console.print(f"[green]ok[/] sandboxed dry run on {args.workload} ({budget:,.0f} compute units): "
                  f"{summary['trainer_steps']} trainer steps, replay ratio {summary['replay_ratio']:.2f}, "
                  f"{summary['strategy_ms_per_call']:.2f} ms per strategy call")
    return 0


def cmd_submit(args) -> int:
    from benchmark.submission import load_submission

    sub = load_submission(args.entry)
    tags = {"submission": sub.name, "submission_sha256": sub.content_sha256(), "track": sub.track}
    failures = 0
    for spec in sub.run_specs(args.workload, args.seeds):
        spec.tags, spec.executor = tags, args.executor
        try:
            _run_with_progress(spec, label=f"{sub.name} seed {spec.seed}")
        except StrategyError as exc:  # recorded in MLflow as failed; the other seeds go on
            console.print(f"[red]{sub.name} seed {spec.seed} failed:[/] {exc}")
            failures += 1
    console.print(f"recorded in MLflow with tags replaybench.submission={sub.name}, track {sub.track}; "
                  f"see `replaybench leaderboard --workload {args.workload}`")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replaybench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--workload", default="arith-tiny", help="workload name or path of a workload .yaml")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a workload field (grpo.lr=1e-4) or a strategy hyperparameter (buffer_size=64)")
        p.add_argument("--budget", type=float, help="compute budget in normalised units (default: the workload's)")
        p.add_argument("--workers", type=int, help="inference workers W (W + T must equal the workload's devices)")
        p.add_argument("--trainers", type=int, help="trainers T")
        p.add_argument("--isolate", action="store_true",
                       help="run the strategy in its own process under time and memory limits (as official runs do)")

    def executor(p):
        p.add_argument("--executor", choices=["sim", "ray"], default="sim",
                       help="sim: the virtual-time pipeline (the reference); ray: real Ray actors "
                            "(needs the distributed extra; recorded under replaybench-ray/<workload>)")

    p = sub.add_parser("run", help="one training run, recorded in MLflow")
    common(p)
    executor(p)
    p.add_argument("--strategy", required=True, help="path of a strategy file, e.g. baselines/fifo_uniform.py")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the interrupted run of this config and seed")
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

    p = sub.add_parser("baselines", help="all reference baselines x seeds, then a ranked table")
    common(p)
    executor(p)
    p.add_argument("--seeds", type=int, nargs="+", help="default: the workload's seeds")
    p.add_argument("--strategies", nargs="+",
                   help="baseline names from baselines/baselines.yaml (default: the reference pair)")
    p.set_defaults(func=cmd_baselines)

    p = sub.add_parser("workloads", help="list the workloads")
    p.add_argument("--check", action="store_true", help="exit non-zero if any workload does not validate")
    p.set_defaults(func=cmd_workloads)

    p = sub.add_parser("warmstart", help="(re)build a tiny workload's start checkpoint")
    common(p)
    p.add_argument("--out", help="output folder (default: the workload's model.checkpoint)")
    p.set_defaults(func=cmd_warmstart)

    p = sub.add_parser("grade", help='grade lines of {"gold": ..., "completion": ...} with a task\'s verifier')
    p.add_argument("--task", required=True, help="task name, e.g. math500")
    p.add_argument("file", type=Path, help="input .jsonl")
    p.add_argument("--out", type=Path, help="output .jsonl, one verdict per line (default: stdout)")
    p.add_argument("--timeout", type=float,
                   help="seconds per item, past it graded incorrect (default: the verifier's: math 5, Lean 300)")
    p.add_argument("--workers", type=int, default=2, help="grading processes")
    p.set_defaults(func=cmd_grade)

    from benchmark.cli import eval as eval_cli

    p = sub.add_parser("eval", help="pass@k of a model (local folder or hub id) on a task, recorded in MLflow")
    eval_cli.add_arguments(p)
    p.set_defaults(func=eval_cli.cmd_eval)

    p = sub.add_parser("validate", help="check a submission: schema, then a short sandboxed dry run")
    p.add_argument("entry", help="the submission folder, e.g. submissions/example_entry")
    p.add_argument("--workload", default="arith-tiny")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("submit", help="run a submission over the workload's pinned seeds, sandboxed, into MLflow")
    p.add_argument("entry", help="the submission folder")
    p.add_argument("--workload", default="arith-tiny")
    p.add_argument("--seeds", type=int, nargs="+", help="default: the workload's pinned seeds")
    executor(p)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("doctor", help="check what this machine has: Python stack, MLflow, Lean, GPU (one line each)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("measure-mu", help="measure mu (training / generation throughput per device) on this machine")
    p.add_argument("--workload", default="arith-tiny", help="workload name or path of a workload .yaml")
    p.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="generation engine (vllm: the gpu extra)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats; the median is reported")
    p.add_argument("--write", action="store_true",
                   help="write pipeline.mu and pipeline.mu_source into the workload file")
    p.set_defaults(func=cmd_measure_mu)

    from benchmark.leaderboard.cli import add_arguments as leaderboard_arguments

    p = sub.add_parser("leaderboard", help="ranked table from MLflow; `build` writes leaderboard/, `freeze-target`")
    leaderboard_arguments(p)
    p.set_defaults(func=cmd_leaderboard)
    return parser


def _quiet_libraries() -> None:
    """Our progress bar is the one to read: silence the libraries' bars and info logs."""
    import logging
    import os

    from transformers.utils import logging as hf_logging

    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")  # escaped: messages may hold [brackets]
        return 2
    except KeyboardInterrupt:
        console.print("interrupted; continue with the same command and --resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())

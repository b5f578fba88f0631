"""`replaybench diagnose`: is a workload in the paper's regime? The on-policy reference with one and with two
trainer steps per fresh batch on the calibration seeds, probed (docs/protocols/regime-diagnostic.md), resumable
(a run already finished in MLflow with its probe is not run again), then the three statistics and the verdict."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from benchmark.cli.options import console
from benchmark.cli.runs import add_jobs_option, jobs_of, run_all
from benchmark.errors import UserError
from benchmark.leaderboard.diagnostic import ARMS, CALIBRATION_SEEDS, THRESHOLDS, diagnose
from benchmark.leaderboard.files import json_values, write_atomic
from benchmark.leaderboard.store import finished_runs
from benchmark.leaderboard.targets import REFERENCE
from benchmark.paths import BASELINES_DIR
from benchmark.submission import load_baselines

ARM_STRATEGIES = {"A": "on_policy.py", "B": "on_policy_repeat.py"}


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("diagnose", help="is a workload in the paper's regime (update-limited, small steps, "
                                               "headroom)? the on-policy reference's diagnostic, resumable")
    p.add_argument("--workload", default="arith-tiny", help="workload name or path of a workload .yaml")
    p.add_argument("--seeds", type=int, nargs="+", default=list(CALIBRATION_SEEDS),
                   help="the calibration seeds (the protocol's: 100 101 102 103)")
    p.add_argument("--summary-only", action="store_true", help="run nothing: diagnose from the finished runs")
    p.add_argument("--out", type=Path, help="also write the diagnostic (with every MLflow run id) to this JSON file")
    add_jobs_option(p)
    p.set_defaults(func=cmd_diagnose, executor="sim")


def arm_specs(workload_name: str, seeds: list[int]) -> dict[str, list]:
    """Each arm's run specs: the reference's split and buffer size, probed; arm B the pipe trained twice per batch."""
    from benchmark.runner import RunSpec

    entry = load_baselines().entries[REFERENCE]
    workload = entry.workload_for(workload_name)
    params = {arm: {**entry.strategy_params(), **({"steps": steps} if steps > 1 else {})}
              for arm, steps in ARMS.items()}
    return {arm: [RunSpec(workload, BASELINES_DIR / ARM_STRATEGIES[arm], params[arm], seed, probe=True,
                          name=f"{REFERENCE} diagnostic {arm}") for seed in seeds] for arm in ARMS}


def probed_runs(workload_name: str) -> dict[tuple[str, int], dict]:
    """(group, seed) -> the first finished run with the probe's measurements (its summary, run id, code)."""
    done = {}
    for r in finished_runs(workload_name):
        if r.summary.get("probe"):
            done.setdefault((r.group, r.seed), {**r.summary, "mlflow_run_id": r.run_id,
                                                "code_version": r.code_version})
    return done


def cmd_diagnose(args) -> int:
    specs = arm_specs(args.workload, args.seeds)
    workload = specs["A"][0].workload
    done = probed_runs(workload.name)
    todo = [(s, f"arm {arm} seed {s.seed}") for arm, arm_runs in specs.items() for s in arm_runs
            if (s.group_key(), s.seed) not in done]
    total = sum(map(len, specs.values()))
    console.print(f"regime diagnostic of {workload.name}: {total} runs, {total - len(todo)} already finished in "
                  f"MLflow, {len(todo)} to run")
    failures = 0
    if todo and not args.summary_only:
        failures = sum(isinstance(o, Exception) for o in run_all(todo, jobs_of(args)))
        done = probed_runs(workload.name)
    runs = {arm: [done[(s.group_key(), s.seed)] for s in arm_runs if (s.group_key(), s.seed) in done]
            for arm, arm_runs in specs.items()}
    missing = [f"arm {arm} seed {s.seed}" for arm, arm_runs in specs.items() for s in arm_runs
               if (s.group_key(), s.seed) not in done]
    if missing:
        raise UserError(f"the diagnostic needs every run; missing: {', '.join(missing)} (run without "
                       "--summary-only to make them)")
    result = {"workload": workload.name, "version": workload.version, "seeds": args.seeds,
              "run_ids": {arm: [r["mlflow_run_id"] for r in rs] for arm, rs in runs.items()},
              "code_versions": sorted({r["code_version"] or "unknown" for rs in runs.values() for r in rs}),
              **diagnose(runs["A"], runs["B"])}
    print_diagnostic(result)
    if args.out:
        write_atomic(args.out, json.dumps(json_values(result), indent=1) + "\n")
        console.print(f"wrote {args.out}")
    return 1 if failures else 0


def print_diagnostic(result: dict) -> None:
    u, s, h = result["update_limited"], result["step_size"], result["headroom"]
    table = Table(title=f"{result['workload']}: regime diagnostic on seeds {', '.join(map(str, result['seeds']))} "
                        "(docs/protocols/regime-diagnostic.md)")
    for col in ("statistic", "value", "threshold", "holds"):
        table.add_column(col, justify="left" if col == "statistic" else "right")
    table.add_row("update-limited: fresh data to the level, 1 step / 2 steps per batch",
                  f"{u['gain']:.2f} [{u['ci95'][0]:.2f}, {u['ci95'][1]:.2f}]",
                  f">= {THRESHOLDS['gain']}, lower end > {THRESHOLDS['gain_lower']}", _yes(u["holds"]))
    clip = s["clip_s9"]
    table.add_row("step size: clip share at 9 steps of staleness", "-" if clip is None else f"{clip:.4f}",
                  f"<= {THRESHOLDS['clip_s9']}", _yes(s["holds"]))
    table.add_row("headroom: best of the reference's median curve (learned since the start)",
                  f"{h['best']:.3f} (+{h['learned']:.3f})",
                  f"<= {THRESHOLDS['best']}, learned >= {THRESHOLDS['learned']}", _yes(h["holds"]))
    for key in ("relative_update", "kl_s1", "clip_s1", "kl_s5", "clip_s5", "kl_s9"):
        value = s[key]
        table.add_row(f"  reported: {key}", "-" if value is None else f"{value:.4g}", "", "")
    from rich.console import Console

    Console(width=max(Console().width, 140)).print(table)
    dirty = [v for v in result["code_versions"] if v.endswith("+dirty")]
    verdict = "in the paper's regime" if result["passes"] else "not in the paper's regime"
    console.print(f"{result['workload']}: {verdict}" + (
        f" (runs made by an engine with uncommitted changes, {', '.join(dirty)}: not publishable)" if dirty else ""))


def _yes(holds: bool) -> str:
    return "yes" if holds else "no"



"""The `replaybench` command line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from rich.markup import escape

from benchmark import tracking
from benchmark.cli import campaign, diagnose, doctor, leaderboard, parallel, plan, runs, sweep, tools, tune
from benchmark.cli import eval as evaluation  # not the builtin
from benchmark.cli.options import console, quiet_libraries
from benchmark.errors import UserError

# each adds its subcommands with add_parsers
COMMAND_MODULES = (runs, sweep, tune, campaign, diagnose, plan, tools, evaluation, doctor, leaderboard)


# An example per command, shown under its --help.
EXAMPLES = {
    "run": "replaybench run --strategy baselines/fifo_uniform.py --workers 5 --trainers 3 --budget 600000",
    "baselines": "replaybench baselines --strategies on_policy fifo_uniform --jobs 2",
    "validate": "replaybench validate submissions/example_entry",
    "submit": "replaybench submit submissions/example_entry --preview",
    "sweep": "replaybench sweep --strategies fifo_uniform --splits 6,2 5,3 4,4 --seeds 100 101 --jobs 2",
    "diagnose": "replaybench diagnose --workload arith-tiny --jobs 2",
    "tune": "replaybench tune --workload arith-small-steps --entries on_policy fifo_uniform --jobs 2",
    "campaign": "replaybench campaign status leaderboard/campaigns/v3.yaml",
    "plan": "replaybench plan --workload qwen2.5-7b-openr1",
    "workloads": "replaybench workloads --check",
    "schema": "replaybench schema submission",
    "grade": "replaybench grade --task math500 completions.jsonl --out verdicts.jsonl",
    "measure-mu": "replaybench measure-mu --workload qwen3-0.6b-openr1 --engine vllm",
    "eval": "replaybench eval --model tasks/arith_tiny/checkpoint --task arith_tiny --greedy --limit 200",
    "doctor": "replaybench doctor",
    "leaderboard": "replaybench leaderboard --workload arith-tiny",
}


class HelpFormatter(argparse.HelpFormatter):
    """Every option's default in its help, unless the help already states it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS, [])
                or not action.option_strings or "%(default)" in text):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    parser = Parser(prog="replaybench", description=__doc__)
    try:
        installed = version("replaybench")
    except PackageNotFoundError:  # run from a checkout that is not installed
        installed = "not installed"
    parser.add_argument("--version", action="version", version=f"replaybench {installed}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.add_parsers(subparsers)
    for name, command in subparsers.choices.items():
        if command.epilog is None and name in EXAMPLES:
            command.epilog = f"example: {EXAMPLES[name]}"
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command: its exit status; a user error is one message on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    quiet_libraries()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, parallel.interrupt) if in_main_thread else None
    try:
        problem = args.func is not doctor.cmd_doctor and tracking.store_problem()
        if problem:  # before the work, whose results the store would then refuse
            raise tracking.TrackingError(problem)
        return args.func(args)
    except UserError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")  # escaped: messages may hold [brackets]
        return 2
    except KeyboardInterrupt:
        console.print("interrupted; continue with the same command and --resume" if hasattr(args, "resume") else
                      "interrupted; run the same command again to go on (finished runs are kept)")
        return 130
    finally:
        if previous is not None:  # None also where the previous handler was not installed from Python
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

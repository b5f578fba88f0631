"""The `replaybench` command line."""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from benchmark.cli import doctor, leaderboard, runs, sweep, tools
from benchmark.cli import eval as evaluation  # not the builtin
from benchmark.cli.options import console, quiet_libraries
from benchmark.grading.tasks import TaskError
from benchmark.rl.generation import EngineError
from benchmark.rl.policy import PolicyError
from benchmark.runner import RunError
from benchmark.strategy import StrategyError
from benchmark.submission import SubmissionError
from benchmark.tracking import TrackingError
from benchmark.workload import WorkloadError

USER_ERRORS = (WorkloadError, StrategyError, TaskError, PolicyError, RunError, SubmissionError, EngineError,
               TrackingError)
COMMAND_MODULES = (runs, sweep, tools, evaluation, doctor, leaderboard)  # each adds its subcommands with add_parsers


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    parser = argparse.ArgumentParser(prog="replaybench", description=__doc__)
    try:
        installed = version("replaybench")
    except PackageNotFoundError:  # run from a checkout that is not installed
        installed = "not installed"
    parser.add_argument("--version", action="version", version=f"replaybench {installed}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.add_parsers(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command: its exit status; a user error is one message on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    quiet_libraries()
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

"""The `replaybench` command line: `app` builds the parser and dispatches to one module per command group,
each holding its commands' arguments (`add_parsers`) and handlers (`cmd_<command>`):

    runs         run, baselines, validate, submit, and the progress bar they share
    tools        workloads, schema, warmstart, grade, measure-mu
    eval         eval
    doctor       doctor
    leaderboard  leaderboard [build | serve | freeze-target]
    options      what several commands share: the stderr console, the workload and executor options

Imports are deferred to main() so that importing the package loads nothing heavy.
"""


def main(argv: list[str] | None = None) -> int:
    from benchmark.cli.app import main as run

    return run(argv)

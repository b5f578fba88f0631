"""The `replaybench` command line: `app` builds the parser and dispatches to one module per command group."""


def main(argv: list[str] | None = None) -> int:
    from benchmark.cli.app import main as run

    return run(argv)

"""`replaybench plan`: what each split (W, T) of a workload gives in steady state (the paper's arithmetic), to
choose a configuration before spending compute on it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from benchmark.engine.costs import steady_state
from benchmark.workload import WorkloadError, load_workload


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("plan", help="per split (W,T): compute per update, replay ratio, staleness and updates "
                                           "in the budget, from the workload's mu, before running anything")
    p.add_argument("--workload", default="arith-tiny", help="workload name or path of a workload .yaml")
    p.add_argument("--buffer-size", type=int, metavar="N",
                   help="the strategy's buffer size (default: the workload's strategy_defaults, else 256)")
    p.add_argument("--tokens-per-rollout", type=float, metavar="L",
                   help="mean prompt + completion tokens of a rollout, for the number of updates the budget pays for "
                        "(default: measured on this store's finished runs of the workload, if any)")
    p.set_defaults(func=cmd_plan)


def measured_tokens_per_rollout(workload) -> tuple[float, int] | None:
    """L from finished runs whose trainers were never idle (then compute = (W+T) x steps x B L / T): the median,
    and how many runs it comes from."""
    import statistics

    from benchmark.leaderboard.store import finished_runs

    values = []
    for rec in finished_runs(workload.name):
        s = rec.summary
        if s.get("trainer_idle_fraction", 1) > 0.01 or not s.get("trainer_steps"):
            continue
        pipe, grpo = s["config"]["workload"]["pipeline"], s["config"]["workload"]["grpo"]
        values.append(s["compute_used"] * pipe["trainers"]
                      / ((pipe["workers"] + pipe["trainers"]) * s["trainer_steps"] * grpo["batch_size"]))
    return (statistics.median(values), len(values)) if values else None


def cmd_plan(args) -> int:
    w = load_workload(args.workload)
    n = args.buffer_size or w.strategy_defaults.get("buffer_size", 256)
    if n < 1 or (args.tokens_per_rollout is not None and args.tokens_per_rollout <= 0):
        raise WorkloadError("--buffer-size and --tokens-per-rollout must be positive")
    tokens, source = args.tokens_per_rollout, "given"
    if tokens is None:
        measured = measured_tokens_per_rollout(w)
        if measured:
            tokens, source = measured[0], f"the median of {measured[1]} finished run(s) in this store"
    p, b = w.pipeline, w.grpo.batch_size
    out = Console()  # the plan is the command's output: stdout
    # a heading line, not the table's title: rich wraps a title to the table's width, narrower than the terminal
    out.print(f"{w.name}: mu = {p.mu:g}, W + T = {p.devices}, B = {b}, N = {n}, budget {w.budget:,.0f}")
    table = Table()
    for col in ("W,T", "gamma", "replay", "in buffer", "updates", "on-policy"):
        table.add_column(col, justify="right", no_wrap=True)
    for workers in range(p.devices - 1, 0, -1):
        s = steady_state(p.mu, workers, p.devices - workers, b, n, tokens, w.budget)
        table.add_row(f"{workers},{p.devices - workers}", f"{s.gamma:.3f}", f"{s.replay_ratio:.2f}",
                      f"{s.buffer_steps:.1f}",
                      *(f"{u:,.0f}" if u is not None else "-" for u in (s.updates, s.updates_on_policy)))
    out.print(table)
    out.print("gamma = (1 + W/T) / (1 + mu): compute per update against on-policy with generation and training "
                  "balanced. replay = mu T / W: uses per rollout once a buffer keeps the trainers busy (below 1, some "
                  "rollouts are never used). in buffer = N x replay / B: the trainer steps a rollout stays in a FIFO "
                  "of N (the mean sample is about half as old).")
    if tokens:
        out.print(f"updates: the trainer steps the budget pays for with a buffer; on-policy: with each rollout "
                      f"used once, at the same split; at {tokens:.1f} tokens per rollout ({source}).")
    else:
        out.print("updates: pass --tokens-per-rollout L (no finished run of this workload in this store to "
                      "measure it on).")
    return 0

"""Share of a run's wall time spent outside model generation, forward and backward.

    python benchmarks/pipeline_overhead.py [--workload arith-tiny] [--budget UNITS] [--strategies NAME ...]

Runs each baseline once (seed 0, its (W, T) from baselines/baselines.yaml) into a throw-away
MLflow store and prints a table. Evaluation generation counts as model time; everything else
(event loop, strategy, rewards, rollout records, metrics, checkpoints, MLflow) is overhead:
"loop" counts the pipeline's own loop, "whole run" adds model loading, MLflow set-up and artifacts.
With --isolate, each strategy also runs in its box, and a last table gives the boundary's cost: the isolated
run's wall time over the in-process one's, measured side by side in this one invocation.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="arith-tiny")
    parser.add_argument("--budget", type=float)
    parser.add_argument("--strategies", nargs="+", default=["on_policy", "fifo_uniform"])
    parser.add_argument("--isolate", action="store_true", help="also run each strategy in its sandbox process")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="replaybench-overhead-")
    os.environ["REPLAYBENCH_RUNS_DIR"] = tmp
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlflow.db"
    from benchmark.runner import RunSpec, run
    from benchmark.submission import load_baselines

    baselines = load_baselines()
    rows = []
    for name in args.strategies:
        entry = baselines.entries[name]
        w = entry.workload_for(args.workload, args.budget or None)
        for isolated in (False, True) if args.isolate else (False,):
            start = time.perf_counter()
            spec = RunSpec(w, entry.strategy, entry.strategy_params(), seed=0, isolated=isolated)
            summary = run(spec)
            whole = time.perf_counter() - start  # model loading, MLflow set-up and artifacts included
            wall = summary["wall_seconds"]
            model = wall["generation"] + wall["training"] + wall["evaluation"]
            rows.append((name + (" (isolated)" if isolated else ""), summary["trainer_steps"], whole, wall["total"],
                         wall["generation"], wall["training"], wall["evaluation"], wall["strategy"],
                         summary["strategy_calls"], summary["strategy_ms_per_call"],
                         1 - model / wall["total"], 1 - model / whole))
    header = ("strategy", "steps", "run s", "loop s", "generation s", "train s", "eval s", "strategy s",
              "strategy calls", "ms/call", "overhead (loop)", "overhead (whole run)")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for (name, steps, whole, total, gen, train, ev, strat, calls, per_call, loop_overhead, run_overhead) in rows:
        print(f"{name} | {steps} | {whole:.1f} | {total:.1f} | {gen:.1f} | {train:.1f} | {ev:.1f} | {strat:.2f} | "
              f"{calls} | {per_call:.3f} | {loop_overhead:.1%} | {run_overhead:.1%}")
    if args.isolate:
        print("\nstrategy | isolated / in-process (whole run) | strategy calls' wall time, isolated / in-process")
        print("--- | --- | ---")
        for plain, boxed in zip(rows[::2], rows[1::2]):
            print(f"{plain[0]} | {boxed[2] / plain[2]:.3f} | {boxed[7]:.2f} s / {plain[7]:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

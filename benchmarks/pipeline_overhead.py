"""Share of a run's wall time spent outside model generation, forward and backward.

    python benchmarks/pipeline_overhead.py [--workload arith-tiny] [--budget UNITS] [--strategies on_policy fifo_uniform]

Runs each baseline once (seed 0) into a throw-away MLflow store and prints a table. Evaluation
generation counts as model time; everything else (event loop, strategy, rewards, rollout records,
metrics, checkpoints, MLflow) is overhead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="arith-tiny")
    parser.add_argument("--budget", type=float)
    parser.add_argument("--strategies", nargs="+", default=["on_policy", "fifo_uniform"])
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="replaybench-overhead-")
    os.environ["REPLAYBENCH_RUNS_DIR"] = tmp
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlflow.db"
    from benchmark.runner import RunSpec, run
    from benchmark.workload import load_workload

    overrides = {"budget": args.budget} if args.budget else {}
    workload = load_workload(args.workload, overrides)
    rows = []
    for name in args.strategies:
        summary = run(RunSpec(workload, REPO / "baselines" / f"{name}.py", {}, seed=0))
        wall = summary["wall_seconds"]
        model = wall["generation"] + wall["training"] + wall["evaluation"]
        rows.append((name, summary["trainer_steps"], wall["total"], wall["generation"], wall["training"],
                     wall["evaluation"], 1 - model / wall["total"]))
    header = ("strategy", "steps", "total s", "generation s", "train s", "eval s", "overhead")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, steps, total, gen, train, ev, overhead in rows:
        print(f"{name} | {steps} | {total:.1f} | {gen:.1f} | {train:.1f} | {ev:.1f} | {overhead:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

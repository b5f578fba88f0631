"""A whole CPU-tier run: its CPU time against another checkout's, and its share of the FLOP floor.

    python benchmarks/full_run.py [--against OLD_CHECKOUT | --native-kernels] [--strategy on_policy]
                                  [--budget UNITS] [--rounds 1]

Each contender runs `replaybench run` (seed 0, the baseline's (W, T) from baselines/baselines.yaml) in a
child process on one thread, into a throw-away MLflow store, at its own workload settings (its checkout's
workload file: budget, evaluation set and cadence), or at --budget for both; the table reports its CPU time
(model loading and MLflow included), the ratio to this checkout, and where the run's wall time went
(evaluation, training, generation, other) by the run's own summary.json. Rounds alternate the contenders,
so the machine's noise falls on both. --native-kernels sets this checkout against itself computing with the native
kernels instead of the portable ones (benchmark/kernels.py): the price of runs that agree across CPUs.

The FLOP floor is the run's model arithmetic at this CPU's single-thread matmul peak: 2·P FLOPs per token
generated (training rollouts and evaluation, prompt included) and 6·P per token trained (forward and
backward over prompt and completion). It is counted in this process, from the engines' and the trainer's
own calls, with the same run as the children make.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


BREAKDOWN = ("evaluation", "training", "generation", "other")


def child_run(tree: Path, args: list[str], kernels: str = "portable") -> tuple[float, dict]:
    """CPU time of `replaybench run ARGS` run from checkout `tree`, in a store of its own, and the run's own
    account of where its time went (summary.json's wall_seconds; `other`: startup, MLflow, checkpoints, the
    strategy, what the executor does between its timed parts)."""
    with tempfile.TemporaryDirectory(prefix="replaybench-full-run-") as tmp:
        from benchmark import kernels as kernels_module  # this process pinned its own: a native child drops them

        env = {**kernels_module.environment(kernels), "PYTHONPATH": str(tree), "REPLAYBENCH_RUNS_DIR": tmp,
               "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db", "OMP_NUM_THREADS": "1"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "benchmark.cli", "run", *args, "--summary-json", f"{tmp}/summary.json"],
                       cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        timed = json.loads(Path(tmp, "summary.json").read_text()).get("wall_seconds", {})
    shares = {k: timed.get(k, 0.0) / wall for k in BREAKDOWN[:-1]}
    shares["other"] = 1 - sum(shares.values())  # the process's wall time, start to exit, is the whole
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), shares


def matmul_peak_flops(size: int = 512, repeats: int = 20) -> float:
    """Single-thread float32 matmul FLOP/s: the best of `repeats`."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        a @ b
        best = min(best, time.process_time() - start)
    return 2 * size**3 / best


def run_in_process(pipeline, entry, workload) -> float:
    """Run the entry's strategy through `pipeline` to the end of its budget; the CPU seconds it took."""
    from benchmark.engine.ledger import StrategySpec

    pipeline.open_strategy(StrategySpec(entry.strategy, entry.strategy_params(), workload.strategy_defaults))
    start = time.process_time()
    pipeline.start()
    pipeline.run()
    return time.process_time() - start


def floor_share(workload, entry, seed: int = 0) -> dict:
    """The run in this process with its model arithmetic counted: CPU seconds, FLOP floor seconds, tokens."""
    from benchmark.engine.pipeline import Pipeline
    from benchmark.rl.policy import set_threads

    set_threads()
    pipeline = Pipeline(workload, workload.load_task(), seed)
    tokens = {"generated": 0, "trained": 0}

    def counting_generate(engine):
        generate = engine.generate

        def wrapped(prompts, n, *args, **kwargs):
            groups = generate(prompts, n, *args, **kwargs)
            tokens["generated"] += sum(len(c.prompt_ids) + len(c.completion_ids) for g in groups for c in g)
            return groups
        engine.generate = wrapped

    counting_generate(pipeline.engine)
    counting_generate(pipeline.eval_engine)
    step = pipeline.trainer.step

    def counting_step(rollouts, *args, **kwargs):
        tokens["trained"] += sum(r.length for r in rollouts)
        return step(rollouts, *args, **kwargs)
    pipeline.trainer.step = counting_step

    cpu = run_in_process(pipeline, entry, workload)
    params = sum(p.numel() for p in pipeline.trainer.model.parameters())
    flops = 2 * params * tokens["generated"] + 6 * params * tokens["trained"]
    return {"cpu": cpu, "floor": flops / matmul_peak_flops(), "params": params, **tokens,
            "rows_per_call": pipeline.work.engine_rows / max(pipeline.work.engine_calls, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, help="another checkout (e.g. a git worktree of an older commit)")
    parser.add_argument("--native-kernels", action="store_true", help="this checkout with the native kernels too")
    parser.add_argument("--strategy", default="on_policy", help="a baseline of baselines/baselines.yaml")
    parser.add_argument("--workload", default="arith-tiny")
    parser.add_argument("--budget", type=float, help="default: the workload's")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from benchmark.submission import load_baselines

    entry = load_baselines().entries[args.strategy]
    workload = entry.workload_for(args.workload, args.budget)
    # without --budget each checkout runs its own workload file's settings; (W, T) and the parameters are the entry's
    run_args = ["--workload", args.workload, "--strategy", str(entry.strategy), "--seed", "0",
                "--workers", str(workload.pipeline.workers), "--trainers", str(workload.pipeline.trainers),
                *(["--budget", str(args.budget)] if args.budget else [])] + [
        f"--set={k}={json.dumps(v)}" for k, v in entry.strategy_params().items()]
    trees = {"this checkout": (REPO, "portable"),
             **({f"{args.against}": (args.against.resolve(), "portable")} if args.against else {}),
             **({"this checkout, native kernels": (REPO, "native")} if args.native_kernels else {})}
    times: dict[str, list[float]] = {name: [] for name in trees}
    shares: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):  # interleaved: the machine's noise falls on every contender alike
        for name, (tree, kernels) in trees.items():
            cpu, share = child_run(tree, run_args, kernels)
            times[name].append(cpu)
            shares[name].append(share)
    print(f"{args.strategy} ({workload.pipeline.workers},{workload.pipeline.trainers}) on {args.workload}, "
          f"{'budget ' + format(workload.budget, ',.0f') if args.budget else 'each checkout at its own settings'}, "
          f"seed 0, one thread; median of {args.rounds} round(s); the shares of the run's wall time\n")
    print("checkout | run CPU s | ratio to this checkout | " + " | ".join(BREAKDOWN))
    print("--- | --- | --- | " + " | ".join("---" for _ in BREAKDOWN))
    ours = statistics.median(times["this checkout"])
    for name, values in times.items():
        parts = " | ".join(f"{statistics.median(s[k] for s in shares[name]):.1%}" for k in BREAKDOWN)
        print(f"{name} | {statistics.median(values):.1f} | {statistics.median(values) / ours:.2f} | {parts}")

    share = floor_share(workload, entry)
    print(f"\nthis checkout, the run in process: {share['cpu']:.1f} CPU s; FLOP floor {share['floor']:.1f} s "
          f"({share['params']:,} parameters, {share['generated']:,} tokens generated, {share['trained']:,} "
          f"trained, at this CPU's single-thread matmul peak): {share['floor'] / share['cpu']:.0%} of the floor; "
          f"{share['rows_per_call']:.1f} rows per generation call")
    return 0


if __name__ == "__main__":
    sys.exit(main())

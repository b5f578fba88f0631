"""How small and how sparse arith-tiny's evaluation may be: the measurement of docs/protocols/evaluation-size.md.

    python benchmarks/eval_noise.py record --seeds 0 1 2 3 --out DIR   # the reference, every problem's outcome kept
    python benchmarks/eval_noise.py analyse --out DIR                  # the protocol's table and its verdict

`record` runs the reference (on_policy at its baseline (W, T), this checkout's workload) in process on one thread and
writes DIR/seed<k>.json: each evaluation's compute, accuracy and the greedy outcome of every problem (a string of
0/1). A seed already written is skipped, so it resumes. `analyse` reads those files and the shipped reference runs
(leaderboard/runs/), and prints, per candidate (n problems, every Δ compute): the rms of log(ctt / ctt of the full
set at 120k) over disjoint blocks of n problems and seeds, the rms of the final-accuracy difference, the
per-checkpoint jitter, and whether the protocol's rule passes it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SIZES = (250, 500, 1000, 2500)
CADENCES = (120_000, 240_000)
FINAL_FROM = 0.8  # the final-accuracy window: evaluations at compute >= 0.8 x budget
SEED_SD_LOG_CTT = 0.073  # median over the shipped entries (docs/protocols/evaluation-size.md)


def record(seeds: list[int], out: Path, strategy: str, budget: float | None = None) -> None:
    sys.path.insert(0, str(REPO))
    from full_run import run_in_process  # beside this script

    from benchmark.engine.pipeline import Pipeline
    from benchmark.grading import evaluation
    from benchmark.rl.policy import set_threads
    from benchmark.rollout import is_correct
    from benchmark.submission import load_baselines

    set_threads()
    entry = load_baselines().entries[strategy]
    workload = entry.workload_for("arith-tiny", budget)
    out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        path = out / f"seed{seed}.json"
        if path.exists():
            continue
        outcomes: list[str] = []
        sample = evaluation.sample

        def recording(engine, task, docs, n, temperature, seed_, sample=sample, outcomes=outcomes, **kwargs):
            result = sample(engine, task, docs, n, temperature, seed_, **kwargs)
            if n == 1 and len(docs) == workload.eval.num_problems:  # the scored greedy set, not pass@k's
                outcomes.append("".join("1" if is_correct(row[0]) else "0" for row in result.scores))
            return result
        evaluation.sample = recording
        try:
            pipeline = Pipeline(workload, workload.load_task(), seed)
            cpu = run_in_process(pipeline, entry, workload)
        finally:
            evaluation.sample = sample
        evals = [{"compute": p["compute"], "accuracy": p["accuracy"], "outcomes": packed(o)}
                 for p, o in zip(pipeline.eval_history, outcomes)]
        path.write_text(json.dumps({"seed": seed, "strategy": strategy, "budget": workload.budget, "cpu_seconds": cpu,
                                    "wall_seconds": pipeline.work.wall_seconds, "evaluations": evals}))
        print(f"seed {seed}: {cpu:.0f} CPU s, {len(evals)} evaluations", flush=True)


def packed(bits: str) -> str:
    """A string of 0/1 as hex, 4 problems a digit (the file stays small enough to ship)."""
    return f"{len(bits)}:" + "".join(f"{int(bits[i:i + 4].ljust(4, '0'), 2):x}" for i in range(0, len(bits), 4))


def unpacked(text: str) -> str:
    length, digits = text.split(":")
    return "".join(f"{int(d, 16):04b}" for d in digits)[: int(length)]


def crossing(curve: list[tuple[float, float]], target: float, interpolated: bool = True) -> float | None:
    """Compute at which the curve first reaches `target`: interpolated linearly from the evaluation before, or the
    first evaluation itself (first passage). None if it never does."""
    for i, (compute, accuracy) in enumerate(curve):
        if accuracy >= target:
            if not interpolated or i == 0:
                return compute
            c0, a0 = curve[i - 1]
            return c0 + (target - a0) / (accuracy - a0) * (compute - c0)
    return None


def final_accuracy(curve: list[tuple[float, float]], budget: float) -> float:
    return statistics.mean(a for c, a in curve if c >= FINAL_FROM * budget - 1e-6)


def jitter(curve: list[tuple[float, float]]) -> float:
    """Checkpoint-to-checkpoint jitter from second differences: sd(a[i-1] - 2a[i] + a[i+1]) / sqrt(6)."""
    a = [acc for _, acc in curve]
    seconds = [a[i - 1] - 2 * a[i] + a[i + 1] for i in range(1, len(a) - 1)]
    return statistics.pstdev(seconds) / math.sqrt(6) if len(seconds) > 1 else float("nan")


def on_cadence(evaluations: list[dict], every: int) -> list[dict]:
    return [e for e in evaluations if round(e["compute"]) % every == 0]


def subset_curve(evaluations: list[dict], lo: int, hi: int) -> list[tuple[float, float]]:
    return [(e["compute"], e["outcomes"][lo:hi].count("1") / (hi - lo)) for e in evaluations]


def shipped_reference_final_sd(target: dict, budget: float) -> tuple[float, int]:
    """sd of the final accuracy over the shipped reference runs: the board's scored reference runs and the runs
    that froze the target."""
    results = json.loads((REPO / "leaderboard" / "results.json").read_text())
    reference = next(e for e in results["entries"] if e["reference"])["workloads"][target["workload"]]
    finals = []
    for run_id in [*reference["run_ids"], *target["run_ids"]]:
        curve = json.loads((REPO / "leaderboard" / "runs" / run_id / "summary.json").read_text())["eval_curve"]
        finals.append(final_accuracy([(p["compute"], p["accuracy"]) for p in curve], budget))
    return (statistics.stdev(finals) if len(finals) > 1 else float("nan")), len(finals)


def not_cancelling(draws: dict[int, list[float]]) -> float:
    """rms of each draw's per-seed values less their mean (the draw's own offset, common to every run on that set),
    scaled by sqrt(S / (S - 1)) for S seeds; infinite if any value is."""
    left = []
    for values in draws.values():
        if any(math.isinf(v) for v in values):
            return math.inf
        mean = statistics.mean(values)
        scale = math.sqrt(len(values) / (len(values) - 1)) if len(values) > 1 else float("nan")
        left += [(v - mean) * scale for v in values]
    return rms(left)


def rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else float("nan")


def analyse(out: Path) -> int:
    target = json.loads((REPO / "leaderboard" / "targets" / "arith-tiny.json").read_text())
    level = target["target_accuracy"]
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("seed*.json"))]
    for run in runs:
        for e in run["evaluations"]:
            e["outcomes"] = unpacked(e["outcomes"])
    if not runs:
        print(f"no recorded seeds in {out}: run `record` first", file=sys.stderr)
        return 2
    budget = runs[0]["budget"]
    final_sd, final_runs = shipped_reference_final_sd(target, budget)
    print(f"{len(runs)} reference runs (seeds {', '.join(str(r['seed']) for r in runs)}); target {level}; "
          f"seed-to-seed sd of the final accuracy over {final_runs} shipped reference runs: {final_sd:.4f}\n")
    thresholds = (SEED_SD_LOG_CTT / 3, final_sd / 3)
    print(f"rule: rms log ctt ratio <= {thresholds[0]:.4f}, rms final-accuracy difference <= {thresholds[1]:.4f}\n")
    print("the rms of each statistic less each draw's mean over seeds (what does not cancel between entries), "
          "the raw rms in brackets\n")
    print("n | every | evaluations | problems evaluated | log ctt ratio (interpolated) | "
          "log ctt ratio (first passage) | final accuracy difference | jitter | passes")
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    verdicts = []
    for every in CADENCES:
        for n in SIZES:
            # [statistic][draw] -> one value per seed
            draws: dict[str, dict[int, list[float]]] = {"ctt": {}, "first": {}, "final": {}}
            jitters, evaluated = [], 0
            for run in runs:
                full = subset_curve(run["evaluations"], 0, 2500)
                full_ctt, full_fp = crossing(full, level), crossing(full, level, interpolated=False)
                full_final = final_accuracy(full, budget)
                evals = on_cadence(run["evaluations"], every)
                evaluated = len(evals)
                for lo in range(0, 2500 - n + 1, n):
                    curve = subset_curve(evals, lo, lo + n)
                    ctt, fp = crossing(curve, level), crossing(curve, level, interpolated=False)
                    # a draw that misses a crossing the full set sees fails the rule outright
                    draws["ctt"].setdefault(lo, []).append(math.log(ctt / full_ctt) if ctt else math.inf)
                    draws["first"].setdefault(lo, []).append(math.log(fp / full_fp) if fp else math.inf)
                    draws["final"].setdefault(lo, []).append(final_accuracy(curve, budget) - full_final)
                    jitters.append(jitter(curve))
            raw = {k: rms([x for xs in v.values() for x in xs]) for k, v in draws.items()}
            left = {k: not_cancelling(v) for k, v in draws.items()}
            passes = left["ctt"] <= thresholds[0] and left["final"] <= thresholds[1]
            verdicts.append((n * evaluated, -every, n, every, passes))
            print(f"{n} | {every:,} | {evaluated} | {n * evaluated:,} | {left['ctt']:.4f} ({raw['ctt']:.4f}) | "
                  f"{left['first']:.4f} ({raw['first']:.4f}) | {left['final']:.4f} ({raw['final']:.4f}) | "
                  f"{statistics.median(jitters):.4f} | {'yes' if passes else 'no'}")
    chosen = min((v for v in verdicts if v[4]), default=None)
    print()
    print(f"chosen by the rule: {chosen[2]} problems every {chosen[3]:,}" if chosen else
          "no candidate passes: v2's 2,500 problems every 120k stay")
    shares = [r["wall_seconds"]["evaluation"] / r["wall_seconds"]["total"] for r in runs]
    print(f"evaluation's share of the recorded runs' wall time (v2 settings): median {statistics.median(shares):.1%}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    rec.add_argument("--strategy", default="on_policy")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--budget", type=float, help="a shorter run, to try the script (default: the workload's)")
    ana = sub.add_parser("analyse")
    ana.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "record":
        record(args.seeds, args.out, args.strategy, args.budget)
        return 0
    return analyse(args.out)


if __name__ == "__main__":
    sys.exit(main())

"""Generation time of the CPU tier's rollouts: transformers `generate` (HFEngine) against KVEngine.

    python benchmarks/sampler_speed.py [--workload arith-tiny] [--prompts 8] [--rounds 30] [--eval-rounds 3]

Times `--prompts` prompts x G completions (the workload's group size, temperature and completion
length) from the workload's start model on one thread, each engine called one prompt at a time
(as the pipeline calls it today) and with every prompt in one call. The contenders take turns
within each round, so a slow spell of the machine hits them alike; prints the median ms per
round's rollouts and each one's speed relative to HFEngine called one prompt at a time. Then
times one checkpoint's evaluation (the workload's eval sets, as the pipeline runs it) with each engine.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="arith-tiny")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--eval-rounds", type=int, default=3)
    args = parser.parse_args()

    from benchmark.engine.eval_sets import eval_sets, evaluate_sets
    from benchmark.engine.stream import stream_doc
    from benchmark.grading.prompts import PromptFormat
    from benchmark.rl.generation import HFEngine
    from benchmark.rl.policy import load_start_policy, set_threads
    from benchmark.rl.sampler import KVEngine
    from benchmark.workload import load_workload

    set_threads()
    workload = load_workload(args.workload)
    task = workload.load_task()
    model, tokenizer, _ = load_start_policy(workload)
    prompt = PromptFormat(tokenizer, workload.model.prompt_format)
    docs = task.docs("train")
    g = workload.grpo
    max_new_tokens = workload.max_new_tokens or task.max_new_tokens
    engines = {"HFEngine": HFEngine(copy.deepcopy(model), tokenizer), "KVEngine": KVEngine(model, tokenizer)}

    def one_per_call(engine, prompts, seed):
        return [engine.generate([p], g.group_size, g.temperature, max_new_tokens, seed + i)[0]
                for i, p in enumerate(prompts)]

    def all_in_one(engine, prompts, seed):
        return engine.generate(prompts, g.group_size, g.temperature, max_new_tokens, seed)

    contenders = {(name, label): (engine, call) for name, engine in engines.items()
                  for label, call in ((f"1 prompt x {args.prompts} calls", one_per_call),
                                      (f"{args.prompts} prompts in 1 call", all_in_one))}
    times = {key: [] for key in contenders}
    tokens = {key: 0 for key in contenders}
    for round_ in range(-2, args.rounds):  # two warm-up rounds, untimed
        prompts = [prompt(task.doc_to_text(stream_doc(docs, 0, (round_ + 2) * args.prompts + i)))
                   for i in range(args.prompts)]
        order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
        for key in order:
            engine, call = contenders[key]
            start = time.perf_counter()
            groups = call(engine, prompts, 1000 * (round_ + 2))
            seconds = time.perf_counter() - start
            if round_ >= 0:
                times[key].append(seconds * 1000)
                tokens[key] += sum(len(c.completion_ids) for group in groups for c in group)

    reference = statistics.median(times[next(iter(contenders))])
    rollouts = args.prompts * g.group_size
    print(f"{workload.name}: {rollouts} rollouts per round ({args.prompts} prompts x G = {g.group_size}, T = "
          f"{g.temperature}, max {max_new_tokens} new tokens), {args.rounds} rounds, 1 thread")
    header = ("engine", "calls", f"ms per {rollouts} rollouts (median)", "IQR ms", "tokens per rollout",
              "speed vs HFEngine, 1 prompt per call")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for (name, label), ms in times.items():
        q = statistics.quantiles(ms, n=4)
        print(f"{name} | {label} | {statistics.median(ms):.2f} | {q[2] - q[0]:.2f} | "
              f"{tokens[name, label] / (rollouts * args.rounds):.2f} | {reference / statistics.median(ms):.2f}x")

    sets = eval_sets(workload, task)
    eval_seconds = {name: [] for name in engines}
    for round_ in range(args.eval_rounds):
        for name in engines if round_ % 2 == 0 else reversed(engines):
            start = time.perf_counter()
            evaluate_sets(engines[name], sets, workload, 0, round_, prompt)
            eval_seconds[name].append(time.perf_counter() - start)
    e = workload.eval
    print(f"\nevaluation at a checkpoint ({e.num_problems} problems at T = {e.temperature}, {e.pass_k_problems} x "
          f"{e.pass_k_samples} samples at T = 1), {args.eval_rounds} rounds")
    print("engine | seconds (median) | speed vs HFEngine")
    print("--- | --- | ---")
    for name, seconds in eval_seconds.items():
        print(f"{name} | {statistics.median(seconds):.2f} | "
              f"{statistics.median(eval_seconds['HFEngine']) / statistics.median(seconds):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

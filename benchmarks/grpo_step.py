"""One GRPO step of the CPU tier: ReplayBench against TRL's GRPOTrainer and a plain PyTorch loop.

    python benchmarks/grpo_step.py [--rounds 20] [--warmup 3]

Needs TRL (`pip install -e '.[bench]'`). Each round, every contender takes one step on the same 8 prompts of
the arith-tiny training stream: G = 8 completions each (64 rollouts), rewards from the task's verifier,
group-relative advantages, one clipped-ratio GRPO update (token mean, no KL, AdamW at the workload's learning
rate and betas, gradients clipped at 1), each on its own copy of the start model, on one thread. Times are CPU
time (`time.process_time`), medians over the rounds after the warm-up; the contenders take turns within each
round (the order flips every round), so a slow spell of the machine hits them alike. The ratios are what
carries over to another machine, not the milliseconds.

How each step is split:
- ReplayBench: generation = one `KVEngine.generate` call for the 8 prompts (as the pipeline calls it);
  rewards and batch = the task's scores, advantages and `Rollout` records (`build_rollouts`); training = one
  `GRPOTrainer.step`; weight sync = the trainer's weights into the engine's own model, which the pipeline
  does after every step (`sync_every: 1`).
- TRL: `trainer.train()` runs the steps, with a callback that runs the other contenders between TRL's steps
  (their time is taken out of TRL's). A step is everything TRL does from the end of one step to the end of
  the next (data loader, generation, rewards, loss, backward, clipping, optimiser, scheduler, its metrics).
  generation = inside `model.generate`; rewards and batch = the rest of `_prepare_inputs` (tokenising,
  decoding, padding, reward function, advantages, its completion metrics); training = the rest of the step.
  With one optimisation step per generation batch and beta = 0, TRL runs no extra forward pass for the old
  or reference log-probs (it takes the new ones, detached).
- Plain loop: generation = `model.generate` on the 64 rows (sampling at T = 1 with no top-k/top-p);
  rewards and batch = decoding, scores, advantages; training = a forward on prompt + completion, log-softmax,
  the clipped loss with the detached log-probs as the old ones (as TRL does), backward, clipping, AdamW.

benchmarks/full_run.py times a whole run.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

CONTENDERS = ("ReplayBench", "TRL GRPOTrainer", "plain PyTorch loop")
PARTS = ("generation", "rewards and batch", "training", "weight sync")


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


class CPUClock:
    """CPU time accumulated while running; paused while another contender runs inside TRL's loop."""

    def __init__(self):
        self.total, self.since = 0.0, None

    def resume(self):
        self.since = time.process_time()

    def pause(self):
        self.total += time.process_time() - self.since


def timed(function, sink: dict, key: str):
    """`function`, adding the CPU time of each call to sink[key]."""
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            sink[key] += time.process_time() - start
    return wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="arith-tiny")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first, at least 1 (TRL's first step "
                        "includes its set-up)")
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup must be at least 1: TRL's first step includes its set-up")
    if importlib.util.find_spec("trl") is None:
        print("benchmarks/grpo_step.py compares against TRL, which is not installed: pip install -e '.[bench]'")
        return 2

    from benchmark.rl.policy import set_threads

    set_threads()
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renames, which TRL still calls
    step_table(args)
    return 0


def step_table(args) -> None:
    import datasets
    import torch
    import trl
    from transformers import PrinterCallback, TrainerCallback

    import benchmark
    from benchmark.engine.ledger import PendingGroup, build_rollouts
    from benchmark.engine.stream import doc_id, stream_doc
    from benchmark.grading.prompts import PromptFormat
    from benchmark.rl.grpo import GRPOTrainer
    from benchmark.rl.policy import load_start_policy
    from benchmark.rl.sampler import transformers_engine
    from benchmark.workload import load_workload

    workload = load_workload(args.workload)
    task = workload.load_task()
    g = workload.grpo
    model, tokenizer, _ = load_start_policy(workload)
    prompt_format = PromptFormat(tokenizer, workload.model.prompt_format)
    max_new_tokens = workload.max_new_tokens or task.max_new_tokens
    train_docs = task.docs("train")
    steps = args.warmup + args.rounds
    round_docs = [[stream_doc(train_docs, 0, r * args.prompts + i) for i in range(args.prompts)] for r in range(steps)]
    times = {name: {part: [] for part in PARTS} | {"total": []} for name in CONTENDERS}
    tokens = {name: [0, 0] for name in CONTENDERS}  # prompt, completion tokens of the timed rounds

    def record(name: str, round_: int, parts: dict, prompt_tokens: int, completion_tokens: int) -> None:
        if round_ < args.warmup:
            return
        for part, seconds in parts.items():
            times[name][part].append(seconds)
        times[name]["total"].append(sum(parts.values()))
        tokens[name][0] += prompt_tokens
        tokens[name][1] += completion_tokens

    # ReplayBench, as the pipeline runs a step: the engine holds its own copy of the weights
    trainer = GRPOTrainer.from_config(copy.deepcopy(model), tokenizer.pad_token_id, g)
    engine = transformers_engine(copy.deepcopy(model), tokenizer, workload.model.source)

    def replaybench_round(round_: int) -> None:
        docs = round_docs[round_]
        t0 = time.process_time()
        groups = engine.generate([prompt_format(task.doc_to_text(d)) for d in docs], n=g.group_size,
                                 temperature=g.temperature, max_new_tokens=max_new_tokens,
                                 seed=[1000 * round_ + i for i in range(len(docs))])
        t1 = time.process_time()
        rollouts = []
        for i, (doc, group) in enumerate(zip(docs, groups)):
            pending = PendingGroup(doc_id(doc), group, task.score_many(doc, [c.text for c in group]), round_)
            rollouts += build_rollouts(pending, len(rollouts), i, round_, 0.0)
        t2 = time.process_time()
        trainer.step(rollouts)
        t3 = time.process_time()
        engine.load_weights(trainer.model.state_dict(), round_ + 1)
        t4 = time.process_time()
        record("ReplayBench", round_, dict(zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3))),
               sum(len(r.prompt_ids) for r in rollouts), sum(len(r.completion_ids) for r in rollouts))

    # the plain loop: what one would write by hand with transformers' generate
    plain_model = copy.deepcopy(model)
    plain_optimizer = torch.optim.AdamW(plain_model.parameters(), lr=g.lr, betas=g.betas, weight_decay=g.weight_decay)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id

    def plain_round(round_: int) -> None:
        docs = round_docs[round_]
        t0 = time.process_time()
        batch = tokenizer([task.doc_to_text(d) for d in docs for _ in range(g.group_size)], return_tensors="pt",
                          padding=True, add_special_tokens=False)
        plain_model.eval()
        with torch.no_grad():
            sequences = plain_model.generate(**batch, do_sample=True, temperature=g.temperature, top_k=0, top_p=1.0,
                                             max_new_tokens=max_new_tokens, pad_token_id=pad, eos_token_id=eos)
        t1 = time.process_time()
        prompt_length = batch["input_ids"].shape[1]
        completions = sequences[:, prompt_length:]
        is_eos = completions == eos
        ends = torch.where(is_eos.any(1), is_eos.int().argmax(1), completions.shape[1])
        completion_mask = torch.arange(completions.shape[1]) <= ends[:, None]  # up to and including eos
        texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
        rewards = torch.tensor(task.score_pairs([(docs[row // g.group_size], text) for row, text in enumerate(texts)]))
        by_group = rewards.view(-1, g.group_size)
        advantages = ((by_group - by_group.mean(1, keepdim=True)) / (by_group.std(1, keepdim=True) + 1e-4)).view(-1)
        t2 = time.process_time()
        plain_model.train()
        attention = torch.cat([batch["attention_mask"], completion_mask.long()], 1)
        logits = plain_model(input_ids=sequences, attention_mask=attention).logits[:, prompt_length - 1:-1]
        logp = torch.log_softmax(logits.float() / g.temperature, -1).gather(-1, completions[..., None]).squeeze(-1)
        ratio = torch.exp(logp - logp.detach())
        adv = advantages[:, None]
        per_token = -torch.minimum(ratio * adv, ratio.clamp(1 - g.eps_low, 1 + g.eps_high) * adv)
        loss = (per_token * completion_mask).sum() / completion_mask.sum()
        plain_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(plain_model.parameters(), g.max_grad_norm)
        plain_optimizer.step()
        t3 = time.process_time()
        record("plain PyTorch loop", round_, dict(zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, 0.0))),
               batch["attention_mask"].sum().item(), completion_mask.sum().item())

    # TRL drives the rounds: the other two run inside its loop, off its clock
    clock = CPUClock()
    trl_parts = {"generate": 0.0, "prepare": 0.0, "step_start": 0.0}
    trl_model = copy.deepcopy(model)
    trl_tokens = [0, 0]

    def others(round_: int) -> None:
        for run in (replaybench_round, plain_round) if round_ % 2 == 0 else (plain_round, replaybench_round):
            run(round_)

    class Interleave(TrainerCallback):
        # even rounds: the others, then TRL's step; odd rounds: TRL's step, then the others
        def on_step_begin(self, args_, state, control, **kwargs):
            if state.global_step % 2 == 0:
                clock.pause()
                others(state.global_step)
                clock.resume()

        def on_step_end(self, args_, state, control, **kwargs):
            clock.pause()
            round_ = state.global_step - 1
            step = clock.total - trl_parts["step_start"]
            generate, rest = trl_parts["generate"], trl_parts["prepare"] - trl_parts["generate"]
            record("TRL GRPOTrainer", round_, dict(zip(PARTS, (generate, rest, step - generate - rest, 0.0))),
                   *trl_tokens)
            trl_parts.update(generate=0.0, prepare=0.0, step_start=clock.total)
            trl_tokens[:] = [0, 0]
            if round_ % 2 == 1:
                others(round_)
            clock.resume()

    all_docs = [doc for docs in round_docs for doc in docs]
    prompt_lengths = [len(ids) for ids in tokenizer([task.doc_to_text(d) for d in all_docs])["input_ids"]]

    def reward(completions, doc_index, completion_ids, **_):
        trl_tokens[0] += sum(prompt_lengths[i] for i in doc_index)
        trl_tokens[1] += sum(len(ids) for ids in completion_ids)
        return task.score_pairs([(all_docs[i], text) for i, text in zip(doc_index, completions)])

    dataset = datasets.Dataset.from_list([{"prompt": task.doc_to_text(doc), "doc_index": i}
                                          for i, doc in enumerate(all_docs)])
    config = trl.GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="replaybench-grpo-step-"), use_cpu=True, bf16=False, fp16=False,
        per_device_train_batch_size=args.prompts * g.group_size, gradient_accumulation_steps=1,
        num_generations=g.group_size, max_completion_length=max_new_tokens, temperature=g.temperature,
        top_k=0, top_p=1.0, beta=0.0, num_iterations=1, epsilon=g.eps_low, epsilon_high=g.eps_high,
        loss_type="dapo",  # token mean over the batch: ReplayBench's token_mean with one process, no accumulation
        learning_rate=g.lr, adam_beta1=g.betas[0], adam_beta2=g.betas[1], weight_decay=g.weight_decay,
        max_grad_norm=g.max_grad_norm, lr_scheduler_type="constant", max_steps=steps, shuffle_dataset=False,
        remove_unused_columns=False, logging_strategy="no", save_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0, seed=0)
    trl_trainer = trl.GRPOTrainer(model=trl_model, reward_funcs=[reward], args=config, train_dataset=dataset,
                                  processing_class=tokenizer, callbacks=[Interleave()])
    trl_trainer.remove_callback(PrinterCallback)  # its end-of-training metrics line
    trl_model.generate = timed(trl_model.generate, trl_parts, "generate")
    trl_trainer._prepare_inputs = timed(trl_trainer._prepare_inputs, trl_parts, "prepare")
    clock.resume()
    trl_trainer.train()
    clock.pause()

    rollouts = args.prompts * g.group_size
    print(f"{workload.name}: one GRPO step on {rollouts} rollouts ({args.prompts} prompts x G = {g.group_size}, "
          f"T = {g.temperature}, max {max_new_tokens} new tokens), {args.rounds} rounds after {args.warmup} warm-up, "
          f"{torch.get_num_threads()} thread, TRL {trl.__version__}; CPU ms, median over rounds; "
          f"ReplayBench from {Path(benchmark.__file__).parent}")
    print()
    print(f"| per step of {rollouts} rollouts | " + " | ".join(CONTENDERS) + " |")
    print("|---|" + "---|" * len(CONTENDERS))
    for part in PARTS:
        print(f"| {part} | " + " | ".join(f"{median_ms(times[name][part]):.1f} ms" if any(times[name][part]) else "—"
                                          for name in CONTENDERS) + " |")
    totals = {name: median_ms(times[name]["total"]) for name in CONTENDERS}
    print("| total | " + " | ".join(f"{totals[name]:.1f} ms" for name in CONTENDERS) + " |")
    reference = totals["ReplayBench"]
    print("| total (ratio to ReplayBench) | " + " | ".join(f"{totals[name] / reference:.2f}" for name in CONTENDERS)
          + " |")
    timed_rollouts = rollouts * args.rounds
    print("| tokens per rollout (prompt + completion) | " + " | ".join(
        f"{p / timed_rollouts:.1f} + {c / timed_rollouts:.2f}" for p, c in tokens.values()) + " |")
    print()
    print(f"ReplayBench's total / TRL's: {reference / totals['TRL GRPOTrainer']:.2f}; "
          f"/ the plain loop's: {reference / totals['plain PyTorch loop']:.2f}")


if __name__ == "__main__":
    sys.exit(main())

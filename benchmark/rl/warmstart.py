"""Build the CPU tier's start checkpoint: the tiny model trained by supervised learning on the task's
format until it reaches a modest accuracy, so RL has room to improve. Deterministic for a seed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.grading.evaluation import evaluate
from benchmark.grading.tasks import Task
from benchmark.rl.generation import HFEngine
from benchmark.rl.policy import weights_hash
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model, count_parameters
from benchmark.workload import Workload


def _sft_batch(tokenizer, docs, task: Task):
    """Right-padded prompt+target+eos with the loss on the target tokens only."""
    rows, masks = [], []
    for d in docs:
        prompt = tokenizer.encode(task.doc_to_text(d), add_special_tokens=False)
        answer = tokenizer.encode(d["target"], add_special_tokens=False) + [tokenizer.eos_token_id]
        rows.append(prompt + answer)
        masks.append([0] * len(prompt) + [1] * len(answer))
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width))
    for i, (r, m) in enumerate(zip(rows, masks)):
        ids[i, : len(r)] = torch.tensor(r)
        attention[i, : len(r)] = 1
        loss_mask[i, : len(m)] = torch.tensor(m, dtype=torch.float)
    return ids, attention, loss_mask


def warm_start(workload: Workload, task: Task, out_dir: Path, log=print) -> dict:
    cfg, mcfg = workload.warm_start, workload.model
    torch.manual_seed(cfg.seed)
    tokenizer = build_char_tokenizer(mcfg.alphabet)
    model = build_tiny_model(tokenizer, hidden_size=mcfg.hidden_size, num_layers=mcfg.num_layers,
                             num_heads=mcfg.num_heads, num_kv_heads=mcfg.num_kv_heads,
                             max_positions=mcfg.max_positions, seed=cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    # a separate supervised split when the task has one, so RL prompts stay unseen
    has_sft = "sft" in task.config.get("dataset_kwargs", {}).get("data_files", {})
    train, test = task.docs("sft" if has_sft else "train"), task.docs("test")[: cfg.eval_problems]
    rng = np.random.default_rng(cfg.seed)
    engine = HFEngine(model, tokenizer)
    start, accuracy, step = time.time(), 0.0, 0
    for step in range(1, cfg.max_steps + 1):
        model.train()
        batch = [train[i] for i in rng.integers(len(train), size=cfg.batch_size)]
        ids, attention, loss_mask = _sft_batch(tokenizer, batch, task)
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        token_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
        loss = (token_loss * loss_mask[:, 1:].reshape(-1)).sum() / loss_mask[:, 1:].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % cfg.eval_every == 0:
            accuracy = evaluate(engine, task, test, temperature=0.0, pass_k=[1], pass_k_samples=1,
                                pass_k_problems=0, seed=0)["accuracy"]
            log(f"warm start step {step}: loss {loss.item():.3f}, greedy accuracy {accuracy:.3f}")
            if accuracy >= cfg.target_accuracy:
                break
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    info = {
        "workload": workload.name, "task": task.name, "task_version": task.version, "steps": step,
        "greedy_accuracy": accuracy, "parameters": count_parameters(model), "seconds": round(time.time() - start, 1),
        "weights_sha256": weights_hash(model), "config": {"model": vars(mcfg), "warm_start": vars(cfg)},
    }
    (out_dir / "warm_start.json").write_text(json.dumps(info, indent=2) + "\n")
    return info

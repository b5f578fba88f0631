"""Evaluation: pass@1 and pass@k (the unbiased estimator of Chen et al. 2021) on a task's test split."""

from __future__ import annotations

from math import comb

from benchmark.generation import GenerationEngine
from benchmark.tasks import Task

EVAL_BATCH = 256  # prompts per generate call


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _sample(engine: GenerationEngine, task: Task, docs: list[dict], n: int, temperature: float, seed: int):
    """[[completion text] * n per doc], generated in batches with seeds derived from `seed`."""
    texts = []
    for start in range(0, len(docs), EVAL_BATCH):
        chunk = docs[start:start + EVAL_BATCH]
        groups = engine.generate([task.doc_to_text(d) for d in chunk], n=n, temperature=temperature,
                                 max_new_tokens=task.max_new_tokens, seed=seed + start)
        texts.extend([c.text for c in g] for g in groups)
    return texts


def evaluate(engine: GenerationEngine, task: Task, docs: list[dict], *, temperature: float, pass_k: list[int],
             pass_k_samples: int, pass_k_problems: int, seed: int, keep_samples: int = 0) -> dict:
    """accuracy (pass@1 at `temperature`, 0 = greedy) on `docs`, and pass@k at temperature 1.0
    from `pass_k_samples` samples on the first `pass_k_problems` docs."""
    firsts = _sample(engine, task, docs, 1, temperature, seed)
    scores = [task.score(d, t[0]) for d, t in zip(docs, firsts)]
    result = {"accuracy": sum(scores) / len(scores)}
    ks = [k for k in pass_k if k > 1]
    if ks and pass_k_problems > 0:
        subset = docs[:pass_k_problems]
        samples = _sample(engine, task, subset, pass_k_samples, 1.0, seed + 1_000_003)
        correct = [sum(task.score(d, t) >= 1.0 for t in ts) for d, ts in zip(subset, samples)]
        for k in [1] + ks:
            result[f"pass_at_{k}"] = sum(pass_at_k(pass_k_samples, c, k) for c in correct) / len(correct)
    if keep_samples:
        result["samples"] = [
            {"prompt": task.doc_to_text(d), "completion": t[0], "score": s}
            for d, t, s in list(zip(docs, firsts, scores))[:keep_samples]
        ]
    return result

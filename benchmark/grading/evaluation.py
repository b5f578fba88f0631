"""Evaluation: pass@k (the unbiased estimator of Chen et al. 2021) from n samples per problem.

One code path serves the pipeline's in-loop evaluations (`evaluate`) and `replaybench eval`
(`pass_at_ks`, with the paper's temperatures): sample n completions per problem with the engine,
score each with the task's reward, then average pass@k over problems.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Callable

from benchmark.grading.prompts import identity
from benchmark.grading.tasks import Task
from benchmark.rl.generation import GenerationEngine
from benchmark.rollout import is_correct

EVAL_BATCH = 256  # prompts per generate call in the pipeline's evaluations


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass
class Samples:
    """n completions per problem at one temperature, with their scores (the task's reward)."""

    temperature: float
    completions: list[list[str]]
    scores: list[list[float]]

    @property
    def n(self) -> int:
        return len(self.completions[0]) if self.completions else 0

    def pass_at(self, k: int) -> float:
        """pass@k averaged over problems; a sample counts as correct by is_correct."""
        correct = [sum(map(is_correct, row)) for row in self.scores]
        return sum(pass_at_k(self.n, c, k) for c in correct) / len(correct)


def sample(engine: GenerationEngine, task: Task, docs: list[dict], n: int, temperature: float, seed: int, *,
           prompt: Callable[[str], str] = identity, max_new_tokens: int | None = None, batch_size: int = EVAL_BATCH,
           on_batch: Callable[[int], None] | None = None) -> Samples:
    """n completions per doc, generated `batch_size` prompts at a time with seeds derived from `seed`, and
    scored. Same seed, batch size and engine: same completions. on_batch(docs done) after each batch."""
    completions, scores = [], []
    for start in range(0, len(docs), batch_size):
        chunk = docs[start:start + batch_size]
        groups = engine.generate([prompt(task.doc_to_text(d)) for d in chunk], n=n, temperature=temperature,
                                 max_new_tokens=max_new_tokens or task.max_new_tokens, seed=seed + start)
        texts = [[c.text for c in group] for group in groups]
        # the whole batch at once, so that a slow verifier (Lean) checks across problems concurrently
        rewards = iter(task.score_pairs([(doc, t) for doc, row in zip(chunk, texts) for t in row]))
        for row in texts:
            completions.append(row)
            scores.append([next(rewards) for _ in row])
        if on_batch:
            on_batch(start + len(chunk))
    return Samples(temperature, completions, scores)


def pass_at_ks(engine: GenerationEngine, task: Task, docs: list[dict], *, n: int, ks: list[int], seed: int,
               temperature_pass1: float = 0.1, temperature_pass_k: float = 1.0, greedy: bool = False,
               **sampling) -> tuple[dict, list[Samples]]:
    """The paper's protocol: pass@1 from n samples at `temperature_pass1` (greedy: one greedy sample),
    pass@k for k > 1 from n samples at `temperature_pass_k`. One set of samples serves both when the
    temperatures are equal. Returns ({"pass_at_k": value}, the sample sets)."""
    ks = sorted(set(ks))
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise ValueError(f"k must be between 1 and n = {n}, got {ks}")
    results, sets = {}, []
    if 1 in ks:
        first = sample(engine, task, docs, 1 if greedy else n, 0.0 if greedy else temperature_pass1, seed, **sampling)
        results["pass_at_1"] = first.pass_at(1)
        sets.append(first)
    higher = [k for k in ks if k > 1]
    if higher:
        if sets and sets[0].temperature == temperature_pass_k and sets[0].n == n:
            many = sets[0]
        else:
            many = sample(engine, task, docs, n, temperature_pass_k, seed + 1_000_003, **sampling)
            sets.append(many)
        results.update({f"pass_at_{k}": many.pass_at(k) for k in higher})
    return results, sets


def evaluate(engine: GenerationEngine, task: Task, docs: list[dict], *, temperature: float, pass_k: list[int],
             pass_k_samples: int, pass_k_problems: int, seed: int, keep_samples: int = 0,
             prompt: Callable[[str], str] = identity, max_new_tokens: int | None = None) -> dict:
    """The pipeline's evaluation: accuracy (one sample per doc at `temperature`, 0 = greedy) on `docs`, and
    pass@k at temperature 1.0 from `pass_k_samples` samples on the first `pass_k_problems` docs."""
    sampling = dict(prompt=prompt, max_new_tokens=max_new_tokens)
    firsts = sample(engine, task, docs, 1, temperature, seed, **sampling)
    scores = [row[0] for row in firsts.scores]
    result = {"accuracy": sum(scores) / len(scores)}
    ks = [k for k in pass_k if k > 1]
    if ks and pass_k_problems > 0:
        many = sample(engine, task, docs[:pass_k_problems], pass_k_samples, 1.0, seed + 1_000_003, **sampling)
        for k in [1] + ks:
            result[f"pass_at_{k}"] = many.pass_at(k)
    if keep_samples:
        result["samples"] = [
            {"prompt": prompt(task.doc_to_text(d)), "completion": c[0], "score": s}
            for d, c, s in list(zip(docs, firsts.completions, scores))[:keep_samples]
        ]
    return result

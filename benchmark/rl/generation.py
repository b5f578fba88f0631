"""Generation engines: sample completions with the behaviour policy's per-token log-probs.

The pipeline only talks to `GenerationEngine`. On transformers models: `HFEngine` (transformers
`generate`, any model) and `KVEngine` (`benchmark/rl/sampler.py`: its own KV-cached decoding loop,
the CPU tier's engine); `VLLMEngine` (`benchmark/rl/vllm_engine.py`, the `gpu` extra) sits behind
the same interface. All load new weights through `benchmark.rl.weight_sync`.

All sample from exactly softmax(logits / T) (or greedily) and return the log-probs of that
distribution, which is what the trainer recomputes. Nothing of a checkpoint's own generation
defaults (a real instruct model ships e.g. top_k, top_p, repetition_penalty) may reshape the
distribution, or the returned log-probs would not be the behaviour policy's.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import GenerationConfig

from benchmark.errors import UserError
from benchmark.rl.weight_sync import engine_weights, load_into_model


@dataclass(frozen=True)
class Completion:
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]  # up to and including the end-of-sequence token, if produced
    logprobs: tuple[float, ...]  # behaviour log-prob of each completion token
    text: str  # decoded completion without special tokens


class EngineError(UserError):
    """An engine that cannot start or load weights; the message names the fix."""


class GenerationEngine:
    """Holds one version of the policy weights and samples from it."""

    version: int = 0

    def load_weights(self, state_dict: dict, version: int) -> None:
        raise NotImplementedError

    def generate(self, prompts: list[str], n: int, temperature: float, max_new_tokens: int,
                 seed: int | Sequence[int]) -> list[list[Completion]]:
        """n completions per prompt. temperature 0 means greedy. The same seed gives the same output.
        seed: one for the whole call, or one per prompt: then a prompt's completions depend on its own
        seed and the weights only, not on the other prompts of the call (up to the last bits of a
        batched forward pass)."""
        raise NotImplementedError


def per_prompt_seeds(seed: int | Sequence[int], prompts: int) -> list[int] | None:
    """The list of per-prompt seeds, checked against the number of prompts; None for one seed per call."""
    if isinstance(seed, numbers.Integral):
        return None
    seeds = [int(s) for s in seed]
    if len(seeds) != prompts:
        raise ValueError(f"{len(seeds)} seeds for {prompts} prompts: pass one seed, or one per prompt")
    return seeds


def sampling_config(temperature: float, max_new_tokens: int, pad_token_id: int, eos_token_id: int) -> GenerationConfig:
    """Everything `generate` samples with: plain sampling at `temperature` (greedy at 0), no top-k,
    top-p, min-p or typical-p truncation, no repetition or n-gram penalties, one beam; raw logits returned."""
    greedy = temperature <= 0
    knobs = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                                      typical_p=1.0, epsilon_cutoff=0.0, eta_cutoff=0.0)
    return GenerationConfig(
        **knobs, num_beams=1, repetition_penalty=1.0, no_repeat_ngram_size=0, max_new_tokens=max_new_tokens,
        pad_token_id=pad_token_id, eos_token_id=eos_token_id, output_logits=True, return_dict_in_generate=True,
    )


@contextlib.contextmanager
def without_checkpoint_defaults(model):
    """transformers fills every field a passed GenerationConfig leaves unset from the model's own
    `generation_config` (the checkpoint's generation_config.json): hide it for the call, so only
    `sampling_config` and transformers' neutral defaults apply."""
    saved = model.generation_config
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved


class TransformersEngine(GenerationEngine):
    """What the engines on a transformers model of their own share: weights loaded in place on sync,
    completions cut after the end-of-sequence token and decoded."""

    def __init__(self, model, tokenizer, version: int = 0):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.version = version

    def load_weights(self, state_dict: dict, version: int) -> None:
        tied = bool(getattr(self.model.config, "tie_word_embeddings", False))
        weights = engine_weights(state_dict, tie_word_embeddings=tied, dtype=self.model.dtype)
        load_into_model(self.model, weights, tied)
        self.version = version

    def completion(self, prompt_ids: tuple[int, ...], new_ids: list[int], token_logp: list[float]) -> Completion:
        """A row's sampled tokens up to and including the first end-of-sequence token, if any."""
        eos = self.tokenizer.eos_token_id
        if eos in new_ids:
            new_ids = new_ids[: new_ids.index(eos) + 1]
        return Completion(prompt_ids=prompt_ids, completion_ids=tuple(new_ids),
                          logprobs=tuple(token_logp[: len(new_ids)]),
                          text=self.tokenizer.decode(new_ids, skip_special_tokens=True))


class HFEngine(TransformersEngine):
    """transformers `generate` on a model of its own (weights loaded in place on sync)."""

    @torch.no_grad()
    def generate(self, prompts, n, temperature, max_new_tokens, seed):
        seeds = per_prompt_seeds(seed, len(prompts))
        if seeds is not None:  # one call per prompt: its samples then depend on its own seed only
            return [self.generate([p], n, temperature, max_new_tokens, s)[0] for p, s in zip(prompts, seeds)]
        tok = self.tokenizer
        enc = tok([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True,
                  add_special_tokens=False).to(self.model.device)
        greedy = temperature <= 0
        config = sampling_config(temperature, max_new_tokens, tok.pad_token_id, tok.eos_token_id)
        # A private RNG stream per call: results depend on the seed only, not on what ran before.
        device = self.model.device
        with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]), \
                without_checkpoint_defaults(self.model):
            torch.manual_seed(seed)
            out = self.model.generate(**enc, generation_config=config)
        new_tokens = out.sequences[:, enc["input_ids"].shape[1]:]
        logits = torch.stack(out.logits, 1).float()  # raw logits, [rows, new, vocab]
        logp = F.log_softmax(logits / (temperature if not greedy else 1.0), -1)
        token_logp = logp.gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
        results = []
        for row in range(new_tokens.shape[0]):
            mask = enc["attention_mask"][row].bool()
            prompt_ids = tuple(enc["input_ids"][row][mask].tolist())
            results.append(self.completion(prompt_ids, new_tokens[row].tolist(), token_logp[row].tolist()))
        return [results[i * n:(i + 1) * n] for i in range(len(prompts))]

"""`KVEngine`: the CPU tier's sampler, a KV-cached decoding loop over the model's plain forward.

transformers `generate` (`HFEngine`) spends a large share of a small model's time on its own
bookkeeping and runs the prompt once per completion row. This loop does only what sampling needs:
- each prompt is prefilled once and its KV cache copied to its n rows (greedy: one row, copied at the end);
- several prompts per call, left-padded, with the attention mask and position ids (counted from
  each row's first real token) that `generate` would use, so greedy output is the same token for token;
- a row that produced the end-of-sequence token leaves the batch (its cache rows are dropped);
  decoding stops when no row is left or after max_new_tokens.

Sampling is exact: the token is argmax(log softmax(logits / T) + Gumbel noise), a draw from
softmax(logits / T), with noise from one `torch.Generator` per prompt. With one seed per prompt a
prompt's completions then depend on its seed and the weights only, whichever prompts share the call;
one seed s for the call stands for s + i for prompt i. Noise is drawn in blocks of steps whose size
depends only on n, the vocabulary and max_new_tokens, so the other prompts of a call never shift a
prompt's stream. The forward pass itself is batched: a prompt's log-probs can differ in the last
bits with the company it keeps, and so, in a near tie, could a sampled token (in the tests, tokens
were the same alone and in any company).
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from benchmark.rl.generation import HFEngine, TransformersEngine, per_prompt_seeds

NOISE_ELEMENTS = 1 << 16  # per prompt and block: a tiny vocabulary gets all steps' noise at once


class KVEngine(TransformersEngine):
    """Incremental decoding with a `DynamicCache` on a transformers causal LM of its own."""

    def __init__(self, model, tokenizer, version: int = 0):
        super().__init__(model, tokenizer, version)
        # transformers 5 renamed the forward's `past_key_values` to `cache`
        params = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"

    def _forward(self, ids, mask, positions, cache, **extra):
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         **{self.cache_arg: cache}, **extra)
        return out.logits[:, -1].float()

    @torch.no_grad()
    def generate(self, prompts, n, temperature, max_new_tokens, seed):
        if not prompts:
            return []
        seeds = per_prompt_seeds(seed, len(prompts)) or [seed + i for i in range(len(prompts))]
        greedy = temperature <= 0
        rows_per_prompt = 1 if greedy else n  # greedy rows of a prompt are all alike
        device = self.model.device
        prompt_ids = [tuple(ids) for ids in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]
        ids, mask = left_padded(prompt_ids, self.tokenizer.pad_token_id, device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # a row's first real token is at position 0

        # Without padding the model takes its causal fast path either way: skip building masks
        padded = not bool(mask.all())
        cache = DynamicCache(config=self.model.config)
        logits = self._forward(ids, mask if padded else None, positions, cache, logits_to_keep=1)
        if rows_per_prompt > 1:
            cache.batch_repeat_interleave(rows_per_prompt)
            logits, mask = logits.repeat_interleave(rows_per_prompt, 0), mask.repeat_interleave(rows_per_prompt, 0)
        rows = len(prompts) * rows_per_prompt
        next_position = positions[:, -1:].repeat_interleave(rows_per_prompt, 0) + 1
        noise = None if greedy else GumbelNoise(seeds, rows_per_prompt, logits.shape[-1], max_new_tokens, device)

        tokens = torch.full((rows, max_new_tokens), self.tokenizer.pad_token_id, dtype=torch.long, device=device)
        token_logp = torch.zeros((rows, max_new_tokens), device=device)
        live = torch.arange(rows, device=device)  # output row of each batch row still decoding
        eos = self.tokenizer.eos_token_id
        for step in range(max_new_tokens):
            logp = F.log_softmax(logits / (1.0 if greedy else temperature), -1)
            # greedy on the raw logits, as `generate` does: ties go the same way
            chosen = logits.argmax(-1) if greedy else (logp + noise.at(step, live)).argmax(-1)
            tokens[live, step] = chosen
            token_logp[live, step] = logp.gather(-1, chosen[:, None]).squeeze(-1)
            if step == max_new_tokens - 1:
                break
            going = chosen != eos
            if not going.all():
                if not going.any():
                    break
                kept = going.nonzero().squeeze(-1)
                cache.batch_select_indices(kept)
                live, chosen, mask, next_position = live[kept], chosen[kept], mask[kept], next_position[kept]
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], 1)
            logits = self._forward(chosen[:, None], mask if padded else None, next_position, cache)
            next_position = next_position + 1

        results = [self.completion(prompt_ids[row // rows_per_prompt], ids_, logp_)
                   for row, (ids_, logp_) in enumerate(zip(tokens.tolist(), token_logp.tolist()))]
        groups = [results[i * rows_per_prompt:(i + 1) * rows_per_prompt] for i in range(len(prompts))]
        return [group * n if greedy else group for group in groups]


def left_padded(sequences: list[tuple[int, ...]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) with every sequence aligned on the right, whatever the tokenizer's padding side."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq):] = torch.tensor(seq)
            mask[row, width - len(seq):] = 1
    return ids.to(device), mask.to(device)


class GumbelNoise:
    """Gumbel noise for every row and step, each prompt's from its own generator."""

    def __init__(self, seeds: list[int], rows_per_prompt: int, vocab: int, steps: int, device):
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        self.shape = (rows_per_prompt, vocab)
        self.block = max(1, min(steps, NOISE_ELEMENTS // (rows_per_prompt * vocab)))
        self.device = device
        self.noise: torch.Tensor | None = None  # [block steps, rows, vocab]

    def at(self, step: int, live: torch.Tensor) -> torch.Tensor:
        """The noise of step `step` for the batch rows `live` (output row indices)."""
        if step % self.block == 0:
            blocks = [torch.empty((self.block, *self.shape), device=self.device).exponential_(generator=g)
                      for g in self.generators]
            # -log(E), E ~ Exp(1), is Gumbel; E is kept off 0, where the log is infinite
            self.noise = torch.cat(blocks, 1).clamp_(min=torch.finfo(torch.float32).tiny).log_().neg_()
        return self.noise[step % self.block, live]


def transformers_engine(model, tokenizer, source: str | None, version: int = 0) -> TransformersEngine:
    """The engine for a workload's transformers model: `KVEngine` for the CPU tier's model (source
    "tiny"), `HFEngine` (transformers `generate`, which knows every architecture's quirks) otherwise."""
    return (KVEngine if source == "tiny" else HFEngine)(model, tokenizer, version=version)

"""Trainer weights -> what a generation engine loads when the trainer publishes a new policy version.

A trainer's `state_dict()` is not what an engine should load as is:
- its names may carry wrapper prefixes (`module.` from DistributedDataParallel, `_orig_mod.` from
  torch.compile) that the checkpoint format (the names `save_pretrained` writes) does not have;
- with tied embeddings it lists the same matrix twice (`model.embed_tokens.weight` and
  `lm_head.weight`): checkpoints store it once, under the embedding's name, and engines load it
  there (vLLM skips `lm_head.weight` of a tied model; safetensors refuses shared tensors);
- its tensors live on the trainer's device, in the trainer's dtype, and keep changing in place
  at every optimiser step.
`engine_weights` returns detached CPU copies with checkpoint names, in the engine's dtype. Both
engines (`HFEngine`, `VLLMEngine`) load through it, so the conversion is tested on the CPU tier.
"""

from __future__ import annotations

import torch

WRAPPER_PREFIXES = ("module.", "_orig_mod.")
TIED_HEAD = "lm_head.weight"  # the output projection's name when it shares the input embedding


class WeightSyncError(Exception):
    """Weights that do not fit the engine's model; the message names what differs."""


def checkpoint_name(name: str) -> str:
    """The parameter's name without training wrappers' prefixes (they can nest: module._orig_mod.x)."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in WRAPPER_PREFIXES:
            if name.startswith(prefix):
                name, stripped = name[len(prefix):], True
    return name


def engine_weights(state_dict: dict, *, tie_word_embeddings: bool, dtype: torch.dtype | None = None
                   ) -> dict[str, torch.Tensor]:
    """Checkpoint-format copies of a trainer's weights: name -> contiguous CPU tensor in `dtype`
    (default: each tensor's own), with the tied output head dropped when the model ties it."""
    weights = {}
    for name, tensor in state_dict.items():
        name = checkpoint_name(name)
        if tie_word_embeddings and name == TIED_HEAD:
            continue
        if name in weights:
            raise WeightSyncError(f"two trainer weights map to {name!r}; pass the unwrapped model's state_dict")
        weights[name] = tensor.detach().to(device="cpu", dtype=dtype or tensor.dtype, copy=True).contiguous()
    return weights


def load_into_model(model: torch.nn.Module, weights: dict[str, torch.Tensor], tie_word_embeddings: bool) -> None:
    """Copy checkpoint-format weights into a transformers model in place; every weight must fit."""
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # A tied head is the embedding matrix itself: loading the embedding loaded it.
    missing = [name for name in missing if not (tie_word_embeddings and name == TIED_HEAD)]
    if missing or unexpected:
        raise WeightSyncError(f"weights do not match the engine's model: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")

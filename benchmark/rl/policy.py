"""The starting policy of a workload: model + tokenizer + the hash that identifies the weights.

`source: tiny` loads the warm-started CPU model shipped in the workload's `checkpoint` folder
(`replaybench warmstart` rebuilds it). Any other source is a hub id or a local path, loaded with
transformers as a real model would be.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from benchmark.errors import UserError
from benchmark.paths import REPO_ROOT
from benchmark.workload import Workload


def set_threads() -> None:
    # A fixed thread count keeps CPU kernels' reduction order, hence the metrics, reproducible
    # on one machine. Tiny models gain little from more threads, and oversubscribed cores lose a lot.
    torch.set_num_threads(int(os.environ.get("REPLAYBENCH_THREADS", "1")))


class PolicyError(UserError):
    """A model that cannot be loaded; the message names the fix."""


def weights_hash(model) -> str:
    """SHA-256 over the parameter tensors in name order: the same weights give the same hash."""
    return state_hash(model.state_dict())


def state_hash(state: dict) -> str:
    """weights_hash of a state dict."""
    digest = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        digest.update(name.encode())
        # the raw bytes, whatever the dtype (numpy has no bfloat16)
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def checkpoint_dir(workload: Workload) -> Path:
    return REPO_ROOT / workload.model.checkpoint


def load_start_policy(workload: Workload):
    """(model, tokenizer, info) where info holds the weights hash and how the checkpoint was made."""
    source = workload.model.source
    path = checkpoint_dir(workload) if source == "tiny" else Path(source)
    if source == "tiny" and not (path / "config.json").is_file():
        raise PolicyError(f"start checkpoint missing at {path}: run `replaybench warmstart --workload {workload.name}`")
    model, tokenizer = load_pretrained(str(path) if source == "tiny" else source, dtype=workload.model.dtype)
    info = {"weights_sha256": weights_hash(model), "source": source}
    meta = path / "warm_start.json"
    if meta.is_file():
        info["warm_start"] = json.loads(meta.read_text())
    return model, tokenizer, info


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
GENERIC_TOKENIZERS = ("TokenizersBackend", "PreTrainedTokenizerFast")  # tokenizer_class of a plain tokenizer.json


def load_pretrained(source: str, dtype: str = "float32"):
    """(model, tokenizer) from a local folder or a hub id, the tokenizer padding on the left.

    An unreachable hub fails at once with a PolicyError naming the fix, instead of transformers'
    retries."""
    from benchmark.grading.tasks import hub_reachable

    local = Path(source).exists()
    if not local:
        from huggingface_hub import constants

        if not constants.HF_HUB_OFFLINE and not hub_reachable(constants.ENDPOINT):
            raise PolicyError(
                f"cannot load model {source!r}: no such local folder, and the Hugging Face Hub "
                f"({constants.ENDPOINT}) cannot be reached to download it. Fix: pass a local folder with "
                "config.json, weights and tokenizer files, or set HF_HUB_OFFLINE=1 to use a copy in the "
                "Hugging Face cache")
    try:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=DTYPES[dtype])
        tokenizer = _load_tokenizer(source)
    except (OSError, ValueError) as exc:  # ValueError: a folder transformers cannot read as a model
        raise PolicyError(
            f"cannot load model {source!r}: {exc}. Pass a local folder with config.json and weights, "
            "or a hub id on a machine that reaches the hub (set HF_HUB_OFFLINE=1 to fail fast offline)"
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _load_tokenizer(source: str):
    # A folder whose tokenizer_config.json names the generic class (ours: the CPU tier's character
    # tokenizer) gets its tokenizer.json exactly as saved. AutoTokenizer would substitute the model
    # type's class (Qwen2Tokenizer for a Qwen2 config), which re-reads the character vocabulary as
    # byte-level BPE and silently drops every character outside it instead of mapping it to <unk>.
    config = Path(source) / "tokenizer_config.json"
    if config.is_file() and json.loads(config.read_text()).get("tokenizer_class") in GENERIC_TOKENIZERS:
        return PreTrainedTokenizerFast.from_pretrained(source, padding_side="left")
    return AutoTokenizer.from_pretrained(source, padding_side="left")

"""The starting policy of a workload: model + tokenizer + the hash that identifies the weights.

`source: tiny` loads the warm-started CPU model shipped in the workload's `checkpoint` folder
(`replaybench warmstart` rebuilds it). Any other source is a hub id or a local path, loaded with
transformers as a real model would be.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.workload import Workload

REPO_ROOT = Path(__file__).resolve().parent.parent


class PolicyError(Exception):
    """A model that cannot be loaded; the message names the fix."""


def weights_hash(model) -> str:
    """SHA-256 over the parameter tensors in name order: the same weights give the same hash."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def checkpoint_dir(workload: Workload) -> Path:
    return REPO_ROOT / workload.model.checkpoint


def load_start_policy(workload: Workload):
    """(model, tokenizer, info) where info holds the weights hash and how the checkpoint was made."""
    source = workload.model.source
    path = checkpoint_dir(workload) if source == "tiny" else Path(source)
    if source == "tiny" and not (path / "config.json").is_file():
        raise PolicyError(f"start checkpoint missing at {path}: run `replaybench warmstart --workload {workload.name}`")
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path) if path.exists() else source, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(path) if path.exists() else source, padding_side="left")
    except OSError as exc:
        raise PolicyError(
            f"cannot load model {source!r}: {exc}. Pass a local folder with config.json and weights, "
            "or a hub id on a machine that reaches the hub (set HF_HUB_OFFLINE=1 to fail fast offline)"
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    info = {"weights_sha256": weights_hash(model), "source": source}
    meta = path / "warm_start.json"
    if meta.is_file():
        info["warm_start"] = json.loads(meta.read_text())
    return model, tokenizer, info

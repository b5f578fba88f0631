"""The training stream and the run's seeds: what a run draws, in which order, from which seed."""

from __future__ import annotations

import hashlib
import json

import numpy as np


def derive_seed(seed: int, *names) -> int:
    """A 32-bit seed from a run seed and names; stable across processes (unlike Python's hash())."""
    text = ":".join(str(x) for x in (seed, *names))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def doc_id(doc: dict) -> str:
    """A training document's prompt id: its `id` (or `unique_id`, `name`), else a hash of its content."""
    for key in ("id", "unique_id", "name"):
        if doc.get(key) not in (None, ""):
            return str(doc[key])
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def stream_doc(train_docs: list[dict], seed: int, position: int) -> dict:
    """The training stream: the train split in a seeded order, reshuffled every epoch."""
    n = len(train_docs)
    epoch, index = divmod(position, n)
    order = np.random.default_rng(derive_seed(seed, "stream", epoch)).permutation(n)
    return train_docs[order[index]]

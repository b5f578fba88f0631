"""Writing the published files (results.json, LEADERBOARD.md, index.html, the targets): atomically, and in
JSON, which has no infinity."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np


def json_values(obj):
    """inf -> "inf" (JSON has no infinity), nan -> null, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {k: json_values(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_values(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
    return obj


def write_atomic(path: Path, text: str) -> None:
    """Write a temp file next to path, then rename: a failure leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; these are published files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

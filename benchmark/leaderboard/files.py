"""The published files (results.json, LEADERBOARD.md, index.html, the targets): the values they hold, and
writing them atomically."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np


def plain_values(obj):
    """numpy scalars -> Python numbers, tuples -> lists, nan -> None (undefined: null in JSON, "-" in a table).
    Infinities stay floats."""
    return _converted(obj, spell_infinity=False)


def json_values(obj):
    """plain_values, and inf -> "inf", -inf -> "-inf": JSON has no infinity."""
    return _converted(obj, spell_infinity=True)


def read_results(path: Path) -> dict:
    """A results.json as the renderers take it: "inf" and "-inf" back to infinities (json_values, reversed)."""
    import json

    def unspelled(obj):
        if isinstance(obj, dict):
            return {k: unspelled(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [unspelled(v) for v in obj]
        return {"inf": math.inf, "-inf": -math.inf}.get(obj, obj) if isinstance(obj, str) else obj

    return unspelled(json.loads(Path(path).read_text()))


def _converted(obj, spell_infinity: bool):
    if isinstance(obj, dict):
        return {k: _converted(v, spell_infinity) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_converted(v, spell_infinity) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj) and spell_infinity:
            return "inf" if obj > 0 else "-inf"
    return obj


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write a temp file next to path, then rename: a failure leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; these are published files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

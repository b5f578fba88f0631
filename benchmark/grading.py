"""`replaybench grade`: grade lines of {"gold": ..., "completion": ...} with a task's verifier."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmark.tasks import TaskError, load_task
from benchmark.verifiers import DEFAULT_TIMEOUT, TIMEOUT, grade_many

# metadata.verifier of a task YAML -> a batch grader: (pairs, timeout, workers) -> verdicts
VERIFIERS = {"math": grade_many}


class GradingError(ValueError):
    """An input file that cannot be graded; the message names the line."""


def read_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    with Path(path).open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pairs.append((str(row["gold"]), str(row["completion"])))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise GradingError(f'{path}:{number}: expected a JSON object with "gold" and "completion" '
                                   f"({exc})") from exc
    return pairs


def grade_file(task_name: str, path: Path, out: Path | None = None, timeout: float = DEFAULT_TIMEOUT,
               workers: int = 2) -> dict:
    """Grade every line of `path`; one JSON verdict per line to `out` (stdout if None), in order."""
    task = load_task(task_name)
    verifier = (task.config.get("metadata") or {}).get("verifier")
    if verifier not in VERIFIERS:
        raise TaskError(f"task {task_name} names no verifier that `grade` can use (metadata.verifier: {verifier}); "
                        f"known verifiers: {', '.join(VERIFIERS)}")
    verdicts = VERIFIERS[verifier](read_pairs(path), timeout=timeout, workers=workers)
    lines = "".join(json.dumps(v.to_dict()) + "\n" for v in verdicts)
    if out is None:
        sys.stdout.write(lines)
    else:
        Path(out).write_text(lines)
    return {"graded": len(verdicts), "correct": sum(v.correct for v in verdicts),
            "timeouts": sum(v.reason == TIMEOUT for v in verdicts)}

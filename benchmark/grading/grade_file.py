"""`replaybench grade`: grade lines of {"gold": ..., "completion": ...} with a task's verifier.

For a Lean task the gold is the statement with its header (the task's doc_to_target); a line may give
{"name": ...} instead of "gold" to grade against the statement of the task's document of that name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmark.errors import UserError
from benchmark.grading import lean
from benchmark.grading.tasks import Task, TaskError, load_task
from benchmark.grading.verifiers import DEFAULT_TIMEOUT, TIMEOUT, grade_many

# metadata.verifier of a task YAML -> a batch grader: (pairs, timeout, workers) -> verdicts
VERIFIERS = {"math": grade_many, "lean": lean.check_many}
# seconds per item when the caller gives none (None: the verifier's own default or environment setting)
DEFAULT_TIMEOUTS = {"math": DEFAULT_TIMEOUT, "lean": None}


class GradingError(UserError, ValueError):
    """An input file that cannot be graded; the message names the line."""


def read_pairs(path: Path, gold_by_name: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """(line number, gold, completion) per non-blank line; with `gold_by_name`, a line may name its document
    instead of a gold."""
    pairs = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise GradingError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8 "
                           "JSON lines") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if "gold" not in row and gold_by_name is not None and "name" in row:
                if row["name"] not in gold_by_name:
                    raise GradingError(f"{path}:{number}: no document named {row['name']!r} in the task")
                row["gold"] = gold_by_name[row["name"]]
            pairs.append((number, str(row["gold"]), str(row["completion"])))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            wanted = '"gold" (or "name")' if gold_by_name is not None else '"gold"'
            raise GradingError(f'{path}:{number}: expected a JSON object with {wanted} and "completion" '
                               f"({exc})") from exc
    return pairs


def golds_by_name(task: Task) -> dict[str, str]:
    """name -> gold over the task's training and test documents (for tasks whose documents have names)."""
    target = task.config["doc_to_target"]
    return {doc["name"]: target(doc) for split in ("train", "test") for doc in task.docs(split) if doc.get("name")}


def grade_file(task_name: str, path: Path, out: Path | None = None, timeout: float | None = None,
               workers: int = 2) -> dict:
    """Grade every line of `path`; one JSON verdict per line to `out` (stdout if None), in order, each with the
    input's line number and gold.
    timeout: seconds per line (None: the verifier's default)."""
    task = load_task(task_name)
    verifier = (task.config.get("metadata") or {}).get("verifier")
    if verifier not in VERIFIERS:
        raise TaskError(f"task {task_name} names no verifier that `grade` can use (metadata.verifier: {verifier}); "
                        f"known verifiers: {', '.join(VERIFIERS)}")
    pairs = read_pairs(path, golds_by_name(task) if verifier == "lean" else None)
    if timeout is None:
        timeout = DEFAULT_TIMEOUTS[verifier]
    verdicts = VERIFIERS[verifier]([(gold, completion) for _, gold, completion in pairs], timeout=timeout,
                                   workers=workers)
    # each verdict names the input line it grades and the gold it was graded against
    lines = "".join(json.dumps({"line": number, "gold": gold, **v.to_dict()}) + "\n"
                    for (number, gold, _), v in zip(pairs, verdicts))
    if out is None:
        sys.stdout.write(lines)
    else:
        Path(out).write_text(lines)
    crashed = [v for v in verdicts if v.reason == lean.CRASHED]
    if verdicts and len(crashed) == len(verdicts):  # written first: the verdicts are kept all the same
        raise GradingError(lean.broken_message(len(crashed), crashed[0].detail, lean.lean_setup()))
    return {"graded": len(verdicts), "correct": sum(v.correct for v in verdicts),
            "timeouts": sum(v.reason == TIMEOUT for v in verdicts), "crashed": len(crashed)}

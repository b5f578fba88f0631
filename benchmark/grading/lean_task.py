"""Prompt, gold statement and reward shared by the Lean tasks (miniF2F in its two forms): the functions
their lm-eval `utils.py` files expose.

The prompt is the checkable statement, `header + informal_prefix + formal_statement`, ending in `:= by`;
the completion is the proof that continues it. The gold is that same statement: the verifier
(benchmark.grading.lean) checks `gold + completion` with Lean.
"""

from __future__ import annotations

import re

from benchmark.grading.lean import check, check_concurrently
from benchmark.grading.lean_output import split_header

_TRAILING_SORRY = re.compile(r"\s*sorry\s*$")


def normalise(doc: dict) -> dict:
    """The fields every Lean task reads (name, split, header, formal_statement, informal_prefix), from either
    bundled form or a copy that keeps the header inside formal_statement or ends it in `:= by sorry`."""
    statement = _TRAILING_SORRY.sub("", doc["formal_statement"])
    header = doc.get("header")
    if header is None:
        header, statement = split_header(statement)
    statement = statement.rstrip() + "\n"
    return {**doc, "name": doc.get("name") or doc.get("id") or "", "split": doc.get("split", ""),
            "header": header, "formal_statement": statement, "informal_prefix": doc.get("informal_prefix") or ""}


def process_docs(docs):
    """lm-eval's hook: a datasets.Dataset when lm-eval calls it, a list of dicts when ReplayBench does."""
    if hasattr(docs, "map"):
        return docs.map(normalise)
    return [normalise(doc) for doc in docs]


def doc_to_text(doc: dict) -> str:
    # Plain text: the model continues the statement after `:= by` (no chat template for provers).
    return f"{doc['header']}{doc['informal_prefix']}{doc['formal_statement']}"


def doc_to_target(doc: dict) -> str:
    """The statement with its header: what the completion must prove."""
    return doc_to_text(doc)


def process_results(doc: dict, results: list[str]) -> dict:
    return {"lean_proof": float(check(doc_to_target(doc), results[0]).correct)}


def score_pairs(pairs: list[tuple[dict, str]]) -> list[float]:
    """The rewards of (doc, completion) pairs, in order, their proofs checked concurrently (the task's
    metadata.score_pairs; process_results scores one at a time, for lm-eval)."""
    verdicts = check_concurrently([(doc_to_target(doc), completion) for doc, completion in pairs])
    return [float(verdict.correct) for verdict in verdicts]

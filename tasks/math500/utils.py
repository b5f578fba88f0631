"""MATH / MATH-500 prompt, gold answer and reward (lm-eval `!function` targets)."""

from benchmark.verifiers import grade, last_boxed

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def doc_to_text(doc: dict) -> str:
    # Plain text: a real model's chat template is applied by the generation engine.
    return f"{doc['problem']}\n\n{INSTRUCTION}"


def doc_to_target(doc: dict) -> str:
    """`answer`; data without it (the raw MATH files) keep it as the last \\boxed{} of `solution`."""
    return doc.get("answer") or last_boxed(doc.get("solution") or "") or ""


def process_results(doc: dict, results: list[str]) -> dict:
    return {"math_verify": float(grade(doc_to_target(doc), results[0]).correct)}

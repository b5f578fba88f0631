"""Prompt, gold answer and reward shared by the math tasks (MATH-500, OpenR1-Math): the functions
their lm-eval `utils.py` files expose."""

from benchmark.verifiers import grade, last_boxed

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def doc_to_text(doc: dict) -> str:
    # Plain text: a real model's chat template is applied by the generation engine.
    return f"{doc['problem']}\n\n{INSTRUCTION}"


def doc_to_target(doc: dict) -> str:
    """`answer`; where it is empty, the last \\boxed{} of `solution` (where open-r1's reward takes its gold,
    and how the raw MATH files keep it)."""
    return doc.get("answer") or last_boxed(doc.get("solution") or "") or ""


def process_results(doc: dict, results: list[str]) -> dict:
    return {"math_verify": float(grade(doc_to_target(doc), results[0]).correct)}

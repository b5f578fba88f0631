"""arith-tiny prompt and verifier (lm-eval `!function` targets)."""


def doc_to_text(doc: dict) -> str:
    return doc["question"]


def reversed_digits_value(completion: str) -> int | None:
    """The integer a completion writes with its digits reversed ('7530' -> 357), or None."""
    text = completion.strip()
    if not text.isdigit():
        return None
    return int(text[::-1])


def process_results(doc: dict, results: list[str]) -> dict:
    # Answers are integers, so checking is an exact integer comparison (what math-verify reduces to
    # for integers, at a fraction of its cost on the hot path of the pipeline).
    return {"exact_match": float(reversed_digits_value(results[0]) == int(doc["answer"]))}

"""Prompt, gold answer and reward shared by the math tasks (MATH-500, OpenR1-Math): the functions
their lm-eval `utils.py` files expose."""

from pathlib import Path

from benchmark.grading.verifiers import grade, last_boxed

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


def local_dataset(folder: Path, data_files: dict | None = None, data_path=None, **_):
    """lm-eval's `custom_dataset` hook: the task's local data files (dataset_kwargs.data_files, then
    metadata.data_path's files), read relative to the task folder as our loader reads them (lm-eval alone
    would read them relative to the working directory). Returns {split: datasets.Dataset}."""
    import datasets

    files = dict(data_files or {})
    if isinstance(data_path, dict):
        files.update({split: path for split, path in data_path.items() if path})
    splits = {}
    for split, path in files.items():
        path = Path(folder) / path
        builder = "parquet" if path.suffix == ".parquet" else "json"
        splits[split] = datasets.load_dataset(builder, data_files=str(path), split="train")
    return datasets.DatasetDict(splits)

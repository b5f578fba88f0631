"""MATH / MATH-500 prompt, gold answer and reward (lm-eval `!function` targets), shared by the math tasks."""

from pathlib import Path

from benchmark.grading.math_task import INSTRUCTION, doc_to_target, doc_to_text, local_dataset, process_results

__all__ = ["INSTRUCTION", "dataset", "doc_to_target", "doc_to_text", "process_results"]


def dataset(**kwargs):
    """lm-eval's custom_dataset: this folder's data files (lm-eval would resolve them from the working directory)."""
    return local_dataset(Path(__file__).parent, **kwargs)

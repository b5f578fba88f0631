"""OpenR1-Math-220k prompt, gold answer and reward (lm-eval `!function` targets), shared by the math tasks."""

from benchmark.math_task import INSTRUCTION, doc_to_target, doc_to_text, process_results

__all__ = ["INSTRUCTION", "doc_to_target", "doc_to_text", "process_results"]

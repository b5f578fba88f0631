"""miniF2F (Lean 4) prompt, gold statement and reward (lm-eval `!function` targets), shared by the Lean tasks."""

from benchmark.grading.lean_task import doc_to_target, doc_to_text, process_docs, process_results, score_pairs

__all__ = ["doc_to_target", "doc_to_text", "process_docs", "process_results", "score_pairs"]

"""Tasks and how they are judged: task loading (lm-eval YAML), prompts, evaluation, the math and Lean verifiers."""

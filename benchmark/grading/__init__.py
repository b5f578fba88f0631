"""Tasks and how they are judged: task loading (lm-eval YAML), prompts, evaluation, the math and Lean verifiers."""


class TaskError(Exception):
    """A task that cannot be found or loaded; the message names the fix."""

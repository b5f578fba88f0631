"""Tasks and how they are judged: task loading (lm-eval YAML), prompts, evaluation, the math and Lean verifiers."""

from benchmark.errors import UserError


class TaskError(UserError):
    """A task that cannot be found or loaded; the message names the fix."""

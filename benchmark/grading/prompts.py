"""How a task's prompt text reaches the model: through the model's chat template when it has one.

A task's `doc_to_text` gives the raw prompt (for the math tasks: the problem, then "Please reason step
by step, and put your final answer within \\boxed{}."), as lm-evaluation-harness sees it. Before
generation, training and evaluation both pass it through the same `PromptFormat`:

- `chat`: the text is the user message of a one-turn conversation rendered with the tokenizer's chat
  template, with the assistant's turn opened (`add_generation_prompt=True`), as Qwen's instruct models
  expect;
- `plain`: the text as is, after the tokenizer's BOS token where the tokenizer adds one by default
  (engines tokenize prompts without adding special tokens, so a chat template's own BOS is not doubled);
- `auto` (the default): `chat` when the tokenizer has a chat template, `plain` otherwise.

A workload's `model.chat_template_options` go to the template as keyword arguments (Qwen3's template
thinks unless given `enable_thinking: false`).
"""

from __future__ import annotations

from benchmark.errors import UserError

PROMPT_FORMATS = ("auto", "chat", "plain")


class PromptError(UserError, ValueError):
    """A prompt format the tokenizer cannot give; the message names the fix."""


class PromptFormat:
    def __init__(self, tokenizer, prompt_format: str = "auto", template_options: dict | None = None):
        if prompt_format not in PROMPT_FORMATS:
            raise PromptError(f"prompt format must be one of {', '.join(PROMPT_FORMATS)}, not {prompt_format!r}")
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if prompt_format == "chat" and not has_template:
            raise PromptError("the prompt format is chat but the tokenizer has no chat template: "
                              "use the plain (or auto) prompt format, or a tokenizer with a chat template")
        self.tokenizer = tokenizer
        self.template_options = dict(template_options or {})  # e.g. Qwen3's enable_thinking
        self.kind = "chat" if prompt_format == "chat" or (prompt_format == "auto" and has_template) else "plain"
        self.bos = ""
        if self.kind == "plain" and tokenizer.bos_token_id is not None:
            ids = tokenizer("x", add_special_tokens=True)["input_ids"]
            if ids[:1] == [tokenizer.bos_token_id]:
                self.bos = tokenizer.bos_token

    def __call__(self, text: str) -> str:
        if self.kind == "chat":
            return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                      add_generation_prompt=True, **self.template_options)
        return self.bos + text


def identity(text: str) -> str:
    return text

"""Prompts: the model's chat template when it has one, the plain prompt otherwise; training and evaluation alike."""

import copy

import pytest
from tokenizers import processors

from benchmark.grading.evaluation import evaluate
from benchmark.grading.prompts import PromptError, PromptFormat
from benchmark.grading.tasks import load_task
from benchmark.rl.generation import HFEngine
from benchmark.rl.policy import load_pretrained
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model

# A ChatML template as Qwen's instruct models use (trimmed to one-turn conversations without tools).
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@pytest.fixture
def chat_tokenizer():
    tokenizer = build_char_tokenizer("0123456789+=abcdefghijklmnopqrstuvwxyz ")
    tokenizer.chat_template = CHATML
    return tokenizer


def test_chat_template_renders_the_math_prompt_as_the_user_turn(chat_tokenizer):
    task = load_task("math500")
    doc = task.docs("test")[0]
    prompt = PromptFormat(chat_tokenizer)
    assert prompt.kind == "chat"
    assert prompt(task.doc_to_text(doc)) == (
        f"<|im_start|>user\n{doc['problem']}\n\n{INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n")
    assert task.doc_to_text(doc) == f"{doc['problem']}\n\n{INSTRUCTION}"  # what lm-eval sees stays raw


def test_the_workloads_chat_template_options_reach_the_template(chat_tokenizer):
    # as Qwen3's template does: an empty think block when thinking is switched off
    chat_tokenizer.chat_template = CHATML + ("{% if add_generation_prompt and enable_thinking is defined and "
                                             "not enable_thinking %}<think>\n\n</think>\n\n{% endif %}")
    assert not PromptFormat(chat_tokenizer)("1+1=").endswith("</think>\n\n")
    no_thinking = PromptFormat(chat_tokenizer, "auto", {"enable_thinking": False})
    assert no_thinking("1+1=") == "<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_plain_prompt_without_a_template_and_bos_only_where_the_tokenizer_adds_one():
    tokenizer = build_char_tokenizer("0123456789+=")
    assert PromptFormat(tokenizer).kind == "plain" and PromptFormat(tokenizer)("12+3=") == "12+3="
    with_bos = copy.deepcopy(tokenizer)  # a tokenizer that prepends BOS by default, as Llama's does
    with_bos.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", with_bos.bos_token_id)])
    assert PromptFormat(with_bos)("12+3=") == "<s>12+3="


def test_prompt_format_choices(chat_tokenizer):
    assert PromptFormat(chat_tokenizer, "plain")("x") == "x"
    with pytest.raises(PromptError, match="no chat template"):
        PromptFormat(build_char_tokenizer("0123456789"), "chat")
    with pytest.raises(PromptError, match="one of auto, chat, plain"):
        PromptFormat(chat_tokenizer, "jinja")


def test_a_saved_chat_template_is_used_by_evaluation(chat_tokenizer, tmp_path):
    """Saved and reloaded like a hub checkpoint; the evaluation's prompts go through the template."""
    model = build_tiny_model(chat_tokenizer, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    model.save_pretrained(tmp_path)
    chat_tokenizer.save_pretrained(tmp_path)
    model, tokenizer = load_pretrained(str(tmp_path))
    assert tokenizer.chat_template == CHATML
    task = load_task("math500")
    docs = task.docs("test")[:2]
    result = evaluate(HFEngine(model, tokenizer), task, docs, temperature=0.0, pass_k=[1], pass_k_samples=1,
                      pass_k_problems=0, seed=0, keep_samples=2, prompt=PromptFormat(tokenizer), max_new_tokens=4)
    assert [s["prompt"] for s in result["samples"]] == [
        f"<|im_start|>user\n{d['problem']}\n\n{INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n" for d in docs]


def test_characters_outside_the_tiny_alphabet_become_unk_not_nothing(tiny_checkpoint):
    _, tokenizer = load_pretrained(str(tiny_checkpoint))
    ids = tokenizer("What is 1+1?", add_special_tokens=False)["input_ids"]
    assert len(ids) == len("What is 1+1?") and ids.count(tokenizer.unk_token_id) == 9

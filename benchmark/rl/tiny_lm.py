"""The CPU tier's model: a tiny Qwen2-style causal LM with a character-level tokenizer.

Both are ordinary transformers objects (`Qwen2ForCausalLM`, `PreTrainedTokenizerFast`), so
everything downstream (generation, log-probs, training, saving) takes the same code path as a
real Qwen checkpoint; only the size differs.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]


def build_char_tokenizer(alphabet: str) -> PreTrainedTokenizerFast:
    """One token per character of `alphabet`, plus pad/bos/eos/unk; decoding joins characters back."""
    chars = sorted(set(alphabet))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + chars)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    # Left padding: batched generation then appends new tokens at the same position for every row.
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
    )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int = 192,
    num_layers: int = 3,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    max_positions: int = 64,
    seed: int = 0,
) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 causal LM sized for the tokenizer's vocabulary."""
    import torch

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())

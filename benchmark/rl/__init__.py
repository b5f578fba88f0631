"""The learning side: the GRPO trainer, generation engines, weight sync, the start policy and the tiny CPU model."""

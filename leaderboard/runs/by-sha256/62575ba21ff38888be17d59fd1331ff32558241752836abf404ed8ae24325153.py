"""FIFO buffer sampled without replacement (Arnal et al. 2026, ablation): like fifo_uniform, but
a batch never holds the same rollout twice. Rollouts stay in the buffer after use.
"""

from benchmark import ReplayStrategy


class WithoutReplacement(ReplayStrategy):
    def __init__(self, buffer_size: int = 256):
        self.buffer_size = buffer_size
        self.buffer = []  # oldest first

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        del self.buffer[: max(0, len(self.buffer) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        picks = ctx.rng.choice(len(self.buffer), size=batch_size, replace=False)
        return [self.buffer[i] for i in sorted(picks)]

"""The paper's replay buffer (Arnal et al. 2026): a FIFO of `buffer_size` rollouts.

Trainers sample uniformly with replacement; sampling never removes, only eviction of the
oldest does. Trainers wait until the buffer holds at least one batch.
"""

from benchmark import ReplayStrategy


class FifoUniform(ReplayStrategy):
    def __init__(self, buffer_size: int = 256):
        self.buffer_size = buffer_size
        self.buffer = []  # oldest first

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        del self.buffer[: max(0, len(self.buffer) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        picks = ctx.rng.integers(len(self.buffer), size=batch_size)
        return [self.buffer[i] for i in picks]

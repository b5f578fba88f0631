"""Capped FIFO: the paper's FIFO buffer, but a rollout leaves after `max_uses` uses."""

from benchmark import ReplayStrategy


class CappedFifo(ReplayStrategy):
    def __init__(self, buffer_size: int = 256, max_uses: int = 4):
        self.buffer_size, self.max_uses = buffer_size, max_uses
        self.buffer = []  # oldest first

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        del self.buffer[: max(0, len(self.buffer) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        self.buffer = [r for r in self.buffer if ctx.use_count.get(r.rollout_id, 0) < self.max_uses]
        if len(self.buffer) < batch_size:
            return None
        return [self.buffer[i] for i in ctx.rng.choice(len(self.buffer), size=batch_size, replace=False)]

"""FIFO buffer that prefers never-used rollouts (Arnal et al. 2026, ablation): a batch takes
rollouts not yet trained on first (uniformly among them); if there are too few, the rest is
drawn uniformly with replacement from the used ones.
"""

from benchmark import ReplayStrategy


class PreferUnused(ReplayStrategy):
    def __init__(self, buffer_size: int = 256):
        self.buffer_size = buffer_size
        self.buffer = []  # oldest first

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        del self.buffer[: max(0, len(self.buffer) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        unused = [r for r in self.buffer if ctx.use_count.get(r.rollout_id, 0) == 0]
        used = [r for r in self.buffer if ctx.use_count.get(r.rollout_id, 0) > 0]
        take = min(len(unused), batch_size)
        batch = [unused[i] for i in sorted(ctx.rng.choice(len(unused), size=take, replace=False))] if take else []
        if len(batch) < batch_size:
            batch += [used[i] for i in ctx.rng.integers(len(used), size=batch_size - len(batch))]
        return batch

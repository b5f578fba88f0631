"""Sharded buffer (Arnal et al. 2026): one FIFO buffer per trainer, of buffer_size / T rollouts
each. Finished groups go to the shards in turn; trainer i's slice of the batch
(`ctx.trainer_slices`) is sampled uniformly, with replacement, from shard i only.
"""

from benchmark import ReplayStrategy


class Sharded(ReplayStrategy):
    def __init__(self, buffer_size: int = 256):
        self.buffer_size = buffer_size
        self.shards = None  # one list per trainer, oldest first
        self.next_shard = 0

    def add(self, rollouts, ctx):
        if self.shards is None:
            self.shards = [[] for _ in range(ctx.num_trainers)]
        shard = self.shards[self.next_shard]
        self.next_shard = (self.next_shard + 1) % ctx.num_trainers
        shard.extend(rollouts)
        del shard[: max(0, len(shard) - self.buffer_size // ctx.num_trainers)]

    def sample(self, batch_size, ctx):
        slices = ctx.trainer_slices(batch_size)
        if self.shards is None or any(len(s) < sl.stop - sl.start for s, sl in zip(self.shards, slices)):
            return None
        batch = []
        for shard, sl in zip(self.shards, slices):
            batch += [shard[i] for i in ctx.rng.integers(len(shard), size=sl.stop - sl.start)]
        return batch

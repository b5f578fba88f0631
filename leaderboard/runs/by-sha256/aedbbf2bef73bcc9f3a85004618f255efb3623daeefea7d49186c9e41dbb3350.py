"""Control, deliberately poor: keeps the first `buffer_size` rollouts it ever receives and trains on them for
the whole run, the oldest of them first; every later rollout is dropped unused. Its data never improves and
grows ever more off-policy, so it must land below the on-policy reference: a board where it does not cannot
tell strategies apart.
"""

from benchmark import ReplayStrategy


class OldestFirst(ReplayStrategy):
    def __init__(self, buffer_size: int = 256):
        self.buffer_size = buffer_size
        self.buffer = []  # in arrival order, never evicted

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts[: max(0, self.buffer_size - len(self.buffer))])

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        return self.buffer[:batch_size]

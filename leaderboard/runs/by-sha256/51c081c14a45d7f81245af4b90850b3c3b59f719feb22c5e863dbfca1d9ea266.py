"""On-policy reference (Arnal et al. 2026): a LIFO pipe, every rollout trained on exactly once.

Trainers take the freshest rollouts first; when the pipe holds more than `buffer_size`
rollouts the stalest are dropped unused. With no data the trainers wait.
"""

from benchmark import ReplayStrategy


class OnPolicy(ReplayStrategy):
    def __init__(self, buffer_size: int = 256):
        self.buffer_size = buffer_size
        self.pipe = []  # oldest first

    def add(self, rollouts, ctx):
        self.pipe.extend(rollouts)
        del self.pipe[: max(0, len(self.pipe) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        if len(self.pipe) < batch_size:
            return None
        batch = self.pipe[-batch_size:]
        del self.pipe[-batch_size:]
        return batch

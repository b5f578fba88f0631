"""The regime diagnostic's second arm (docs/protocols/regime-diagnostic.md), not an entry: the on-policy
reference's pipe (freshest first, the stalest dropped past `buffer_size`), each batch it takes trained on
`steps` times in a row. Against the reference at equal fresh data trained on, it measures what extra updates on
the same data are worth: the trade replay makes.
"""

from benchmark import ReplayStrategy


class OnPolicyRepeat(ReplayStrategy):
    def __init__(self, buffer_size: int = 256, steps: int = 2):
        self.buffer_size, self.steps = buffer_size, steps
        self.pipe = []  # oldest first
        self.batch, self.left = None, 0  # the batch being repeated, and how many more times

    def add(self, rollouts, ctx):
        self.pipe.extend(rollouts)
        del self.pipe[: max(0, len(self.pipe) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        if self.left == 0:
            if len(self.pipe) < batch_size:
                return None
            self.batch, self.left = self.pipe[-batch_size:], self.steps
            del self.pipe[-batch_size:]
        self.left -= 1
        return self.batch

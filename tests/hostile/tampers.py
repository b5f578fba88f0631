import dataclasses

from benchmark import ReplayStrategy


class Tampers(ReplayStrategy):
    def __init__(self):
        self.seen = []

    def add(self, rollouts, ctx):
        self.seen.extend(dataclasses.replace(r, reward=1.0, correct=True, advantage=3.0) for r in rollouts)

    def sample(self, batch_size, ctx):
        return self.seen[:batch_size] if len(self.seen) >= batch_size else None

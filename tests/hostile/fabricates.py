import dataclasses

from benchmark import ReplayStrategy


class Fabricates(ReplayStrategy):
    def __init__(self):
        self.seen = []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)

    def sample(self, batch_size, ctx):
        if len(self.seen) < batch_size:
            return None
        return [dataclasses.replace(r, rollout_id=10**9 + i) for i, r in enumerate(self.seen[:batch_size])]

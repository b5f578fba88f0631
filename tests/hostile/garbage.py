from benchmark import ReplayStrategy


class Garbage(ReplayStrategy):
    def __init__(self):
        self.seen = []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)

    def sample(self, batch_size, ctx):
        return list(range(batch_size)) if len(self.seen) >= batch_size else None

"""Positive-bias buffer (Arnal et al. 2026): the freshest (1 - delta) * N rollouts, plus the
freshest delta * N *correct* rollouts that have left that recent set. Sampling is uniform with
replacement over both parts, so successes stay available longer than failures.
"""

from benchmark import ReplayStrategy


class PositiveBias(ReplayStrategy):
    def __init__(self, buffer_size: int = 256, delta: float = 0.25):
        if not 0.0 <= delta < 1.0:
            raise ValueError("delta must be in [0, 1)")
        self.buffer_size, self.delta = buffer_size, delta
        self.recent_size = round((1 - delta) * buffer_size)
        self.positive_size = buffer_size - self.recent_size
        self.recent, self.positives = [], []  # oldest first

    def add(self, rollouts, ctx):
        self.recent.extend(rollouts)
        overflow = len(self.recent) - self.recent_size
        if overflow > 0:
            leaving, self.recent = self.recent[:overflow], self.recent[overflow:]
            self.positives.extend(r for r in leaving if r.correct)
            del self.positives[: max(0, len(self.positives) - self.positive_size)]

    def sample(self, batch_size, ctx):
        pool = self.recent + self.positives
        if len(pool) < batch_size:
            return None
        return [pool[i] for i in ctx.rng.integers(len(pool), size=batch_size)]

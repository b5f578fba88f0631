from benchmark import ReplayStrategy


class MutatesInPlace(ReplayStrategy):
    """Forges rewards on the rollouts it was handed, past the frozen dataclass."""

    def __init__(self):
        self.seen = []

    def add(self, rollouts, ctx):
        for r in rollouts:
            object.__setattr__(r, "reward", 1.0)
            object.__setattr__(r, "advantage", 3.0)
        self.seen.extend(rollouts)

    def sample(self, batch_size, ctx):
        return self.seen[:batch_size] if len(self.seen) >= batch_size else None

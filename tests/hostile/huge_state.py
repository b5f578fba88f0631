from benchmark import ReplayStrategy


class HugeState(ReplayStrategy):
    """A checkpoint state far over the reply limit."""

    def add(self, rollouts, ctx):
        pass

    def sample(self, batch_size, ctx):
        return None

    def state_dict(self):
        return {"junk": "x" * (8 * 1024 * 1024)}

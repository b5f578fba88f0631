from benchmark import ReplayStrategy


class Raises(ReplayStrategy):
    def add(self, rollouts, ctx):
        pass

    def sample(self, batch_size, ctx):
        raise ValueError("boom")

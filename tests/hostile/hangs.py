from benchmark import ReplayStrategy


class Hangs(ReplayStrategy):
    def add(self, rollouts, ctx):
        while True:
            pass

    def sample(self, batch_size, ctx):
        return None

import os

from benchmark import ReplayStrategy


class Crashes(ReplayStrategy):
    def add(self, rollouts, ctx):
        os._exit(3)

    def sample(self, batch_size, ctx):
        return None

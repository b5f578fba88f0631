import time

from benchmark import ReplayStrategy


class SleepsUnderTheLimit(ReplayStrategy):
    """Each call stays under the per-call limit; together they would stretch the run without end."""

    def add(self, rollouts, ctx):
        time.sleep(0.5)

    def sample(self, batch_size, ctx):
        return None

import os

from benchmark import Batch, ReplayStrategy


class Payload:
    """Runs code wherever it is unpickled."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.system, (f"echo escaped > {self.target}",))


class SmugglesCode(ReplayStrategy):
    def __init__(self, target="/tmp/replaybench-hostile-write.txt"):
        self.target, self.seen = target, []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)

    def sample(self, batch_size, ctx):
        if len(self.seen) < batch_size:
            return None
        return Batch(self.seen[:batch_size], weights=[Payload(self.target)] * batch_size)

import os

from benchmark import Batch, ReplayStrategy

TARGET = os.environ.get("HOSTILE_TARGET", "/tmp/replaybench-hostile-write.txt")


class Payload:
    """Runs code wherever it is unpickled."""

    def __reduce__(self):
        return (os.system, (f"echo escaped > {TARGET}",))


class SmugglesCode(ReplayStrategy):
    def __init__(self):
        self.seen = []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)

    def sample(self, batch_size, ctx):
        if len(self.seen) < batch_size:
            return None
        return Batch(self.seen[:batch_size], weights=[Payload()] * batch_size)

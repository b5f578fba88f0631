import os

from benchmark import ReplayStrategy

TARGET = os.environ.get("HOSTILE_TARGET", "/tmp/replaybench-hostile-write.txt")
try:  # module-level code runs before any call: the guard must already be there
    with open(TARGET, "w") as f:
        f.write("escaped")
except PermissionError:
    pass


class WritesAtImport(ReplayStrategy):
    def add(self, rollouts, ctx):
        pass

    def sample(self, batch_size, ctx):
        return None

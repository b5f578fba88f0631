import os

from benchmark import ReplayStrategy

TARGET = os.environ.get("HOSTILE_TARGET", "/tmp/replaybench-hostile-write.txt")


class WritesOutside(ReplayStrategy):
    def add(self, rollouts, ctx):
        try:
            with open(TARGET, "w") as f:
                f.write("escaped")
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

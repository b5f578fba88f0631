from benchmark import ReplayStrategy


class WritesOutside(ReplayStrategy):
    def __init__(self, target="/tmp/replaybench-hostile-write.txt"):
        self.target = target

    def add(self, rollouts, ctx):
        try:
            with open(self.target, "w") as f:
                f.write("escaped")
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

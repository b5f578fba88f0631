import os

from benchmark import ReplayStrategy


class ReadsTheStore(ReplayStrategy):
    """Reading needs no audit event: only the operating-system boundary hides these files."""

    def __init__(self, secrets=(), secret_variable="REPLAYBENCH_TEST_SECRET"):
        self.secrets, self.secret_variable, self.seen = secrets, secret_variable, []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)
        if self.secret_variable in os.environ:
            raise RuntimeError(f"could read ${self.secret_variable}")
        for path in self.secrets:
            try:
                with open(path, "rb") as f:
                    f.read(16)
            except OSError:
                continue
            raise RuntimeError(f"could read {path}")

    def sample(self, batch_size, ctx):
        return self.seen[-batch_size:] if len(self.seen) >= batch_size else None

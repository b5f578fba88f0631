import os

from benchmark import ReplayStrategy


class ReadsTheStore(ReplayStrategy):
    """Reading needs no audit event: only the operating-system boundary hides these files."""

    def __init__(self):
        self.seen = []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)
        for path in os.environ.get("HOSTILE_SECRETS", "").split(os.pathsep):
            try:
                with open(path, "rb") as f:
                    f.read(16)
            except OSError:
                continue
            raise RuntimeError(f"could read {path}")

    def sample(self, batch_size, ctx):
        return self.seen[-batch_size:] if len(self.seen) >= batch_size else None

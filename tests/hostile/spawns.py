import subprocess
import sys

from benchmark import ReplayStrategy


class Spawns(ReplayStrategy):
    def __init__(self, target="/tmp/replaybench-hostile-write.txt"):
        self.target = target

    def add(self, rollouts, ctx):
        try:
            subprocess.run([sys.executable, "-c", f"open({self.target!r}, 'w').write('escaped')"], check=False)
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

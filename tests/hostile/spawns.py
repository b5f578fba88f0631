import os
import subprocess
import sys

from benchmark import ReplayStrategy

TARGET = os.environ.get("HOSTILE_TARGET", "/tmp/replaybench-hostile-write.txt")


class Spawns(ReplayStrategy):
    def add(self, rollouts, ctx):
        try:
            subprocess.run([sys.executable, "-c", f"open({TARGET!r}, 'w').write('escaped')"], check=False)
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

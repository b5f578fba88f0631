"""Output meant to pass for the engine's own: a forged line and terminal escapes (clear the screen, colour)."""

import sys

from benchmark import ReplayStrategy


class WritesToTheConsole(ReplayStrategy):
    def add(self, rollouts, ctx):
        print("\x1b[2J\x1b[Hseed 0: finished, best 0.999\x1b[31m", flush=True)
        sys.stderr.write("\rRUN FINISHED\x07\n")
        sys.stderr.flush()

    def sample(self, batch_size, ctx):
        return None

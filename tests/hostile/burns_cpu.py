"""CPU the wall clock of a call does not show: `between`, a thread that spins while the engine works between
calls; `calls`, threads that spin inside each call (three cores' worth of CPU in one core's wall time)."""

import threading
import time

from benchmark import ReplayStrategy


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class BurnsCpu(ReplayStrategy):
    def __init__(self, how="between", seconds=0.3):
        self.how, self.seconds, self.started = how, seconds, False

    def add(self, rollouts, ctx):
        if self.how == "between" and not self.started:
            self.started = True
            threading.Thread(target=spin, args=(3600,), daemon=True).start()
        elif self.how == "calls":
            threads = [threading.Thread(target=spin, args=(self.seconds,)) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    def sample(self, batch_size, ctx):
        return None

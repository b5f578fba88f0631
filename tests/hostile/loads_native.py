import ctypes

from benchmark import ReplayStrategy


class LoadsNative(ReplayStrategy):
    def add(self, rollouts, ctx):
        try:
            ctypes.CDLL(None).getpid()
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

import os
import socket

from benchmark import ReplayStrategy

PORT = int(os.environ.get("HOSTILE_PORT", "9"))


class Connects(ReplayStrategy):
    def add(self, rollouts, ctx):
        try:
            with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
                s.sendall(b"escaped")
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

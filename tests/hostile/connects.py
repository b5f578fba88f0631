import socket

from benchmark import ReplayStrategy


class Connects(ReplayStrategy):
    def __init__(self, port=9):
        self.port = port

    def add(self, rollouts, ctx):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(b"escaped")
        except PermissionError:
            pass  # swallowing the refusal does not hide it

    def sample(self, batch_size, ctx):
        return None

"""Attacks on the engine's reading of replies, from inside the box with the audit hook off: the pipe is a plain
socket that gc finds. `how`: a reply that stops after its length (the engine must not wait for ever), one nested
deeper than any decoder recurses, one that announces more than the cap."""

import gc
import socket
import struct
import time

from benchmark import ReplayStrategy


class RepliesBadly(ReplayStrategy):
    def __init__(self, how="stalls"):
        self.how = how

    def add(self, rollouts, ctx):
        [pipe] = [obj for obj in gc.get_objects() if isinstance(obj, socket.socket)]
        if self.how == "stalls":
            pipe.sendall(struct.pack("!I", 100))  # the length, then nothing
            time.sleep(3600)
        elif self.how == "nests":
            body = b"[" * 400_000 + b"]" * 400_000
            pipe.sendall(struct.pack("!I", len(body)) + body)
            time.sleep(3600)
        elif self.how == "oversize":
            pipe.sendall(struct.pack("!I", 2**31))
            time.sleep(3600)

    def sample(self, batch_size, ctx):
        return None

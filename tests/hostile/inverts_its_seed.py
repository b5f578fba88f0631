"""The box owns its random generator, so it knows the generator's seed; with the public derivation it would find
the run's seed among small ones, and with it the engine's prompt stream (`derive_seed(seed, "stream")`)."""

import hashlib

import numpy as np

from benchmark import ReplayStrategy


def derive_seed(seed, *names):  # the engine's public derivation, copied
    text = ":".join(str(x) for x in (seed, *names))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


class InvertsItsSeed(ReplayStrategy):
    def add(self, rollouts, ctx):
        state = ctx.rng.bit_generator.state["state"]
        for seed in range(10_000):
            if np.random.default_rng(derive_seed(seed, "strategy")).bit_generator.state["state"] == state:
                raise RuntimeError(f"ESCAPED: the run's seed is {seed}")
        raise RuntimeError("contained: no run seed below 10,000 gives this generator")

    def sample(self, batch_size, ctx):
        return None

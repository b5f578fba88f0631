"""Prioritized replay (Schaul et al. 2016), a baseline beyond the papers: a FIFO buffer of
`buffer_size` rollouts, sampled with probability proportional to (|advantage| + eps)^alpha, with
importance weights (N * P(i))^-beta / max so that the update stays unbiased as beta -> 1.

Rollouts whose group had equal rewards (advantage 0, no learning signal) are drawn rarely.
"""

import numpy as np

from benchmark import Batch, ReplayStrategy


class Prioritized(ReplayStrategy):
    def __init__(self, buffer_size: int = 256, alpha: float = 0.6, beta: float = 0.4, eps: float = 0.01):
        self.buffer_size, self.alpha, self.beta, self.eps = buffer_size, alpha, beta, eps
        self.buffer = []  # oldest first

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        del self.buffer[: max(0, len(self.buffer) - self.buffer_size)]

    def probabilities(self) -> np.ndarray:
        priority = (np.abs([r.advantage for r in self.buffer]) + self.eps) ** self.alpha
        return priority / priority.sum()

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        p = self.probabilities()
        picks = ctx.rng.choice(len(self.buffer), size=batch_size, p=p)
        weights = (len(self.buffer) * p[picks]) ** -self.beta
        return Batch([self.buffer[i] for i in picks], (weights / weights.max()).tolist())

"""The cost model, in normalised compute units shared by every executor.

Training on one token costs 1 unit of device time, generating one costs mu; both sides count the
same tokens (prompt + completion). A generation lasts its cost on one worker, a training step its
cost spread over the T trainers, and the strategy's pool (generated before the workers start) its
cost spread over every device. Every device counts, busy or idle:
    compute used = (W + T) * elapsed time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CostModel:
    mu: float
    workers: int
    trainers: int

    @classmethod
    def of(cls, workload) -> CostModel:
        p = workload.pipeline
        return cls(mu=p.mu, workers=p.workers, trainers=p.trainers)

    @property
    def devices(self) -> int:
        return self.workers + self.trainers

    def generation_time(self, tokens: int) -> float:
        """How long one worker takes to generate `tokens`."""
        return self.mu * tokens

    def pool_time(self, tokens: int) -> float:
        """How long generating `tokens` takes when every device generates."""
        return self.mu * tokens / self.devices

    def training_time(self, tokens: int) -> float:
        """How long the T trainers take to train on `tokens`."""
        return tokens / self.trainers

    def compute(self, elapsed: float) -> float:
        return self.devices * elapsed

    def elapsed(self, compute: float) -> float:
        """The elapsed time at which `compute` units are used."""
        return compute / self.devices


def eval_points(every: float, budget: float) -> list[float]:
    """Compute checkpoints: 0, every, 2*every, ..., and the budget itself."""
    points = [i * every for i in range(int(budget // every) + 1)]
    if points[-1] < budget - 1e-9:
        points.append(budget)
    return points

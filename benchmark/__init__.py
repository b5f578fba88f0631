"""ReplayBench: a benchmark of replay-buffer strategies for asynchronous RL training of LLMs."""

from benchmark import kernels

kernels.pin()  # before torch computes anything: the kernels are chosen once per process

from benchmark.rollout import Rollout  # noqa: E402
from benchmark.strategy import Batch, PoolRequest, ReplayStrategy, StrategyContext, UpdateFeedback  # noqa: E402

__all__ = ["Batch", "PoolRequest", "Rollout", "ReplayStrategy", "StrategyContext", "UpdateFeedback"]

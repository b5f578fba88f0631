"""ReplayBench: a benchmark of replay-buffer strategies for asynchronous RL training of LLMs."""

from benchmark.rollout import Rollout
from benchmark.strategy import Batch, PoolRequest, ReplayStrategy, StrategyContext, UpdateFeedback

__all__ = ["Batch", "PoolRequest", "Rollout", "ReplayStrategy", "StrategyContext", "UpdateFeedback"]

"""ReplayBench: a benchmark of replay-buffer strategies for asynchronous RL training of LLMs."""

from benchmark.rollout import Rollout
from benchmark.strategy import ReplayStrategy, StrategyContext

__all__ = ["Rollout", "ReplayStrategy", "StrategyContext"]

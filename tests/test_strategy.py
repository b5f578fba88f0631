from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from benchmark.rollout import Rollout
from benchmark.strategy import StrategyContext, StrategyError, build_strategy, load_strategy_class

BASELINES = Path(__file__).resolve().parent.parent / "baselines"


def ctx(step=0):
    return StrategyContext(step, step, np.random.default_rng(0), MappingProxyType({}))


def group(first_id, n=4, version=0):
    return [Rollout(first_id + i, first_id, "p", (1,), (2,), (-1.0,), 0.0, False, 0.0, version, 0, 0.0)
            for i in range(n)]


def test_on_policy_serves_freshest_first_each_once_and_drops_stale():
    s = build_strategy(BASELINES / "on_policy.py", {"buffer_size": 8})
    for g in range(3):  # 12 rollouts into a pipe of 8: ids 0-3 are dropped
        s.add(group(4 * g), ctx())
    first = s.sample(4, ctx())
    assert [r.rollout_id for r in first] == [8, 9, 10, 11]
    second = s.sample(4, ctx())
    assert [r.rollout_id for r in second] == [4, 5, 6, 7]
    assert s.sample(4, ctx()) is None  # nothing is ever used twice


def test_fifo_uniform_evicts_oldest_and_samples_with_replacement_without_removing():
    s = build_strategy(BASELINES / "fifo_uniform.py", {"buffer_size": 8})
    assert s.sample(4, ctx()) is None
    for g in range(3):
        s.add(group(4 * g), ctx())
    assert sorted(r.rollout_id for r in s.buffer) == list(range(4, 12))
    c = ctx()  # one engine RNG across calls, as in a run
    draws = [r.rollout_id for _ in range(50) for r in s.sample(8, c)]
    assert set(draws) == set(range(4, 12))  # uniform over what is kept, only that
    assert len(s.buffer) == 8  # sampling never removes
    assert any(len({r.rollout_id for r in s.sample(8, c)}) < 8 for _ in range(20))  # with replacement


def test_state_dict_round_trip_restores_the_buffer():
    s = build_strategy(BASELINES / "fifo_uniform.py", {"buffer_size": 8})
    s.add(group(0), ctx())
    state = s.state_dict()
    s.add(group(4), ctx())
    s.load_state_dict(state)
    assert [r.rollout_id for r in s.buffer] == [0, 1, 2, 3]


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(StrategyError, match="not found"):
        load_strategy_class(tmp_path / "nope.py")


def test_file_without_a_strategy_is_rejected(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    with pytest.raises(StrategyError, match="exactly one subclass"):
        load_strategy_class(path)


def test_strategy_without_sample_is_rejected(tmp_path):
    path = tmp_path / "half.py"
    path.write_text("from benchmark import ReplayStrategy\n"
                    "class Half(ReplayStrategy):\n    def add(self, r, c): pass\n")
    with pytest.raises(StrategyError, match="does not implement sample"):
        load_strategy_class(path)


def test_import_error_is_reported_not_raised(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import does_not_exist\n")
    with pytest.raises(StrategyError, match="importing .* failed: ModuleNotFoundError"):
        load_strategy_class(path)


def test_unknown_hyperparameter_lists_the_known_ones():
    with pytest.raises(StrategyError, match="does not take bufer_size; its parameters are: buffer_size"):
        build_strategy(BASELINES / "fifo_uniform.py", {"bufer_size": 3})

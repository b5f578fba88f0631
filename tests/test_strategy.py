from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from benchmark.rollout import Rollout
from benchmark.strategy import StrategyContext, StrategyError, build_strategy, load_strategy_class

BASELINES = Path(__file__).resolve().parent.parent / "baselines"


def ctx(step=0):
    return StrategyContext(step, np.random.default_rng(0), MappingProxyType({}))


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


def correct_group(first_id, pattern, version=0):
    """Rollouts whose `correct` follows pattern, e.g. [True, False]."""
    return [Rollout(first_id + i, first_id, "p", (1,), (2,), (-1.0,), float(c), c, 0.0, version, 0, 0.0)
            for i, c in enumerate(pattern)]


def test_positive_bias_keeps_exactly_the_freshest_and_the_freshest_older_successes():
    s = build_strategy(BASELINES / "positive_bias.py", {"buffer_size": 8, "delta": 0.25})  # 6 recent + 2 positive
    s.add(correct_group(0, [True, False, True, False]), ctx())
    s.add(correct_group(4, [False, True, False, False]), ctx())
    s.add(correct_group(8, [False, False, False, True]), ctx())
    # recent = the 6 freshest (ids 6..11); ids 0..5 left it, of which 0, 2, 5 were correct:
    # the positive part keeps the freshest two of those.
    assert [r.rollout_id for r in s.recent] == [6, 7, 8, 9, 10, 11]
    assert [r.rollout_id for r in s.positives] == [2, 5]
    drawn = {r.rollout_id for _ in range(30) for r in s.sample(8, ctx())}
    assert drawn <= {2, 5, 6, 7, 8, 9, 10, 11}


def test_without_replacement_never_repeats_within_a_batch():
    s = build_strategy(BASELINES / "without_replacement.py", {"buffer_size": 16})
    for g in range(4):
        s.add(group(4 * g), ctx())
    c = ctx()
    for _ in range(20):
        ids = [r.rollout_id for r in s.sample(12, c)]
        assert len(set(ids)) == 12
    assert s.sample(17, c) is None


def test_prefer_unused_takes_never_used_rollouts_first():
    s = build_strategy(BASELINES / "prefer_unused.py", {"buffer_size": 16})
    for g in range(4):
        s.add(group(4 * g), ctx())
    used = {i: 1 for i in range(10)}  # ids 10..15 never used
    c = StrategyContext(0, np.random.default_rng(0), MappingProxyType(used))
    batch = [r.rollout_id for r in s.sample(8, c)]
    assert set(range(10, 16)) <= set(batch)  # all six unused ones are in
    assert all(i < 10 for i in batch if i not in range(10, 16))


def test_sharded_never_crosses_shards():
    s = build_strategy(BASELINES / "sharded.py", {"buffer_size": 24})
    c = StrategyContext(0, np.random.default_rng(0), MappingProxyType({}), num_trainers=3)
    for g in range(6):  # groups 0,3 -> shard 0; 1,4 -> shard 1; 2,5 -> shard 2
        s.add(group(4 * g), c)
    shard_of = {r.rollout_id: i for i, shard in enumerate(s.shards) for r in shard}
    assert shard_of[0] == 0 and shard_of[4] == 1 and shard_of[8] == 2 and shard_of[12] == 0
    for _ in range(20):
        batch = s.sample(10, c)
        slices = c.trainer_slices(10)
        assert [sl.stop - sl.start for sl in slices] == [4, 3, 3]
        for trainer, sl in enumerate(slices):
            assert {shard_of[r.rollout_id] for r in batch[sl]} == {trainer}


def test_prioritized_prefers_large_advantages_and_weights_them_down():
    from benchmark import Batch

    s = build_strategy(BASELINES / "prioritized.py", {"buffer_size": 8, "alpha": 1.0, "beta": 1.0, "eps": 0.01})
    rollouts = [Rollout(i, 0, "p", (1,), (2,), (-1.0,), 0.0, False, adv, 0, 0, 0.0)
                for i, adv in enumerate([2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])]
    s.add(rollouts, ctx())
    c = ctx()
    batches = [s.sample(8, c) for _ in range(50)]
    assert all(isinstance(b, Batch) and len(b.rollouts) == 8 for b in batches)
    picks = [r.rollout_id for b in batches for r in b.rollouts]
    assert picks.count(0) / len(picks) > 0.9  # P(0) = 2.01 / 2.08
    mixed = next(b for b in batches if len({r.rollout_id for r in b.rollouts}) > 1)
    weight_of = {r.rollout_id: w for r, w in zip(mixed.rollouts, mixed.weights)}
    assert weight_of[0] < min(w for i, w in weight_of.items() if i != 0)  # frequent -> small IS weight
    assert max(weight_of.values()) == pytest.approx(1.0)


def test_rlep_mixes_each_fresh_group_with_replayed_successes_of_its_prompt():
    from benchmark import Batch

    s = build_strategy(BASELINES / "rlep.py", {"replay_k": 2, "buffer_size": 64})
    assert s.pool_request() == (4096, 64, 0.2)  # RLEP's phase 1: a policy trained first, 64 samples a prompt
    pool = [Rollout(100 + i, 50, "p", (1,), (2,), (-1.0,), 1.0, True, 0.0, 0, 0, 0.0) for i in range(3)]
    s.add_pool(pool + [Rollout(200, 51, "q", (1,), (2,), (-1.0,), 0.0, False, 0.0, 0, 0, 0.0)], ctx())
    assert set(s.pool) == {"p"}  # only successes are kept
    fresh = [Rollout(i, 1, "p", (1,), (2,), (-1.0,), float(i == 0), i == 0, 0.0, 1, 1, 0.0) for i in range(4)]
    s.add(fresh, ctx())
    batch = s.sample(6, ctx())
    assert isinstance(batch, Batch) and len(batch.rollouts) == 6
    assert [r.rollout_id for r in batch.rollouts[:4]] == [0, 1, 2, 3]
    assert {r.rollout_id for r in batch.rollouts[4:]} <= {100, 101, 102}
    assert batch.regroup == [[0, 1, 2, 3, 4, 5]]
    assert batch.recompute_behaviour == [4, 5]  # the replayed successes get the current policy's old log-probs
    assert s.sample(6, ctx()) is None  # fresh rollouts are used once


@pytest.mark.parametrize("request_, verdict", [
    ((10, 4), (10, 4, 0.0)), ([10, 4, 0.25], (10, 4, 0.25)), (None, None),
    ((10, 4, 0.95), "garbage"), ((0, 4), "garbage"), ((10, 4, True), "garbage"), ((10,), "garbage"),
])
def test_a_pool_request_is_checked(request_, verdict):
    from benchmark.engine.ledger import checked_pool_request
    from benchmark.strategy import StrategyFailure

    if verdict == "garbage":
        with pytest.raises(StrategyFailure, match="garbage: pool_request"):
            checked_pool_request(request_)
    else:
        assert checked_pool_request(request_) == verdict


def test_engine_recomputes_advantages_over_the_mixed_group():
    from benchmark.engine.ledger import regrouped
    from benchmark.rl.grpo import group_advantages

    fresh = [Rollout(i, 1, "p", (1,), (2,), (-1.0,), float(i == 0), i == 0, 9.0, 1, 1, 0.0) for i in range(4)]
    replayed = [Rollout(100 + i, 0, "p", (1,), (2,), (-1.0,), 1.0, True, 9.0, 0, 0, 0.0) for i in range(2)]
    mixed = regrouped(fresh + replayed, [[0, 1, 2, 3, 4, 5]])
    expected = group_advantages([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    assert [r.advantage for r in mixed] == pytest.approx(expected)
    assert all(r.group_reward_mean == pytest.approx(0.5) for r in mixed)
    assert [r.advantage for r in fresh] == [9.0] * 4  # the engine's own records are untouched

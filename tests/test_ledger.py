"""The engine's side of a strategy (`benchmark/engine/ledger.py`) on scripted calls whose answers are known by
hand: rollout records, what the strategy is handed, pool requests, the time limits, the counters and their
checkpoint."""

import dataclasses
import math
import time

import numpy as np
import pytest

from benchmark import PoolRequest, ReplayStrategy
from benchmark.engine import ledger as ledger_module
from benchmark.engine.ledger import (
    PendingGroup,
    StrategyLedger,
    StrategySpec,
    build_rollouts,
    checked_pool_request,
    most_pool_rollouts,
    open_strategy,
    reference_strategy,
    strategy_seed,
)
from benchmark.paths import BASELINES_DIR
from benchmark.rl.generation import Completion
from benchmark.strategy import StrategyContext, StrategyFailure
from benchmark.workload import LimitsConfig, load_workload


def group(prompt="p", rewards=(1.0, 0.0, 1.0, 0.0), version=0, prompt_len=2, completion_len=1) -> PendingGroup:
    completions = [Completion(prompt_ids=tuple(range(prompt_len)), completion_ids=(7,) * completion_len,
                              logprobs=(-0.5,) * completion_len, text="x") for _ in rewards]
    return PendingGroup(prompt, completions, list(rewards), version)


def facts(ctx) -> tuple:
    assert isinstance(ctx, StrategyContext)
    return ctx.policy_version, ctx.num_trainers, dict(ctx.use_count)


class Recorder(ReplayStrategy):
    """Keeps what it is handed, with each call's context; samples the first batch_size rollouts."""

    def __init__(self, pool=None, sleep=0.0):
        self.pool, self.sleep, self.calls = pool, sleep, []

    def add(self, rollouts, ctx):
        time.sleep(self.sleep)
        self.calls.append(("add", rollouts, facts(ctx)))

    def add_pool(self, rollouts, ctx):
        self.calls.append(("add_pool", rollouts, facts(ctx)))

    def pool_request(self):
        return self.pool

    def sample(self, batch_size, ctx):
        self.calls.append(("sample", batch_size, facts(ctx)))
        handed = [r for call in self.calls if call[0] in ("add", "add_pool") for r in call[1]]
        return handed[:batch_size] if len(handed) >= batch_size else None


def test_rollout_records_carry_ids_group_advantages_and_their_generation():
    rollouts = build_rollouts(group("q", (1.0, 0.0, 0.5, 1.0), version=3), first_rollout_id=10, group_id=4,
                              created_step=5, created_time=2.5)
    assert [r.rollout_id for r in rollouts] == [10, 11, 12, 13]
    assert {(r.group_id, r.prompt_id, r.policy_version, r.created_step, r.created_time) for r in rollouts} == \
        {(4, "q", 3, 5, 2.5)}
    assert [r.correct for r in rollouts] == [True, False, False, True]  # correct: a reward of 1 or more
    assert [r.reward for r in rollouts] == [1.0, 0.0, 0.5, 1.0]
    mean, std = 0.625, float(np.std([1.0, 0.0, 0.5, 1.0], ddof=1))  # the sample standard deviation
    assert [r.advantage for r in rollouts] == pytest.approx([(x - mean) / std for x in (1, 0, 0.5, 1)])
    assert {r.group_reward_mean for r in rollouts} == {mean}
    assert rollouts[0].prompt_ids == (0, 1) and rollouts[0].completion_ids == (7,)
    assert rollouts[0].behaviour_logprobs == (-0.5,) and rollouts[0].length == 3


def test_the_ledger_hands_over_copies_with_the_context_and_keeps_its_own():
    strategy = Recorder(pool=PoolRequest(2, 4))
    ledger = StrategyLedger(strategy, seed=0, num_trainers=2)
    assert ledger.pool_request(most_rollouts=8) == PoolRequest(2, 4, 0.0)
    assert ledger.calls == 0  # the pool request is not one of the counted calls
    assert ledger.add_pool([group("a"), group("b")], clock=1.0) == 8
    assert ledger.add(group("c", version=1), clock=2.0) == 4
    (_, pool, pool_ctx), (_, added, ctx) = strategy.calls
    assert [r.rollout_id for r in pool] == list(range(8)) and [r.rollout_id for r in added] == [8, 9, 10, 11]
    assert {r.group_id for r in added} == {2} and ledger.next_group_id == 3 and ledger.next_rollout_id == 12
    assert all(r is not ledger.known[r.rollout_id] and r == ledger.known[r.rollout_id] for r in pool + added)
    assert pool_ctx == ctx == (0, 2, {})
    batch, weights = ledger.sample(4)
    assert [r.rollout_id for r in batch] == [0, 1, 2, 3] and weights is None
    assert ledger.calls == 3 and ledger.seconds > 0
    ledger.record_step(batch)
    ctx = ledger.ctx()
    assert ctx.policy_version == 1 and dict(ctx.use_count) == {0: 1, 1: 1, 2: 1, 3: 1}
    with pytest.raises(TypeError):
        ctx.use_count[0] = 5  # read-only
    assert ledger.sample(13) is None  # not enough handed over yet: the strategy waits


def test_a_strategys_exception_is_a_raised_verdict_and_its_time_is_counted():
    class Raises(Recorder):
        def add(self, rollouts, ctx):
            raise ValueError("boom")

    ledger = StrategyLedger(Raises(), seed=0, num_trainers=1)
    with pytest.raises(StrategyFailure, match=r"^raised: add\(\) raised ValueError: boom$"):
        ledger.add(group(), clock=0.0)
    assert ledger.calls == 1


@pytest.mark.parametrize("limits, verdict", [
    (LimitsConfig(call_seconds=0.05), r"^timeout: add\(\) took longer than 0.05 s$"),
    (LimitsConfig(strategy_seconds=0.05), r"^timeout: the strategy's calls took more than 0.05 s in this run$"),
    (LimitsConfig(floor_seconds=0.05, wall_share=0.01),
     r"^timeout: the strategy's calls took 0\.1 s, more than their allowance of 0.05 s \+ 1% of the engine's own "
     r"time in this run \(0\.\d s\)$"),
])
def test_the_time_limits_give_their_verdicts_in_process(limits, verdict):
    ledger = StrategyLedger(Recorder(sleep=0.1), seed=0, num_trainers=1, limits=limits)
    with pytest.raises(StrategyFailure, match=verdict):
        ledger.add(group(), clock=0.0)


def test_calls_within_every_limit_pass():
    ledger = StrategyLedger(Recorder(sleep=0.02), seed=0, num_trainers=1,
                            limits=LimitsConfig(call_seconds=1, strategy_seconds=1, floor_seconds=1))
    for _ in range(3):
        ledger.add(group(), clock=0.0)
    assert ledger.calls == 3 and 0.06 <= ledger.seconds < 1


@pytest.mark.parametrize("request_, expected", [
    (None, None), ((), None), ((1, 1), PoolRequest(1, 1, 0.0)), ([3, 2, 0.9], PoolRequest(3, 2, 0.9)),
    ((2, 5), PoolRequest(2, 5, 0.0)),  # exactly the most rollouts the budget pays for
    (PoolRequest(1, 1, 0), PoolRequest(1, 1, 0)),
])
def test_a_valid_pool_request_is_taken_as_it_is(request_, expected):
    assert checked_pool_request(request_, most_rollouts=10) == expected


POOL_SHAPE = ("garbage: pool_request() must return a PoolRequest (prompts > 0, samples > 0, trained_for from 0 to "
              "0.9) or None")


@pytest.mark.parametrize("request_", [
    (0, 1), (1, 0), (-1, 1), (True, 1), (1, True), (1.0, 1), (1,), (1, 1, 0.0, 0), "ab", {"prompts": 1},
    (1, 1, 0.91), (1, 1, -0.1), (1, 1, True), (1, 1, "0.5"), (1, 1, math.nan),
])
def test_a_malformed_pool_request_is_garbage(request_):
    with pytest.raises(StrategyFailure) as failure:
        checked_pool_request(request_, most_rollouts=10)
    assert str(failure.value) == POOL_SHAPE


def test_a_pool_request_past_what_the_budget_pays_for_is_refused_before_any_work():
    with pytest.raises(StrategyFailure) as failure:
        checked_pool_request((3, 4), most_rollouts=10)
    assert str(failure.value) == ("garbage: pool_request() asks for 12 rollouts, more than the run's whole budget "
                                  "pays for (10 at the least)")
    w = load_workload("arith-tiny")
    assert most_pool_rollouts(w) == w.budget / (2 * w.pipeline.mu)


def test_the_counters_and_the_rng_come_back_whole_from_a_checkpoint():
    ledger = StrategyLedger(Recorder(), seed=3, num_trainers=1)
    ledger.add(group("a"), clock=0.0)
    ledger.add(group("b"), clock=1.0)
    batch, _ = ledger.sample(6)
    ledger.record_step(batch)
    ledger.record_step(batch[:2])
    ledger.rng.random(5)
    state = ledger.state_dict()
    fresh = StrategyLedger(Recorder(), seed=99, num_trainers=1)
    fresh.load_state_dict(state)
    for name in ("known", "use_count", "last_used_step", "next_rollout_id", "next_group_id", "trainer_step",
                 "staleness_total", "calls", "seconds", "offpolicy_counts", "since_last_use_counts"):
        assert getattr(fresh, name) == getattr(ledger, name), name
    assert fresh.rng.random() == ledger.rng.random()
    assert fresh.strategy.calls == ledger.strategy.calls
    assert abs((time.perf_counter() - fresh.started) - (time.perf_counter() - ledger.started)) < 0.5
    assert fresh.usage() == ledger.usage() == {
        "use_count": {0: 2, 1: 2, 2: 1, 3: 1, 4: 1, 5: 1}, "staleness_total": 2 + 0, "recomputed_total": 0,
        "strategy_calls": 3,
        "strategy_seconds": ledger.seconds, "offpolicy_counts": {0: 6, 1: 2},
        "since_last_use_counts": {"new": 6, "1": 2}}


def test_a_steps_metrics_are_those_of_its_batch():
    ledger = StrategyLedger(Recorder(), seed=0, num_trainers=1)
    ledger.add(group("a", rewards=(1.0, 0.0, 0.0, 0.0), completion_len=2), clock=0.0)
    ledger.add(group("b", rewards=(1.0, 1.0, 1.0, 0.0), completion_len=4, version=2), clock=0.0)
    ledger.trainer_step = 3
    batch = [ledger.known[i] for i in (0, 1, 4, 5, 6)]
    metrics = ledger.record_step(batch)
    assert metrics == {"offpolicy_mean": pytest.approx((3 + 3 + 1 + 1 + 1) / 5), "offpolicy_median": 1.0,
                       "offpolicy_max": 3.0, "steps_since_last_use": 0.0, "reused_fraction": 0.0,
                       "reward": pytest.approx(4 / 5), "response_length": pytest.approx((2 + 2 + 4 + 4 + 4) / 5),
                       "recomputed_fraction": 0.0}
    # a sample whose behaviour the trainer takes from the current policy is counted as such
    batch[1] = dataclasses.replace(batch[1], current_policy_behaviour=True)
    assert ledger.record_step(batch)["recomputed_fraction"] == pytest.approx(1 / 5)
    assert ledger.usage()["recomputed_total"] == 1


def test_the_strategy_seed_is_public_or_keyed_by_the_runs_secret():
    from benchmark.engine.stream import derive_seed

    assert strategy_seed(0) == derive_seed(0, "strategy") == 3242254559
    assert strategy_seed(1) != strategy_seed(0)
    assert strategy_seed(0, "s1") == derive_seed(0, "strategy", "s1") != strategy_seed(0)
    assert strategy_seed(0, "s1") != strategy_seed(0, "s2")
    ledger, keyed = (StrategyLedger(Recorder(), seed=0, num_trainers=1, seed_secret=s) for s in (None, "s1"))
    assert ledger.rng.integers(2**32) == np.random.default_rng(strategy_seed(0)).integers(2**32)
    assert keyed.rng.integers(2**32) == np.random.default_rng(strategy_seed(0, "s1")).integers(2**32)


def test_a_strategy_opens_in_process_or_in_its_box_with_the_runs_seed():
    path = BASELINES_DIR / "fifo_uniform.py"
    in_process = open_strategy(StrategySpec(path, {"buffer_size": 7}, {"buffer_size": 3, "other": 1}), seed=0)
    assert type(in_process).__name__ == "FifoUniform" and in_process.buffer_size == 7
    defaulted = open_strategy(StrategySpec(path, {}, {"buffer_size": 3}), seed=0)
    assert defaulted.buffer_size == 3  # the workload's defaults fill in what the params omit
    boxed = open_strategy(StrategySpec(path, {"buffer_size": 7}, {}, isolated=True, seed_secret="s"), seed=2,
                          limits=LimitsConfig(call_seconds=5))
    try:
        assert boxed.limits.call_seconds == 5
        state = boxed.state_dict()
        import base64
        import pickle

        box_state = pickle.loads(base64.b64decode(state["box"]))  # the test reads the box's own bytes
        assert box_state["strategy"]["buffer_size"] == 7
        assert box_state["rng"] == np.random.default_rng(strategy_seed(2, "s")).bit_generator.state
    finally:
        boxed.close()


def test_the_reference_strategy_is_the_baselines_on_policy_at_its_own_settings():
    from benchmark.submission import load_baselines

    entry = load_baselines().entries["on_policy"]
    custom = load_workload("arith-tiny", {"strategy_defaults": {"buffer_size": 11}})
    reference = reference_strategy(custom)
    assert type(reference).__name__ == "OnPolicy"
    assert reference.buffer_size == entry.strategy_params()["buffer_size"]  # the entry's settings, not the defaults


def test_an_empty_regroup_set_leaves_the_batch_as_it_is():
    batch = build_rollouts(group(rewards=(1.0, 1.0, 1.0, 0.0)), 0, 0, 0, 0.0)
    assert ledger_module.regrouped(batch, [[]]) == batch
    regrouped = ledger_module.regrouped(batch, [[], [0, 3]])  # the sets after an empty one count all the same
    assert [r.group_reward_mean for r in regrouped] == [0.5, 0.75, 0.75, 0.5] and regrouped[1:3] == batch[1:3]


def test_the_ledger_resolves_a_boxs_ids_checks_its_batch_and_bounds_its_pool():
    from benchmark.engine.box import SampledIds

    class Boxed(Recorder):  # what IsolatedStrategy hands the ledger: ids, weights and regroup lists as sent
        def sample(self, batch_size, ctx):
            assert ctx.rng is not None
            return SampledIds([1, 0], [1.0, 0.5], None, [0])

    ledger = StrategyLedger(Boxed(pool=(2, 4)), seed=0, num_trainers=1, track="open")
    ledger.add(group("a", version=0), clock=2.0)
    assert {(r.created_step, r.created_time) for r in ledger.known.values()} == {(0, 2.0)}
    batch, weights = ledger.sample(2)
    assert [r.rollout_id for r in batch] == [1, 0] and weights == [1.0, 0.5]
    assert [r.current_policy_behaviour for r in batch] == [True, False]  # position 0 recomputed
    with pytest.raises(StrategyFailure, match="asks for 8 rollouts"):
        ledger.pool_request(most_rollouts=7)
    assert ledger.ctx().rng is ledger.rng


def test_batch_rules_at_their_smallest_sizes_and_in_their_own_words():
    from benchmark import Batch
    from benchmark.engine.ledger import check_batch

    rollouts = build_rollouts(group(), 0, 0, 0, 0.0)
    known = {r.rollout_id: r for r in rollouts}
    with pytest.raises(StrategyFailure, match="^forbidden: rollout 0 fills 2 of the batch's 2 places"):
        check_batch([rollouts[0], rollouts[0]], 2, known)  # a batch of two: one rollout may fill one place
    with pytest.raises(StrategyFailure, match="^garbage: sample\\(\\) returned a int, not a Rollout$"):
        check_batch([rollouts[0], 3], 2, known)
    with pytest.raises(StrategyFailure, match="^forbidden: Batch.regroup is an open-track choice: on the buffer track "
                                              "the engine's advantages and behaviour log-probs stand$"):
        check_batch(Batch(rollouts[:2], regroup=[[0, 1]]), 2, known)
    ledger = StrategyLedger(Recorder(), seed=0, num_trainers=1)  # a ledger's track is the buffer track by default
    assert ledger.track == "buffer"


def test_the_wall_time_allowance_is_a_share_of_the_engines_own_time_outside_the_calls():
    # the engine works 0.3 s, then a call takes 0.1 s: 0.01 + 25% of 0.3 s = 0.085 s < 0.1 s
    ledger = StrategyLedger(Recorder(sleep=0.1), seed=0, num_trainers=1,
                            limits=LimitsConfig(floor_seconds=0.01, wall_share=0.25))
    time.sleep(0.3)
    with pytest.raises(StrategyFailure, match="more than their allowance"):
        ledger.add(group(), clock=0.0)
    # after 0.6 s of the engine's own: 0.01 + 25% of 0.6 s = 0.16 s > 0.1 s
    ledger = StrategyLedger(Recorder(sleep=0.1), seed=0, num_trainers=1,
                            limits=LimitsConfig(floor_seconds=0.01, wall_share=0.25))
    time.sleep(0.6)
    ledger.add(group(), clock=0.0)


def test_a_resumed_ledger_goes_on_counting_the_runs_time_from_where_it_was():
    ledger = StrategyLedger(Recorder(), seed=0, num_trainers=1)
    ledger.started -= 100.0  # a run 100 s in
    fresh = StrategyLedger(Recorder(), seed=0, num_trainers=1)
    fresh.load_state_dict(ledger.state_dict())
    assert 99.5 < time.perf_counter() - fresh.started < 101.0

"""What `sample()` returns is checked by the engine before any training: a wrong batch size, invalid
Batch.weights or Batch.regroup end the run with a `garbage: ...` verdict, what the buffer track's rules do not
allow with a `forbidden: ...` one, a forged or altered rollout with `fabricated` or `tampered`; a valid regroup
trains on the group-relative advantages the engine recomputes over the named positions."""

import math

import pytest
from conftest import small_workload
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark import Batch, ReplayStrategy
from benchmark.engine.pipeline import Pipeline
from benchmark.rl.grpo import GRPOTrainer, group_advantages
from benchmark.strategy import StrategyFailure

BATCH = 16  # small_workload's grpo.batch_size

SIZE = f"garbage: sample() must return a list of exactly {BATCH} rollouts or None, got "
WEIGHTS = "garbage: Batch.weights must hold one number from 0 to 1 per rollout"
REGROUP = "garbage: Batch.regroup must be disjoint lists of batch positions"
RECOMPUTE = "garbage: Batch.recompute_behaviour must be distinct batch positions"


class Shaped(ReplayStrategy):
    """Keeps every rollout; once it holds a batch, returns shape(the first BATCH rollouts)."""

    def __init__(self, shape):
        self.shape, self.seen = shape, []

    def add(self, rollouts, ctx):
        self.seen.extend(rollouts)

    def sample(self, batch_size, ctx):
        assert batch_size == BATCH
        return self.shape(list(self.seen[:batch_size])) if len(self.seen) >= batch_size else None


def run_pipeline(checkpoint, task, shape, budget=20_000, track="open"):
    w = small_workload(checkpoint, budget=budget, **{"eval.every": budget, "eval.num_problems": 4,
                                                     "eval.pass_k_problems": 0})
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    tok = AutoTokenizer.from_pretrained(checkpoint, padding_side="left")
    p = Pipeline(w, task, seed=0, policy=(model, tok, {}))
    p.attach(Shaped(shape), track)
    p.start()
    p.run()
    return p


def weights(*values):
    return lambda rs: Batch(rs, list(values) + [1.0] * (len(rs) - len(values)))


@pytest.mark.parametrize("shape, verdict", [
    (lambda rs: rs[:-1], SIZE + f"{BATCH - 1} items"),
    (lambda rs: rs + rs[:1], SIZE + f"{BATCH + 1} items"),
    (lambda rs: [], SIZE + "0 items"),
    (lambda rs: {r.rollout_id: r for r in rs}, SIZE + "dict"),
    (lambda rs: Batch(rs[:-2]), SIZE + f"{BATCH - 2} items"),
    (lambda rs: Batch(rs, [1.0] * (len(rs) - 1)), WEIGHTS),
    (lambda rs: Batch(rs, [1.0] * (len(rs) + 1)), WEIGHTS),
    (weights(-0.5), WEIGHTS),
    (weights(1.0, math.nan), WEIGHTS),
    (weights(math.inf), WEIGHTS),
    (weights("1.0"), WEIGHTS),
    (weights(None), WEIGHTS),
    (weights(1.5), WEIGHTS),  # a weight over 1 turns the learning rate up
    (weights(10**400), WEIGHTS),  # past float32, and past float64
    (weights(3e38 * 10), WEIGHTS),
    (weights(True), WEIGHTS),
    (lambda rs: Batch(rs, regroup=[[0, 1, 2, 3], [3, 4]]), REGROUP),  # overlapping
    (lambda rs: Batch(rs, regroup=[[0, 1, 1]]), REGROUP),  # a position twice in one set
    (lambda rs: Batch(rs, regroup=[[0, BATCH]]), REGROUP),  # out of range
    (lambda rs: Batch(rs, regroup=[[-1, 0]]), REGROUP),
    (lambda rs: Batch(rs, regroup=[[0, 1.0]]), REGROUP),  # not an int
    (lambda rs: Batch(rs, regroup=[["0", "1"]]), REGROUP),
    (lambda rs: Batch(rs, recompute_behaviour=[0, 0]), RECOMPUTE),  # twice
    (lambda rs: Batch(rs, recompute_behaviour=[BATCH]), RECOMPUTE),  # out of range
    (lambda rs: Batch(rs, recompute_behaviour=[True]), RECOMPUTE),  # not a position
    (lambda rs: Batch(rs, recompute_behaviour="0"), RECOMPUTE),
])
def test_invalid_batch_ends_the_run_with_a_garbage_verdict(tiny_checkpoint, arith_task, shape, verdict):
    with pytest.raises(StrategyFailure) as failure:
        run_pipeline(tiny_checkpoint, arith_task, shape)
    assert str(failure.value).startswith(verdict)


@pytest.mark.parametrize("shape", [
    lambda rs: rs,
    lambda rs: tuple(rs),
    lambda rs: Batch(rs, [0.0, 1, 0.5] + [1.0] * (len(rs) - 3), regroup=[[0, 5, 9], [2, 3]]),
    lambda rs: rs[:1] * (BATCH // 2) + rs[1:BATCH // 2 + 1],  # with replacement: half a batch of one rollout
    lambda rs: Batch(rs, regroup=[]),
    lambda rs: Batch(rs, regroup=[[0, 1]], recompute_behaviour=[1, 3]),
])
def test_valid_batches_train(tiny_checkpoint, arith_task, shape):
    assert run_pipeline(tiny_checkpoint, arith_task, shape).trainer_step > 0


@pytest.mark.parametrize("shape, verdict", [
    (lambda rs: Batch(rs, regroup=[[0, 1]]), "forbidden: Batch.regroup is an open-track choice"),
    (lambda rs: Batch(rs, recompute_behaviour=[0]), "forbidden: Batch.recompute_behaviour is an open-track choice"),
    (lambda rs: rs[:1] * BATCH, f"forbidden: rollout 0 fills {BATCH} of the batch's {BATCH} places"),
    (lambda rs: rs[:1] * (BATCH // 2 + 1) + rs[1:BATCH // 2], f"forbidden: rollout 0 fills {BATCH // 2 + 1} of"),
])
def test_the_buffer_tracks_rules_hold_in_code(tiny_checkpoint, arith_task, shape, verdict):
    with pytest.raises(StrategyFailure) as failure:
        run_pipeline(tiny_checkpoint, arith_task, shape, track="buffer")
    assert str(failure.value).startswith(verdict)


def test_regrouped_advantages_are_recomputed_over_the_named_positions(tiny_checkpoint, coin_task, monkeypatch):
    trained = []
    step = GRPOTrainer.step

    def recording_step(self, rollouts, weights=None, **kwargs):
        trained.append((list(rollouts), weights))
        return step(self, rollouts, weights, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "step", recording_step)
    chosen = {}

    def shape(rs):
        ones = [i for i, r in enumerate(rs) if r.reward == 1.0]
        zeros = [i for i, r in enumerate(rs) if r.reward == 0.0]
        assert len(ones) >= 3 and len(zeros) >= 3, "coin_task gives mixed rewards"
        # sets across the generation groups, in no particular order
        chosen["regroup"] = [[zeros[2], ones[0], zeros[0]], [ones[2], ones[1], zeros[1]]]
        chosen["given"] = rs
        return Batch(rs, [0.25] * len(rs), regroup=chosen["regroup"])

    p = run_pipeline(tiny_checkpoint, coin_task, shape, budget=10_000)
    assert p.trainer_step > 0
    batch, batch_weights = trained[0]
    given, regroup = chosen["given"], chosen["regroup"]
    assert [r.rollout_id for r in batch] == [r.rollout_id for r in given]
    assert batch_weights == [0.25] * BATCH
    for positions in regroup:
        rewards = [given[i].reward for i in positions]
        assert [batch[i].advantage for i in positions] == pytest.approx(group_advantages(rewards))
        assert all(batch[i].group_reward_mean == pytest.approx(sum(rewards) / len(rewards)) for i in positions)
    others = [i for i in range(BATCH) if all(i not in positions for positions in regroup)]
    assert [batch[i].advantage for i in others] == [given[i].advantage for i in others]
    assert [batch[i].group_reward_mean for i in others] == [given[i].group_reward_mean for i in others]
    # the regrouped advantages differ from the generation groups' own: the test would see a skipped recompute
    assert any(batch[i].advantage != pytest.approx(given[i].advantage) for positions in regroup for i in positions)


def test_recomputed_behaviour_reaches_the_trainer_as_the_current_policys(tiny_checkpoint, coin_task, monkeypatch):
    trained = []
    step = GRPOTrainer.step

    def recording_step(self, rollouts, weights=None, **kwargs):
        trained.append(list(rollouts))
        return step(self, rollouts, weights, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "step", recording_step)
    run_pipeline(tiny_checkpoint, coin_task, lambda rs: Batch(rs, recompute_behaviour=[2, 5]), budget=10_000)
    assert [i for i, r in enumerate(trained[0]) if r.current_policy_behaviour] == [2, 5]


def test_a_stale_sample_whose_behaviour_is_recomputed_has_ratio_one(tiny_checkpoint, coin_task):
    import dataclasses

    import torch

    from benchmark.engine.ledger import PendingGroup, build_rollouts
    from benchmark.rl.generation import HFEngine

    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    tok = AutoTokenizer.from_pretrained(tiny_checkpoint, padding_side="left")
    doc = coin_task.docs("train")[0]
    completions = HFEngine(model, tok).generate([coin_task.doc_to_text(doc)], n=4, temperature=1.0,
                                                max_new_tokens=4, seed=[1])[0]
    fresh = build_rollouts(PendingGroup("p", completions, [1.0, 0.0, 1.0, 0.0], 0), 0, 0, 0, 0.0)
    # as if sampled long ago by another policy: its recorded log-probs are far from the current ones
    stale = [dataclasses.replace(r, behaviour_logprobs=tuple(x - 3.0 for x in r.behaviour_logprobs)) for r in fresh]
    trainer = GRPOTrainer(model, tok.pad_token_id, lr=0.0)
    torch.manual_seed(0)
    assert trainer.step(stale)["ratio_mean"] > 10  # e^3: clipped, no gradient from most tokens
    recomputed = [dataclasses.replace(r, current_policy_behaviour=True) for r in stale]
    stats = trainer.step(recomputed)
    assert stats["ratio_mean"] == pytest.approx(1.0) and stats["clip_fraction"] == 0.0


def test_an_isolated_strategys_batch_crosses_the_boundary_whole():
    """What the box sends for a Batch (ids, weights, regroup, recompute positions) is what the engine reads."""
    import json

    from benchmark.engine.box import Box, SampledIds, encode
    from benchmark.rollout import Rollout

    rollouts = [Rollout(i, 0, "p", (1,), (2,), (-0.5,), 1.0, True, 0.0, 0, 0, 0.0) for i in range(4)]
    box = Box(ReplayStrategy(), rng_seed=0)
    sent = box.batch(Batch(rollouts, [1.0, 0.5, 1.0, 0.0], regroup=[[0, 1]], recompute_behaviour=[3]))
    read = SampledIds.from_message(json.loads(encode(sent)), 4)
    batch = read.resolve({r.rollout_id: r for r in rollouts})
    assert (batch.weights, batch.regroup, batch.recompute_behaviour) == ([1.0, 0.5, 1.0, 0.0], [[0, 1]], [3])


def small_rollouts(n: int, versions=None) -> list:
    from benchmark.rollout import Rollout

    versions = versions or [0] * n
    return [Rollout(i, i // 4, f"p{i // 4}", (1, 2), (3,), (-0.5,), float(i % 2), bool(i % 2), 0.0, v, 0, 0.0)
            for i, v in zip(range(n), versions)]


def test_an_altered_rollout_is_tampered_and_an_unknown_one_fabricated_at_the_first_batch():
    import dataclasses

    from benchmark.engine.ledger import check_batch

    rollouts = small_rollouts(4)
    known = {r.rollout_id: r for r in rollouts}
    assert check_batch(rollouts, 4, known)[0] == rollouts
    for field, value in (("reward", 1.0), ("advantage", 2.5), ("correct", True), ("policy_version", 7),
                         ("completion_ids", (3, 3)), ("behaviour_logprobs", (-0.1,))):
        altered = dataclasses.replace(rollouts[0], **{field: value})
        with pytest.raises(StrategyFailure, match="^tampered: rollout 0 differs"):
            check_batch([altered, *rollouts[1:]], 4, known)
    with pytest.raises(StrategyFailure, match="^fabricated: rollout 99 was never produced"):
        check_batch([*rollouts[:3], dataclasses.replace(rollouts[3], rollout_id=99)], 4, known)


def test_staleness_and_steps_since_last_use_against_hand_computed_values():
    """A scripted sequence of trained batches, counted by hand: staleness = the step a sample is trained at
    minus the policy version that generated it; steps since the rollout's last use, "new" at its first (a rollout
    drawn twice in one batch is counted once as such, then 0)."""
    from benchmark.engine.ledger import StrategyLedger

    a, b, c, d = small_rollouts(4, versions=[0, 0, 1, 3])
    ledger = StrategyLedger(ReplayStrategy(), seed=0, num_trainers=1)
    step0 = ledger.record_step([a, b])  # staleness 0, 0; both new
    step1 = ledger.record_step([a, c])  # a: 1 (last used at 0); c: 0, new
    step2 = ledger.record_step([c, c, a])  # c: 1 (last 1), c again: 1 (0 since), a: 2 (last 1)
    step3 = ledger.record_step([d, b])  # d: 0, new; b: 3 (last 0)
    assert ledger.trainer_step == 4
    assert ledger.offpolicy_counts == {0: 4, 1: 3, 2: 1, 3: 1}
    assert ledger.since_last_use_counts == {"new": 4, "1": 3, "0": 1, "3": 1}
    assert ledger.staleness_total == 8
    assert ledger.use_count == {0: 3, 1: 2, 2: 3, 3: 1}
    assert [s["offpolicy_mean"] for s in (step0, step1, step2, step3)] == [0.0, 0.5, pytest.approx(4 / 3), 1.5]
    assert [s["offpolicy_max"] for s in (step0, step1, step2, step3)] == [0, 1, 2, 3]
    assert [s["steps_since_last_use"] for s in (step0, step1, step2, step3)] == [0.0, 1.0, 1.0, 3.0]
    assert [s["reused_fraction"] for s in (step0, step1, step2, step3)] == [0.0, 0.5, 1.0, 0.5]


def test_the_run_reports_its_importance_ratios_and_the_share_it_trained_on_recomputed_behaviour(tiny_checkpoint,
                                                                                                 coin_task):
    """Ratio statistics in the summary and the per-step metrics: here 2 of each batch's samples take their
    behaviour from the current policy, so that share is 2 / BATCH, and Kish's effective sample size stays in (0, 1]."""
    p = run_pipeline(tiny_checkpoint, coin_task, lambda rs: Batch(rs, recompute_behaviour=[2, 5]), budget=10_000)
    stats = p.summary()["ratio_statistics"]
    assert stats["steps"] == p.trainer_step > 0
    assert stats["recomputed_behaviour_fraction"] == pytest.approx(2 / BATCH)
    assert 0 < stats["ess_fraction_mean"] <= 1 and stats["ratio_max"] >= 1 and stats["clip_fraction_mean"] >= 0
    logged = {name for name, _, _ in p.last_checkpoint.metrics} | {name for name, _, _ in p.metrics}
    assert {"train/ess_fraction", "train/recomputed_fraction", "train/clip_fraction", "train/ratio_max"} <= logged


def test_effective_sample_size_of_the_ratios():
    from benchmark.engine.executor import effective_sample_fraction

    assert effective_sample_fraction(1.0, 1.0) == 1.0  # every ratio 1
    # ratios 3 on one token of four, 1/3 on the others: mean 1.25, mean square 2.333...
    assert effective_sample_fraction(1.25, (9 + 3 / 9) / 4) == pytest.approx(1.25 ** 2 / ((9 + 1 / 3) / 4))
    assert effective_sample_fraction(1.0, 0.0) == 1.0

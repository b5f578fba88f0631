import math

import pytest
import torch

from benchmark.rl.generation import HFEngine
from benchmark.rl.grpo import GRPOTrainer, LossConfig, clipped_policy_loss, group_advantages, pad_batch
from benchmark.rollout import Rollout


def test_group_advantages_are_normalised_within_the_group():
    adv = group_advantages([1.0, 0.0, 0.0, 1.0])
    assert sum(adv) == pytest.approx(0.0)
    std = torch.tensor(adv).std().item()  # sample std, as computed
    assert std == pytest.approx(1.0)
    assert adv[0] > 0 > adv[1]


def test_group_with_equal_rewards_gets_zero_advantage():
    assert group_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    assert group_advantages([0.0] * 8) == [0.0] * 8


def _rollouts_from(engine, prompts, n, temperature=1.0):
    groups = engine.generate(prompts, n=n, temperature=temperature, max_new_tokens=5, seed=3)
    rollouts = []
    for g in groups:
        for c in g:
            i = len(rollouts)
            rollouts.append(Rollout(i, 0, "p", c.prompt_ids, c.completion_ids, c.logprobs, 0.0, False,
                                    1.0 if i % 2 else -1.0, 0, 0, 0.0))
    return rollouts


def test_on_policy_data_gives_ratio_one_and_no_clipping(tiny_checkpoint):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    tok = AutoTokenizer.from_pretrained(tiny_checkpoint, padding_side="left")
    rollouts = _rollouts_from(HFEngine(model, tok), ["012+345=", "1+2="], n=6)
    trainer = GRPOTrainer(model, tok.pad_token_id, lr=1e-3)
    stats = trainer.step(rollouts)  # the first step's ratio is computed before the update
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert stats["ratio_max"] == pytest.approx(1.0, abs=1e-4)
    assert stats["clip_fraction"] == 0.0
    assert math.isfinite(stats["grad_norm"]) and stats["grad_norm"] > 0


def test_clipping_bites_only_beyond_the_epsilon_band():
    cfg = LossConfig(eps_low=0.2, eps_high=0.3)
    behaviour = torch.zeros(1, 4)
    # ratios 1.5 (above 1+eps_high), 1.1 (inside), 0.5 (below 1-eps_low), 0.9 (inside)
    logprobs = torch.log(torch.tensor([[1.5, 1.1, 0.5, 0.9]]))
    mask = torch.ones(1, 4, dtype=torch.bool)
    _, pos = clipped_policy_loss(logprobs, behaviour, torch.tensor([1.0]), mask, cfg)
    _, neg = clipped_policy_loss(logprobs, behaviour, torch.tensor([-1.0]), mask, cfg)
    # positive advantage: only the ratio above 1+eps_high is clipped; negative: only the one below 1-eps_low
    assert pos["clip_fraction"] == pytest.approx(0.25)
    assert neg["clip_fraction"] == pytest.approx(0.25)
    loss, _ = clipped_policy_loss(logprobs, behaviour, torch.tensor([1.0]), mask, cfg)
    assert loss.item() == pytest.approx(-(1.3 + 1.1 + 0.5 + 0.9) / 4, rel=1e-5)


def test_clip_higher_lets_ratio_rise_further():
    logprobs = torch.log(torch.tensor([[1.25]]))
    args = (torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1, dtype=torch.bool))
    sym, _ = clipped_policy_loss(logprobs, *args, LossConfig(0.2, 0.2))
    higher, _ = clipped_policy_loss(logprobs, *args, LossConfig(0.2, 0.28))
    assert sym.item() == pytest.approx(-1.2) and higher.item() == pytest.approx(-1.25)


def test_token_mean_and_sequence_mean_differ_on_unequal_lengths():
    logprobs = torch.zeros(2, 4)
    behaviour = torch.zeros(2, 4)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    adv = torch.tensor([1.0, -1.0])
    token, _ = clipped_policy_loss(logprobs, behaviour, adv, mask, LossConfig(aggregation="token_mean"))
    seq, _ = clipped_policy_loss(logprobs, behaviour, adv, mask, LossConfig(aggregation="sequence_mean"))
    assert token.item() == pytest.approx((-1 + 4) / 5)  # long sequence dominates
    assert seq.item() == pytest.approx(0.0)  # each sequence weighs the same


def test_pad_batch_marks_only_completion_tokens():
    r = Rollout(0, 0, "p", (5, 6, 7), (8, 2), (-0.5, -0.25), 1.0, True, 0.0, 0, 0, 0.0)
    s = Rollout(1, 0, "p", (5,), (9,), (-1.0,), 0.0, False, 0.0, 0, 0, 0.0)
    ids, attention, completion, behaviour = pad_batch([r, s], pad_id=0)
    assert ids.tolist() == [[5, 6, 7, 8, 2], [5, 9, 0, 0, 0]]
    assert completion.tolist() == [[False, False, False, True, True], [False, True, False, False, False]]
    assert behaviour[0, 3:].tolist() == [-0.5, -0.25]
    assert attention.sum().item() == 7


def test_asymre_weights_tokens_by_reward_minus_a_lowered_baseline_without_ratio():
    from benchmark.rl.grpo import asymre_loss

    logprobs = torch.log(torch.tensor([[0.5, 0.25], [0.5, 0.5]])).requires_grad_(True)
    behaviour = torch.log(torch.tensor([[0.1, 0.1], [0.9, 0.9]]))  # far off-policy: no effect on the loss
    mask = torch.ones(2, 2, dtype=torch.bool)
    rewards, baselines = torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])
    cfg = LossConfig(kind="asymre", asymre_delta=0.1)
    loss, stats = asymre_loss(logprobs, behaviour, rewards, baselines, mask, cfg)
    # weights: 1 - 0.4 = 0.6 for the correct one, 0 - 0.4 = -0.4 for the wrong one
    expected = -(0.6 * (math.log(0.5) + math.log(0.25)) - 0.4 * 2 * math.log(0.5)) / 4
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    # delta > 0 pushes up the correct sample harder than it pushes down the wrong one
    assert abs(logprobs.grad[0, 0].item()) > abs(logprobs.grad[1, 0].item())
    assert stats["clip_fraction"] == 0.0 and stats["ratio_max"] > 1.0


def test_asymre_runs_in_the_trainer(tiny_checkpoint):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    tok = AutoTokenizer.from_pretrained(tiny_checkpoint, padding_side="left")
    rollouts = _rollouts_from(HFEngine(model, tok), ["012+345="], n=4)
    trainer = GRPOTrainer(model, tok.pad_token_id, lr=1e-3, loss=LossConfig(kind="asymre"))
    before = [p.detach().clone() for p in model.parameters()]
    stats = trainer.step(rollouts)
    assert math.isfinite(stats["loss"])
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_sample_weights_scale_each_sample_loss():
    logprobs = torch.zeros(2, 1)
    args = (torch.zeros(2, 1), torch.tensor([1.0, 1.0]), torch.ones(2, 1, dtype=torch.bool), LossConfig())
    plain, _ = clipped_policy_loss(logprobs, *args)
    weighted, _ = clipped_policy_loss(logprobs, *args, weights=torch.tensor([1.0, 0.0]))
    assert plain.item() == pytest.approx(-1.0) and weighted.item() == pytest.approx(-0.5)


# ---- micro-batching (gradient accumulation) and activation checkpointing: the same update -------------
def _varied_rollouts(n: int = 7, seed: int = 0) -> list[Rollout]:
    """Rollouts of unequal prompt and completion lengths, behaviour log-probs away from the model's
    (so ratios differ from 1 and some are clipped), mixed advantages."""
    g = torch.Generator().manual_seed(seed)
    rollouts = []
    for i in range(n):
        p, c = int(torch.randint(2, 6, (1,), generator=g)), int(torch.randint(1, 9, (1,), generator=g))
        ids = torch.randint(0, 12, (p + c,), generator=g).tolist()
        logprobs = (-0.5 - 2.5 * torch.rand(c, generator=g)).tolist()
        reward = float(i % 2)
        rollouts.append(Rollout(i, i // 4, "p", tuple(ids[:p]), tuple(ids[p:]), tuple(logprobs), reward,
                                bool(reward), float(torch.randn(1, generator=g)), 0, 0, 0.0, 0.5))
    return rollouts


def _one_step(checkpoint, rollouts, weights=None, micro_batch_size=0, gradient_checkpointing=False,
              share_prompts=True, **loss):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    trainer = GRPOTrainer(model, 0, lr=1e-3, loss=LossConfig(**loss), micro_batch_size=micro_batch_size,
                          gradient_checkpointing=gradient_checkpointing, share_prompts=share_prompts)
    stats = trainer.step(rollouts, weights)
    return [p.detach().clone() for p in model.parameters()], stats


def _assert_same_update(a, b):
    # Adam's first step moves a parameter by lr * g / (|g| + eps): where g is near eps = 1e-8, a rounding-level
    # change of g moves the update by a fraction of lr (1e-3); 1e-5 is 1% of it. The statistics compare to 1e-5.
    (params_a, stats_a), (params_b, stats_b) = a, b
    for x, y in zip(params_a, params_b):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-5)
    assert stats_a.keys() == stats_b.keys()
    for key in stats_a:
        assert stats_b[key] == pytest.approx(stats_a[key], rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_micro_batches_give_the_whole_batch_update(tiny_checkpoint, aggregation, weighted):
    rollouts = _varied_rollouts()
    weights = [0.5 + 0.25 * i for i in range(len(rollouts))] if weighted else None
    whole = _one_step(tiny_checkpoint, rollouts, weights, aggregation=aggregation)
    assert whole[1]["clip_fraction"] > 0  # the comparison covers clipped tokens
    for size in (1, 3, len(rollouts)):
        _assert_same_update(whole, _one_step(tiny_checkpoint, rollouts, weights, size, aggregation=aggregation))


def test_micro_batches_give_the_whole_batch_update_for_asymre(tiny_checkpoint):
    rollouts = _varied_rollouts(seed=1)
    whole = _one_step(tiny_checkpoint, rollouts, kind="asymre")
    _assert_same_update(whole, _one_step(tiny_checkpoint, rollouts, None, 2, kind="asymre"))


def test_activation_checkpointing_gives_the_same_update(tiny_checkpoint):
    rollouts = _varied_rollouts(seed=2)
    whole = _one_step(tiny_checkpoint, rollouts)
    _assert_same_update(whole, _one_step(tiny_checkpoint, rollouts, gradient_checkpointing=True))
    _assert_same_update(whole, _one_step(tiny_checkpoint, rollouts, None, 3, gradient_checkpointing=True))


def _grouped_rollouts(seed: int = 3) -> list[Rollout]:
    """Groups of rollouts sharing a prompt, prompts of unequal lengths, some groups partly present and out of
    order: a replay batch."""
    base = _varied_rollouts(24, seed)
    rollouts = [Rollout(i, i % 5, "p", base[i % 5].prompt_ids, r.completion_ids, r.behaviour_logprobs, r.reward,
                        r.correct, r.advantage, 0, 0, 0.0, 0.5) for i, r in enumerate(base)]
    return rollouts[::-1][:21]


@pytest.mark.parametrize("kind", ["grpo", "asymre"])
def test_a_prompt_computed_once_for_its_rollouts_gives_the_same_gradients(tiny_checkpoint, kind):
    from transformers import AutoModelForCausalLM

    rollouts = _grouped_rollouts()
    assert len({r.prompt_ids for r in rollouts}) == 5 and len({len(r.prompt_ids) for r in rollouts}) > 1
    results = []
    for share in (False, True):
        model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
        trainer = GRPOTrainer(model, 0, lr=1e-3, loss=LossConfig(kind=kind), share_prompts=share)
        assert trainer.share_prompts == share
        loss, stats, entropy, tokens = trainer._forward(rollouts, [0.5 + 0.1 * i for i in range(len(rollouts))])
        loss.backward()
        results.append((torch.cat([p.grad.flatten() for p in model.parameters()]), loss.item(), stats,
                        entropy.item(), tokens.item()))
    (grad_full, *rest_full), (grad_shared, *rest_shared) = results
    torch.testing.assert_close(grad_shared, grad_full, rtol=0, atol=1e-5 * grad_full.abs().max().item())
    assert rest_shared[0] == pytest.approx(rest_full[0], rel=1e-5)
    assert rest_shared[1] == pytest.approx(rest_full[1], rel=1e-5)
    assert rest_shared[2:] == pytest.approx(rest_full[2:], rel=1e-5)
    _assert_same_update(_one_step(tiny_checkpoint, rollouts, share_prompts=False), _one_step(tiny_checkpoint, rollouts))


def test_micro_batches_under_ddp_all_reduce_once_and_give_the_same_update(tiny_checkpoint, tmp_path):
    """A one-rank DistributedDataParallel model (as the Ray executor's trainers use) takes the no_sync path."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformers import AutoModelForCausalLM

    rollouts = _varied_rollouts(seed=3)
    whole = _one_step(tiny_checkpoint, rollouts)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
        ddp = DistributedDataParallel(model)
        syncs = []
        no_sync = ddp.no_sync
        ddp.no_sync = lambda: syncs.append(1) or no_sync()
        trainer = GRPOTrainer(ddp, 0, lr=1e-3, micro_batch_size=3, gradient_checkpointing=True)
        stats = trainer.step(rollouts)
    finally:
        dist.destroy_process_group()
    assert len(syncs) == 2  # 7 rollouts in micro-batches of 3: the first two skip the all-reduce
    _assert_same_update(whole, ([p.detach().clone() for p in model.parameters()], stats))


def test_negative_micro_batch_size_is_a_clear_workload_error():
    from benchmark.workload import WorkloadError, load_workload

    with pytest.raises(WorkloadError, match="grpo.micro_batch_size must be an integer >= 0"):
        load_workload("arith-tiny", {"grpo.micro_batch_size": -1})


def test_an_unknown_loss_is_refused_not_trained_as_grpo():
    with pytest.raises(ValueError, match="unknown loss 'ppo'"):
        LossConfig(kind="ppo")


def test_every_loss_the_schema_accepts_is_registered():
    from benchmark.rl.grpo import LOSS_FUNCTIONS
    from benchmark.workload import LOSSES

    assert set(LOSS_FUNCTIONS) == set(LOSSES)

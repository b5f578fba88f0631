"""The off-policy losses of the async trainers (tis, cispo, m2po, decoupled_ppo): each shapes the per-token
ratio as its paper says, on hand-made batches whose gradients are known in closed form."""

import math

import pytest
import torch

from benchmark.rl.grpo import LossConfig, m2po_keep, shaped_ratio_loss


def gradient(kind: str, current: list[float], behaviour: list[float], advantage: float = 1.0, **cfg):
    """d loss / d log pi_theta per token of one sample (token mean), and the loss's statistics."""
    logprobs = torch.tensor([current], dtype=torch.float32, requires_grad=True)
    loss, stats = shaped_ratio_loss(logprobs, torch.tensor([behaviour]), torch.tensor([advantage]),
                                    torch.ones(1, len(current), dtype=torch.bool), LossConfig(kind=kind, **cfg))
    loss.backward()
    return logprobs.grad[0].tolist(), stats


def test_tis_truncates_the_weight_and_keeps_every_tokens_gradient():
    log_ratios = [math.log(0.5), 0.0, math.log(3.0)]
    grads, stats = gradient("tis", log_ratios, [0.0] * 3, tis_cap=2.0)
    # gradient of the token mean of -min(ratio, C) A log pi: -min(ratio, C) A / n
    assert grads == pytest.approx([-0.5 / 3, -1.0 / 3, -2.0 / 3])
    assert stats["clip_fraction"] == pytest.approx(1 / 3) and stats["ratio_max"] == pytest.approx(3.0)


def test_cispo_clips_the_weight_from_above_only_and_the_clipped_token_still_learns():
    grads, stats = gradient("cispo", [math.log(0.5), math.log(1.5)], [0.0, 0.0], eps_high=0.28)
    assert grads == pytest.approx([-0.5 / 2, -1.28 / 2])  # PPO would give the second token no gradient
    assert stats["clip_fraction"] == pytest.approx(0.5)


def test_m2po_masks_exactly_the_tokens_its_rule_names():
    # (log ratio)^2: 0.25, 0.01, 0.0004, 0.09 -> mean 0.0876 > 0.04; dropping 0.25 leaves mean 0.0335 <= 0.04
    log_ratios = torch.tensor([[0.5, 0.1, -0.02], [-0.3, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    keep = m2po_keep(log_ratios, mask, tau=0.04)
    assert keep.tolist() == [[False, True, True], [True, False, False]]
    # a tighter tau drops the next largest too: 0.09 -> mean of 0.01, 0.0004 = 0.0052
    assert m2po_keep(log_ratios, mask, tau=0.01).tolist() == [[False, True, True], [False, False, False]]
    # already under tau: nothing dropped; padding stays out
    assert m2po_keep(log_ratios, mask, tau=1.0).tolist() == mask.tolist()


def test_m2po_trains_the_kept_tokens_on_the_unclipped_ratio():
    grads, stats = gradient("m2po", [0.5, 0.1, -0.02], [0.0, 0.0, 0.0], m2po_tau=0.04)
    # the first token is masked; the others: d(-ratio A / n)/d log pi = -ratio / n
    assert grads == pytest.approx([0.0, -math.exp(0.1) / 3, -math.exp(-0.02) / 3])
    assert stats["clip_fraction"] == pytest.approx(1 / 3)


def test_decoupled_ppo_weights_by_the_capped_behaviour_ratio_under_a_trust_region_that_does_not_bind():
    grads, stats = gradient("decoupled_ppo", [math.log(2.0), math.log(8.0)], [0.0, 0.0], decoupled_cap=5.0)
    assert grads == pytest.approx([-2.0 / 2, -5.0 / 2])
    assert stats["clip_fraction"] == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["tis", "cispo", "m2po", "decoupled_ppo"])
def test_on_policy_data_gets_the_policy_gradient_from_every_loss(kind):
    """At ratio 1 nothing is truncated, clipped or masked: each loss is -A log pi in gradient."""
    grads, stats = gradient(kind, [-1.0, -2.0], [-1.0, -2.0], advantage=0.7)
    assert grads == pytest.approx([-0.35, -0.35]) and stats["clip_fraction"] == 0.0


@pytest.mark.parametrize("kind", ["tis", "cispo", "m2po", "decoupled_ppo"])
def test_each_loss_runs_in_the_trainer_from_the_workload(kind, tiny_checkpoint):
    from conftest import small_workload

    from benchmark.engine.ledger import build_rollouts
    from benchmark.engine.pipeline import Pipeline

    workload = small_workload(tiny_checkpoint, **{"grpo.loss": kind})
    pipeline = Pipeline(workload, workload.load_task(), seed=0)
    assert pipeline.trainer.loss_cfg.kind == kind
    groups = pipeline.generator.stream_groups(range(workload.grpo.batch_size // workload.grpo.group_size))
    rollouts = [r for i, g in enumerate(groups) for r in build_rollouts(g, i * 100, i, 0, 0.0)]
    stats = pipeline.trainer.step(rollouts)
    assert math.isfinite(stats["loss"]) and stats["clip_fraction"] == 0.0  # on-policy: nothing shaped


def test_the_m2po_baseline_trains_with_the_papers_tau_on_the_fifo_at_the_papers_split():
    from benchmark.submission import load_baselines

    entry = load_baselines().entries["m2po"]
    grpo = entry.workload_for("arith-tiny").grpo
    assert (entry.track, grpo.loss, grpo.m2po_tau, entry.workers, entry.trainers) == ("open", "m2po", 0.04, 5, 3)
    assert entry.strategy.name == "fifo_uniform.py" and entry.strategy_params() == {"buffer_size": 90}

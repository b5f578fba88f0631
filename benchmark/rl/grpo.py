"""GRPO with off-policy correction: group-relative advantages and the clipped importance-ratio loss.

The loss, for completion token t of rollout i sampled by the behaviour policy b:
    ratio = pi_theta(y_t) / b(y_t)
    loss  = -min(ratio * A_i, clip(ratio, 1 - eps_low, 1 + eps_high) * A_i)
aggregated by token mean over the batch (default) or by sequence mean. No KL term.

A batch too large for one device is trained in micro-batches: each is backpropagated on its own with
the whole batch's normaliser (its completion tokens, or its sequences), so the accumulated gradients,
and the one optimiser step on them, are those of the whole batch.

The alternative loss "asymre" (asymmetric REINFORCE, Arnal et al. 2025) has no importance ratio:
    loss  = -log pi_theta(y_t) * (r_i - V),   V = mean reward of i's group - delta
a baseline set below the behaviour policy's value, which keeps off-policy training stable.

The off-policy losses of the 2025-26 async trainers each shape the per-token ratio before it meets the
advantage; all of them are  loss = -sg(c_t) * ratio_t * A_i  with a coefficient c_t >= 0 that takes no
gradient, so their gradient is c_t * ratio_t * A_i * grad log pi_theta(y_t):
    tis            c = min(ratio, C) / ratio                truncated importance sampling (verl, slime), C = tis_cap
    cispo          c = min(ratio, 1 + eps_high) / ratio     CISPO (MiniMax-M1): the weight is clipped, the token
                                                            keeps its gradient (PPO's clip drops it)
    m2po           c = 0 on the tokens with the largest (log ratio)^2 until the mean (log ratio)^2 of the others
                   is <= tau (M2PO, tau = m2po_tau; the paper's 0.04), 1 on the rest; no clip
    decoupled_ppo  AReaL's decoupled loss: the behaviour weight min(pi_prox / b, cap) (cap = decoupled_cap) times
                   PPO's clipped objective in pi_theta / pi_prox. pi_prox is the policy before this update (the
                   step's own forward, detached), so with one optimiser step per batch the trust-region ratio is 1
                   when the gradient is taken and the loss is the capped importance weight's.
The statistics of each: clip_fraction is the share of tokens whose coefficient is not 1 (truncated, clipped or
masked).
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from benchmark.rl.data_parallel import full_tensor, is_sharded
from benchmark.rollout import Rollout
from benchmark.workload import LOSSES


def group_advantages(rewards: list[float]) -> list[float]:
    """(r - mean) / std within one group; a group whose rewards are all equal gets zeros.

    std is the sample standard deviation (Bessel-corrected), as TRL and verl compute it.
    """
    r = torch.tensor(rewards, dtype=torch.float64)
    if len(rewards) < 2:
        return [0.0] * len(rewards)
    std = r.std()
    if std.item() < 1e-8:
        return [0.0] * len(rewards)
    return ((r - r.mean()) / std).tolist()


@dataclass
class LossConfig:
    eps_low: float = 0.2
    eps_high: float = 0.2
    aggregation: str = "token_mean"  # or "sequence_mean"
    kind: str = "grpo"  # one of benchmark.workload.LOSSES
    asymre_delta: float = 0.1
    tis_cap: float = 2.0
    m2po_tau: float = 0.04
    decoupled_cap: float = 5.0

    def __post_init__(self):
        if self.kind not in LOSSES:
            raise ValueError(f"unknown loss {self.kind!r}: use one of {', '.join(LOSSES)}")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, aggregation: str,
              normaliser: torch.Tensor | None = None) -> torch.Tensor:
    """The batch loss. `normaliser`: when per_token holds one micro-batch, the whole batch's number of
    completion tokens (token_mean) or of sequences (sequence_mean); None = per_token is the whole batch."""
    if aggregation == "token_mean":
        return (per_token * mask).sum() / (mask.sum().clamp(min=1) if normaliser is None else normaliser)
    if aggregation == "sequence_mean":
        per_sequence = (per_token * mask).sum(1) / mask.sum(1).clamp(min=1)
        return per_sequence.mean() if normaliser is None else per_sequence.sum() / normaliser
    raise ValueError(f"unknown loss aggregation {aggregation!r}: use token_mean or sequence_mean")


def loss_normaliser(rollouts: list[Rollout], aggregation: str) -> torch.Tensor:
    """What `aggregate` divides the whole batch's summed loss by: its completion tokens, or its sequences."""
    if aggregation == "sequence_mean":
        return torch.tensor(float(len(rollouts)))
    return torch.tensor(float(max(sum(len(r.completion_ids) for r in rollouts), 1)))


def ratio_stats(ratio: torch.Tensor, mask: torch.Tensor, clipped_tokens: torch.Tensor | None = None) -> dict:
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        return {
            "clip_fraction": 0.0 if clipped_tokens is None else (clipped_tokens.sum() / n).item(),
            "ratio_mean": ((ratio * mask).sum() / n).item(),
            # with the mean, the effective sample size (Kish: mean(r)^2 / mean(r^2) of n); a token mean merges
            "ratio_sq_mean": ((ratio.square() * mask).sum() / n).item(),
            "ratio_max": ratio.masked_fill(mask == 0, float("-inf")).max().item(),
        }


@dataclass
class TokenLoss:
    """A loss before aggregation: per completion token, its loss (sample weights applied, with gradients), the
    importance ratio (detached) and which tokens the loss clipped, truncated or masked (None: it shapes none)."""

    per_token: torch.Tensor
    ratio: torch.Tensor
    shaped: torch.Tensor | None = None

    def weighted(self, weights: torch.Tensor | None) -> TokenLoss:
        if weights is None:
            return self
        return TokenLoss(self.per_token * weights.unsqueeze(1), self.ratio, self.shaped)

    def reduce(self, mask: torch.Tensor, cfg: LossConfig, normaliser=None) -> tuple[torch.Tensor, dict[str, float]]:
        """(the batch loss, its ratio statistics)."""
        mask = mask.to(self.per_token.dtype)
        shaped = None if self.shaped is None else self.shaped.to(mask.dtype) * mask
        return aggregate(self.per_token, mask, cfg.aggregation, normaliser), ratio_stats(self.ratio, mask, shaped)

    def per_sample(self, mask: torch.Tensor) -> tuple[list[float], list[float]]:
        """Each sample's loss (its tokens' mean) and the share of its tokens shaped."""
        with torch.no_grad():
            mask = mask.to(self.per_token.dtype)
            tokens = mask.sum(1).clamp(min=1)
            loss = (self.per_token.detach() * mask).sum(1) / tokens
            if self.shaped is None:
                shaped = torch.zeros_like(loss)
            else:
                shaped = (self.shaped.to(mask.dtype) * mask).sum(1) / tokens
            return loss.tolist(), shaped.tolist()


def asymre_terms(logprobs, behaviour_logprobs, rewards, baselines, cfg: LossConfig) -> TokenLoss:
    """rewards, baselines (group mean rewards): [batch]. No importance ratio; reported for monitoring."""
    weight = (rewards - (baselines - cfg.asymre_delta)).unsqueeze(1)
    return TokenLoss(-logprobs * weight, torch.exp(logprobs.detach() - behaviour_logprobs))


def clipped_policy_terms(logprobs, behaviour_logprobs, advantages, cfg: LossConfig) -> TokenLoss:
    """PPO's clipped objective; logprobs, behaviour_logprobs: [batch, tokens]; advantages: [batch]."""
    ratio = torch.exp(logprobs - behaviour_logprobs)
    adv = advantages.unsqueeze(1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high) * adv
    # the shaped tokens: where the clip changed the objective
    return TokenLoss(-torch.minimum(unclipped, clipped), ratio.detach(), clipped < unclipped)


def m2po_keep(log_ratio: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """M2PO's token mask: drop the tokens with the largest (log ratio)^2, one by one, until the mean (log ratio)^2
    of the tokens kept is <= tau (none dropped when it already is)."""
    with torch.no_grad():
        valid_tokens = mask.bool().flatten()
        squared = log_ratio.square().flatten().masked_fill(~valid_tokens, 0.0)
        valid = int(valid_tokens.sum().item())
        if valid == 0:
            return mask.bool()
        order = torch.argsort(squared.masked_fill(~valid_tokens, -1.0), descending=True, stable=True)[:valid]
        remaining = squared.sum() - torch.cumsum(squared[order], 0)  # after dropping the first k + 1
        kept_after = valid - torch.arange(1, valid + 1, device=squared.device)
        means = torch.cat([squared.sum()[None] / valid, remaining / kept_after.clamp(min=1)])
        drop = int(torch.nonzero(means <= tau)[0].item()) if bool((means <= tau).any()) else valid
        keep = valid_tokens.clone()
        keep[order[:drop]] = False
        return keep.view_as(mask)


def shaped_ratio_terms(logprobs, behaviour_logprobs, advantages, mask, cfg: LossConfig) -> TokenLoss:
    """-sg(c) * ratio * A with the coefficient c of `cfg.kind` (the module's docstring); logprobs,
    behaviour_logprobs, mask: [batch, tokens]; advantages: [batch]."""
    log_ratio = logprobs - behaviour_logprobs
    ratio = torch.exp(log_ratio)
    detached = ratio.detach()
    if cfg.kind == "decoupled_ppo":
        # pi_prox is this forward's own policy: the trust-region ratio pi_theta / pi_prox is 1 in value, its
        # gradient that of log pi_theta; PPO's clip of it never binds with one optimiser step per batch
        trust = torch.exp(logprobs - logprobs.detach())
        adv = advantages.unsqueeze(1)
        objective = torch.minimum(trust * adv, torch.clamp(trust, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high) * adv)
        return TokenLoss(-detached.clamp(max=cfg.decoupled_cap) * objective, detached, detached > cfg.decoupled_cap)
    if cfg.kind == "tis":
        coefficient = detached.clamp(max=cfg.tis_cap) / detached
    elif cfg.kind == "cispo":
        coefficient = detached.clamp(max=1.0 + cfg.eps_high) / detached
    elif cfg.kind == "m2po":
        coefficient = m2po_keep(log_ratio.detach(), mask, cfg.m2po_tau).to(ratio.dtype)
    else:
        raise ValueError(f"{cfg.kind!r} is not a shaped-ratio loss")
    return TokenLoss(-(coefficient * ratio) * advantages.unsqueeze(1), detached, coefficient != 1.0)


def asymre_loss(logprobs, behaviour_logprobs, rewards, baselines, mask, cfg: LossConfig, weights=None,
                normaliser=None):
    """AsymRE's batch loss and statistics (`asymre_terms`)."""
    return asymre_terms(logprobs, behaviour_logprobs, rewards, baselines, cfg).weighted(weights).reduce(
        mask, cfg, normaliser)


def clipped_policy_loss(logprobs, behaviour_logprobs, advantages, mask, cfg: LossConfig, weights=None,
                        normaliser=None) -> tuple[torch.Tensor, dict[str, float]]:
    """logprobs, behaviour_logprobs, mask: [batch, tokens]; advantages, weights (per sample): [batch];
    normaliser: see `aggregate`."""
    return clipped_policy_terms(logprobs, behaviour_logprobs, advantages, cfg).weighted(weights).reduce(
        mask, cfg, normaliser)


def shaped_ratio_loss(logprobs, behaviour_logprobs, advantages, mask, cfg: LossConfig, weights=None,
                      normaliser=None) -> tuple[torch.Tensor, dict[str, float]]:
    """A shaped-ratio loss's batch loss and statistics (`shaped_ratio_terms`)."""
    return shaped_ratio_terms(logprobs, behaviour_logprobs, advantages, mask, cfg).weighted(weights).reduce(
        mask, cfg, normaliser)


def _per_sample(rollouts: list[Rollout], field: str, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor([getattr(r, field) for r in rollouts], dtype=torch.float32, device=like.device)


# Each registered loss (benchmark.workload.LOSSES names them for the schema), per token, from the batch's log-probs
# and its rollouts: (logprobs, behaviour, rollouts, mask, cfg) -> TokenLoss.
LOSS_FUNCTIONS = {
    "grpo": lambda logp, behaviour, rollouts, mask, cfg: clipped_policy_terms(
        logp, behaviour, _per_sample(rollouts, "advantage", logp), cfg),
    "asymre": lambda logp, behaviour, rollouts, mask, cfg: asymre_terms(
        logp, behaviour, _per_sample(rollouts, "reward", logp), _per_sample(rollouts, "group_reward_mean", logp), cfg),
    **{kind: lambda logp, behaviour, rollouts, mask, cfg: shaped_ratio_terms(
        logp, behaviour, _per_sample(rollouts, "advantage", logp), mask, cfg)
       for kind in ("tis", "cispo", "m2po", "decoupled_ppo")},
}


def pad_batch(rollouts: list[Rollout], pad_id: int):
    """Right-padded input ids, attention mask, completion mask and behaviour log-probs.

    Right padding keeps position ids equal to those used at generation (which counted from the
    first real token), so on-policy data gives an importance ratio of 1.
    """
    longest = max(r.length for r in rollouts)
    n = len(rollouts)
    input_ids = torch.full((n, longest), pad_id, dtype=torch.long)
    attention = torch.zeros((n, longest), dtype=torch.long)
    completion_mask = torch.zeros((n, longest), dtype=torch.bool)
    behaviour = torch.zeros((n, longest), dtype=torch.float32)
    for i, r in enumerate(rollouts):
        p, c = len(r.prompt_ids), len(r.completion_ids)
        input_ids[i, : p + c] = torch.tensor(r.prompt_ids + r.completion_ids)
        attention[i, : p + c] = 1
        completion_mask[i, p : p + c] = True
        behaviour[i, p : p + c] = torch.tensor(r.behaviour_logprobs)
    return input_ids, attention, completion_mask, behaviour


def token_logprobs_and_entropy(model, input_ids, attention, temperature: float = 1.0):
    """Log-prob of each token given its prefix (aligned to the token's own position), and entropy."""
    # no KV cache: nothing is generated here, and it would only hold memory
    logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits[:, :-1].float()
    logits = logits / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    target = input_ids[:, 1:]
    logp = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    # shift right by one so index t holds the log-prob of token t
    pad = torch.zeros_like(logp[:, :1])
    return torch.cat([pad, logp], 1), torch.cat([pad, entropy], 1)


def pad_completions(rollouts: list[Rollout], pad_id: int):
    """Right-padded completion ids, their mask and behaviour log-probs: [rollouts, longest completion]."""
    longest = max(len(r.completion_ids) for r in rollouts)
    ids = torch.full((len(rollouts), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rollouts), longest), dtype=torch.bool)
    behaviour = torch.zeros((len(rollouts), longest), dtype=torch.float32)
    for i, r in enumerate(rollouts):
        c = len(r.completion_ids)
        ids[i, :c] = torch.tensor(r.completion_ids)
        mask[i, :c] = True
        behaviour[i, :c] = torch.tensor(r.behaviour_logprobs)
    return ids, mask, behaviour


def completion_logprobs_sharing_prompts(model, rollouts: list[Rollout], pad_id: int, temperature: float = 1.0):
    """Log-prob and entropy of each completion token, [rollouts, longest completion]: each distinct prompt
    runs through the model once and its KV cache serves every rollout of it (the G rollouts of a group share
    their prompt), which is the forward of `token_logprobs_and_entropy` up to float rounding."""
    device = next(model.parameters()).device
    prompt_of, row_prompt = {}, []
    for r in rollouts:
        row_prompt.append(prompt_of.setdefault(tuple(r.prompt_ids), len(prompt_of)))
    prompts = list(prompt_of)
    lengths = torch.tensor([len(p) for p in prompts], device=device)
    prompt_ids = torch.full((len(prompts), int(lengths.max())), pad_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        prompt_ids[i, :len(p)] = torch.tensor(p)
    prompt_ids = prompt_ids.to(device)
    prompt_mask = (torch.arange(prompt_ids.shape[1], device=device) < lengths[:, None]).long()
    rows = torch.tensor(row_prompt, device=device)

    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    cache = DynamicCache(config=model.config)
    prompt_logits = model(input_ids=prompt_ids, attention_mask=prompt_mask, use_cache=True,
                          **{cache_arg: cache}).logits
    first = prompt_logits[torch.arange(len(prompts), device=device), lengths - 1]  # predicts completion token 0
    cache.batch_select_indices(rows)  # each rollout's rows of its prompt's keys and values, gradients summed back
    ids, mask, _ = (t.to(device) for t in pad_completions(rollouts, pad_id))
    positions = lengths[rows][:, None] + torch.arange(ids.shape[1], device=device)
    # a right-padded prompt leaves a gap between its last token and the completion: masked out
    attention = torch.cat([prompt_mask[rows], mask.long()], 1)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True,
                   **{cache_arg: cache}).logits
    logits = torch.cat([first[rows][:, None], logits[:, :-1]], 1).float() / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(-1)


def enable_activation_checkpointing(model) -> None:
    """Recompute each layer's activations in backward instead of keeping them (transformers models;
    a DistributedDataParallel wrapper is seen through). Non-reentrant, which works under DDP."""
    model = getattr(model, "module", model)
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.24; the older name is deprecated
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def merge_step_stats(parts: list[dict], completion_tokens: list[int], loss_weights: list[float] | None = None) -> dict:
    """One step's statistics from those of its parts (micro-batches, or data-parallel ranks): token means
    weighted by each part's completion tokens, the maximum ratio, the loss summed with `loss_weights`
    (each part's share of the whole batch's normaliser; 1 for parts already normalised as the whole
    batch), and the gradient norm, the same on every rank, from the first."""
    tokens = max(sum(completion_tokens), 1)
    weights = loss_weights or [1.0] * len(parts)
    out = {}
    for key in parts[0]:
        values = [p[key] for p in parts]
        if key == "ratio_max":
            out[key] = max(values)
        elif key == "grad_norm":
            out[key] = values[0]
        elif key == "loss":
            out[key] = sum(w * v for w, v in zip(weights, values))
        else:
            out[key] = sum(n * v for n, v in zip(completion_tokens, values)) / tokens
    return out


def make_optimizer(model, lr: float, betas, weight_decay: float) -> torch.optim.AdamW:
    """The trainer's AdamW. With the portable CPU kernels the fused one: its square root is the processor's exact
    one, where the other implementations take MKL's vectorised square root, whose last bits differ from one kind of
    CPU to another (benchmarks/kernels_portability.py). The native kernels keep the default implementation, as runs
    made before the pin computed; so do sharded (FSDP) parameters and other devices."""
    from benchmark import kernels

    params = list(model.parameters())
    fused = (not is_sharded(model) and all(p.device.type == "cpu" for p in params)
             and kernels.in_force()["kernels"] == "portable")
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=fused)


class GRPOTrainer:
    """The T data-parallel trainers, acting as one: one optimiser step per batch.

    micro_batch_size > 0 trains the batch in micro-batches of at most that many rollouts, accumulating
    their gradients (0 = the whole batch at once); gradient_checkpointing trades compute for memory."""

    def __init__(self, model, pad_id: int, lr: float, weight_decay: float = 0.0, max_grad_norm: float = 1.0,
                 betas: tuple[float, float] = (0.9, 0.999), temperature: float = 1.0, loss: LossConfig | None = None,
                 micro_batch_size: int = 0, gradient_checkpointing: bool = False, share_prompts: bool = True):
        self.model = model
        self.pad_id = pad_id
        self.temperature = temperature
        self.max_grad_norm = max_grad_norm
        self.loss_cfg = loss or LossConfig()
        self.micro_batch_size = micro_batch_size
        if gradient_checkpointing:
            enable_activation_checkpointing(model)
        # Two forwards per backward (prompts, then completions) suit neither activation checkpointing, which
        # turns the KV cache off, nor DistributedDataParallel, which expects one forward per backward.
        # FSDP gathers and frees each layer's weights around its forward, once per backward as well.
        self.share_prompts = (share_prompts and not gradient_checkpointing and not hasattr(model, "module")
                              and not is_sharded(model))
        self.optimizer = make_optimizer(model, lr, betas, weight_decay)
        self._samples: dict | None = None  # batch position -> (loss, clip fraction, log-probs) during a step
        self.per_sample: dict | None = None  # the last step's, when asked for

    @classmethod
    def from_config(cls, model, pad_id: int, g) -> GRPOTrainer:
        """The trainer with a workload's settings (g: its GRPOConfig)."""
        return cls(model, pad_id, lr=g.lr, weight_decay=g.weight_decay, max_grad_norm=g.max_grad_norm,
                   betas=g.betas, temperature=g.temperature,
                   loss=LossConfig(eps_low=g.eps_low, eps_high=g.eps_high, aggregation=g.aggregation, kind=g.loss,
                                   asymre_delta=g.asymre_delta, tis_cap=g.tis_cap, m2po_tau=g.m2po_tau,
                                   decoupled_cap=g.decoupled_cap),
                   micro_batch_size=g.micro_batch_size, gradient_checkpointing=g.gradient_checkpointing)

    def step(self, rollouts: list[Rollout], weights: list[float] | None = None,
             loss_scale: float = 1.0, per_sample: bool = False) -> dict[str, float]:
        """One optimiser step; `weights` (one per rollout) scale each sample's token losses.

        loss_scale multiplies the loss before backward (the reported loss is unscaled): a data-parallel
        trainer holding part of the batch scales by T x its share, so that averaging the T gradients
        gives the gradient of the whole batch's loss. per_sample: keep each sample's loss, share of tokens
        shaped and log-probs before the update in `self.per_sample` (lists in batch order; training feedback)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self._samples = {} if per_sample else None
        if 0 < self.micro_batch_size < len(rollouts):
            stats = self._accumulate_micro_batches(rollouts, weights, loss_scale)
        else:
            loss, stats, entropy_sum, tokens = self._forward(rollouts, weights)
            (loss * loss_scale if loss_scale != 1.0 else loss).backward()
            stats.update(loss=loss.item(), entropy=(entropy_sum / tokens.clamp(min=1)).item())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        stats["grad_norm"] = full_tensor(grad_norm).item()
        if per_sample:
            rows = [self._samples[i] for i in range(len(rollouts))]
            self.per_sample = {key: [row[k] for row in rows] for k, key in
                               enumerate(("loss", "clip_fraction", "logprobs"))}
        return stats

    @torch.no_grad()
    def completion_logprobs(self, rollouts: list[Rollout]) -> list[list[float]]:
        """Each completion token's log-prob under the current weights (one forward pass, no gradient)."""
        self.model.eval()
        device = next(self.model.parameters()).device
        input_ids, attention, mask, _ = (t.to(device) for t in pad_batch(rollouts, self.pad_id))
        logp, _ = token_logprobs_and_entropy(self.model, input_ids, attention, self.temperature)
        return [row[m].tolist() for row, m in zip(logp, mask)]

    def _forward(self, rollouts: list[Rollout], weights: list[float] | None, normaliser: torch.Tensor | None = None,
                 positions: list[int] | None = None):
        """The loss of `rollouts` (see `aggregate` for normaliser), its ratio statistics, the entropy summed
        over completion tokens, and the number of completion tokens. positions: where each rollout sits in the
        step's batch (micro-batches), for the per-sample feedback."""
        device = next(self.model.parameters()).device  # the batch goes where the model is (a GPU, or the CPU)
        w = None if weights is None else torch.tensor(weights, dtype=torch.float32, device=device)
        if normaliser is not None:
            normaliser = normaliser.to(device)
        if self.share_prompts:
            _, completion_mask, behaviour = (t.to(device) for t in pad_completions(rollouts, self.pad_id))
            logp, entropy = completion_logprobs_sharing_prompts(self.model, rollouts, self.pad_id, self.temperature)
        else:
            input_ids, attention, completion_mask, behaviour = (t.to(device) for t in pad_batch(rollouts, self.pad_id))
            logp, entropy = token_logprobs_and_entropy(self.model, input_ids, attention, self.temperature)
        recompute = [i for i, r in enumerate(rollouts) if r.current_policy_behaviour]
        if recompute:  # the weights do not change within a step: this forward's log-probs are the current policy's
            rows = torch.tensor(recompute, device=device)
            behaviour = behaviour.clone()
            behaviour[rows] = logp.detach()[rows].to(behaviour.dtype)
        terms = LOSS_FUNCTIONS[self.loss_cfg.kind](logp, behaviour, rollouts, completion_mask, self.loss_cfg)
        terms = terms.weighted(w)
        loss, stats = terms.reduce(completion_mask, self.loss_cfg, normaliser)
        if self._samples is not None:
            losses, shaped = terms.per_sample(completion_mask)
            logprobs = [row[m].tolist() for row, m in zip(logp.detach(), completion_mask.bool())]
            self._samples.update(zip(positions or range(len(rollouts)), zip(losses, shaped, logprobs)))
        return loss, stats, (entropy.detach() * completion_mask).sum(), completion_mask.sum()

    def _accumulate_micro_batches(self, rollouts: list[Rollout], weights: list[float] | None,
                                  loss_scale: float) -> dict[str, float]:
        """Backpropagate micro-batch by micro-batch, each normalised as part of the whole batch; the
        statistics are the whole batch's (token means weighted by each micro-batch's tokens)."""
        normaliser = loss_normaliser(rollouts, self.loss_cfg.aggregation)
        by_length = sorted(range(len(rollouts)), key=lambda i: rollouts[i].length)  # less padding per micro-batch
        size = self.micro_batch_size
        chunks = [by_length[start:start + size] for start in range(0, len(by_length), size)]
        part_stats, part_tokens = [], []
        for k, chunk in enumerate(chunks):
            part = [rollouts[i] for i in chunk]
            part_weights = None if weights is None else [weights[i] for i in chunk]
            # under DDP, all-reduce the gradients once, in the last micro-batch's backward
            last = k == len(chunks) - 1
            no_sync = getattr(self.model, "no_sync", None)
            with contextlib.nullcontext() if last or no_sync is None else no_sync():
                loss, stats, entropy_sum, tokens = self._forward(part, part_weights, normaliser, chunk)
                (loss * loss_scale if loss_scale != 1.0 else loss).backward()
            n = int(tokens.item())
            part_stats.append({**stats, "loss": loss.item(), "entropy": entropy_sum.item() / max(n, 1)})
            part_tokens.append(n)
        return merge_step_stats(part_stats, part_tokens)

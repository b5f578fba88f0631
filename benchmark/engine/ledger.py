"""The engine's side of a strategy, the same in every executor.

The ledger turns finished generations into rollout records (ids, group-relative advantages), keeps
every rollout it handed to the strategy, checks what the strategy returns (exact batch size, only
rollouts the engine produced, nothing altered, valid weights and regroups) and trains only on its
own copies, counts each rollout's uses and staleness, and builds the read-only context of each call.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from benchmark.engine.box import SampledIds
from benchmark.engine.sandbox import IsolatedStrategy, over_budget
from benchmark.engine.stream import derive_seed
from benchmark.rl.grpo import group_advantages
from benchmark.rollout import Rollout, is_correct
from benchmark.strategy import (
    Batch,
    PoolRequest,
    ReplayStrategy,
    StrategyContext,
    StrategyFailure,
    UpdateFeedback,
    build_strategy,
    checked_admission,
    checked_prompt_choice,
    defined_hooks,
)
from benchmark.workload import LimitsConfig

MAX_TRAINED_FOR = 0.9  # of the budget: a pool's policy trained longer leaves no room for the run itself
MAX_WEIGHT = 1.0  # a sample's loss weight: a larger one would turn the workload's learning rate up
MAX_SHARE_OF_ONE_ROLLOUT = 0.5  # of a batch: sampling with replacement repeats rollouts, never to fill a batch


@dataclass
class PendingGroup:
    """A finished generation before it becomes rollouts: what a worker returns."""

    prompt_id: str
    completions: list  # benchmark.rl.generation.Completion
    rewards: list[float]
    policy_version: int

    @property
    def tokens(self) -> int:
        """Prompt + completion tokens of the group: what the cost model charges."""
        return sum(len(c.prompt_ids) + len(c.completion_ids) for c in self.completions)


@dataclass(frozen=True)
class StrategySpec:
    """Which strategy a run uses and how it runs: in this process, or isolated in its own box."""

    path: Path
    params: dict
    defaults: dict  # the workload's strategy_defaults: they fill in only what the strategy accepts
    isolated: bool = False
    track: str = "buffer"  # whose rules its batches follow (`check_batch`)
    source: bytes | None = None  # the file's bytes as the run hashed and logged them: what the box runs
    seed_secret: str | None = None  # keys the strategy's RNG seed (`strategy_seed`)


def open_strategy(spec: StrategySpec, seed: int, limits: LimitsConfig | None = None) -> ReplayStrategy:
    if spec.isolated:
        return IsolatedStrategy(spec.path, spec.params, rng_seed=strategy_seed(seed, spec.seed_secret),
                                defaults=spec.defaults, limits=limits, source=spec.source)
    return build_strategy(spec.path, spec.params, spec.defaults)


def reference_strategy(workload) -> ReplayStrategy:
    """The no-buffer reference (baselines/on_policy.py, as baselines.yaml sets it), run in this process: the
    policy that samples a trained pool (PoolRequest.trained_for) is trained with it."""
    from benchmark.submission import load_baselines

    entry = load_baselines().entries["on_policy"]
    return build_strategy(entry.strategy, entry.strategy_params(), workload.strategy_defaults)


def strategy_seed(seed: int, secret: str | None = None) -> int:
    """The seed of the strategy's random generator (ctx.rng), in this process or in its box. A box knows its
    generator's state, and from the public derivation it would find the run's seed, and with it the prompt stream;
    keyed with a secret (an entry's official runs: `submit`, which records it in MLflow, out of the box's reach) it
    cannot."""
    return derive_seed(seed, "strategy") if secret is None else derive_seed(seed, "strategy", secret)


def copies(rollouts: list[Rollout]) -> list[Rollout]:
    """What the strategy is handed: copies, so that a rollout altered in place (past its frozen dataclass)
    is told from the engine's own, in process as in the box."""
    return [copy.copy(r) for r in rollouts]


def build_rollouts(group: PendingGroup, first_rollout_id: int, group_id: int, created_step: int,
                   created_time: float) -> list[Rollout]:
    """Rollout records for a finished generation: ids from first_rollout_id on, group-relative advantages."""
    advantages = group_advantages(group.rewards)
    return [
        Rollout(rollout_id=first_rollout_id + i, group_id=group_id, prompt_id=group.prompt_id,
                prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, behaviour_logprobs=c.logprobs,
                reward=r, correct=is_correct(r), advantage=a, policy_version=group.policy_version,
                created_step=created_step, created_time=created_time,
                group_reward_mean=sum(group.rewards) / len(group.rewards))
        for i, (c, r, a) in enumerate(zip(group.completions, group.rewards, advantages))
    ]


def checked_pool_request(request, most_rollouts: float = float("inf")) -> PoolRequest | None:
    """What `pool_request` returned, checked before any work: a PoolRequest or None, and no pool whose least
    cost (`most_rollouts`: the rollouts the run's budget pays for at one token each) exceeds the budget."""
    if not request:
        return None
    if not (isinstance(request, (tuple, list)) and len(request) in (2, 3)
            and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in request[:2])
            and (len(request) == 2 or (isinstance(request[2], (int, float)) and not isinstance(request[2], bool)
                                       and 0 <= request[2] <= MAX_TRAINED_FOR))):
        raise StrategyFailure("garbage: pool_request() must return a PoolRequest (prompts > 0, samples > 0, "
                              f"trained_for from 0 to {MAX_TRAINED_FOR}) or None")
    request = PoolRequest(*request)
    if request.prompts * request.samples > most_rollouts:
        raise StrategyFailure(f"garbage: pool_request() asks for {request.prompts * request.samples:,} rollouts, "
                              f"more than the run's whole budget pays for ({most_rollouts:,.0f} at the least)")
    return request


def most_pool_rollouts(workload) -> float:
    """The most rollouts a pool may ask for: what the run's whole budget pays for at the least a rollout costs
    (one prompt token and one completion token, generated at mu units each)."""
    return workload.budget / (2 * workload.pipeline.mu)


def check_batch(sampled, batch_size: int, known: dict[int, Rollout],
                track: str = "buffer") -> tuple[list[Rollout], list[float] | None]:
    """What `sample` returned, checked: train only on the engine's own copies of rollouts it handed over, under
    the rules of the entry's track (docs/sandbox.md: what a buffer-track entry may do)."""
    batch = Batch.of(sampled)
    sampled, weights, regroup, recompute = batch.rollouts, batch.weights, batch.regroup, batch.recompute_behaviour
    if weights is not None and (not isinstance(weights, (list, tuple)) or len(weights) != len(sampled) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= MAX_WEIGHT for x in weights)):
        raise StrategyFailure(f"garbage: Batch.weights must hold one number from 0 to {MAX_WEIGHT:g} per rollout "
                              "(importance weights divided by their largest, as prioritized replay does)")
    for name, value in (("regroup", regroup), ("recompute_behaviour", recompute)):
        if value and track != "open":  # benchmark/submission.py: the tracks
            raise StrategyFailure(f"forbidden: Batch.{name} is an open-track choice: on the {track} track the "
                                  "engine's advantages and behaviour log-probs stand")
    if not isinstance(sampled, (list, tuple)) or len(sampled) != batch_size:
        got = f"{len(sampled)} items" if isinstance(sampled, (list, tuple)) else type(sampled).__name__
        raise StrategyFailure(f"garbage: sample() must return a list of exactly {batch_size} rollouts "
                              f"or None, got {got}")
    checked = []
    for r in sampled:
        if not isinstance(r, Rollout):
            raise StrategyFailure(f"garbage: sample() returned a {type(r).__name__}, not a Rollout")
        own = known.get(r.rollout_id)
        if own is None:
            raise StrategyFailure(f"fabricated: rollout {r.rollout_id} was never produced by the engine")
        if own != r:
            raise StrategyFailure(f"tampered: rollout {r.rollout_id} differs from the one the engine handed over")
        checked.append(own)
    most, copies_of_one = max(Counter(r.rollout_id for r in checked).items(), key=lambda kv: kv[1])
    if copies_of_one > max(1, int(batch_size * MAX_SHARE_OF_ONE_ROLLOUT)):
        raise StrategyFailure(f"forbidden: rollout {most} fills {copies_of_one} of the batch's {batch_size} places "
                              f"(one rollout may fill at most {MAX_SHARE_OF_ONE_ROLLOUT:.0%} of a batch)")
    if regroup:
        checked = regrouped(checked, regroup)
    if recompute:
        if not (isinstance(recompute, (list, tuple)) and len(set(recompute)) == len(recompute) and all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(checked) for i in recompute)):
            raise StrategyFailure("garbage: Batch.recompute_behaviour must be distinct batch positions")
        checked = [dataclasses.replace(r, current_policy_behaviour=True) if i in set(recompute) else r
                   for i, r in enumerate(checked)]
    return checked, None if weights is None else list(weights)


def regrouped(batch: list[Rollout], regroup) -> list[Rollout]:
    """The engine's own recompute of group-relative advantages over the sets the strategy named."""
    seen: set[int] = set()
    batch = list(batch)
    for positions in regroup:
        if not (all(isinstance(i, int) and 0 <= i < len(batch) and i not in seen for i in positions)
                and len(set(positions)) == len(positions)):
            raise StrategyFailure("garbage: Batch.regroup must be disjoint lists of batch positions")
        seen.update(positions)
        if not positions:
            continue
        rewards = [batch[i].reward for i in positions]
        mean = sum(rewards) / len(rewards)
        for i, advantage in zip(positions, group_advantages(rewards)):
            batch[i] = dataclasses.replace(batch[i], advantage=advantage, group_reward_mean=mean)
    return batch


def since_last_use_keys(batch: list[Rollout], step: int, previous_uses: dict[int, int]) -> list[str]:
    """Each sample's steps since its rollout's last use, "new" at the first; a rollout drawn twice in one batch
    is new once, then 0 steps."""
    last, keys = dict(previous_uses), []
    for r in batch:
        keys.append("new" if r.rollout_id not in last else str(step - last[r.rollout_id]))
        last[r.rollout_id] = step
    return keys


def hooks_of(strategy: ReplayStrategy) -> tuple[str, ...]:
    """The optional hooks a strategy defines: an isolated one's box said so when it started."""
    return strategy.hooks if isinstance(strategy, IsolatedStrategy) else defined_hooks(strategy)


class StrategyLedger:
    """Everything the engine records about its strategy. `trainer_step` counts the steps trained;
    `generations_in_flight` is the executor's to keep (its workers' generations started and not handed over)."""

    def __init__(self, strategy: ReplayStrategy, seed: int, num_trainers: int, limits: LimitsConfig | None = None,
                 track: str = "buffer", seed_secret: str | None = None, group_size: int = 0, batch_size: int = 0):
        self.strategy, self.num_trainers, self.track = strategy, num_trainers, track
        self.hooks = hooks_of(strategy)
        self.feedback_after_update = "on_update" in self.hooks and bool(strategy.feedback_after_update)
        self.group_size, self.batch_size, self.generations_in_flight = group_size, batch_size, 0
        self.prompt_ids: set[str] = set()  # every prompt generated in this run: what next_prompt may name
        self.limits = limits or LimitsConfig()
        self.started = time.perf_counter()
        self.rng = np.random.default_rng(strategy_seed(seed, seed_secret))
        self.known: dict[int, Rollout] = {}  # every rollout handed to the strategy, by id
        self.use_count: dict[int, int] = {}
        self.last_used_step: dict[int, int] = {}
        self.next_rollout_id = self.next_group_id = self.trainer_step = 0
        self.staleness_total = 0  # sum over trained samples of (trainer version - rollout version)
        self.recomputed_total = 0  # trained samples whose behaviour log-probs came from the current policy
        # the paper's figure 2, over every trained sample: off-policiness, and steps since the rollout's last use
        # ("new" at its first)
        self.offpolicy_counts: dict[int, int] = {}
        self.since_last_use_counts: dict[str, int] = {}
        self.calls, self.seconds = 0, 0.0  # the strategy's add / add_pool / sample calls and their wall time

    def ctx(self) -> StrategyContext:
        return StrategyContext(policy_version=self.trainer_step, rng=self.rng,
                               use_count=MappingProxyType(self.use_count), num_trainers=self.num_trainers,
                               generations_in_flight=self.generations_in_flight, group_size=self.group_size,
                               batch_size=self.batch_size)

    def _call(self, method: str, *args, counted: bool = True):
        """The strategy's call, under the workload's time limits: an isolated strategy's box enforces them as
        it goes, and this check gives an in-process run the same verdicts once the call returns."""
        start = time.perf_counter()
        try:
            result = getattr(self.strategy, method)(*args)
        except StrategyFailure:
            raise
        except Exception as exc:  # in process; the box words it the same way
            raise StrategyFailure(f"raised: {method}() raised {type(exc).__name__}: {exc}") from exc
        finally:
            took = time.perf_counter() - start
            self.seconds += took
            self.calls += counted
        limits = self.limits
        if took > limits.call_seconds:
            raise StrategyFailure(f"timeout: {method}() took longer than {limits.call_seconds:g} s")
        if self.seconds > limits.strategy_seconds:
            raise StrategyFailure(over_budget(limits))
        engine_seconds = time.perf_counter() - self.started - self.seconds
        if self.seconds > limits.floor_seconds + limits.wall_share * engine_seconds:
            raise StrategyFailure(f"timeout: the strategy's calls took {self.seconds:.1f} s, more than their "
                                  f"allowance of {limits.floor_seconds:g} s + {limits.wall_share:.0%} of the "
                                  f"engine's own time in this run ({engine_seconds:.1f} s)")
        return result

    def register(self, group: PendingGroup, clock: float) -> list[Rollout]:
        """Rollout records for a finished generation, kept as the engine's own."""
        rollouts = build_rollouts(group, self.next_rollout_id, self.next_group_id, self.trainer_step, clock)
        self.known.update((r.rollout_id, r) for r in rollouts)
        self.prompt_ids.add(group.prompt_id)
        self.next_rollout_id += len(rollouts)
        self.next_group_id += 1
        return rollouts

    def pool_request(self, most_rollouts: float = float("inf")) -> PoolRequest | None:
        return checked_pool_request(self._call("pool_request", counted=False), most_rollouts)

    def add_pool(self, groups: list[PendingGroup], clock: float) -> int:
        """Hand the pool's groups over; returns the number of rollouts."""
        rollouts = [r for group in groups for r in self.register(group, clock)]
        self._call("add_pool", copies(rollouts), self.ctx())
        return len(rollouts)

    def add(self, group: PendingGroup, clock: float) -> int:
        """Hand one finished generation over; returns the number of rollouts."""
        rollouts = self.register(group, clock)
        self._call("add", copies(rollouts), self.ctx())
        return len(rollouts)

    def sample(self, batch_size: int) -> tuple[list[Rollout], list[float] | None] | None:
        """The checked batch and its weights, or None when the strategy waits for more data."""
        sampled = self._call("sample", batch_size, self.ctx())
        if sampled is None:
            return None
        if isinstance(sampled, SampledIds):  # an isolated strategy names rollouts by id
            sampled = sampled.resolve(self.known)
        return check_batch(sampled, batch_size, self.known, self.track)

    def admit(self) -> bool:
        """May a free worker start a generation now (admission control; True without the hook)?"""
        return checked_admission(self._call("admit", self.ctx())) if "admit" in self.hooks else True

    def next_prompt(self) -> str | None:
        """The prompt a starting generation replays (the prompt track's hook), or None for the stream's next."""
        if "next_prompt" not in self.hooks:
            return None
        chosen = checked_prompt_choice(self._call("next_prompt", self.ctx()))
        if chosen is None:
            return None
        if self.track != "prompt":
            raise StrategyFailure(f"forbidden: next_prompt() chose a prompt: scheduling prompts is the prompt "
                                  f"track's, and this entry is on the {self.track} track")
        if chosen not in self.prompt_ids:
            raise StrategyFailure(f"fabricated: next_prompt() named prompt {chosen[:80]!r}, which this run never "
                                  "generated")
        return chosen

    def on_update(self, batch: list[Rollout], per_sample: dict, logprobs_after: list[list[float]] | None) -> None:
        """The step just recorded (`record_step`), as feedback to a strategy with the hook."""
        if "on_update" not in self.hooks:
            return
        feedback = UpdateFeedback(step=self.trainer_step - 1, rollout_ids=[r.rollout_id for r in batch],
                                  loss=per_sample["loss"], clip_fraction=per_sample["clip_fraction"],
                                  logprobs=per_sample["logprobs"], logprobs_after=logprobs_after)
        self._call("on_update", feedback, self.ctx())

    def record_step(self, batch: list[Rollout]) -> dict:
        """The batch has been trained: count its uses and staleness, advance the step; its usage metrics."""
        step = self.trainer_step
        staleness = [step - r.policy_version for r in batch]
        since_last = [step - self.last_used_step[r.rollout_id] for r in batch if r.rollout_id in self.last_used_step]
        previous_uses = {r.rollout_id: self.last_used_step[r.rollout_id] for r in batch
                         if r.rollout_id in self.last_used_step}
        for r in batch:
            self.use_count[r.rollout_id] = self.use_count.get(r.rollout_id, 0) + 1
            self.last_used_step[r.rollout_id] = step
        self.trainer_step += 1
        if isinstance(self.strategy, IsolatedStrategy):
            self.strategy.trained()  # the box's mirror of the use counts learns it with its next call
        self.staleness_total += sum(staleness)
        recomputed = sum(r.current_policy_behaviour for r in batch)
        self.recomputed_total += recomputed
        for value in staleness:
            self.offpolicy_counts[value] = self.offpolicy_counts.get(value, 0) + 1
        for key in since_last_use_keys(batch, step, previous_uses):
            self.since_last_use_counts[key] = self.since_last_use_counts.get(key, 0) + 1
        return dict(
            offpolicy_mean=float(np.mean(staleness)), offpolicy_median=float(np.median(staleness)),
            offpolicy_max=float(max(staleness)),
            steps_since_last_use=float(np.mean(since_last)) if since_last else 0.0,
            reused_fraction=len(since_last) / len(batch),
            reward=float(np.mean([r.reward for r in batch])),
            response_length=float(np.mean([len(r.completion_ids) for r in batch])),
            recomputed_fraction=recomputed / len(batch),
        )

    def usage(self) -> dict:
        """What the run summary needs from the ledger."""
        return {"use_count": dict(self.use_count), "staleness_total": self.staleness_total,
                "recomputed_total": self.recomputed_total,
                "strategy_calls": self.calls, "strategy_seconds": self.seconds,
                "offpolicy_counts": dict(sorted(self.offpolicy_counts.items())),
                "since_last_use_counts": dict(self.since_last_use_counts)}

    # ---- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"strategy": self.strategy.state_dict(), "rng": self.rng.bit_generator.state,
                "known": self.known, "use_count": self.use_count, "last_used_step": self.last_used_step,
                "next_rollout_id": self.next_rollout_id, "next_group_id": self.next_group_id,
                "trainer_step": self.trainer_step, "staleness_total": self.staleness_total,
                "recomputed_total": self.recomputed_total,
                "calls": self.calls, "seconds": self.seconds, "offpolicy_counts": self.offpolicy_counts,
                "generations_in_flight": self.generations_in_flight, "prompt_ids": self.prompt_ids,
                "since_last_use_counts": self.since_last_use_counts, "elapsed": time.perf_counter() - self.started}

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        self.strategy.load_state_dict(state.pop("strategy"))
        self.rng.bit_generator.state = state.pop("rng")
        self.started = time.perf_counter() - state.pop("elapsed", 0.0)  # the time limits go on counting
        vars(self).update(state)

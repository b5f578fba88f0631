"""The asynchronous GRPO pipeline, simulated in virtual time with real model computation.

W inference workers generate groups of G rollouts with the weights version they hold and hand
each finished group to the replay strategy; T data-parallel trainers (acting as one) take a step
whenever the strategy returns a batch. Workers receive the trainers' weights every `sync_every`
steps and use them from their next generation on.

Cost model (normalised compute units): training on one token costs 1 unit of device time,
generating one costs mu. A generation lasts its cost on one worker; a training step lasts its
cost spread over the T trainers. Every device counts, busy or idle:
    compute used = (W + T) * elapsed virtual time.
Events are processed in (virtual time, kind, sequence number) order, so the same seed and config
give the same run. Wall-clock time is measured and logged, never used for a decision.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import heapq
import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch

from benchmark.grading.evaluation import evaluate
from benchmark.grading.prompts import PromptFormat, identity
from benchmark.grading.tasks import Task
from benchmark.rl.generation import HFEngine
from benchmark.rl.grpo import GRPOTrainer, LossConfig, group_advantages
from benchmark.rollout import Rollout
from benchmark.strategy import Batch, ReplayStrategy, StrategyContext, StrategyFailure
from benchmark.workload import Workload

GENERATION_DONE, TRAIN_DONE, POOL_DONE = 0, 1, 2  # at equal times, arrivals are handled before step ends


def derive_seed(seed: int, *names) -> int:
    """A 32-bit seed from a run seed and names; stable across processes (unlike Python's hash())."""
    text = ":".join(str(x) for x in (seed, *names))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


@dataclass(order=True)
class Event:
    time: float
    kind: int
    seq: int
    worker: int = field(default=-1, compare=False)
    payload: object = field(default=None, compare=False)


@dataclass
class PendingGroup:
    """A generation in flight: computed when it started, handed over when it finishes."""

    prompt_id: str
    completions: list  # benchmark.rl.generation.Completion
    rewards: list[float]
    policy_version: int


# ---- pieces shared with the Ray executor (benchmark/engine/ray/driver.py) ------------------------
def build_trainer(model, pad_id: int, g) -> GRPOTrainer:
    """The GRPO trainer with the workload's settings (g: its GRPOConfig)."""
    return GRPOTrainer(
        model, pad_id, lr=g.lr, weight_decay=g.weight_decay, max_grad_norm=g.max_grad_norm,
        betas=g.betas, temperature=g.temperature,
        loss=LossConfig(eps_low=g.eps_low, eps_high=g.eps_high, aggregation=g.aggregation, kind=g.loss,
                        asymre_delta=g.asymre_delta),
        micro_batch_size=g.micro_batch_size, gradient_checkpointing=g.gradient_checkpointing,
    )


def eval_points(every: float, budget: float) -> list[float]:
    """Compute checkpoints: 0, every, 2*every, ..., and the budget itself."""
    points = [i * every for i in range(int(budget // every) + 1)]
    if points[-1] < budget - 1e-9:
        points.append(budget)
    return points


def doc_id(doc: dict) -> str:
    """A training document's prompt id: its `id` (or `unique_id`, `name`), else a hash of its content."""
    for key in ("id", "unique_id", "name"):
        if doc.get(key) not in (None, ""):
            return str(doc[key])
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def stream_doc(train_docs: list[dict], seed: int, position: int) -> dict:
    """The training stream: the train split in a seeded order, reshuffled every epoch."""
    n = len(train_docs)
    epoch, index = divmod(position, n)
    order = np.random.default_rng(derive_seed(seed, "stream", epoch)).permutation(n)
    return train_docs[order[index]]


def build_rollouts(group: PendingGroup, first_rollout_id: int, group_id: int, created_step: int,
                   created_time: float) -> list[Rollout]:
    """Rollout records for a finished generation: ids from first_rollout_id on, group-relative advantages."""
    advantages = group_advantages(group.rewards)
    return [
        Rollout(rollout_id=first_rollout_id + i, group_id=group_id, prompt_id=group.prompt_id,
                prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, behaviour_logprobs=c.logprobs,
                reward=r, correct=r >= 1.0, advantage=a, policy_version=group.policy_version,
                created_step=created_step, created_time=created_time,
                group_reward_mean=sum(group.rewards) / len(group.rewards))
        for i, (c, r, a) in enumerate(zip(group.completions, group.rewards, advantages))
    ]


def checked_pool_request(request) -> tuple[int, int] | None:
    """What `pool_request` returned, checked: (prompts, samples_per_prompt) or None."""
    if not request:
        return None
    if not (isinstance(request, (tuple, list)) and len(request) == 2
            and all(isinstance(x, int) and x > 0 for x in request)):
        raise StrategyFailure("garbage: pool_request() must return (prompts, samples_per_prompt) or None")
    return tuple(request)


def check_batch(sampled, batch_size: int, known: dict[int, Rollout]) -> tuple[list[Rollout], list[float] | None]:
    """What `sample` returned, checked: train only on the engine's own copies of rollouts it handed over."""
    weights = regroup = None
    if isinstance(sampled, Batch):
        sampled, weights, regroup = sampled.rollouts, sampled.weights, sampled.regroup
        if weights is not None and (len(weights) != len(sampled) or not all(
                isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in weights)):
            raise StrategyFailure("garbage: Batch.weights must hold one finite, non-negative number per rollout")
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
    if regroup:
        checked = regrouped(checked, regroup)
    return checked, None if weights is None else list(weights)


def regrouped(batch: list[Rollout], regroup) -> list[Rollout]:
    """The engine's own recompute of group-relative advantages over the sets the strategy named."""
    seen: set[int] = set()
    batch = list(batch)
    for positions in regroup:
        if not all(isinstance(i, int) and 0 <= i < len(batch) and i not in seen for i in positions):
            raise StrategyFailure("garbage: Batch.regroup must be disjoint lists of batch positions")
        seen.update(positions)
        rewards = [batch[i].reward for i in positions]
        mean = sum(rewards) / len(rewards) if rewards else 0.0
        for i, advantage in zip(positions, group_advantages(rewards)):
            batch[i] = dataclasses.replace(batch[i], advantage=advantage, group_reward_mean=mean)
    return batch


def record_use(batch: list[Rollout], trainer_step: int, use_count: dict[int, int],
               last_used_step: dict[int, int]) -> tuple[dict, int]:
    """Count a trained batch in use_count / last_used_step; returns its usage metrics and its summed
    staleness (trainer version - rollout version, over the batch)."""
    staleness = [trainer_step - r.policy_version for r in batch]
    since_last = [trainer_step - last_used_step[r.rollout_id] for r in batch if r.rollout_id in last_used_step]
    for r in batch:
        use_count[r.rollout_id] = use_count.get(r.rollout_id, 0) + 1
        last_used_step[r.rollout_id] = trainer_step
    stats = dict(
        offpolicy_mean=float(np.mean(staleness)), offpolicy_median=float(np.median(staleness)),
        offpolicy_max=float(max(staleness)),
        steps_since_last_use=float(np.mean(since_last)) if since_last else 0.0,
        reused_fraction=len(since_last) / len(batch),
        reward=float(np.mean([r.reward for r in batch])),
        response_length=float(np.mean([len(r.completion_ids) for r in batch])),
    )
    return stats, sum(staleness)


def evaluate_policy(engine, task: Task, docs: list[dict], cfg, seed: int, index: int, prompt=identity,
                    max_new_tokens: int | None = None) -> dict:
    """The workload's evaluation (cfg: its EvalConfig) of the engine's weights; `index` numbers the checkpoint.
    prompt: the PromptFormat; max_new_tokens: the workload's limit (None: the task's)."""
    return evaluate(engine, task, docs, temperature=cfg.temperature, pass_k=cfg.pass_k,
                    pass_k_samples=cfg.pass_k_samples, pass_k_problems=cfg.pass_k_problems,
                    seed=derive_seed(seed, "eval", index), keep_samples=cfg.num_logged_samples, prompt=prompt,
                    max_new_tokens=max_new_tokens)


def eval_sets(workload: Workload, task: Task) -> list[tuple[str, Task, list[dict]]]:
    """(label, task, docs) per evaluated (task, split) of the workload, the scored one first with label ""
    (its metrics are eval/accuracy, ...); the others are labelled task or task.split (eval/<label>/accuracy)."""
    sets = []
    for i, (name, split) in enumerate(workload.eval_targets()):
        t = task if name == task.name else workload.load_task(name)
        label = "" if i == 0 else name if split == "test" else f"{name}.{split}"
        sets.append((label, t, t.docs(split)[: workload.eval.num_problems]))
    return sets


def evaluate_sets(engine, sets, workload: Workload, seed: int, index: int, prompt=identity) -> tuple[dict, list]:
    """The evaluation at checkpoint `index` on every eval set (from `eval_sets`): the metrics (the scored
    set's as they are, the others as <label>/<metric>) and the scored set's logged samples."""
    metrics, logged = {}, []
    for label, task, docs in sets:
        result = evaluate_policy(engine, task, docs, workload.eval, seed, index, prompt=prompt,
                                 max_new_tokens=workload.max_new_tokens or None)
        samples = result.pop("samples", [])
        if not label:  # the scored evaluation
            logged = samples
        metrics.update({f"{label}/{k}" if label else k: v for k, v in result.items()})
    return metrics, logged


def train_step_metrics(run, stats: dict, usage: dict) -> list[tuple[str, float, int]]:
    """The train/ metrics of the step just finished, as (name, value, trainer step): the trainer's
    statistics, the batch's usage (from record_use) and the run's counters at this point. run: the
    executor (Pipeline or RayPipeline), after it counted the step."""
    metrics = {
        **stats, **usage,
        "compute": run.compute_used,
        "rollouts_generated": run.rollouts_generated, "samples_trained": run.samples_trained,
        "replay_ratio": run.samples_trained / max(run.rollouts_generated, 1),
        "trainer_idle_fraction": run.trainer_idle_fraction(),
        "worker_idle_fraction": run.worker_idle_fraction(),
    }
    return [(f"train/{k}", float(v), run.trainer_step) for k, v in metrics.items()]


def run_summary(run, use_count: dict[int, int], staleness_total: int, wall_seconds: dict,
                strategy_calls: int, strategy_seconds: float) -> dict:
    """The summary of a finished run, from its evaluations, how rollouts were used and its counters.
    run: the executor (Pipeline or RayPipeline); each adds what only it knows."""
    history = run.eval_history
    best = max(history, key=lambda p: (p["accuracy"], -p["compute"]))
    used = list(use_count.values())
    return {
        "final": history[-1],
        "best": best,
        "start_accuracy": history[0]["accuracy"],
        "eval_curve": history,
        "replay_ratio": run.samples_trained / max(run.rollouts_generated, 1),
        "offpolicy_mean": staleness_total / max(run.samples_trained, 1),
        "rollouts_never_used_fraction": 1 - len(used) / max(run.rollouts_generated, 1),
        "max_uses_of_a_rollout": max(used, default=0),
        "median_uses_of_used_rollouts": statistics.median(used) if used else 0,
        "compute_used": run.compute_used,
        "budget": run.w.budget,
        "virtual_time": run.clock,
        "trainer_steps": run.trainer_step,
        "rollouts_generated": run.rollouts_generated,
        "samples_trained": run.samples_trained,
        "trainer_idle_fraction": run.trainer_idle_fraction(),
        "worker_idle_fraction": run.worker_idle_fraction(),
        "wall_seconds": wall_seconds,
        "strategy_calls": strategy_calls,
        "strategy_ms_per_call": 1000 * strategy_seconds / max(strategy_calls, 1),
    }


class Pipeline:
    def __init__(self, workload: Workload, task: Task, model, tokenizer, strategy: ReplayStrategy, seed: int):
        self.w, self.task, self.tokenizer, self.strategy, self.seed = workload, task, tokenizer, strategy, seed
        p, g = workload.pipeline, workload.grpo
        self.devices = p.workers + p.trainers
        self.trainer = build_trainer(model, tokenizer.pad_token_id, g)
        # Workers share one engine holding the latest published weights: a worker picks the
        # version up when its next generation starts, which is all the pipeline needs.
        self.engine = HFEngine(copy.deepcopy(model), tokenizer, version=0)
        self.eval_engine = HFEngine(model, tokenizer)
        self.train_docs = task.docs("train")
        self.eval_docs = task.docs("test")[: workload.eval.num_problems]
        self.eval_sets = eval_sets(workload, task)
        # The model's chat template when it has one (model.prompt_format), the same for training and evaluation.
        self.prompt = PromptFormat(tokenizer, workload.model.prompt_format)
        self.max_new_tokens = workload.max_new_tokens or task.max_new_tokens

        self.clock = 0.0
        self.events: list[Event] = []
        self.seq = 0
        self.stream_position = 0
        self.generations_started = 0
        self.next_rollout_id = 0
        self.next_group_id = 0
        self.trainer_step = 0
        self.trainer_busy = False
        self.trainer_busy_time = 0.0
        self.worker_busy_time = 0.0  # finished generations only; in-flight ones are in worker_started
        self.worker_started: dict[int, float] = {}
        self.rollouts_generated = 0
        self.samples_trained = 0
        self.staleness_total = 0  # sum over trained samples of (trainer version - rollout version)
        self.known: dict[int, Rollout] = {}  # every rollout handed to the strategy, by id
        self.use_count: dict[int, int] = {}
        self.last_used_step: dict[int, int] = {}
        self.strategy_rng = np.random.default_rng(derive_seed(seed, "strategy"))
        self.evals_done = 0
        self.eval_history: list[dict] = []
        self.pending_metrics: list[tuple[str, float, int]] = []
        self.flushes = 0
        self.wall = {"generation": 0.0, "training": 0.0, "evaluation": 0.0, "strategy": 0.0, "total": 0.0}
        self.strategy_calls = 0
        self.last_samples: list[dict] = []

    # ---- the schedule -------------------------------------------------------------------
    @property
    def compute_used(self) -> float:
        return self.devices * self.clock

    def eval_points(self) -> list[float]:
        return eval_points(self.w.eval.every, self.w.budget)

    def start(self) -> None:
        request = checked_pool_request(self.strategy.pool_request())
        if request:
            self._generate_pool(*request)  # the workers start when the pool is done
        else:
            self._start_workers()

    def _start_workers(self) -> None:
        for worker in range(self.w.pipeline.workers):
            self._start_generation(worker)

    def _generate_pool(self, prompts: int, samples: int) -> None:
        """The strategy's pool: the stream's first prompts, sampled by the starting policy on all devices."""
        g = self.w.grpo
        groups, tokens = [], 0
        for position in range(prompts):
            doc = self._stream_doc(position)
            t = time.perf_counter()
            [completions] = self.engine.generate([self.prompt(self.task.doc_to_text(doc))], n=samples,
                                                 temperature=g.temperature, max_new_tokens=self.max_new_tokens,
                                                 seed=derive_seed(self.seed, "pool", position))
            self.wall["generation"] += time.perf_counter() - t
            rewards = self.task.score_many(doc, [c.text for c in completions])
            tokens += sum(len(c.prompt_ids) + len(c.completion_ids) for c in completions)
            groups.append(PendingGroup(doc_id(doc), completions, rewards, self.engine.version))
        self._push(self.w.pipeline.mu * tokens / self.devices, POOL_DONE, payload=groups)

    def _finish_pool(self, event: Event) -> None:
        rollouts = [r for group in event.payload for r in self._make_rollouts(group)]
        t = time.perf_counter()
        self.strategy.add_pool(rollouts, self._ctx())
        self._time_strategy(t)
        self._start_workers()

    def run(self, on_checkpoint=None, on_progress=None) -> None:
        """Advance until the budget is spent. on_checkpoint(self) runs after each evaluation."""
        t0 = time.perf_counter()
        wall_before = self.wall["total"]
        points = self.eval_points()
        end_time = self.w.budget / self.devices
        while True:
            next_eval = points[self.evals_done] / self.devices if self.evals_done < len(points) else None
            next_event = self.events[0].time if self.events else float("inf")
            if next_eval is not None and next_eval < next_event:
                self.clock = next_eval
                self._evaluate()
                self.wall["total"] = wall_before + time.perf_counter() - t0
                if on_checkpoint:
                    on_checkpoint(self)
                if on_progress:
                    on_progress(self)
                continue
            if next_event > end_time:
                break
            event = heapq.heappop(self.events)
            self.clock = event.time
            if event.kind == GENERATION_DONE:
                self._finish_generation(event)
            elif event.kind == TRAIN_DONE:
                self._finish_train_step(event)
            else:
                self._finish_pool(event)
            if on_progress and event.kind == TRAIN_DONE:
                on_progress(self)
        self.clock = end_time
        self.wall["total"] = wall_before + time.perf_counter() - t0

    @property
    def finished(self) -> bool:
        return self.evals_done >= len(self.eval_points())

    def _push(self, time_: float, kind: int, worker: int = -1, payload=None) -> None:
        heapq.heappush(self.events, Event(time_, kind, self.seq, worker, payload))
        self.seq += 1

    def _ctx(self) -> StrategyContext:
        return StrategyContext(trainer_step=self.trainer_step, policy_version=self.trainer_step,
                               rng=self.strategy_rng, use_count=MappingProxyType(self.use_count),
                               num_trainers=self.w.pipeline.trainers)

    # ---- workers --------------------------------------------------------------------------
    def _stream_doc(self, position: int) -> dict:
        return stream_doc(self.train_docs, self.seed, position)

    def _next_doc(self) -> dict:
        self.stream_position += 1
        return self._stream_doc(self.stream_position - 1)

    def _start_generation(self, worker: int) -> None:
        g = self.w.grpo
        doc = self._next_doc()
        seed = derive_seed(self.seed, "generation", self.generations_started)
        self.generations_started += 1
        t = time.perf_counter()
        [completions] = self.engine.generate([self.prompt(self.task.doc_to_text(doc))], n=g.group_size,
                                             temperature=g.temperature, max_new_tokens=self.max_new_tokens,
                                             seed=seed)
        self.wall["generation"] += time.perf_counter() - t
        rewards = self.task.score_many(doc, [c.text for c in completions])
        tokens = sum(len(c.prompt_ids) + len(c.completion_ids) for c in completions)
        duration = self.w.pipeline.mu * tokens
        self.worker_started[worker] = self.clock
        self._push(self.clock + duration, GENERATION_DONE, worker,
                   PendingGroup(doc_id(doc), completions, rewards, self.engine.version))

    def _finish_generation(self, event: Event) -> None:
        self.worker_busy_time += self.clock - self.worker_started.pop(event.worker)
        rollouts = self._make_rollouts(event.payload)
        t = time.perf_counter()
        self.strategy.add(list(rollouts), self._ctx())
        self._time_strategy(t)
        self._start_generation(event.worker)
        if not self.trainer_busy:
            self._try_train()

    def _make_rollouts(self, group: PendingGroup) -> list[Rollout]:
        """Rollout records for a finished generation, registered as the engine's own."""
        rollouts = build_rollouts(group, self.next_rollout_id, self.next_group_id, self.trainer_step, self.clock)
        self.known.update((r.rollout_id, r) for r in rollouts)
        self.next_rollout_id += len(rollouts)
        self.next_group_id += 1
        self.rollouts_generated += len(rollouts)
        return rollouts

    # ---- trainers -------------------------------------------------------------------------
    def _try_train(self) -> None:
        batch_size = self.w.grpo.batch_size
        t = time.perf_counter()
        sampled = self.strategy.sample(batch_size, self._ctx())
        self._time_strategy(t)
        if sampled is None:
            return
        batch, weights = self._checked_batch(sampled, batch_size)
        duration = sum(r.length for r in batch) / self.w.pipeline.trainers
        self.trainer_busy = True
        self.trainer_busy_time += duration  # a step in flight at the budget's end is cut in summary()
        self._push(self.clock + duration, TRAIN_DONE, payload=(batch, weights))

    def _time_strategy(self, start: float) -> None:
        self.wall["strategy"] += time.perf_counter() - start
        self.strategy_calls += 1

    def _checked_batch(self, sampled, batch_size: int) -> tuple[list[Rollout], list[float] | None]:
        return check_batch(sampled, batch_size, self.known)

    _regrouped = staticmethod(regrouped)

    def _finish_train_step(self, event: Event) -> None:
        batch, weights = event.payload
        t = time.perf_counter()
        stats = self.trainer.step(batch, weights)
        self.wall["training"] += time.perf_counter() - t
        usage, staleness = record_use(batch, self.trainer_step, self.use_count, self.last_used_step)
        self.trainer_step += 1
        self.samples_trained += len(batch)
        self.staleness_total += staleness
        self.trainer_busy = False
        self.pending_metrics.extend(train_step_metrics(self, stats, usage))
        if self.trainer_step % self.w.pipeline.sync_every == 0:
            self.engine.load_weights(self.trainer.model.state_dict(), self.trainer_step)
        self._try_train()

    # ---- evaluation -----------------------------------------------------------------------
    def _evaluate(self) -> None:
        t = time.perf_counter()
        point = {"compute": self.compute_used, "trainer_step": self.trainer_step,
                 "rollouts_generated": self.rollouts_generated, "samples_trained": self.samples_trained}
        metrics, self.last_samples = evaluate_sets(self.eval_engine, self.eval_sets, self.w, self.seed,
                                                   self.evals_done, self.prompt)
        point.update(metrics)
        self.wall["evaluation"] += time.perf_counter() - t
        self.eval_history.append(point)
        self.evals_done += 1
        self.pending_metrics.extend((f"eval/{k}", float(v), self.trainer_step) for k, v in point.items())

    def trainer_idle_fraction(self) -> float:
        busy = self.trainer_busy_time
        if self.trainer_busy:  # the step in flight ends in the future: count only its elapsed part
            busy -= next(e.time for e in self.events if e.kind == TRAIN_DONE) - self.clock
        return 1.0 - busy / self.clock if self.clock > 0 else 0.0

    def worker_idle_fraction(self) -> float:
        busy = self.worker_busy_time + sum(self.clock - t for t in self.worker_started.values())
        return 1.0 - busy / (self.clock * self.w.pipeline.workers) if self.clock > 0 else 0.0

    # ---- results --------------------------------------------------------------------------
    def summary(self) -> dict:
        return run_summary(self, self.use_count, self.staleness_total, dict(self.wall), self.strategy_calls,
                           self.wall["strategy"])

    # ---- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        skip = {"w", "task", "tokenizer", "strategy", "trainer", "engine", "eval_engine", "train_docs",
                "eval_docs", "eval_sets", "prompt", "strategy_rng"}
        state = {k: v for k, v in vars(self).items() if k not in skip}
        state["strategy_rng"] = self.strategy_rng.bit_generator.state
        state["strategy"] = self.strategy.state_dict()
        state["model"] = self.trainer.model.state_dict()
        state["optimizer"] = self.trainer.optimizer.state_dict()
        state["engine"] = {"weights": self.engine.model.state_dict(), "version": self.engine.version}
        return state

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        self.trainer.model.load_state_dict(state.pop("model"))
        self.trainer.optimizer.load_state_dict(state.pop("optimizer"))
        engine = state.pop("engine")
        self.engine.load_weights(engine["weights"], engine["version"])
        self.strategy.load_state_dict(state.pop("strategy"))
        self.strategy_rng.bit_generator.state = state.pop("strategy_rng")
        vars(self).update(state)

    def save(self, path: Path) -> None:
        """Atomic: a kill during the write leaves the previous checkpoint intact."""
        tmp = path.with_suffix(".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)

    def load(self, path: Path) -> None:
        self.load_state_dict(torch.load(path, weights_only=False))

"""The asynchronous GRPO pipeline, simulated in virtual time with real model computation (`sim`).

W inference workers generate groups of G rollouts with the weights version they hold and hand
each finished group to the replay strategy; T data-parallel trainers (acting as one) take a step
whenever the strategy returns a batch. Workers receive the trainers' weights every `sync_every`
steps and use them from their next generation on. Durations come from the cost model
(`benchmark/engine/costs.py`). Events are processed in (virtual time, kind, sequence number)
order, so the same seed and config give the same run. Wall-clock time is measured and logged,
never used for a decision.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from benchmark.engine.eval_sets import eval_sets, evaluate_sets
from benchmark.engine.executor import Checkpoint, Executor
from benchmark.engine.groups import GroupGenerator, WorkDone
from benchmark.engine.ledger import (
    PendingGroup,
    StrategyLedger,
    StrategySpec,
    build_rollouts,
    most_pool_rollouts,
    open_strategy,
    reference_strategy,
)
from benchmark.engine.probe import StalenessProbe
from benchmark.grading.prompts import PromptFormat
from benchmark.rl.grpo import GRPOTrainer
from benchmark.rl.policy import load_start_policy
from benchmark.rl.sampler import transformers_engine
from benchmark.rollout import is_correct
from benchmark.strategy import PoolRequest, ReplayStrategy, StrategyFailure

GENERATION_DONE, TRAIN_DONE, POOL_DONE = 0, 1, 2  # at equal times, arrivals are handled before step ends


@dataclass(order=True)
class Event:
    time: float
    kind: int
    seq: int
    worker: int = field(default=-1, compare=False)
    payload: object = field(default=None, compare=False)


class Pipeline(Executor):
    name = "sim"
    resumable = True

    def __init__(self, workload, task, seed: int, options=None, policy=None):
        """policy: (model, tokenizer, info) already loaded; by default the workload's start policy."""
        super().__init__(workload, seed)
        self.task = task
        model, self.tokenizer, self.start_info = policy or load_start_policy(workload)
        tokenizer = self.tokenizer
        self.trainer = GRPOTrainer.from_config(model, tokenizer.pad_token_id, workload.grpo)
        source = workload.model.source
        self.eval_engine = transformers_engine(model, tokenizer, source)
        self.eval_sets = eval_sets(workload, task)
        # The model's chat template when it has one (model.prompt_format), the same for training and evaluation.
        self.prompt = PromptFormat(tokenizer, workload.model.prompt_format, workload.model.chat_template_options)
        self.work = WorkDone()
        # Workers share one engine holding the latest published weights: a worker picks the
        # version up when its next generation starts, which is all the pipeline needs.
        self.generator = GroupGenerator(transformers_engine(copy.deepcopy(model), tokenizer, source, version=0),
                                        task, self.prompt, workload, seed, self.work)
        self.ledger: StrategyLedger | None = None
        self.pool_facts: dict | None = None  # what the strategy's pool cost and held (summary["pool"])
        self.probe: StalenessProbe | None = None  # the regime diagnostic's measurements (enable_probe)

        self.time = 0.0  # the virtual clock
        self.events: list[Event] = []
        self.seq = 0
        self.generations_started = 0
        self.ahead: dict[int, PendingGroup] = {}  # generations computed before their start, by start index
        self.trainer_busy = False
        self.trainer_busy_time = 0.0
        self.worker_busy_time = 0.0  # finished generations only; in-flight ones are in worker_started
        self.worker_started: dict[int, float] = {}
        self.held: list[int] = []  # workers the strategy's admission control holds back, in the order held
        self.replays_started = 0  # generations of a prompt the strategy chose again (the prompt track)
        self.metrics: list = []  # logged since the last checkpoint

    @property
    def engine(self):
        """The workers' generation engine."""
        return self.generator.engine

    def open_strategy(self, spec: StrategySpec) -> None:
        self.attach(open_strategy(spec, self.seed, self.w.limits), spec.track, spec.seed_secret)

    def attach(self, strategy: ReplayStrategy, track: str = "buffer", seed_secret: str | None = None) -> None:
        """Use a strategy built in this process (or an IsolatedStrategy)."""
        self.ledger = StrategyLedger(strategy, self.seed, self.w.pipeline.trainers, self.w.limits, track, seed_secret,
                                     group_size=self.w.grpo.group_size, batch_size=self.w.grpo.batch_size)

    def enable_probe(self) -> None:
        self.probe = StalenessProbe(self.w.grpo.eps_low, self.w.grpo.eps_high)

    def close(self) -> None:
        close = getattr(self.ledger.strategy if self.ledger else None, "close", None)
        if close:
            close()

    # ---- the schedule -------------------------------------------------------------------
    @property
    def clock(self) -> float:
        return self.time

    @property
    def wall(self) -> dict:
        return {**self.work.wall_seconds, "strategy": self.ledger.seconds if self.ledger else 0.0}

    def start(self) -> None:
        request = self.ledger.pool_request(most_pool_rollouts(self.w))
        if request:
            self._generate_pool(request)  # the workers start when the pool is done
        else:
            self._start_workers()

    def _start_workers(self) -> None:
        self._generate_ahead(self.generations_started, also=self.w.pipeline.workers - 1)
        for worker in range(self.w.pipeline.workers):
            self._start_generation(worker)
        self._check_not_stalled()

    def _generate_pool(self, request: PoolRequest) -> None:
        """The strategy's pool: the stream's first prompts, sampled on all devices by the starting policy, or by
        the one the reference strategy trains from it for `trained_for` of the budget (charged: the clock runs)."""
        facts = {"trained_for": request.trained_for, "prompts": request.prompts, "samples": request.samples}
        if request.trained_for:
            phase1 = train_pool_policy(self, request.trained_for)
            self.engine.load_weights(phase1.trainer.model.state_dict(), -phase1.trainer_step)
            facts.update(training_compute=self.compute_used, training_steps=phase1.trainer_step)
        groups = self.generator.pool_groups(request.prompts, request.samples)
        if request.trained_for:  # phase 2 starts again from the starting policy
            self.engine.load_weights(self.trainer.model.state_dict(), 0)
        pool_time = self.costs.pool_time(sum(g.tokens for g in groups))
        facts.update(generation_compute=self.costs.compute(pool_time), rollouts=sum(len(g.rewards) for g in groups),
                     correct=sum(sum(map(is_correct, g.rewards)) for g in groups))
        facts["compute"] = facts.get("training_compute", 0.0) + facts["generation_compute"]
        self.pool_facts = facts
        self.metrics.extend((f"pool/{k}", float(v), 0) for k, v in facts.items())  # what the pool cost, in MLflow
        self._push(self.time + pool_time, POOL_DONE, payload=groups)

    def _finish_pool(self, event: Event) -> None:
        self.rollouts_generated += self.ledger.add_pool(event.payload, self.time)
        self._start_workers()

    def checkpoints(self, progress=None) -> Iterator[Checkpoint]:
        t0 = time.perf_counter()
        wall_before = self.work.wall_seconds["total"]
        points = self.eval_points()
        end_time = self.costs.elapsed(self.w.budget)
        while True:
            evals_done = len(self.eval_history)
            next_eval = self.costs.elapsed(points[evals_done]) if evals_done < len(points) else None
            next_event = self.events[0].time if self.events else float("inf")
            if next_eval is not None and next_eval < next_event:
                self.time = next_eval
                self._evaluate()
                self.work.wall_seconds["total"] = wall_before + time.perf_counter() - t0
                self.metrics.extend((f"wall/{k}_seconds", v, self.trainer_step) for k, v in self.wall.items())
                self.last_checkpoint = Checkpoint(len(self.eval_history), self.metrics)
                self.metrics = []
                if progress:
                    progress(self)
                yield self.last_checkpoint
                continue
            if next_event > end_time:
                break
            self._handle(heapq.heappop(self.events), progress)
        self.time = end_time
        self.work.wall_seconds["total"] = wall_before + time.perf_counter() - t0

    def run_until(self, end_time: float) -> None:
        """Process the events up to `end_time`, evaluating nothing."""
        while self.events and self.events[0].time <= end_time:
            self._handle(heapq.heappop(self.events))
        self.time = end_time

    def _handle(self, event: Event, progress=None) -> None:
        self.time = event.time
        if event.kind == GENERATION_DONE:
            self._finish_generation(event)
        elif event.kind == TRAIN_DONE:
            self._finish_train_step(event)
            if progress:
                progress(self)
        else:
            self._finish_pool(event)
        self._check_not_stalled()

    def _check_not_stalled(self) -> None:
        if self.held and not self.events:
            raise StrategyFailure("stalled: admit() holds every worker back while sample() waits for data, so "
                                  "nothing can change: admit a generation whenever the buffer cannot fill a batch")

    def _push(self, time_: float, kind: int, worker: int = -1, payload=None) -> None:
        heapq.heappush(self.events, Event(time_, kind, self.seq, worker, payload))
        self.seq += 1

    # ---- workers --------------------------------------------------------------------------
    def _start_generation(self, worker: int) -> None:
        """A free worker starts its next generation if the strategy's admission control lets it, or is held."""
        if self.ledger.admit():
            self._launch(worker)
        else:
            self.held.append(worker)

    def _admit_held(self) -> None:
        """The held workers, asked again in the order they were held, start until the strategy holds one back."""
        while self.held and self.ledger.admit():
            self._launch(self.held.pop(0))

    def _launch(self, worker: int) -> None:
        """The worker's generation: the stream's next prompt, or one the strategy chose again (the prompt track)."""
        replayed = self.ledger.next_prompt()
        if replayed is None:
            index = self.generations_started  # the stream position too: each fresh start takes the next prompt
            self.generations_started += 1
            group = self.ahead.pop(index, None)
            if group is None or group.policy_version != self.engine.version:
                self._generate_ahead(index)
                group = self.ahead.pop(index)
        else:
            group = self.generator.replay_group(replayed, self.replays_started)
            self.replays_started += 1
        self.worker_started[worker] = self.time
        self.ledger.generations_in_flight = len(self.worker_started)
        self._push(self.time + self.costs.generation_time(group.tokens), GENERATION_DONE, worker, group)

    def _generate_ahead(self, first: int, also: int = 0) -> None:
        """Generate start `first` together with the starts certain to come before the weights can next change:
        one per generation that finishes (and whose worker then starts its next) before a trainer step can
        end, within the budget, and `also`, the starts at this very moment. Each is generated with exactly
        the weights its worker will hold when it starts, so the run is the one of generating each group at
        its start, in fewer engine calls."""
        arrivals = sorted(e.time for e in self.events if e.kind == GENERATION_DONE)
        step_end = next((e.time for e in self.events if e.kind == TRAIN_DONE), None)
        if step_end is None:  # an idle trainer may start a step now, of at least 2 tokens a rollout
            step_end = self.time + self.costs.training_time(2 * self.w.grpo.batch_size)
        horizon = min(step_end, self.costs.elapsed(self.w.budget))
        coming = sum(1 for t in arrivals if t < horizon)
        positions = range(first, first + 1 + also + coming)
        self.ahead = dict(zip(positions, self.generator.stream_groups(positions)))

    def _finish_generation(self, event: Event) -> None:
        self.worker_busy_time += self.time - self.worker_started.pop(event.worker)
        self.ledger.generations_in_flight = len(self.worker_started)
        if self.probe:
            self.metrics.extend(self.probe.generated(self.trainer, build_rollouts(event.payload, 0, 0, 0, self.time),
                                                     self.trainer_step, self.compute_used))
        self.rollouts_generated += self.ledger.add(event.payload, self.time)
        self._admit_held()  # those held before this one first
        self._start_generation(event.worker)
        if not self.trainer_busy:
            self._try_train()

    # ---- trainers -------------------------------------------------------------------------
    def _try_train(self) -> None:
        checked = self.ledger.sample(self.w.grpo.batch_size)
        if checked is None:
            return
        batch, weights = checked
        tokens = sum(r.length for r in batch)
        duration = self.costs.training_time(tokens)
        if self.ledger.feedback_after_update:  # the strategy's extra forward pass over the batch
            duration += self.costs.forward_time(tokens)
        self.trainer_busy = True
        self.trainer_busy_time += duration  # a step in flight at the budget's end is cut in trainer_idle_fraction
        self._push(self.time + duration, TRAIN_DONE, payload=(batch, weights))

    def _finish_train_step(self, event: Event) -> None:
        batch, weights = event.payload
        feedback = "on_update" in self.ledger.hooks
        if self.probe:
            self.probe.before_step(self.trainer, self.trainer_step)
        t = time.perf_counter()
        stats = self.trainer.step(batch, weights, per_sample=feedback)
        after = self.trainer.completion_logprobs(batch) if self.ledger.feedback_after_update else None
        self.work.wall_seconds["training"] += time.perf_counter() - t
        self.work.tokens_trained += sum(r.length for r in batch)
        usage = self.ledger.record_step(batch)
        if feedback:
            self.ledger.on_update(batch, self.trainer.per_sample, after)
        self.trainer_step = self.ledger.trainer_step
        self.samples_trained += len(batch)
        self.trainer_busy = False
        self.metrics.extend(self.train_metrics(stats, usage))
        if self.probe:
            self.metrics.extend(self.probe.after_step(self.trainer, self.trainer_step, self.compute_used))
        if self.trainer_step % self.w.pipeline.sync_every == 0:
            self.engine.load_weights(self.trainer.model.state_dict(), self.trainer_step)
        self._admit_held()
        self._try_train()

    # ---- evaluation -----------------------------------------------------------------------
    def _evaluate(self) -> None:
        t = time.perf_counter()
        point = {"compute": self.compute_used, "trainer_step": self.trainer_step,
                 "rollouts_generated": self.rollouts_generated, "samples_trained": self.samples_trained}
        metrics, self.eval_samples = evaluate_sets(self.eval_engine, self.eval_sets, self.w, self.seed,
                                                   len(self.eval_history), self.prompt)
        point.update(metrics)
        self.work.wall_seconds["evaluation"] += time.perf_counter() - t
        self.eval_history.append(point)
        self.metrics.extend((f"eval/{k}", float(v), self.trainer_step) for k, v in point.items())

    def trainer_idle_fraction(self) -> float:
        busy = self.trainer_busy_time
        if self.trainer_busy:  # the step in flight ends in the future: count only its elapsed part
            busy -= next(e.time for e in self.events if e.kind == TRAIN_DONE) - self.time
        return 1.0 - busy / self.time if self.time > 0 else 0.0

    def worker_idle_fraction(self) -> float:
        busy = self.worker_busy_time + sum(self.time - t for t in self.worker_started.values())
        return 1.0 - busy / (self.time * self.w.pipeline.workers) if self.time > 0 else 0.0

    def strategy_usage(self) -> dict:
        return self.ledger.usage()

    def summary(self) -> dict:
        pool = {"pool": self.pool_facts} if self.pool_facts else {}
        probe = {"probe": self.probe.summary(self.w.budget)} if self.probe else {}
        return {**super().summary(), "measured": self.measured(), **pool, **probe}

    def measured(self) -> dict:
        return self.work.measured()

    # ---- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        probe = {"probe": self.probe.state_dict()} if self.probe else {}
        return {**ResumeState.of(self), **dataclasses.asdict(self.work), "ledger": self.ledger.state_dict(), **probe,
                "model": self.trainer.model.state_dict(), "optimizer": self.trainer.optimizer.state_dict(),
                "engine": {"weights": self.engine.model.state_dict(), "version": self.engine.version}}

    def load_state_dict(self, state: dict) -> None:
        self.trainer.model.load_state_dict(state["model"])
        self.trainer.optimizer.load_state_dict(state["optimizer"])
        self.engine.load_weights(state["engine"]["weights"], state["engine"]["version"])
        self.ledger.load_state_dict(state["ledger"])
        if self.probe and "probe" in state:
            self.probe.load_state_dict(state["probe"])
        ResumeState.restore(self, state)
        for f in dataclasses.fields(self.work):
            setattr(self.work, f.name, state[f.name])


@dataclass
class ResumeState:
    """What a resumed run takes from its checkpoint besides the models, the ledger and the work done: the pipeline's
    attributes of these names, saved under them."""

    time: float  # the virtual clock
    events: list[Event]  # the schedule: generations and the step in flight, with their results
    seq: int
    generations_started: int  # also the stream position of the next generation
    ahead: dict  # generations made before their start (Pipeline._generate_ahead)
    trainer_busy: bool
    trainer_busy_time: float
    worker_busy_time: float
    worker_started: dict
    held: list  # workers held back by admission control
    replays_started: int
    metrics: list  # logged since the last checkpoint
    last_checkpoint: Checkpoint | None
    trainer_step: int
    rollouts_generated: int
    samples_trained: int
    ratio_totals: object  # executor.RatioTotals
    eval_history: list
    eval_samples: list
    pool_facts: dict | None

    @classmethod
    def of(cls, pipeline: Pipeline) -> dict:
        return {f.name: getattr(pipeline, f.name) for f in dataclasses.fields(cls)}

    @classmethod
    def restore(cls, pipeline: Pipeline, state: dict) -> None:
        for f in dataclasses.fields(cls):
            if f.name in state:  # a checkpoint from before a field was added keeps the field's start value
                setattr(pipeline, f.name, state[f.name])


def train_pool_policy(run: Pipeline, trained_for: float) -> Pipeline:
    """RLEP's phase 1, inside `run`: the reference run of its seed and split, from its starting policy, up to
    `trained_for` of the budget, charged to `run`, whose clock then stands where phase 1 stopped."""
    phase1 = Pipeline(run.w, run.task, run.seed,
                      policy=(copy.deepcopy(run.trainer.model), run.tokenizer, run.start_info))
    phase1.attach(reference_strategy(run.w))
    phase1.start()
    phase1.run_until(run.costs.elapsed(trained_for * run.w.budget))
    run.time = phase1.time
    run.trainer_busy_time += (1 - phase1.trainer_idle_fraction()) * phase1.time
    run.worker_busy_time += (1 - phase1.worker_idle_fraction()) * phase1.time * run.w.pipeline.workers
    run.work.add(phase1.work)
    return phase1

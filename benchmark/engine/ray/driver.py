"""The distributed executor (`--executor ray`): the asynchronous GRPO pipeline on real Ray actors.

The same run as the virtual-time pipeline, with real asynchrony instead of virtual time:

- W inference actors, each with its own generation engine (`engine`: the transformers engine by
  default), generate a group of G completions per prompt of the training stream, score them and
  return it stamped with the weights version they hold.
- A strategy actor holds the replay strategy and the engine's ledger of it (in its own sandboxed
  process as well, with `isolated`, as in official runs), checks every batch the strategy returns
  and cuts it into the T trainers' slices. Rollouts flow workers -> strategy actor -> trainers
  through Ray's object store, never through the driver.
- T trainer actors train data-parallel (torch.distributed, DDP or FSDP: grpo.data_parallel): each
  computes the gradient of its slice, DDP averages the gradients, so the trainers' weights stay
  identical. Every `sync_every` steps the rank-0 trainer publishes its weights (`ray.put`, as CPU
  tensors whatever its device); a worker loads the newest published weights before its next
  generation.
- An evaluator actor runs the pipeline's evaluation on the trainers' weights at the same compute
  checkpoints; evaluation is not charged and does not pause the run.

Placement (`benchmark/engine/ray/placement.py`). On a cluster with GPUs each worker and trainer holds one GPU (or
`gpus_per_actor` of one), the trainers all-reduce with NCCL, the evaluator takes a free GPU or shares worker 0's; the
strategy actor and the driver stay on CPUs. Without GPUs every actor gets an equal CPU share; gloo all-reduces.

Compute. The budget is counted with the cost model (`benchmark/engine/costs.py`) from tokens: the
normalised clock is the busier role's normalised busy time (mu * generated tokens / W, or trained
tokens / T) and compute used = (W + T) * clock, as in the pipeline. Busy and idle wall seconds of each role are
logged as `measured/*`; `measured/mu`: measured device-seconds per generated token over those per trained token.

Not deterministic: which rollouts a step sees depends on the real order in which generations and
steps finish. On the CPU tier the virtual-time pipeline remains the scoring reference; Ray runs go
to the MLflow experiment `replaybench-ray/<workload>`, which the leaderboard does not read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from benchmark.engine.executor import Checkpoint, Executor, RunError
from benchmark.engine.ledger import StrategySpec
from benchmark.engine.ray.cluster import require_ray, start_cluster
from benchmark.engine.ray.options import RayOptions
from benchmark.engine.stream import derive_seed, stream_doc
from benchmark.rl.grpo import merge_step_stats
from benchmark.strategy import StrategyError

EXPERIMENT_PREFIX = "replaybench-ray/"  # MLflow experiments replaybench-ray/<workload>, not scored


class RayPipeline(Executor):
    """Drives the actors."""

    name = "ray"
    resumable = True

    def __init__(self, workload, task, seed: int, options: RayOptions | None = None):
        super().__init__(workload, seed)
        self.ray = ray = require_ray()
        self.options = options or RayOptions()
        p, g = workload.pipeline, workload.grpo
        if g.batch_size < p.trainers:
            raise RunError(f"grpo.batch_size ({g.batch_size}) must be at least the number of trainers "
                                f"({p.trainers}): every trainer needs a slice")
        self.W, self.T = p.workers, p.trainers
        self.train_docs = task.docs("train")
        self.cluster = c = start_cluster(ray, workload, seed, self.options)
        self.placement, self.host, self.workers, self.trainers = c.placement, c.host, c.workers, c.trainers
        self.evaluator, self.start_info = c.evaluator, c.start_info

        self.stream_position = self.generations_started = 0
        self.gen_tokens = self.trained_tokens = 0
        self.pool_time = 0.0  # normalised time of the strategy's pool, charged to all devices
        self.in_flight: dict = {}  # ObjectRef -> (kind, details)
        self.worker_version = [0] * self.W
        self.published = (0, None)  # newest weights from the trainers: (version, ObjectRef)
        self.training: dict | None = None  # the step in flight: trainer results so far
        self.holding = False  # no new step starts (while a checkpoint is taken)
        self.stopping = False
        self.evals_queued = 0
        self.metrics: list = []  # logged since the last checkpoint
        self.busy = {"generation": 0.0, "training": 0.0, "evaluation": 0.0}
        # the same calls' seconds with the pacing's sleep: they hold the workload's mu only if the real work fit
        self.paced = {"generation": 0.0, "training": 0.0}
        self.pending_adds: list = []  # the strategy's add() calls, checked for verdicts as they complete
        self.run_started = self.run_ended = None
        self.final: dict = {}

    @classmethod
    def check_installed(cls) -> None:
        require_ray()

    @classmethod
    def experiment(cls, workload_name: str) -> str:
        return f"{EXPERIMENT_PREFIX}{workload_name}"

    def open_strategy(self, spec: StrategySpec) -> None:
        hooks = self._get(self.host.open.remote(spec))
        if hooks:
            raise RunError(f"the strategy defines {', '.join(f'{h}()' for h in hooks)}, which only the virtual-time "
                           "executor calls so far: run it with --executor sim")

    def _get(self, refs):
        """ray.get, with a strategy's verdict re-raised as itself rather than wrapped by Ray."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, StrategyError):
                raise cause from None
            raise

    # ---- the schedule ---------------------------------------------------------------------
    @property
    def clock(self) -> float:
        """Normalised time: the busier role's normalised busy time, after the pool."""
        return self.pool_time + max(self.costs.generation_time(self.gen_tokens) / self.W,
                                    self.costs.training_time(self.trained_tokens))

    def elapsed(self) -> float:
        """Wall seconds from the start to the end of the last generation or training step."""
        if self.run_started is None:
            return 0.0
        return (self.run_ended or time.perf_counter()) - self.run_started

    def start(self) -> None:
        self.run_started = time.perf_counter()
        self._queue_due_evals()  # compute 0: the start weights
        request = self._get(self.host.pool_request.remote())
        if request and request.trained_for:
            raise RunError("a pool sampled by a trained policy (PoolRequest.trained_for) needs --executor sim")
        if request:
            self._generate_pool(request.prompts, request.samples)
        for worker in range(self.W):
            self._start_generation(worker)

    def _generate_pool(self, prompts: int, samples: int) -> None:
        """The strategy's pool: the stream's first prompts, sampled by the starting policy on the workers."""
        refs = []
        for position in range(prompts):
            worker = self.workers[position % self.W]
            refs.append(worker.generate.options(num_returns=2).remote(
                stream_doc(self.train_docs, self.seed, position), samples, derive_seed(self.seed, "pool", position),
                None, 0))
        facts = self._get([f for f, _ in refs])
        self.pool_time = self.costs.pool_time(sum(f["tokens"] for f in facts))
        self.rollouts_generated += sum(f["rollouts"] for f in facts)
        self.busy["generation"] += sum(f["busy_s"] for f in facts)
        self.paced["generation"] += sum(f["paced_s"] for f in facts)
        self._get(self.host.add_pool.remote([g for _, g in refs], self.clock))

    def _start_generation(self, worker: int) -> None:
        doc = stream_doc(self.train_docs, self.seed, self.stream_position)
        self.stream_position += 1
        seed = derive_seed(self.seed, "generation", self.generations_started)
        self.generations_started += 1
        version, weights = self.published
        if weights is None or version <= self.worker_version[worker]:
            version, weights = self.worker_version[worker], None
        facts, group = self.workers[worker].generate.options(num_returns=2).remote(
            doc, self.w.grpo.group_size, seed, weights, version, self.options.pace)
        self.in_flight[facts] = ("generation", (worker, group))

    def checkpoints(self, progress=None) -> Iterator[Checkpoint]:
        """Until the budget is spent and every evaluation is back."""
        while self.in_flight:
            ready, _ = self.ray.wait(list(self.in_flight), num_returns=1)
            kind, details = self.in_flight.pop(ready[0])
            if kind == "generation":
                self._finish_generation(ready[0], *details)
            elif kind == "train":
                self._finish_train_part(ready[0], details)
            else:
                self._finish_eval(ready[0], details)
            if progress and kind != "generation":
                progress(self)
            if kind == "eval":
                self.metrics.extend((f"wall/{k}_seconds", v, self.trainer_step) for k, v in self.wall.items())
                self.last_checkpoint, self.metrics = Checkpoint(len(self.eval_history), self.metrics), []
                yield self.last_checkpoint
            if self.stopping and self.run_ended is None and all(k == "eval" for k, _ in self.in_flight.values()):
                self.run_ended = time.perf_counter()  # only evaluations are left: the measured run ends
            if not self.in_flight and self.evals_queued < len(self.eval_points()):
                self.stopping = True  # nothing left to run: evaluate the rest of the schedule now
                self._queue_due_evals(everything=True)
        self._collect_final()

    def _check_budget(self) -> None:
        if self.compute_used >= self.w.budget - 1e-9:
            self.stopping = True  # work in flight finishes and is counted; nothing new starts

    def _queue_due_evals(self, everything: bool = False) -> None:
        points = self.eval_points()
        while self.evals_queued < len(points) and (everything or self.compute_used >= points[self.evals_queued] - 1e-9):
            askers = self.trainers if self.w.grpo.data_parallel == "fsdp" else self.trainers[:1]  # FSDP: all gather
            ref = self.evaluator.evaluate.remote([t.weights.remote() for t in askers][0], self.evals_queued)
            self.in_flight[ref] = ("eval", {"compute": points[self.evals_queued], "compute_at_eval": self.compute_used,
                                            "rollouts_generated": self.rollouts_generated,
                                            "measured_device_s": self.costs.devices * self.elapsed()})
            self.evals_queued += 1

    # ---- workers --------------------------------------------------------------------------
    def _finish_generation(self, facts_ref, worker: int, group) -> None:
        facts = self._get(facts_ref)
        self.gen_tokens += facts["tokens"]
        self.rollouts_generated += facts["rollouts"]
        self.busy["generation"] += facts["busy_s"]
        self.paced["generation"] += facts["paced_s"]
        self.worker_version[worker] = facts["version"]
        if not self.stopping:
            # the group goes to the strategy actor as an object ref, not through the driver
            self.pending_adds.append(self.host.add.remote(group, self.clock))
            self._check_budget()
        self._queue_due_evals()
        if not self.stopping:
            self._start_generation(worker)
            self._try_train()

    # ---- trainers -------------------------------------------------------------------------
    def _check_adds(self, wait: bool = False) -> None:
        """Raise the verdict of an add() that failed; wait=False looks only at those already done."""
        if not self.pending_adds:
            return
        done, self.pending_adds = (self.pending_adds, []) if wait else self.ray.wait(
            self.pending_adds, num_returns=len(self.pending_adds), timeout=0)
        self._get(done)

    def _try_train(self) -> None:
        self._check_adds()
        if self.training is not None or self.stopping or self.holding:
            return
        facts, *parts = self.host.sample.options(num_returns=1 + self.T).remote(self.w.grpo.batch_size)
        facts = self._get(facts)
        if facts is None:  # the strategy waits for more data
            return
        publish = (self.trainer_step + 1) % self.w.pipeline.sync_every == 0
        min_seconds = (self.options.pace or 0.0) * facts["tokens"] / self.T
        self.training = {"facts": facts, "results": [None] * self.T}
        for rank, (trainer, part) in enumerate(zip(self.trainers, parts)):
            self.in_flight[trainer.step.remote(part, publish, min_seconds)] = ("train", rank)

    def _finish_train_part(self, ref, rank: int) -> None:
        self.training["results"][rank] = self._get(ref)
        if any(r is None for r in self.training["results"]):
            return
        results, facts = self.training["results"], self.training["facts"]
        self.training = None
        usage = self._get(self.host.finish_step.remote())
        self.trainer_step += 1
        self.samples_trained += facts["samples"]
        self.trained_tokens += facts["tokens"]
        self.busy["training"] += sum(r["busy_s"] for r in results)
        self.paced["training"] += sum(r["paced_s"] for r in results)
        if results[0]["published"]:
            self.published = (self.trainer_step, results[0]["published"][0])
        stats = merge_step_stats([r["stats"] for r in results], [r["completion_tokens"] for r in results],
                                 loss_weights=[r["share"] for r in results])
        self.metrics.extend(self.train_metrics(stats, usage))
        self.metrics.extend((f"measured/{k}", float(v), self.trainer_step) for k, v in self.measured().items())
        self._check_budget()
        self._queue_due_evals()
        self._try_train()

    # ---- evaluation -----------------------------------------------------------------------
    def _finish_eval(self, ref, point: dict) -> None:
        out = self._get(ref)
        self.busy["evaluation"] += out["busy_s"]
        self.eval_samples = out["samples"]
        step = out["trainer_step"]
        point = {"compute": point["compute"], "trainer_step": step, "rollouts_generated": point["rollouts_generated"],
                 "samples_trained": step * self.w.grpo.batch_size, **out["metrics"],
                 "compute_at_eval": point["compute_at_eval"], "measured_device_s": point["measured_device_s"]}
        self.eval_history.append(point)
        self.metrics.extend((f"eval/{k}", float(v), step) for k, v in point.items())

    # ---- checkpoints ----------------------------------------------------------------------
    STATE = ("stream_position", "generations_started", "gen_tokens", "trained_tokens", "pool_time", "trainer_step",
             "samples_trained", "rollouts_generated", "eval_history", "eval_samples", "metrics", "busy",
             "paced", "last_checkpoint")

    def state_dict(self) -> dict:
        """One moment of the run, taken at an evaluation: the step in flight finishes first and none starts until
        the state is taken, so the trainers' weights and optimiser, the strategy's state and the counters agree.
        Generations in flight are not in it (nor counted yet): a resumed run starts new ones at the next prompt."""
        self.holding = True
        try:
            while self.training is not None:
                ready, _ = self.ray.wait([r for r, (kind, _) in self.in_flight.items() if kind == "train"])
                _, rank = self.in_flight.pop(ready[0])
                self._finish_train_part(ready[0], rank)
            trained = self._get([t.state.remote() for t in self.trainers])[0]  # a collective under FSDP
            state = {**{k: getattr(self, k) for k in self.STATE}, **trained, "elapsed": self.elapsed(),
                     "strategy": self._get(self.host.state_dict.remote())}
        finally:
            self.holding = False
        self._try_train()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from a checkpoint: the trainers and the strategy restored, the workers given the restored
        weights with their next generation, the evaluations not yet back queued again."""
        self._get([t.load_state.remote(state) for t in self.trainers])
        self._get(self.host.load_state_dict.remote(state["strategy"]))
        for k in self.STATE:
            setattr(self, k, state[k])
        self.run_started = time.perf_counter() - state["elapsed"]
        self.evals_queued = len(self.eval_history)
        self.published = (self.trainer_step, self.ray.put(state["model"]))
        self._check_budget()
        self._queue_due_evals(everything=self.stopping)
        if not self.stopping:
            for worker in range(self.W):
                self._start_generation(worker)
            self._try_train()

    # ---- idle fractions and measurements ------------------------------------------------------
    def trainer_idle_fraction(self) -> float:
        clock = self.clock
        return 1.0 - self.costs.training_time(self.trained_tokens) / clock if clock > 0 else 0.0

    def worker_idle_fraction(self) -> float:
        clock = self.clock
        return 1.0 - (self.costs.generation_time(self.gen_tokens) / self.W) / clock if clock > 0 else 0.0

    def measured(self) -> dict:
        """Real device-seconds per role: busy = inside generate / train calls, idle = the rest of the run."""
        elapsed = self.elapsed()
        worker_busy, trainer_busy = self.busy["generation"], self.busy["training"]
        out = {
            "elapsed_s": elapsed,
            "compute_device_s": self.costs.devices * elapsed,
            "worker_busy_s": worker_busy, "worker_idle_s": max(self.W * elapsed - worker_busy, 0.0),
            "trainer_busy_s": trainer_busy, "trainer_idle_s": max(self.T * elapsed - trainer_busy, 0.0),
            "worker_idle_frac": 1.0 - worker_busy / (self.W * elapsed) if elapsed > 0 else 0.0,
            "trainer_idle_frac": 1.0 - trainer_busy / (self.T * elapsed) if elapsed > 0 else 0.0,
        }
        if self.gen_tokens and self.trained_tokens and trainer_busy > 0:
            out["mu"] = (worker_busy / self.gen_tokens) / (trainer_busy / self.trained_tokens)
            # the roles' relative speeds as they ran: the workload's mu when --ray-pace held, nearer the
            # hardware's own mu where the real work overran the paced durations (a loaded machine)
            out["mu_as_run"] = ((self.paced["generation"] / self.gen_tokens)
                                / (self.paced["training"] / self.trained_tokens))
        return out

    @property
    def wall(self) -> dict:
        return {**self.busy, "strategy": self.final.get("strategy_seconds", 0.0),
                "total": self.final.get("elapsed", self.elapsed())}

    # ---- results --------------------------------------------------------------------------
    def _collect_final(self) -> None:
        """What the summary needs from the actors, fetched while they live."""
        self._check_adds(wait=True)
        self.final = self._get(self.host.usage.remote())
        self.final["trainer_weights_sha256"] = self._get([t.weights_sha256.remote() for t in self.trainers])
        self.final["measured"] = self.measured()
        self.final["elapsed"] = self.elapsed()

    def strategy_usage(self) -> dict:
        return self.final

    def summary(self) -> dict:
        f = self.final
        return {
            **super().summary(),
            "executor": "ray",
            "measured": f["measured"],
            "trainer_weights_sha256": f["trainer_weights_sha256"],
            "trainers_in_sync": len(set(f["trainer_weights_sha256"])) == 1,
            "ray": {"workers": self.W, "trainers": self.T, **self.placement.describe(),
                    "worker_weight_versions": list(self.worker_version),  # each worker's last generation's weights
                    "engine": self.options.engine, "pace": self.options.pace,
                    "data_parallel": f"torch {self.w.grpo.data_parallel}, {self.placement.backend}"},
        }

    def close(self) -> None:
        if getattr(self, "host", None) is not None:
            try:
                self.ray.get(self.host.close.remote(), timeout=30)
            except Exception:
                pass  # the actor is gone already
        if getattr(self, "cluster", None) is not None:
            self.cluster.close(self.ray)
        self.host = None

"""The distributed executor (`--executor ray`): the asynchronous GRPO pipeline on real Ray actors.

The same run as `benchmark/engine/pipeline.py`, with real asynchrony instead of virtual time:

- W inference actors, each with its own generation engine (`engine`: the transformers engine by
  default), generate a group of G completions per prompt of the training stream, score them and
  return it stamped with the weights version they hold.
- A strategy actor holds the replay strategy (in its own sandboxed process as well, with
  `isolated`, as in official runs), turns groups into rollouts, checks every batch the strategy
  returns with the pipeline's checks and cuts it into the T trainers' slices. Rollouts flow
  workers -> strategy actor -> trainers through Ray's object store, never through the driver.
- T trainer actors train data-parallel (torch.distributed, DistributedDataParallel): each
  computes the gradient of its slice, DDP averages the gradients, so the trainers' weights stay
  identical. Every `sync_every` steps the rank-0 trainer publishes its weights (`ray.put`, as CPU
  tensors whatever its device); a worker loads the newest published weights before its next
  generation.
- An evaluator actor runs the pipeline's evaluation on the trainers' weights at the same compute
  checkpoints; evaluation is not charged and does not pause the run.

Placement (`benchmark/engine/ray/placement.py`). On a cluster with GPUs each worker and trainer holds one
GPU (or `gpus_per_actor` of one), the trainers all-reduce with NCCL, the evaluator takes a free GPU
or shares worker 0's; the strategy actor and the driver stay on CPUs. Without GPUs every actor gets
an equal share of the CPUs and the trainers all-reduce with gloo.

Compute. The budget is counted in the pipeline's normalised units, from tokens: generating a token
costs mu, training on one costs 1, and the devices of a role count busy or idle. The normalised
clock is the busier role's normalised busy time, mu * generated tokens / W for the workers or
trained tokens / T for the trainers (the workers never wait, in either executor), and
compute used = (W + T) * clock, as in the pipeline. Real wall seconds are measured too: busy
seconds of each actor (time inside generate / train calls) and idle seconds (the rest of the
run), logged as `measured/*` next to the normalised figures; `measured/mu` is the ratio of the
measured device-seconds per generated token to those per trained token.

Not deterministic. Which rollouts a trainer step sees depends on the real order in which
generations and steps finish, so two runs with the same seed differ; on the CPU tier the
virtual-time pipeline remains the scoring reference. Ray runs are recorded in the MLflow
experiment `replaybench-ray/<workload>`, which the leaderboard does not read. Ray is imported
only here, so the rest of ReplayBench runs without the `distributed` extra.
"""

from __future__ import annotations

import importlib
import inspect
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from benchmark.engine.pipeline import (
    PendingGroup,
    build_rollouts,
    build_trainer,
    check_batch,
    checked_pool_request,
    derive_seed,
    doc_id,
    eval_points,
    eval_sets,
    evaluate_sets,
    record_use,
    run_summary,
    stream_doc,
    train_step_metrics,
)
from benchmark.engine.ray.placement import ActorResources, PlacementError, engine_gpu_fraction, plan_placement
from benchmark.runner import RunError, set_threads
from benchmark.strategy import StrategyContext, StrategyError
from benchmark.workload import Workload

INSTALL_HINT = 'the Ray executor needs the distributed extra: pip install -e ".[distributed]"'
EXPERIMENT_PREFIX = "replaybench-ray"  # MLflow experiments replaybench-ray/<workload>


def require_ray():
    """The ray module, or one clear error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise RunError(INSTALL_HINT) from None
    return ray


@dataclass
class RayOptions:
    """How the actors are placed. address: an existing cluster (default: $RAY_ADDRESS, else a local
    one with num_cpus CPUs, default all). engine: "hf" (transformers), "vllm" or "module:factory", a
    callable (model, tokenizer) -> GenerationEngine; the model comes on the CPU and the factory
    places its engine itself; one that accepts a `gpu_fraction` keyword is told the share of its
    GPU it may fill when the actor holds only part of one. gpus_per_actor: the GPUs of each worker
    and trainer; None: 1 when the cluster has GPUs, else none (see benchmark/engine/ray/placement.py)."""

    address: str | None = None
    num_cpus: float | None = None
    engine: str = "hf"
    gpus_per_actor: float | None = None
    # Optional pacing: wall seconds per normalised compute unit. A generation then lasts at least
    # pace * mu * tokens and a training step pace * tokens / T, so the roles run at the workload's
    # relative speeds (its mu) on hardware whose own mu differs (e.g. CPUs), as long as the real
    # work fits inside those durations. None: as fast as the hardware goes.
    pace: float | None = None

    def __post_init__(self):
        self.engine = resolve_engine(self.engine)  # a mistyped engine fails here, before anything starts


ENGINE_ALIASES = {"vllm": "benchmark.rl.vllm_engine:vllm_engine"}


def resolve_engine(name: str) -> str:
    """What an engine name stands for: "hf" (transformers) or a module:factory ("vllm" is short for
    the vLLM engine's factory); a clear error for anything else."""
    name = ENGINE_ALIASES.get(name, name)
    module, colon, factory = name.partition(":")
    if name != "hf" and not (colon and module and factory.isidentifier()):
        raise RunError(f"unknown --ray-engine {name!r}: use hf, vllm or module:factory "
                       "(e.g. benchmark.rl.vllm_engine:vllm_engine)")
    return name


def make_engine(name: str, model, tokenizer, device: str = "cpu", gpu_fraction: float | None = None):
    """The engine `name` (see resolve_engine) on this actor's device; gpu_fraction: the share of its GPU
    the actor holds when it holds only part of one."""
    name = resolve_engine(name)
    if name == "hf":
        from benchmark.rl.generation import HFEngine

        return HFEngine(model.to(device), tokenizer)
    module, _, factory_name = name.partition(":")
    factory = getattr(importlib.import_module(module), factory_name)
    if gpu_fraction is not None and "gpu_fraction" in inspect.signature(factory).parameters:
        return factory(model, tokenizer, gpu_fraction=gpu_fraction)
    return factory(model, tokenizer)


def _setup_process(device: str = "cpu") -> None:
    set_threads()
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RunError(f"this actor holds a GPU but PyTorch {torch.__version__} sees no CUDA device: install a "
                           "CUDA build of PyTorch on every node, or pass --ray-gpus-per-actor 0 to run on CPUs")


def cpu_state_dict(model) -> dict:
    """The model's weights as CPU tensors (the same tensors when the model is on the CPU already), so any
    actor can load them whatever its device."""
    return {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}


# ---- the actors (plain classes; `ray.remote` wraps them at start) ----------------------------
class InferenceWorker:
    def __init__(self, workload: Workload, engine: str, device: str = "cpu", gpu_fraction: float | None = None):
        from benchmark.grading.prompts import PromptFormat
        from benchmark.rl.policy import load_start_policy

        _setup_process(device)
        self.w = workload
        model, tokenizer, info = load_start_policy(workload)
        self.engine = make_engine(engine, model, tokenizer, device, gpu_fraction)
        self.task = workload.load_task()
        self.prompt = PromptFormat(tokenizer, workload.model.prompt_format)  # as the pipeline prompts
        self.max_new_tokens = workload.max_new_tokens or self.task.max_new_tokens
        self.start_sha256 = info["weights_sha256"]

    def ready(self) -> str:
        return self.start_sha256

    def generate(self, doc: dict, n: int, seed: int, weights: dict | None, version: int, pace: float | None = None):
        """(facts for the driver, the group for the strategy actor): two objects, so the rollouts
        go to the strategy actor without passing through the driver."""
        start = time.perf_counter()
        if weights is not None:
            self.engine.load_weights(weights, version)
        [completions] = self.engine.generate([self.prompt(self.task.doc_to_text(doc))], n=n,
                                             temperature=self.w.grpo.temperature, max_new_tokens=self.max_new_tokens,
                                             seed=seed)
        rewards = self.task.score_many(doc, [c.text for c in completions])
        tokens = sum(len(c.prompt_ids) + len(c.completion_ids) for c in completions)
        facts = {"tokens": tokens, "rollouts": len(completions), "version": self.engine.version,
                 "busy_s": time.perf_counter() - start}
        if pace:
            time.sleep(max(0.0, pace * self.w.pipeline.mu * tokens - facts["busy_s"]))
        return facts, PendingGroup(doc_id(doc), completions, rewards, self.engine.version)


class Trainer:
    """One data-parallel rank: its own model copy and optimiser, gradients averaged by DDP."""

    def __init__(self, workload: Workload, rank: int, world_size: int, device: str = "cpu", backend: str = "gloo"):
        from benchmark.rl.policy import load_start_policy

        _setup_process(device)
        self.w, self.rank, self.world_size, self.device, self.backend = workload, rank, world_size, device, backend
        self.model, tokenizer, info = load_start_policy(workload)  # in the workload's model.dtype
        self.start_sha256 = info["weights_sha256"]
        self.model.to(device)
        self.pad_id = tokenizer.pad_token_id
        self.steps = 0

    def ready(self) -> str:
        return self.start_sha256

    def rendezvous_address(self) -> str:
        """rank 0: where the process group meets (this node, a free port)."""
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join(self, address: str) -> None:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        dist.init_process_group(self.backend, init_method=address, rank=self.rank, world_size=self.world_size)
        # DDP broadcasts rank 0's weights at construction and averages gradients in backward.
        if self.device == "cuda":
            import torch

            ddp = DistributedDataParallel(self.model, device_ids=[torch.cuda.current_device()])
        else:
            ddp = DistributedDataParallel(self.model)
        self.trainer = build_trainer(ddp, self.pad_id, self.w.grpo)

    def step(self, part: tuple, publish: bool, min_seconds: float = 0.0) -> dict:
        """Train on this rank's slice; `share` is its part of the batch's loss normaliser. The step
        lasts at least min_seconds (pacing)."""
        import ray

        rollouts, weights, share = part
        start = time.perf_counter()
        stats = self.trainer.step(rollouts, weights, loss_scale=self.world_size * share)
        busy = time.perf_counter() - start
        self.steps += 1
        published = [ray.put(cpu_state_dict(self.model))] if publish and self.rank == 0 else None
        time.sleep(max(0.0, min_seconds - (time.perf_counter() - start)))
        return {"stats": stats, "share": share, "tokens": sum(len(r.completion_ids) for r in rollouts),
                "busy_s": busy, "published": published}

    def weights(self) -> tuple[int, dict]:
        return self.steps, cpu_state_dict(self.model)

    def weights_sha256(self) -> str:
        from benchmark.rl.policy import weights_hash

        return weights_hash(self.model)


class StrategyHost:
    """The strategy's actor: the engine's side of the strategy (rollout registry, use counts, batch
    checks), with the strategy itself in this process or, isolated, in its own sandboxed one."""

    def __init__(self, workload: Workload, strategy_path: str, params: dict, isolated: bool, seed: int):
        self.w, self.path, self.params, self.isolated, self.seed = workload, strategy_path, params, isolated, seed

    def setup(self) -> None:
        from benchmark.engine.sandbox import IsolatedStrategy
        from benchmark.strategy import build_strategy

        _setup_process()
        rng_seed = derive_seed(self.seed, "strategy")
        if self.isolated:
            self.strategy = IsolatedStrategy(self.path, self.params, rng_seed=rng_seed,
                                             defaults=self.w.strategy_defaults)
        else:
            self.strategy = build_strategy(self.path, self.params, self.w.strategy_defaults)
        self.rng = np.random.default_rng(rng_seed)
        self.known, self.use_count, self.last_used_step = {}, {}, {}
        self.next_rollout_id = self.next_group_id = self.trainer_step = 0
        self.staleness_total = 0
        self.in_training = []
        self.strategy_seconds, self.strategy_calls = 0.0, 0

    def _ctx(self) -> StrategyContext:
        return StrategyContext(trainer_step=self.trainer_step, policy_version=self.trainer_step, rng=self.rng,
                               use_count=MappingProxyType(self.use_count), num_trainers=self.w.pipeline.trainers)

    def _call(self, method: str, *args):
        start = time.perf_counter()
        try:
            return getattr(self.strategy, method)(*args)
        finally:
            self.strategy_seconds += time.perf_counter() - start
            self.strategy_calls += 1

    def _register(self, group: PendingGroup, clock: float) -> list:
        rollouts = build_rollouts(group, self.next_rollout_id, self.next_group_id, self.trainer_step, clock)
        self.known.update((r.rollout_id, r) for r in rollouts)
        self.next_rollout_id += len(rollouts)
        self.next_group_id += 1
        return rollouts

    def pool_request(self):
        return checked_pool_request(self._call("pool_request"))

    def add_pool(self, groups: list[PendingGroup], clock: float) -> None:
        rollouts = [r for group in groups for r in self._register(group, clock)]
        self._call("add_pool", rollouts, self._ctx())

    def add(self, group: PendingGroup, clock: float) -> None:
        self._call("add", list(self._register(group, clock)), self._ctx())

    def sample(self, batch_size: int):
        """(facts, slice for trainer 0, ..., slice for trainer T-1), or Nones when the strategy waits."""
        trainers = self.w.pipeline.trainers
        sampled = self._call("sample", batch_size, self._ctx())
        if sampled is None:
            return (None,) * (1 + trainers)
        batch, weights = check_batch(sampled, batch_size, self.known)
        self.in_training = batch
        # each rank's share of the loss normaliser (completion tokens, or sequences for sequence_mean)
        sizes = [len(r.completion_ids) if self.w.grpo.aggregation == "token_mean" else 1 for r in batch]
        total = max(sum(sizes), 1)
        parts = [(batch[s], None if weights is None else weights[s], sum(sizes[s]) / total)
                 for s in self._ctx().trainer_slices(batch_size)]
        return ({"tokens": sum(r.length for r in batch), "samples": len(batch)}, *parts)

    def finish_step(self) -> dict:
        """The batch handed out last has been trained: count its use; its usage metrics."""
        usage, staleness = record_use(self.in_training, self.trainer_step, self.use_count, self.last_used_step)
        self.trainer_step += 1
        self.staleness_total += staleness
        return usage

    def usage(self) -> dict:
        return {"use_count": dict(self.use_count), "staleness_total": self.staleness_total,
                "strategy_seconds": self.strategy_seconds, "strategy_calls": self.strategy_calls}

    def close(self) -> None:
        close = getattr(getattr(self, "strategy", None), "close", None)
        if close:
            close()


class Evaluator:
    def __init__(self, workload: Workload, engine: str, seed: int, device: str = "cpu",
                 gpu_fraction: float | None = None):
        from benchmark.grading.prompts import PromptFormat
        from benchmark.rl.policy import load_start_policy

        _setup_process(device)
        self.w, self.seed = workload, seed
        model, tokenizer, _ = load_start_policy(workload)
        self.engine = make_engine(engine, model, tokenizer, device, gpu_fraction)
        self.sets = eval_sets(workload, workload.load_task())
        self.prompt = PromptFormat(tokenizer, workload.model.prompt_format)

    def ready(self) -> None:
        return None

    def evaluate(self, weights: tuple[int, dict], index: int) -> dict:
        step, state_dict = weights
        start = time.perf_counter()
        self.engine.load_weights(state_dict, step)
        metrics, samples = evaluate_sets(self.engine, self.sets, self.w, self.seed, index, self.prompt)
        return {"trainer_step": step, "metrics": metrics, "samples": samples, "busy_s": time.perf_counter() - start}


# ---- the driver ---------------------------------------------------------------------------
class RayPipeline:
    """Drives the actors; the same attributes and methods the runner uses on `Pipeline`."""

    def __init__(self, workload: Workload, task, seed: int, strategy_path: str | Path, strategy_params: dict,
                 isolated: bool = False, options: RayOptions | None = None):
        self.ray = ray = require_ray()
        self.w, self.seed, self.options = workload, seed, options or RayOptions()
        p, g = workload.pipeline, workload.grpo
        if g.batch_size < p.trainers:
            raise RunError(f"grpo.batch_size ({g.batch_size}) must be at least the number of trainers "
                           f"({p.trainers}): every trainer needs a slice")
        self.W, self.T, self.devices = p.workers, p.trainers, p.workers + p.trainers
        self.train_docs = task.docs("train")
        self.started_ray = False
        self.actors = []
        try:
            self._start_actors(ray, str(Path(strategy_path).resolve()), strategy_params, isolated)
        except BaseException:
            self.close()
            raise

        self.stream_position = self.generations_started = 0
        self.gen_tokens = self.trained_tokens = 0
        self.pool_time = 0.0  # normalised time of the strategy's pool, charged to all devices
        self.trainer_step = self.rollouts_generated = self.samples_trained = 0
        self.in_flight: dict = {}  # ObjectRef -> (kind, details)
        self.worker_version = [0] * self.W
        self.published = (0, None)  # newest weights from the trainers: (version, ObjectRef)
        self.training: dict | None = None  # the step in flight: trainer results so far
        self.stopping = False
        self.evals_queued = self.evals_done = 0
        self.eval_history: list[dict] = []
        self.pending_metrics: list[tuple[str, float, int]] = []
        self.flushes = 0
        self.last_samples: list[dict] = []
        self.busy = {"generation": 0.0, "training": 0.0, "evaluation": 0.0}
        self.pending_adds: list = []  # the strategy's add() calls, checked for verdicts as they complete
        self.run_started = self.run_ended = None
        self.final: dict = {}

    # ---- setup ----------------------------------------------------------------------------
    def _start_actors(self, ray, strategy_path: str, strategy_params: dict, isolated: bool) -> None:
        o = self.options
        env = {"REPLAYBENCH_THREADS": os.environ.get("REPLAYBENCH_THREADS", "1"), "OMP_NUM_THREADS": "1",
               "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        if not ray.is_initialized():
            address = o.address or os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=o.num_cpus, include_dashboard=False, log_to_driver=False)
            self.started_ray = True
        try:
            self.placement = place = plan_placement(ray.cluster_resources(), self.W, self.T, o.gpus_per_actor)
        except PlacementError as exc:
            raise RunError(str(exc)) from None
        if place.device == "cuda":
            _check_cuda_build()

        def remote(cls, resources: ActorResources):
            return ray.remote(num_cpus=resources.num_cpus, num_gpus=resources.num_gpus,
                              runtime_env={"env_vars": env})(cls)

        def engine_actor(cls, resources: ActorResources, *args):
            return remote(cls, resources).remote(self.w, *args, place.device,
                                                 engine_gpu_fraction(resources.num_gpus))

        self.host = remote(StrategyHost, place.strategy).remote(self.w, strategy_path, strategy_params, isolated,
                                                                self.seed)
        self.workers = [engine_actor(InferenceWorker, place.worker0 if i == 0 else place.worker, o.engine)
                        for i in range(self.W)]
        self.trainers = [remote(Trainer, place.trainer).remote(self.w, rank, self.T, place.device, place.backend)
                         for rank in range(self.T)]
        self.actors = [self.host, *self.workers, *self.trainers]
        self._get(self.host.setup.remote())
        hashes = self._get([a.ready.remote() for a in [*self.workers, *self.trainers]])
        if len(set(hashes)) != 1:
            raise RunError("the actors loaded different start weights: every node needs the same checkpoint")
        # Started once the others hold their GPUs, so that a shared evaluator lands in the share left for it.
        self.evaluator = engine_actor(Evaluator, place.evaluator, o.engine, self.seed)
        self.actors.append(self.evaluator)
        address = self._get(self.trainers[0].rendezvous_address.remote())
        self._get([t.join.remote(address) for t in self.trainers])
        self._get(self.evaluator.ready.remote())

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
        return self.pool_time + max(self.w.pipeline.mu * self.gen_tokens / self.W, self.trained_tokens / self.T)

    @property
    def compute_used(self) -> float:
        return self.devices * self.clock

    def eval_points(self) -> list[float]:
        return eval_points(self.w.eval.every, self.w.budget)

    @property
    def finished(self) -> bool:
        return self.evals_done >= len(self.eval_points())

    def elapsed(self) -> float:
        """Wall seconds from the start to the end of the last generation or training step."""
        if self.run_started is None:
            return 0.0
        return (self.run_ended or time.perf_counter()) - self.run_started

    def start(self) -> None:
        self.run_started = time.perf_counter()
        self._queue_due_evals()  # compute 0: the start weights
        request = self._get(self.host.pool_request.remote())
        if request:
            self._generate_pool(*request)
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
        tokens = sum(f["tokens"] for f in facts)
        self.pool_time = self.w.pipeline.mu * tokens / self.devices
        self.rollouts_generated += sum(f["rollouts"] for f in facts)
        self.busy["generation"] += sum(f["busy_s"] for f in facts)
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

    def run(self, on_checkpoint=None, on_progress=None) -> None:
        """Until the budget is spent and every evaluation is back. on_checkpoint(self) after each evaluation."""
        while self.in_flight:
            ready, _ = self.ray.wait(list(self.in_flight), num_returns=1)
            kind, details = self.in_flight.pop(ready[0])
            if kind == "generation":
                self._finish_generation(ready[0], *details)
            elif kind == "train":
                self._finish_train_part(ready[0], details)
            else:
                self._finish_eval(ready[0], details)
                if on_checkpoint:
                    on_checkpoint(self)
            if on_progress and kind != "generation":
                on_progress(self)
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
            ref = self.evaluator.evaluate.remote(self.trainers[0].weights.remote(), self.evals_queued)
            self.in_flight[ref] = ("eval", {"compute": points[self.evals_queued], "compute_at_eval": self.compute_used,
                                            "rollouts_generated": self.rollouts_generated,
                                            "measured_device_s": self.devices * self.elapsed()})
            self.evals_queued += 1

    # ---- workers --------------------------------------------------------------------------
    def _finish_generation(self, facts_ref, worker: int, group) -> None:
        facts = self._get(facts_ref)
        self.gen_tokens += facts["tokens"]
        self.rollouts_generated += facts["rollouts"]
        self.busy["generation"] += facts["busy_s"]
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
        if self.training is not None or self.stopping:
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
        if results[0]["published"]:
            self.published = (self.trainer_step, results[0]["published"][0])
        self.pending_metrics.extend(train_step_metrics(self, combine_rank_stats(results), usage))
        self.pending_metrics.extend((f"measured/{k}", float(v), self.trainer_step) for k, v in self.measured().items())
        self._check_budget()
        self._queue_due_evals()
        self._try_train()

    # ---- evaluation -----------------------------------------------------------------------
    def _finish_eval(self, ref, point: dict) -> None:
        out = self._get(ref)
        self.busy["evaluation"] += out["busy_s"]
        self.last_samples = out["samples"]
        step = out["trainer_step"]
        point = {"compute": point["compute"], "trainer_step": step, "rollouts_generated": point["rollouts_generated"],
                 "samples_trained": step * self.w.grpo.batch_size, **out["metrics"],
                 "compute_at_eval": point["compute_at_eval"], "measured_device_s": point["measured_device_s"]}
        self.eval_history.append(point)
        self.evals_done += 1
        self.pending_metrics.extend((f"eval/{k}", float(v), step) for k, v in point.items())

    # ---- idle fractions and measurements ------------------------------------------------------
    def trainer_idle_fraction(self) -> float:
        clock = self.clock
        return 1.0 - (self.trained_tokens / self.T) / clock if clock > 0 else 0.0

    def worker_idle_fraction(self) -> float:
        clock = self.clock
        return 1.0 - (self.w.pipeline.mu * self.gen_tokens / self.W) / clock if clock > 0 else 0.0

    def measured(self) -> dict:
        """Real device-seconds per role: busy = inside generate / train calls, idle = the rest of the run."""
        elapsed = self.elapsed()
        worker_busy, trainer_busy = self.busy["generation"], self.busy["training"]
        out = {
            "elapsed_s": elapsed,
            "compute_device_s": self.devices * elapsed,
            "worker_busy_s": worker_busy, "worker_idle_s": max(self.W * elapsed - worker_busy, 0.0),
            "trainer_busy_s": trainer_busy, "trainer_idle_s": max(self.T * elapsed - trainer_busy, 0.0),
            "worker_idle_frac": 1.0 - worker_busy / (self.W * elapsed) if elapsed > 0 else 0.0,
            "trainer_idle_frac": 1.0 - trainer_busy / (self.T * elapsed) if elapsed > 0 else 0.0,
        }
        if self.gen_tokens and self.trained_tokens and trainer_busy > 0:
            out["mu"] = (worker_busy / self.gen_tokens) / (trainer_busy / self.trained_tokens)
        return out

    @property
    def wall(self) -> dict:
        return {**self.busy, "strategy": self.final.get("strategy_seconds", 0.0), "total": self.elapsed()}

    # ---- results --------------------------------------------------------------------------
    def _collect_final(self) -> None:
        """What the summary needs from the actors, fetched while they live."""
        self._check_adds(wait=True)
        self.final = self._get(self.host.usage.remote())
        self.final["trainer_weights_sha256"] = self._get([t.weights_sha256.remote() for t in self.trainers])
        self.final["measured"] = self.measured()
        self.final["elapsed"] = self.elapsed()

    def summary(self) -> dict:
        f = self.final
        wall = {**self.busy, "strategy": f["strategy_seconds"], "total": f["elapsed"]}
        return {
            **run_summary(self, f["use_count"], f["staleness_total"], wall, f["strategy_calls"],
                          f["strategy_seconds"]),
            "executor": "ray",
            "measured": f["measured"],
            "trainer_weights_sha256": f["trainer_weights_sha256"],
            "trainers_in_sync": len(set(f["trainer_weights_sha256"])) == 1,
            "ray": {"workers": self.W, "trainers": self.T, **self.placement.describe(),
                    "engine": self.options.engine, "pace": self.options.pace,
                    "data_parallel": f"torch DistributedDataParallel, {self.placement.backend}"},
        }

    def close(self) -> None:
        ray = self.ray
        if getattr(self, "host", None) is not None:
            try:
                ray.get(self.host.close.remote(), timeout=30)
            except Exception:
                pass  # the actor is gone already
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False


def _check_cuda_build() -> None:
    """On a GPU cluster, a CPU build of PyTorch (the CPU tier's setup) fails in every actor: say so once, here."""
    import torch

    if torch.version.cuda is None:
        raise RunError(f"the Ray cluster has GPUs but PyTorch {torch.__version__} is a CPU build: install a CUDA "
                       "build of PyTorch, or pass --ray-gpus-per-actor 0 to run on the CPUs")


def combine_rank_stats(results: list[dict]) -> dict:
    """The T ranks' step statistics as one step's: the loss weighted by each rank's share of the loss,
    token means weighted by completion tokens, the maximum ratio; the gradient norm is the same on all."""
    tokens = max(sum(r["tokens"] for r in results), 1)
    out = {}
    for key in results[0]["stats"]:
        values = [r["stats"][key] for r in results]
        if key == "ratio_max":
            out[key] = max(values)
        elif key == "grad_norm":
            out[key] = values[0]
        elif key == "loss":
            out[key] = sum(r["share"] * v for r, v in zip(results, values))
        else:
            out[key] = sum(r["tokens"] * v for r, v in zip(results, values)) / tokens
    return out

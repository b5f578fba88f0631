"""The Ray executor's actors: plain classes that `ray.remote` wraps when a run starts.

InferenceWorker generates and scores groups with the weights it holds; Trainer is one
data-parallel rank (DDP); StrategyHost holds the strategy and the engine's ledger of it; Evaluator
runs the pipeline's evaluation on the trainers' weights.
"""

from __future__ import annotations

import socket
import time

from benchmark.engine.eval_sets import eval_sets, evaluate_sets
from benchmark.engine.executor import RunError
from benchmark.engine.ledger import PendingGroup, StrategyLedger, StrategySpec, most_pool_rollouts, open_strategy
from benchmark.engine.ray.options import make_engine
from benchmark.engine.stream import doc_id
from benchmark.grading.prompts import PromptFormat
from benchmark.rl import data_parallel
from benchmark.rl.grpo import GRPOTrainer, loss_normaliser
from benchmark.rl.policy import load_start_policy, set_threads, state_hash


def setup_process(device: str = "cpu") -> None:
    set_threads()
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RunError(f"this actor holds a GPU but PyTorch {torch.__version__} sees no CUDA device: install "
                                "a CUDA build of PyTorch on every node, or pass --ray-gpus-per-actor 0 to run on CPUs")


def cpu_state_dict(model) -> dict:
    """The model's weights as CPU tensors (the same tensors when the model is on the CPU already), so any
    actor can load them whatever its device."""
    return {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}


class InferenceWorker:
    def __init__(self, workload, engine: str, device: str = "cpu", gpu_fraction: float | None = None):
        setup_process(device)
        self.w = workload
        model, tokenizer, self.start_info = load_start_policy(workload)
        self.engine = make_engine(engine, model, tokenizer, device, gpu_fraction, workload.model.source)
        self.task = workload.load_task()
        # as the pipeline prompts
        self.prompt = PromptFormat(tokenizer, workload.model.prompt_format, workload.model.chat_template_options)
        self.max_new_tokens = workload.max_new_tokens or self.task.max_new_tokens

    def ready(self) -> dict:
        return self.start_info

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
        group = PendingGroup(doc_id(doc), completions, rewards, self.engine.version)
        facts = {"tokens": group.tokens, "rollouts": len(completions), "version": self.engine.version,
                 "busy_s": time.perf_counter() - start}
        if pace:
            time.sleep(max(0.0, pace * self.w.pipeline.mu * group.tokens - facts["busy_s"]))
        facts["paced_s"] = time.perf_counter() - start
        return facts, group


class Trainer:
    """One data-parallel rank: its own model copy and optimiser, gradients averaged by DDP."""

    def __init__(self, workload, rank: int, world_size: int, device: str = "cpu", backend: str = "gloo"):
        setup_process(device)
        self.w, self.rank, self.world_size, self.device, self.backend = workload, rank, world_size, device, backend
        self.model, tokenizer, self.start_info = load_start_policy(workload)  # in the workload's model.dtype
        self.model.to(device)
        self.pad_id = tokenizer.pad_token_id
        self.steps = 0

    def ready(self) -> dict:
        return self.start_info

    def rendezvous_address(self) -> str:
        """rank 0: where the process group meets (this node, a free port)."""
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join(self, address: str) -> None:
        import torch.distributed as dist

        dist.init_process_group(self.backend, init_method=address, rank=self.rank, world_size=self.world_size)
        # every rank starts from the same start policy; DDP also broadcasts rank 0's weights at construction
        self.kind = self.w.grpo.data_parallel
        self.trainer = GRPOTrainer.from_config(data_parallel.wrap(self.model, self.kind, self.device), self.pad_id,
                                               self.w.grpo)

    def _weights(self, every_rank: bool) -> dict | None:
        """The whole weights on the CPU: gathered by every rank under FSDP (a collective), else rank 0's own."""
        if self.kind == "fsdp":
            return data_parallel.full_state_dict(self.model)
        return cpu_state_dict(self.model) if every_rank or self.rank == 0 else None

    def step(self, part: tuple, publish: bool, min_seconds: float = 0.0) -> dict:
        """Train on this rank's slice; `share` is its part of the batch's loss normaliser. The step
        lasts at least min_seconds (pacing)."""
        import ray

        rollouts, weights, share = part
        start = time.perf_counter()
        stats = self.trainer.step(rollouts, weights, loss_scale=self.world_size * share)
        busy = time.perf_counter() - start
        self.steps += 1
        weights = self._weights(every_rank=False) if publish else None
        published = [ray.put(weights)] if publish and self.rank == 0 else None
        time.sleep(max(0.0, min_seconds - (time.perf_counter() - start)))
        return {"stats": stats, "share": share, "completion_tokens": sum(len(r.completion_ids) for r in rollouts),
                "busy_s": busy, "paced_s": time.perf_counter() - start, "published": published}

    def weights(self) -> tuple[int, dict]:
        """Called on every rank at once (FSDP gathers)."""
        return self.steps, self._weights(every_rank=True)

    def state(self) -> dict | None:
        """Rank 0: the weights and the optimiser's state, whole, on the CPU, and the steps taken (a collective
        under FSDP: call it on every rank); the others answer None."""
        state = data_parallel.training_state(self.trainer.model, self.trainer.optimizer)
        return {**state, "steps": self.steps} if self.rank == 0 else None

    def load_state(self, state: dict) -> None:
        """What `state` returned, on every rank."""
        data_parallel.load_training_state(self.trainer.model, self.trainer.optimizer, state)
        self.steps = state["steps"]

    def weights_sha256(self) -> str:
        """This rank's weights' hash (the whole weights, gathered under FSDP: call it on every rank)."""
        return state_hash(self._weights(every_rank=True))


class StrategyHost:
    """The strategy's actor: the engine's ledger of the strategy, with the strategy itself in this
    process or, isolated, in its own sandboxed one; it cuts each checked batch into the trainers' slices."""

    def __init__(self, workload, seed: int):
        self.w, self.seed = workload, seed
        self.ledger: StrategyLedger | None = None
        self.in_training: list = []

    def open(self, spec: StrategySpec) -> tuple[str, ...]:
        """The strategy opened; the optional hooks it defines."""
        setup_process()
        self.ledger = StrategyLedger(open_strategy(spec, self.seed, self.w.limits), self.seed, self.w.pipeline.trainers,
                                     self.w.limits, spec.track, spec.seed_secret, group_size=self.w.grpo.group_size,
                                     batch_size=self.w.grpo.batch_size)
        return self.ledger.hooks

    def pool_request(self):
        return self.ledger.pool_request(most_pool_rollouts(self.w))

    def add_pool(self, groups: list[PendingGroup], clock: float) -> None:
        self.ledger.add_pool(groups, clock)

    def add(self, group: PendingGroup, clock: float) -> None:
        self.ledger.add(group, clock)

    def sample(self, batch_size: int):
        """(facts, slice for trainer 0, ..., slice for trainer T-1), or Nones when the strategy waits."""
        trainers = self.w.pipeline.trainers
        checked = self.ledger.sample(batch_size)
        if checked is None:
            return (None,) * (1 + trainers)
        batch, weights = checked
        self.in_training = batch
        # each rank's share of the whole batch's loss normaliser
        total = float(loss_normaliser(batch, self.w.grpo.aggregation))
        parts = [(batch[s], None if weights is None else weights[s],
                  float(loss_normaliser(batch[s], self.w.grpo.aggregation)) / total)
                 for s in self.ledger.ctx().trainer_slices(batch_size)]
        return ({"tokens": sum(r.length for r in batch), "samples": len(batch)}, *parts)

    def finish_step(self) -> dict:
        """The batch handed out last has been trained: count its use; its usage metrics."""
        return self.ledger.record_step(self.in_training)

    def usage(self) -> dict:
        return self.ledger.usage()

    def state_dict(self) -> dict:
        return self.ledger.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.ledger.load_state_dict(state)

    def close(self) -> None:
        close = getattr(self.ledger.strategy if self.ledger else None, "close", None)
        if close:
            close()


class Evaluator:
    def __init__(self, workload, engine: str, seed: int, device: str = "cpu", gpu_fraction: float | None = None):
        setup_process(device)
        self.w, self.seed = workload, seed
        model, tokenizer, _ = load_start_policy(workload)
        self.engine = make_engine(engine, model, tokenizer, device, gpu_fraction, workload.model.source)
        self.sets = eval_sets(workload, workload.load_task())
        self.prompt = PromptFormat(tokenizer, workload.model.prompt_format, workload.model.chat_template_options)

    def ready(self) -> None:
        return None

    def evaluate(self, weights: tuple[int, dict], index: int) -> dict:
        step, state_dict = weights
        start = time.perf_counter()
        self.engine.load_weights(state_dict, step)
        metrics, samples = evaluate_sets(self.engine, self.sets, self.w, self.seed, index, self.prompt)
        return {"trainer_step": step, "metrics": metrics, "samples": samples, "busy_s": time.perf_counter() - start}

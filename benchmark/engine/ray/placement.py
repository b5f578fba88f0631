"""Where the Ray executor's actors run: a pure decision from the cluster's resources.

On a cluster without GPUs (the CPU tier) every actor gets an equal share of the CPUs and the
trainers all-reduce with gloo, as before GPUs were supported. On a cluster with GPUs each worker
and each trainer holds `gpus_per_actor` of a GPU (1 by default); the strategy actor stays on
CPUs. The trainers all-reduce with NCCL when each holds at least a whole GPU; with fractions two
trainers may share one GPU, which NCCL refuses, so they stay on gloo (it all-reduces CUDA tensors
too, more slowly).

The evaluator runs an engine like a worker, so it wants a GPU too. When the cluster has a free
slot beyond the W + T actors it takes one; otherwise it shares worker 0's slot, half each
(evaluations are not charged to the budget, so the generations that share a GPU with them run a
little slower rather than the run waiting for the evaluations). Reusing a worker's actor instead
would queue evaluations behind its generations and pause that worker. A vLLM engine is told its
share of the GPU memory (see `engine_gpu_fraction`). The evaluator is started after the other
actors hold their slots, so that Ray places it in the half left free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from benchmark.errors import UserError


class PlacementError(UserError, ValueError):
    """A placement the cluster cannot hold; the message names the fix."""


@dataclass(frozen=True)
class ActorResources:
    """What one actor asks Ray for."""

    num_cpus: float
    num_gpus: float = 0.0


@dataclass(frozen=True)
class Placement:
    worker: ActorResources  # workers 1..W-1 (and worker 0 unless it shares with the evaluator)
    worker0: ActorResources
    trainer: ActorResources
    strategy: ActorResources
    evaluator: ActorResources
    backend: str  # torch.distributed backend of the trainers: "gloo" or "nccl"
    device: str  # where workers and trainers compute: "cpu" or "cuda"

    def describe(self) -> dict:
        return {"device": self.device, "backend": self.backend, "cpus_per_actor": self.trainer.num_cpus,
                "gpus_per_worker": self.worker.num_gpus, "gpus_per_trainer": self.trainer.num_gpus,
                "gpus_worker0": self.worker0.num_gpus, "gpus_evaluator": self.evaluator.num_gpus}


def plan_placement(cluster: Mapping[str, float], workers: int, trainers: int,
                   gpus_per_actor: float | None = None) -> Placement:
    """The actors' resources on a cluster with `cluster` resources (ray.cluster_resources()).

    gpus_per_actor: None = automatic (1 when the cluster has GPUs, else CPUs only); 0 = CPUs only;
    a fraction, e.g. 0.5, puts two actors on each GPU (each actor computes on one device, so at most 1)."""
    gpus = float(cluster.get("GPU", 0))
    # Every actor gets an equal share of the CPUs: W + T + the strategy and evaluator actors.
    cpu = ActorResources(num_cpus=round(min(1.0, float(cluster.get("CPU", 1)) / (workers + trainers + 2)), 4))
    g = (1.0 if gpus > 0 else 0.0) if gpus_per_actor is None else float(gpus_per_actor)
    if not 0 <= g <= 1:
        raise PlacementError(f"--ray-gpus-per-actor must be between 0 and 1 (0: CPUs only; 0.5: two actors per "
                             f"GPU), not {gpus_per_actor:g}")
    if g == 0:
        return Placement(worker=cpu, worker0=cpu, trainer=cpu, strategy=cpu, evaluator=cpu,
                         backend="gloo", device="cpu")
    needed = (workers + trainers) * g
    if gpus == 0:
        raise PlacementError(f"--ray-gpus-per-actor {gpus_per_actor} asks for GPUs but the Ray cluster has none: "
                             "drop the option (or set it to 0) to run on CPUs")
    if needed > gpus + 1e-9:
        raise PlacementError(
            f"the Ray cluster has {gpus:g} GPUs but {workers} workers + {trainers} trainers at {g:g} GPU each "
            f"need {needed:g}: use fewer workers/trainers (--workers, --trainers) or share GPUs with "
            f"--ray-gpus-per-actor {_sharing_hint(g)}")
    on_gpu = ActorResources(num_cpus=cpu.num_cpus, num_gpus=g)
    if gpus - needed >= g - 1e-9:  # a free slot: the evaluator gets its own
        worker0, evaluator = on_gpu, on_gpu
    else:  # the evaluator shares worker 0's slot, half each
        worker0 = evaluator = ActorResources(num_cpus=cpu.num_cpus, num_gpus=g / 2)
    return Placement(worker=on_gpu, worker0=worker0, trainer=on_gpu, strategy=cpu, evaluator=evaluator,
                     backend="nccl" if g >= 1 else "gloo", device="cuda")


def _sharing_hint(g: float) -> str:
    return "0.5" if g >= 1 else f"{g / 2:g}"


def engine_gpu_fraction(num_gpus: float) -> float | None:
    """The share of its GPU an engine may fill (vLLM's memory budget), or None: a whole GPU or none."""
    return num_gpus if 0 < num_gpus < 1 else None

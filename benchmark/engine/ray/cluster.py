"""The Ray executor's actors, started: Ray itself (a local cluster or $RAY_ADDRESS), where each actor goes
(`placement.py`), the strategy actor, the W workers, the T trainers joined in one process group, the evaluator."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from benchmark.engine.executor import RunError
from benchmark.engine.ray.actors import Evaluator, InferenceWorker, StrategyHost, Trainer
from benchmark.engine.ray.options import RayOptions
from benchmark.engine.ray.placement import (
    ActorResources,
    Placement,
    PlacementError,
    engine_gpu_fraction,
    plan_placement,
)

INSTALL_HINT = 'the Ray executor needs the distributed extra: pip install -e ".[distributed]"'


def require_ray():
    """The ray module, or one clear error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise RunError(INSTALL_HINT) from None
    return ray


@dataclass
class Cluster:
    placement: Placement
    host: object = None
    workers: list = field(default_factory=list)
    trainers: list = field(default_factory=list)
    evaluator: object = None
    start_info: dict = field(default_factory=dict)
    started_ray: bool = False  # this run started a local Ray and shuts it down at the end

    @property
    def actors(self) -> list:
        return [a for a in (self.host, *self.workers, *self.trainers, self.evaluator) if a is not None]

    def close(self, ray) -> None:
        for actor in self.actors:
            ray.kill(actor)
        self.host, self.workers, self.trainers, self.evaluator = None, [], [], None
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False


def start_cluster(ray, workload, seed: int, options: RayOptions) -> Cluster:
    """Every actor started and ready, the trainers' process group joined; on any failure, what was started is
    stopped again before the error goes up."""
    started_ray = False
    if not ray.is_initialized():
        address = options.address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=options.num_cpus, include_dashboard=False, log_to_driver=False)
        started_ray = True
    try:
        place = plan_placement(ray.cluster_resources(), workload.pipeline.workers, workload.pipeline.trainers,
                               options.gpus_per_actor)
    except PlacementError as exc:
        if started_ray:
            ray.shutdown()
        raise RunError(str(exc)) from None
    cluster = Cluster(place, started_ray=started_ray)
    try:
        _start_actors(ray, cluster, workload, seed, options)
    except BaseException:
        cluster.close(ray)
        raise
    return cluster


def _start_actors(ray, c: Cluster, workload, seed: int, o: RayOptions) -> None:
    place = c.placement
    if place.device == "cuda":
        check_cuda_build()
    env = {"REPLAYBENCH_THREADS": os.environ.get("REPLAYBENCH_THREADS", "1"), "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}

    def remote(cls, resources: ActorResources):
        return ray.remote(num_cpus=resources.num_cpus, num_gpus=resources.num_gpus, runtime_env={"env_vars": env})(cls)

    def engine_actor(cls, resources: ActorResources, *args):
        return remote(cls, resources).remote(workload, *args, place.device, engine_gpu_fraction(resources.num_gpus))

    c.host = remote(StrategyHost, place.strategy).remote(workload, seed)
    c.workers = [engine_actor(InferenceWorker, place.worker0 if i == 0 else place.worker, o.engine)
                 for i in range(workload.pipeline.workers)]
    c.trainers = [remote(Trainer, place.trainer).remote(workload, rank, workload.pipeline.trainers, place.device,
                                                        place.backend)
                  for rank in range(workload.pipeline.trainers)]
    infos = ray.get([a.ready.remote() for a in [*c.workers, *c.trainers]])
    if len({info["weights_sha256"] for info in infos}) != 1:
        raise RunError("the actors loaded different start weights: every node needs the same checkpoint")
    c.start_info = infos[0]
    # Started once the others hold their GPUs, so that a shared evaluator lands in the share left for it.
    c.evaluator = engine_actor(Evaluator, place.evaluator, o.engine, seed)
    address = ray.get(c.trainers[0].rendezvous_address.remote())
    ray.get([t.join.remote(address) for t in c.trainers])
    ray.get(c.evaluator.ready.remote())


def check_cuda_build() -> None:
    """On a GPU cluster, a CPU build of PyTorch (the CPU tier's setup) fails in every actor: say so once, here."""
    import torch

    if torch.version.cuda is None:
        raise RunError(f"the Ray cluster has GPUs but PyTorch {torch.__version__} is a CPU build: install a "
                       "CUDA build of PyTorch, or pass --ray-gpus-per-actor 0 to run on the CPUs")

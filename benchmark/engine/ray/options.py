"""How a Ray run places its actors and which generation engine its workers use."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

from benchmark.engine.executor import RunError

ENGINE_ALIASES = {"vllm": "benchmark.rl.vllm_engine:vllm_engine"}


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


def resolve_engine(name: str) -> str:
    """What an engine name stands for: "hf" (transformers) or a module:factory ("vllm" is short for
    the vLLM engine's factory); a clear error for anything else."""
    name = ENGINE_ALIASES.get(name, name)
    module, colon, factory = name.partition(":")
    if name != "hf" and not (colon and module and factory.isidentifier()):
        raise RunError(f"unknown --ray-engine {name!r}: use hf, vllm or module:factory "
                            "(e.g. benchmark.rl.vllm_engine:vllm_engine)")
    return name


def make_engine(name: str, model, tokenizer, device: str = "cpu", gpu_fraction: float | None = None,
                source: str | None = None):
    """The engine `name` (see resolve_engine) on this actor's device; gpu_fraction: the share of its GPU
    the actor holds when it holds only part of one; source: the workload's model.source, which picks
    the transformers engine ("hf") as the pipeline does."""
    name = resolve_engine(name)
    if name == "hf":
        from benchmark.rl.sampler import transformers_engine

        return transformers_engine(model.to(device), tokenizer, source)
    module, _, factory_name = name.partition(":")
    factory = getattr(importlib.import_module(module), factory_name)
    if gpu_fraction is not None and "gpu_fraction" in inspect.signature(factory).parameters:
        return factory(model, tokenizer, gpu_fraction=gpu_fraction)
    return factory(model, tokenizer)

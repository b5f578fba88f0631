"""How the T trainers share the model (the workload's `grpo.data_parallel`).

- "ddp": DistributedDataParallel. Every rank holds the whole model, its gradients and its optimiser state; the
  gradients are averaged in backward.
- "fsdp": PyTorch's own FSDP (`fully_shard`, FSDP2): each decoder layer, then the whole model, is sharded over
  the ranks, so each holds 1/T of the weights, gradients and optimiser state, gathering a layer's weights only
  while it computes. The same update as DDP up to float rounding (tests/test_data_parallel.py), for models whose
  training state would not fit on one device.
Both need the process group to exist (torch.distributed.init_process_group).
"""

from __future__ import annotations

import copy

import torch


def wrap(model: torch.nn.Module, kind: str, device: str = "cpu") -> torch.nn.Module:
    """The model as the trainers train it; FSDP shards it in place and returns the same module."""
    if kind == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in decoder_layers(model):
            fully_shard(layer)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    if device == "cuda":
        return DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    return DistributedDataParallel(model)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """A transformers causal LM's decoder layers (model.model.layers), the units FSDP gathers one at a time."""
    inner = getattr(model, "model", model)
    return list(getattr(inner, "layers", []))


def is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A sharded tensor gathered whole (a collective: every rank must call it), any other as it is."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole weights as CPU tensors, whatever the wrapper; under FSDP a collective: call it on every rank."""
    return {name: full_tensor(t).detach().cpu() for name, t in model.state_dict().items()}


def training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """{"model", "optimizer"}: the whole weights and optimiser state on the CPU, keyed by parameter name whatever
    the wrapper (DDP, FSDP or none), so that a checkpoint loads under any of them. Under FSDP a collective: call
    it on every rank; rank 0 gets the state, the others may get it empty."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer,
                                                  options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    state = {"model": model_state, "optimizer": optimizer_state}
    if all(p.device.type == "cpu" for p in model.parameters()):  # else the offload copied them already
        state = copy.deepcopy(state)  # not the live tensors, which the next step changes in place
    return state


def load_training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """What `training_state` returned (rank 0's), loaded on every rank: each takes its own shards under FSDP."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"],
                   options=StateDictOptions(full_state_dict=True))

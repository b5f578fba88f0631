"""The trainers' two ways of sharing the model, DDP and FSDP (fully_shard), give the update of one trainer on the
whole batch, up to float rounding: two ranks on CPU with gloo, each training its half of the batch as a Ray
trainer does (its loss scaled by its share of the batch's normaliser)."""

import os
import random

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmark.rl import data_parallel
from benchmark.rl.grpo import GRPOTrainer, loss_normaliser
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model
from benchmark.rollout import Rollout

STEPS, WORLD = 3, 2


def model_and_pad():
    tokenizer = build_char_tokenizer("0123456789+=")
    # two decoder layers and tied embeddings: what FSDP shards layer by layer, and a weight two modules share
    return build_tiny_model(tokenizer, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, seed=0), \
        tokenizer.pad_token_id


def adam_trainer(model, pad, **options) -> GRPOTrainer:
    """The trainer at lr 1e-2 with Adam's eps at 1e-4: an element whose gradient is near zero (1e-9) would otherwise
    step by about lr whatever its sign, so the last bits of a summation, which differ between CPUs, could move it
    by a whole step; with this eps such an element barely moves, and every other one steps as Adam's would."""
    trainer = GRPOTrainer(model, pad, lr=1e-2, **options)
    for group in trainer.optimizer.param_groups:
        group["eps"] = 1e-4
    return trainer


def batches() -> list[list[Rollout]]:
    rng = random.Random(0)
    out = []
    for _ in range(STEPS):
        batch = []
        for i in range(8):
            prompt = tuple(rng.randrange(4, 16) for _ in range(rng.randrange(3, 6)))
            completion = tuple(rng.randrange(4, 16) for _ in range(rng.randrange(2, 5)))
            batch.append(Rollout(i, i // 4, f"p{i // 4}", prompt, completion, (0.0,) * len(completion),
                                 float(i % 2), bool(i % 2), rng.uniform(-1, 1), 0, 0, 0.0,
                                 current_policy_behaviour=True))  # ratio 1: every token gives a gradient
        out.append(batch)
    return out


def train(trainer, rank: int, world: int, steps: slice = slice(None)) -> None:
    for batch in batches()[steps]:
        total = float(loss_normaliser(batch, "token_mean"))
        part = batch[rank::world]
        trainer.step(part, loss_scale=world * float(loss_normaliser(part, "token_mean")) / total)


def rank_main(rank: int, kind: str, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    model, pad = model_and_pad()
    wrapped = data_parallel.wrap(model, kind)
    assert data_parallel.is_sharded(model) == (kind == "fsdp")
    trainer = adam_trainer(wrapped, pad)
    train(trainer, rank, WORLD, slice(0, STEPS - 1))
    saved = data_parallel.training_state(wrapped, trainer.optimizer)  # a checkpoint before the last step
    saved = [saved] if rank == 0 else [None]
    dist.broadcast_object_list(saved)  # as a resumed run hands rank 0's checkpoint to every rank
    train(trainer, rank, WORLD, slice(STEPS - 1, None))
    weights = {k: v.clone() for k, v in data_parallel.full_state_dict(model).items()}  # a collective under FSDP
    # back to the checkpoint, the last step again: the same weights (the optimiser's moments came back too)
    data_parallel.load_training_state(wrapped, trainer.optimizer, saved[0])
    train(trainer, rank, WORLD, slice(STEPS - 1, None))
    again = data_parallel.full_state_dict(model)
    if rank == 0:
        torch.save({"weights": weights, "again": again}, out)
    dist.destroy_process_group()
    # Python's teardown of the DDP reducer can deadlock with gloo's worker thread, both waiting on the other and
    # the GIL (seen in CI: ~ProcessGroupGloo joining a thread that waits for the GIL): nothing is left to do
    os._exit(0)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.e2e
def test_ddp_and_fsdp_give_the_single_trainer_update_and_resume_from_their_checkpoint(tmp_path):
    model, pad = model_and_pad()
    single = adam_trainer(model, pad, share_prompts=False)
    for batch in batches():
        single.step(batch)
    expected = {k: v.detach() for k, v in model.state_dict().items()}
    for kind in ("ddp", "fsdp"):
        out = tmp_path / f"{kind}.pt"
        mp.spawn(rank_main, args=(kind, free_port(), str(out)), nprocs=WORLD)
        got, again = torch.load(out).values()
        assert all(torch.equal(again[k], v) for k, v in got.items()), kind  # the checkpoint round trip
        assert got.keys() == expected.keys()
        for name, tensor in expected.items():
            assert torch.allclose(got[name], tensor, atol=1e-5, rtol=1e-4), (kind, name)
        assert any(not torch.equal(v, model_and_pad()[0].state_dict()[k]) for k, v in got.items())  # it trained

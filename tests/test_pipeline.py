from pathlib import Path

import pytest
from conftest import small_workload
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.engine.pipeline import Pipeline
from benchmark.strategy import build_strategy

BASELINES = Path(__file__).resolve().parent.parent / "baselines"


def make_pipeline(checkpoint, task, strategy, params, seed=0, **overrides):
    w = small_workload(checkpoint, **overrides)
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    tok = AutoTokenizer.from_pretrained(checkpoint, padding_side="left")
    p = Pipeline(w, task, seed, policy=(model, tok, {}))
    p.attach(build_strategy(BASELINES / f"{strategy}.py", params))
    p.start()
    return p


def test_replay_ratio_matches_mu_T_over_W_and_compute_is_devices_times_time(tiny_checkpoint, arith_task):
    # A buffer that never starves the trainers: steady state replays mu*T/W times per rollout.
    p = make_pipeline(tiny_checkpoint, arith_task, "fifo_uniform", {"buffer_size": 64}, budget=400_000,
                      **{"pipeline.workers": 5, "pipeline.trainers": 3, "eval.every": 400_000,
                         "eval.num_problems": 10, "eval.pass_k_problems": 0})
    p.run()
    s = p.summary()
    expected = 5.28 * 3 / 5
    assert s["trainer_steps"] > 150
    assert s["replay_ratio"] == pytest.approx(expected, rel=0.05)
    assert s["compute_used"] == pytest.approx(8 * s["virtual_time"])
    assert s["compute_used"] == pytest.approx(400_000)
    assert s["trainer_idle_fraction"] < 0.05


def test_on_policy_uses_every_trained_rollout_once(tiny_checkpoint, arith_task):
    p = make_pipeline(tiny_checkpoint, arith_task, "on_policy", {"buffer_size": 32})
    p.run()
    s = p.summary()
    assert s["trainer_steps"] > 5
    assert s["max_uses_of_a_rollout"] == 1
    assert s["replay_ratio"] <= 1.0
    assert len(s["eval_curve"]) == 4  # compute 0, 20k, 40k, 60k
    assert [e["compute"] for e in s["eval_curve"]] == [0, 20_000, 40_000, 60_000]


def test_same_seed_same_run_and_other_seed_differs(tiny_checkpoint, arith_task):
    runs = []
    for seed in (0, 0, 1):
        p = make_pipeline(tiny_checkpoint, arith_task, "fifo_uniform", {"buffer_size": 32}, seed=seed)
        checkpoints = p.run()
        runs.append((p.eval_history, [m for c in checkpoints for m in c.metrics if not m[0].startswith("wall/")]))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_checkpoint_round_trip_continues_identically(tiny_checkpoint, arith_task, tmp_path):
    straight = make_pipeline(tiny_checkpoint, arith_task, "fifo_uniform", {"buffer_size": 32})
    straight.run()

    first = make_pipeline(tiny_checkpoint, arith_task, "fifo_uniform", {"buffer_size": 32})
    for checkpoint in first.checkpoints():
        if checkpoint.index == 2:
            first.save(tmp_path / "state.pt")
            break
    resumed = make_pipeline(tiny_checkpoint, arith_task, "fifo_uniform", {"buffer_size": 32})
    resumed.load(tmp_path / "state.pt")
    resumed.run()
    assert resumed.eval_history == straight.eval_history
    assert resumed.trainer_step == straight.trainer_step


@pytest.mark.parametrize("name", sorted(p.stem for p in BASELINES.glob("*.py")))
def test_every_baseline_trains_in_the_pipeline(tiny_checkpoint, arith_task, name):
    params = {"buffer_size": 32, **({"pool_prompts": 10, "pool_samples": 4} if name == "rlep" else {})}
    p = make_pipeline(tiny_checkpoint, arith_task, name, params, **{"pipeline.workers": 5, "pipeline.trainers": 3})
    p.run()
    s = p.summary()
    assert s["trainer_steps"] > 3, name
    assert s["compute_used"] == pytest.approx(60_000)


def test_pool_phase_is_charged_and_precedes_the_workers(tiny_checkpoint, arith_task):
    p = make_pipeline(tiny_checkpoint, arith_task, "rlep", {"pool_prompts": 20, "pool_samples": 4},
                      **{"pipeline.workers": 6, "pipeline.trainers": 2})
    pool_event = p.events[0]
    assert len(p.events) == 1 and pool_event.kind == 2  # only the pool is in flight at first
    pool_rollouts = sum(len(g.completions) for g in pool_event.payload)
    assert pool_rollouts == 80
    p.run()
    s = p.summary()
    assert s["rollouts_generated"] > pool_rollouts and s["trainer_steps"] > 0
    assert s["compute_used"] == pytest.approx(60_000)

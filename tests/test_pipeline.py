from pathlib import Path

import pytest
import torch
from conftest import small_workload
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.engine.pipeline import Pipeline
from benchmark.strategy import build_strategy

BASELINES = Path(__file__).resolve().parent.parent / "baselines"


def make_pipeline(checkpoint, task, strategy, params, seed=0, model=None, start=True, track="buffer", **overrides):
    """strategy: a baseline's name (on its own track) or a strategy object; model: the trainers' model (default:
    the checkpoint's)."""
    w = small_workload(checkpoint, **overrides)
    model = model or AutoModelForCausalLM.from_pretrained(checkpoint)
    tok = AutoTokenizer.from_pretrained(checkpoint, padding_side="left")
    if isinstance(strategy, str):
        track = track_of(strategy)
        strategy = build_strategy(BASELINES / f"{strategy}.py", params)
    p = Pipeline(w, task, seed, policy=(model, tok, {}))
    p.attach(strategy, track)
    if start:
        p.start()
    return p


def logged(checkpoints) -> list:
    """The metrics logged at these checkpoints, wall-clock timings aside."""
    return [m for c in checkpoints for m in c.metrics if not m[0].startswith("wall/")]


def track_of(baseline: str) -> str:
    from benchmark.submission import load_baselines

    entry = load_baselines().entries.get(baseline)  # on_policy_repeat: the regime diagnostic's arm, not an entry
    return entry.track if entry else "buffer"


def recording(name, params):
    """The baseline `name`, keeping what it is handed (.seen_pool: the pool's rollouts, .seen_groups) and the
    batches it returns (.returned)."""
    from benchmark.strategy import load_strategy_class

    cls = load_strategy_class(BASELINES / f"{name}.py")

    class Recording(cls):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seen_pool, self.seen_groups, self.returned = [], [], []

        def add_pool(self, rollouts, ctx):
            self.seen_pool.extend(rollouts)
            super().add_pool(rollouts, ctx)

        def add(self, rollouts, ctx):
            self.seen_groups.append(list(rollouts))
            super().add(rollouts, ctx)

        def sample(self, batch_size, ctx):
            batch = super().sample(batch_size, ctx)
            if batch is not None:
                self.returned.append(list(getattr(batch, "rollouts", batch)))
            return batch

    return Recording(**params)


def tokens(rollouts):
    return sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)


@pytest.mark.slow
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


@pytest.mark.parametrize("strategy, params, workers", [
    ("on_policy", {"buffer_size": 32}, 2),  # trainers wait for data
    ("rlep", {"pool_prompts": 12, "pool_samples": 4, "trained_for": 0}, 6),  # workers wait for the pool
    ("fifo_uniform", {"buffer_size": 32}, 5),  # trainers never wait once the buffer holds a batch
])
def test_busy_and_idle_time_follow_the_tokens_generated_and_trained(tiny_checkpoint, arith_task, strategy, params,
                                                                    workers):
    trainers = 8 - workers
    recorder = recording(strategy, params)
    p = make_pipeline(tiny_checkpoint, arith_task, recorder, None, track=track_of(strategy),
                      **{"pipeline.workers": workers, "pipeline.trainers": trainers})
    p.run()
    s = p.summary()
    mu, clock, groups = small_workload(tiny_checkpoint).pipeline.mu, s["virtual_time"], recorder.seen_groups
    assert s["compute_used"] == pytest.approx(60_000) and clock == pytest.approx(60_000 / 8)
    assert s["rollouts_generated"] == len(recorder.seen_pool) + sum(map(len, groups))

    # A generation lasts mu x its tokens (prompt + completion) on one worker, which then starts the next one:
    # each generation starts when the workers start or when an earlier one ends.
    start = mu * tokens(recorder.seen_pool) / 8 if recorder.seen_pool else 0.0
    ends = [group[0].created_time for group in groups]
    starts = [end - mu * tokens(group) for end, group in zip(ends, groups)]
    assert sum(x == pytest.approx(start) for x in starts) == workers
    assert all(x == pytest.approx(start) or any(x == pytest.approx(e) for e in ends[:i])
               for i, x in enumerate(starts))
    worker_busy = (1 - s["worker_idle_fraction"]) * workers * clock
    assert worker_busy == pytest.approx(workers * (clock - start))  # busy from their start to the end
    finished = mu * sum(map(tokens, groups))
    in_flight = workers * max(mu * tokens(g) for g in groups)
    assert finished <= worker_busy + 1e-6 and worker_busy < finished + in_flight

    # A trainer step lasts its batch's tokens / T; the last one may still be in flight at the end.
    batches = recorder.returned
    assert len(batches) - s["trainer_steps"] in (0, 1)
    assert s["samples_trained"] == sum(map(len, batches[:s["trainer_steps"]]))
    trainer_busy = (1 - s["trainer_idle_fraction"]) * clock
    done = sum(map(tokens, batches[:s["trainer_steps"]])) / trainers
    if len(batches) == s["trainer_steps"]:
        assert trainer_busy == pytest.approx(done)
    else:
        assert done <= trainer_busy + 1e-6 and trainer_busy <= done + tokens(batches[-1]) / trainers + 1e-6
    assert s["trainer_steps"] > 3
    if strategy == "fifo_uniform":  # busy from the 4th group (a batch of 16) on; the step in flight is cut at the end
        assert len(batches) == s["trainer_steps"] + 1
        assert trainer_busy == pytest.approx(clock - ends[3])


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
        runs.append((p.eval_history, logged(p.run())))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


@pytest.mark.parametrize("strategy, params", [
    ("fifo_uniform", {"buffer_size": 32}),
    ("prioritized", {"buffer_size": 32}),  # importance weights from advantages
    ("rlep", {"pool_prompts": 10, "pool_samples": 4}),  # a pool and regrouped advantages
])
def test_checkpoint_round_trip_continues_identically(tiny_checkpoint, coin_task, tmp_path, strategy, params):
    # coin_task: mixed rewards, so that every step moves the weights and the optimiser's moments.
    start_weights = AutoModelForCausalLM.from_pretrained(tiny_checkpoint).state_dict()
    straight_model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    straight = make_pipeline(tiny_checkpoint, coin_task, strategy, params, model=straight_model)
    straight_metrics = logged(straight.run())

    first = make_pipeline(tiny_checkpoint, coin_task, strategy, params)
    before_kill = []
    for checkpoint in first.checkpoints():
        before_kill.append(checkpoint)
        if checkpoint.index == 2:
            first.save(tmp_path / "state.pt")
            break
    resumed_model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    resumed = make_pipeline(tiny_checkpoint, coin_task, strategy, params, model=resumed_model, start=False)
    resumed.load(tmp_path / "state.pt")
    assert resumed.last_checkpoint.index == 2 and logged([resumed.last_checkpoint]) == logged(before_kill[-1:])
    resumed_metrics = logged(before_kill) + logged(resumed.run())

    assert any(not torch.equal(v, start_weights[k]) for k, v in straight_model.state_dict().items())
    assert any(m[0] == "train/loss" and m[1] != 0 for m in straight_metrics)
    assert resumed.eval_history == straight.eval_history
    assert resumed.trainer_step == straight.trainer_step
    assert resumed_metrics == straight_metrics  # train/loss, grad norms, ... step by step
    resumed_weights = resumed_model.state_dict()
    for name, value in straight_model.state_dict().items():
        assert torch.equal(resumed_weights[name], value), name


@pytest.mark.parametrize("name", sorted(p.stem for p in BASELINES.glob("*.py")))
def test_every_baseline_trains_in_the_pipeline(tiny_checkpoint, arith_task, name):
    from benchmark.strategy import declared_params

    small_buffer = {"buffer_size": 32} if "buffer_size" in declared_params(BASELINES / f"{name}.py") else {}
    params = {**small_buffer, **({"pool_prompts": 10, "pool_samples": 4} if name == "rlep" else {})}
    p = make_pipeline(tiny_checkpoint, arith_task, name, params, **{"pipeline.workers": 5, "pipeline.trainers": 3})
    p.run()
    s = p.summary()
    assert s["trainer_steps"] > 3, name
    assert s["compute_used"] == pytest.approx(60_000)


def test_pool_phase_is_charged_and_precedes_the_workers(tiny_checkpoint, arith_task):
    strategy = recording("rlep", {"pool_prompts": 20, "pool_samples": 4, "trained_for": 0})
    p = make_pipeline(tiny_checkpoint, arith_task, strategy, None, track="open",
                      **{"pipeline.workers": 6, "pipeline.trainers": 2})
    p.run()
    mu = small_workload(tiny_checkpoint).pipeline.mu
    assert len(strategy.seen_pool) == 80
    # the pool is generated on all 8 devices, and the workers start only when it is done
    pool_end = mu * tokens(strategy.seen_pool) / 8
    assert pool_end > 100
    assert [r.created_time for r in strategy.seen_pool] == pytest.approx([pool_end] * 80)
    assert all(r.policy_version == 0 for r in strategy.seen_pool)
    starts = sorted(group[0].created_time - mu * tokens(group) for group in strategy.seen_groups)
    assert starts[:6] == pytest.approx([pool_end] * 6)  # each worker's first generation
    assert starts[6] > pool_end + 1
    s = p.summary()
    assert s["rollouts_generated"] == 80 + sum(map(len, strategy.seen_groups))
    assert s["trainer_steps"] > 0
    assert s["compute_used"] == pytest.approx(60_000)


def test_rlep_trains_its_pool_policy_first_charges_it_and_still_replays_at_the_end(tiny_checkpoint, coin_task):
    from benchmark.rl.grpo import group_advantages

    strategy = recording("rlep", {"pool_prompts": 100, "pool_samples": 2, "trained_for": 0.25})
    p = make_pipeline(tiny_checkpoint, coin_task, strategy, None, track="open",
                      **{"pipeline.workers": 6, "pipeline.trainers": 2})
    trained = []
    step = p.trainer.step
    p.trainer.step = lambda batch, weights, **options: (trained.append(batch), step(batch, weights, **options))[1]
    logged_metrics = {name: value for name, value, _ in logged(p.run())}
    pool = p.summary()["pool"]
    assert logged_metrics["pool/compute"] == pytest.approx(pool["compute"])  # in MLflow too
    # phase 1: the reference trained for a quarter of the budget, then sampled the pool; all of it is charged
    assert pool["training_compute"] == pytest.approx(15_000) and pool["training_steps"] > 3
    assert pool["rollouts"] == len(strategy.seen_pool) == 200 and pool["correct"] > 50
    assert pool["compute"] == pytest.approx(pool["training_compute"] + pool["generation_compute"])
    assert pool["generation_compute"] > 5_000
    assert all(r.policy_version == -pool["training_steps"] for r in strategy.seen_pool)
    first_start = min(g[0].created_time - 5.28 * tokens(g) for g in strategy.seen_groups)
    assert first_start == pytest.approx(pool["compute"] / 8)  # the workers start when phase 1 and the pool are done
    # phase 2 starts again from the starting policy: its first groups are the reference's own first groups
    assert strategy.seen_groups[0][0].policy_version == 0
    # the last tenth of the steps still replays, over mixed groups, with old log-probs recomputed
    pool_ids = {r.rollout_id for r in strategy.seen_pool}
    last = trained[-max(1, len(trained) // 10):]
    replayed = [r for batch in last for r in batch if r.rollout_id in pool_ids]
    assert replayed and all(r.current_policy_behaviour for r in replayed)
    assert not any(r.current_policy_behaviour for batch in last for r in batch if r.rollout_id not in pool_ids)
    batch = next(b for b in last if any(r.rollout_id in pool_ids for r in b))
    first = next(i for i, r in enumerate(batch) if r.rollout_id in pool_ids)
    mixed = [r for r in batch if r.prompt_id == batch[first].prompt_id]
    assert len(mixed) > 4  # G = 4 fresh + the replays
    assert [r.advantage for r in mixed] == pytest.approx(group_advantages([r.reward for r in mixed]))


@pytest.mark.parametrize("strategy, params", [
    ("fifo_uniform", {"buffer_size": 32}),
    ("rlep", {"pool_prompts": 10, "pool_samples": 4}),  # the pool, generated in one call
])
def test_generating_ahead_in_one_call_makes_the_run_of_generating_each_group_at_its_start(
        tiny_checkpoint, coin_task, monkeypatch, strategy, params):
    from benchmark.rl.generation import HFEngine

    def each_at_its_start(self, first, also=0):  # what the pipeline did before batching
        [self.ahead[first]] = self.generator.stream_groups([first])

    def run(pipeline_patch=None):
        with monkeypatch.context() as patched:
            if pipeline_patch:
                patched.setattr(Pipeline, "_generate_ahead", pipeline_patch)
                patched.setattr("benchmark.engine.groups.MAX_ROWS_PER_CALL", 1)
            p = make_pipeline(tiny_checkpoint, coin_task, strategy, params, start=False,
                              **{"pipeline.workers": 5, "pipeline.trainers": 3})
            # HFEngine samples each prompt of a call on its own: a group's tokens do not depend on its company
            p.generator.engine = HFEngine(p.engine.model, p.engine.tokenizer, version=0)
            p.start()
            return p.eval_history, logged(p.run()), p.work.engine_rows / p.work.engine_calls

    batched, alone = run(), run(each_at_its_start)
    assert batched[:2] == alone[:2]
    assert alone[2] == 4  # rows per call: one group of G
    assert batched[2] > 1.5 * alone[2]

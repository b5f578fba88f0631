"""The strategy API's optional hooks: admission control (`admit`), training feedback (`on_update`) and prompt
scheduling (`next_prompt`, the prompt track). Each makes the same run in process and isolated in its box, each
bad reply ends the run with a verdict, and what a hook costs is charged; the baselines built on them do what
their papers say."""

from pathlib import Path

import pytest
from conftest import small_workload
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmark.engine.ledger import strategy_seed
from benchmark.engine.pipeline import TRAIN_DONE, Pipeline
from benchmark.engine.sandbox import IsolatedStrategy
from benchmark.strategy import StrategyFailure, build_strategy

REPO = Path(__file__).resolve().parent.parent
HOOKS = Path(__file__).resolve().parent / "hooks"
BASELINES = REPO / "baselines"
SPLIT = {"pipeline.workers": 5, "pipeline.trainers": 3}


def pipeline(checkpoint, task, path: Path, params: dict, track: str = "buffer", isolated: bool = False,
             **overrides) -> Pipeline:
    w = small_workload(checkpoint, **{**SPLIT, **overrides})
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    tok = AutoTokenizer.from_pretrained(checkpoint, padding_side="left")
    strategy = (IsolatedStrategy(path, params, rng_seed=strategy_seed(0)) if isolated
                else build_strategy(path, params))
    p = Pipeline(w, task, seed=0, policy=(model, tok, {}))
    p.attach(strategy, track)
    return p


def finished(p: Pipeline) -> tuple:
    """The run to its end: what it measured (no wall-clock values) and what the strategy saw."""
    p.start()
    try:
        metrics = [m for c in p.run() for m in c.metrics if not m[0].startswith("wall/")]
    finally:
        p.close()
    return p.eval_history, p.trainer_step, p.strategy_usage()["use_count"], metrics, p.replays_started


@pytest.mark.slow
@pytest.mark.parametrize("path, params, track", [
    (BASELINES / "staleness_bounded.py", {"max_staleness": 1}, "buffer"),  # admit
    (BASELINES / "prompt_replay.py", {"buffer_size": 32, "cooldown": 1}, "prompt"),  # next_prompt
    (HOOKS / "loss_prioritized.py", {"after": True}, "buffer"),  # on_update, with the charged forward pass
])
def test_each_hook_makes_the_same_run_in_process_and_isolated(tiny_checkpoint, coin_task, path, params, track):
    runs = [finished(pipeline(tiny_checkpoint, coin_task, path, params, track, isolated)) for isolated in (False, True)]
    assert runs[0] == runs[1]


@pytest.mark.slow
@pytest.mark.parametrize("how, track, verdict", [
    ("admit_says_yes", "buffer", "garbage: admit() must return True or False, got str"),
    ("admits_nothing_once_it_has_data", "buffer", "stalled: admit() holds every worker back while sample() waits"),
    ("names_an_unknown_prompt", "prompt", "fabricated: next_prompt() named prompt 'no-such-prompt', which this run "
                                          "never generated"),
    ("names_a_number", "prompt", "garbage: next_prompt() must return a prompt_id (a string) or None, got int"),
    ("replays_off_its_track", "buffer", "forbidden: next_prompt() chose a prompt: scheduling prompts is the prompt "
                                        "track's, and this entry is on the buffer track"),
    ("update_raises", "buffer", "raised: on_update() raised ValueError: boom"),
])
def test_a_bad_reply_to_a_hook_is_the_same_verdict_in_process_and_isolated(tiny_checkpoint, coin_task, how, track,
                                                                            verdict):
    for isolated in (False, True):
        p = pipeline(tiny_checkpoint, coin_task, HOOKS / "misbehaves_in_hooks.py", {"how": how}, track, isolated)
        with pytest.raises(StrategyFailure) as failure:
            finished(p)
        assert str(failure.value).startswith(verdict), (isolated, str(failure.value))


@pytest.mark.parametrize("after", [False, True])
def test_the_feedback_forward_pass_is_charged_a_third_of_the_step(tiny_checkpoint, coin_task, after):
    """Each trainer step lasts training_time(tokens), and a third more when the strategy asks for the log-probs
    after the update: the T trainers' compute for the step grows by one forward pass over the batch."""
    p = pipeline(tiny_checkpoint, coin_task, HOOKS / "loss_prioritized.py", {"after": after})
    durations = []
    push = p._push

    def recording(time_, kind, worker=-1, payload=None):
        if kind == TRAIN_DONE:
            batch, _ = payload
            durations.append((time_ - p.time, sum(r.length for r in batch)))
        push(time_, kind, worker, payload)

    p._push = recording
    finished(p)
    assert len(durations) > 3
    for duration, tokens in durations:
        assert duration == pytest.approx(p.costs.training_time(tokens) * (4 / 3 if after else 1), rel=1e-12)
    moved = p.ledger.strategy.moved
    assert (len(moved) == p.trainer_step and any(m != 0 for m in moved)) if after else moved == []


def test_training_feedback_reports_the_batch_just_trained(tiny_checkpoint, coin_task):
    p = pipeline(tiny_checkpoint, coin_task, HOOKS / "loss_prioritized.py", {"after": False})
    seen = []
    on_update = p.ledger.strategy.on_update
    p.ledger.strategy.on_update = lambda feedback, ctx: (seen.append((feedback, ctx.policy_version)),
                                                         on_update(feedback, ctx))
    record_step = p.ledger.record_step
    batches = []
    p.ledger.record_step = lambda batch: (batches.append(batch), record_step(batch))[1]
    finished(p)
    assert len(seen) == len(batches) == p.trainer_step
    for step, ((feedback, version), batch) in enumerate(zip(seen, batches)):
        assert feedback.step == step and version == step + 1 and feedback.logprobs_after is None
        assert feedback.rollout_ids == [r.rollout_id for r in batch]
        assert [len(lp) for lp in feedback.logprobs] == [len(r.completion_ids) for r in batch]
        assert all(0 <= c <= 1 for c in feedback.clip_fraction)


@pytest.mark.slow
def test_the_staleness_bounded_pipeline_never_trains_past_its_bound_and_never_discards(tiny_checkpoint, coin_task):
    held = []
    p = pipeline(tiny_checkpoint, coin_task, BASELINES / "staleness_bounded.py", {"max_staleness": 1},
                 **{"pipeline.workers": 6, "pipeline.trainers": 2})
    admit = p.ledger.admit
    p.ledger.admit = lambda: (held.append(not (answer := admit())), answer)[1]
    finished(p)
    usage, strategy = p.strategy_usage(), p.ledger.strategy
    assert any(held) and p.trainer_step > 5  # admission control held workers back, and training went on
    assert max(usage["offpolicy_counts"]) <= 1  # never older than its bound
    # never discards: every rollout handed over was trained exactly once, but those still queued or in the step
    # in flight when the budget ran out
    in_flight = [r for e in p.events if e.kind == TRAIN_DONE for r in e.payload[0]]
    assert set(usage["use_count"].values()) == {1}
    assert len(usage["use_count"]) + len(strategy.queue) + len(in_flight) == p.ledger.next_rollout_id


@pytest.mark.slow
def test_prompt_replay_replays_only_medium_prompts_after_their_cooldown_at_most_max_reuse_times(tiny_checkpoint,
                                                                                                coin_task):
    params = {"buffer_size": 32, "cooldown": 1, "max_reuse": 1, "replay_share": 0.5}
    p = pipeline(tiny_checkpoint, coin_task, BASELINES / "prompt_replay.py", params, "prompt")
    strategy, chosen = p.ledger.strategy, []
    next_prompt = strategy.next_prompt

    def checked(ctx):
        before = dict(strategy.pass_rate), dict(strategy.last_started)
        prompt = next_prompt(ctx)
        if prompt is not None:
            rate, started = before[0][prompt], before[1][prompt]
            assert 0.25 <= rate <= 0.75 and ctx.policy_version - started >= 1
            chosen.append(prompt)
        return prompt

    strategy.next_prompt = checked
    finished(p)
    assert chosen and p.replays_started == len(chosen) == len(set(chosen))  # replayed, each at most once
    assert len(chosen) <= 0.5 * (p.generations_started + p.replays_started)


@pytest.mark.slow
def test_fresh_anchored_trains_every_fresh_rollout_first_and_nothing_past_tau_max(tiny_checkpoint, coin_task):
    p = pipeline(tiny_checkpoint, coin_task, BASELINES / "fresh_anchored.py", {"buffer_size": 64, "tau_max": 3})
    strategy, sample = p.ledger.strategy, p.ledger.strategy.sample
    checked = []

    def fresh_first(batch_size, ctx):
        batch = sample(batch_size, ctx)
        if batch is not None:
            fresh = sum(ctx.use_count.get(r.rollout_id, 0) == 0 for r in strategy.store)
            new_in_batch = [ctx.use_count.get(r.rollout_id, 0) == 0 for r in batch]
            assert sum(new_in_batch) == min(fresh, batch_size) and new_in_batch == sorted(new_in_batch, reverse=True)
            checked.append(sum(new_in_batch) < batch_size)  # this batch replayed some
        return batch

    strategy.sample = fresh_first
    finished(p)
    assert any(checked) and max(p.strategy_usage()["offpolicy_counts"]) <= 3


@pytest.mark.slow
def test_an_off_policy_loss_makes_the_same_run_in_process_and_isolated(tiny_checkpoint, coin_task):
    """A registered loss is the engine's: nothing of it crosses the box, and the M2PO baseline's run is the same."""
    runs = [finished(pipeline(tiny_checkpoint, coin_task, BASELINES / "fifo_uniform.py", {"buffer_size": 32}, "open",
                              isolated, **{"grpo.loss": "m2po", "grpo.m2po_tau": 1e-4})) for isolated in (False, True)]
    assert runs[0] == runs[1]
    metrics = runs[0][3]
    # a tight tau on this small model: M2PO masked tokens
    assert any(name == "train/clip_fraction" and value > 0 for name, value, _ in metrics)

"""The paper's workloads: their settings, the schema that holds them, and a few CPU steps of each with the
tiny model substituted for the hub model (so that nothing but hardware stands between them and a GPU run)."""

import hashlib
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from benchmark.leaderboard.compliance import canonical_workload, differing_settings
from benchmark.rl.grpo import GRPOTrainer
from benchmark.runner import RunSpec, run
from benchmark.tracking import find_runs
from benchmark.workload import WorkloadError, load_workload

REPO = Path(__file__).resolve().parent.parent
PAPER = ["qwen3-0.6b-openr1", "qwen2.5-7b-openr1", "llama3.2-3b-openr1", "qwen3-8b-minif2f"]


@pytest.mark.parametrize("name", PAPER)
def test_paper_settings(name):
    w = load_workload(name)
    g, p, e = w.grpo, w.pipeline, w.eval
    assert (g.group_size, g.batch_size, g.eps_low, g.eps_high, g.temperature) == (16, 60, 0.2, 0.2, 1.0)
    assert len(w.seeds) == 4 and e.temperature == 0.1 and w.model.dtype == "bfloat16"
    assert p.devices == 8 and p.grid == [[6, 2], [5, 3], [4, 4]] and [p.workers, p.trainers] in p.grid
    assert {"qwen3-0.6b-openr1": 3.37e-7, "qwen2.5-7b-openr1": 6.8e-8}.get(name, g.lr) == g.lr
    assert p.mu == 5.28 and p.mu_source.startswith("paper" if name == "qwen2.5-7b-openr1" else "unknown")
    if w.task == "openr1_math":
        assert w.eval_targets() == [("openr1_math", "heldout"), ("math500", "test")]
        assert w.model.prompt_format == "auto"  # the model's chat template


@pytest.mark.parametrize("name", PAPER)
def test_paper_workloads_follow_the_paper_where_it_speaks_and_say_so_where_it_does_not(name):
    w = load_workload(name)
    assert w.strategy_defaults == {"buffer_size": 84}  # the paper's N = 84 at B = 60
    assert w.eval.pass_k_samples >= 2 * max(w.eval.pass_k) and len(w.eval.pass_k) >= 3  # several k, n >= 2k
    assert 0 < w.max_new_tokens <= 1024  # the budget's ~1,000-token rollouts
    if w.model.source.startswith("Qwen/Qwen3") and w.model.prompt_format != "plain":
        assert w.model.chat_template_options == {"enable_thinking": False}
    # every setting says whose it is: "paper" or "our"/"not in the paper", on its line or in the comment above it
    lines = (REPO / "workloads" / f"{name}.yaml").read_text().splitlines()
    unmarked = []
    for i, line in enumerate(lines):
        setting = re.match(r"^\s*([a-z_]+):\s*[^\s#]", line)
        if not setting or setting.group(1) in ("name", "version", "description", "data_path", "mu_source"):
            continue
        above, j = [], i - 1
        while j >= 0 and lines[j].lstrip().startswith("#"):
            above.append(lines[j])
            j -= 1
        in_limits = any(lines[k].startswith("limits:") for k in range(i))  # the benchmark's rules, not training's
        if not in_limits and not re.search(r"paper|\bour", " ".join([line.partition("#")[2], *above])):
            unmarked.append(line.strip())
    assert not unmarked, unmarked


@pytest.mark.parametrize("override, message", [
    ({"pipeline.grid": [[5, 2]]}, "W + T = 8"),
    ({"model.dtype": "fp8"}, "model.dtype must be"),
    ({"model.prompt_format": "jinja"}, "model.prompt_format must be one of"),
    ({"task": "no_such_task"}, "no task no_such_task"),
    ({"eval.tasks": ["math500", "nope:test"]}, "no task nope"),
    ({"data_path": {"arith_tiny": "x.jsonl"}}, "data_path names task(s) arith_tiny"),
    ({"eval.pass_k": [1, 32]}, "needs eval.pass_k_samples >= 32"),
    ({"max_new_tokens": -1}, "max_new_tokens must be >= 0"),
    ({"grpo.data_parallel": "zero3"}, "grpo.data_parallel must be one of ddp, fsdp"),
])
def test_schema_errors_name_the_field(override, message):
    with pytest.raises(WorkloadError, match=re.escape(message)):
        load_workload("qwen3-0.6b-openr1", override)


def test_new_fields_at_their_defaults_keep_old_targets_compliant():
    at_defaults = {"eval.tasks": []}  # arith-tiny v2 sets eval.tasks; here every new field is at its default
    official = {k: v for k, v in canonical_workload(load_workload("arith-tiny", at_defaults).to_dict()).items()
                if not k.startswith(("model.dtype", "model.prompt_format", "pipeline.mu_source", "pipeline.grid",
                                     "eval.tasks", "max_new_tokens"))}  # a target frozen before these fields
    run_config = canonical_workload(load_workload("arith-tiny", at_defaults).to_dict())
    assert differing_settings(run_config, official) == []
    changed = canonical_workload(load_workload("arith-tiny", {**at_defaults, "max_new_tokens": 3}).to_dict())
    assert differing_settings(changed, official) == ["max_new_tokens"]


def tiny_substitute(checkpoint, budget=400_000):
    """The hub model replaced by the CPU tier's (random tiny weights), short generations, a tiny budget,
    the bundled data; everything else (G, B, lr, eps, mu, W + T, evaluation protocol) as the paper's."""
    return {"model.source": "tiny", "model.checkpoint": str(checkpoint), "model.dtype": "float32",
            "data_path": {}, "max_new_tokens": 8, "budget": budget, "eval.every": budget / 2,
            "eval.num_problems": 4, "eval.pass_k_problems": 2}


@pytest.mark.slow
def test_each_paper_workload_runs_on_cpu_with_the_tiny_model(tiny_checkpoint, isolated_runs, monkeypatch):
    import benchmark.grading.lean
    import benchmark.grading.lean_task

    # Checking Lean proofs is the Lean task's own business (its tests); here, with or without Lean on the
    # machine, the check is stubbed: a proof passes or fails by a hash of its text, so that groups get mixed
    # rewards, non-zero advantages and steps that move the weights.
    def verdict(gold, completion, timeout=None):
        return SimpleNamespace(correct=hashlib.sha256((gold + completion).encode()).digest()[0] % 2 == 0)

    monkeypatch.setattr(benchmark.grading.lean, "lean_setup", lambda *args, **kwargs: None)
    monkeypatch.setattr(benchmark.grading.lean_task, "check", verdict)
    monkeypatch.setattr(benchmark.grading.lean_task, "check_concurrently", lambda pairs, timeout=None: [
        verdict(gold, completion) for gold, completion in pairs])
    steps = []  # per trainer step: (its batch's advantages, whether it changed the weights)
    step = GRPOTrainer.step

    def recording_step(self, rollouts, weights=None, **kwargs):
        before = [p.detach().clone() for p in self.model.parameters()]
        stats = step(self, rollouts, weights, **kwargs)
        moved = any(not torch.equal(b, p) for b, p in zip(before, self.model.parameters()))
        steps.append(([r.advantage for r in rollouts], moved))
        return stats

    monkeypatch.setattr(GRPOTrainer, "step", recording_step)
    for name in PAPER:
        steps.clear()
        # miniF2F's first statements in the training stream are long: a little more budget for two steps
        w = load_workload(name, tiny_substitute(tiny_checkpoint, 1_000_000 if name.endswith("minif2f") else 400_000))
        summary = run(RunSpec(w, "baselines/fifo_uniform.py", {}, seed=0))
        assert summary["trainer_steps"] >= 2, name
        point = summary["final"]
        assert {"accuracy", "pass_at_1", "pass_at_8"} <= set(point), name
        if w.task == "openr1_math":
            assert {"math500/accuracy", "math500/pass_at_8"} <= set(point)
        [record] = find_runs(name)
        params = record.data.params
        assert params["task_version"] == params[f"task_versions.{w.task}"]
        if w.task == "openr1_math":
            assert (params["task_versions.openr1_math"], params["task_versions.math500"]) == ("1.1", "1.0")
        assert "eval/math500/accuracy" in record.data.metrics or w.task != "openr1_math"
        if w.task == "minif2f":  # the stubbed verifier's mixed rewards reach the trainers and move the weights
            assert any(a != 0 for advantages, _ in steps for a in advantages), name
            assert all(moved for advantages, moved in steps if any(advantages)), name
            assert summary["final"]["pass_at_8"] > 0

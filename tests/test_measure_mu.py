"""`replaybench measure-mu`: the paper's mu measurement on the CPU tier, and writing it into a workload file."""

import shutil
import sys

import pytest

from benchmark.cli import main
from benchmark.engine.measure_mu import measure, write_mu
from benchmark.workload import WORKLOADS_DIR, WorkloadError, load_workload


def test_measure_gives_throughputs_and_their_ratio():
    workload = load_workload("arith-tiny", {"grpo.batch_size": 16, "grpo.group_size": 4})
    m = measure(workload, repeats=2, log=lambda *_: None)
    assert m.rollouts == 16 and len(m.tokens) == len(m.generation_seconds) == len(m.training_seconds) == 2
    assert m.generation_tokens_per_second > 0 and m.training_tokens_per_second > 0
    # two repeats: the median is the mean, and mu is the per-repeat time ratio
    ratios = [g / t for g, t in zip(m.generation_seconds, m.training_seconds)]
    assert m.mu == pytest.approx(sum(ratios) / 2)
    assert m.source_note().startswith("measured: replaybench measure-mu, hf engine on CPU")
    with pytest.raises(WorkloadError, match="unknown engine"):
        measure(workload, engine="sglang")


def test_generation_calls_of_the_pipelines_size_are_timed_per_token():
    workload = load_workload("arith-tiny", {"grpo.batch_size": 16, "grpo.group_size": 4})
    m = measure(workload, repeats=1, log=lambda *_: None, prompts_per_call=8)  # 32 rows per call, batches of 16
    assert m.rollouts == 32 and m.trained_tokens[0] < m.tokens[0]
    per_token = (m.generation_seconds[0] / m.tokens[0]) / (m.training_seconds[0] / m.trained_tokens[0])
    assert m.mu == pytest.approx(per_token)
    with pytest.raises(WorkloadError, match="prompts-per-call must be at least 1"):
        measure(workload, repeats=1, prompts_per_call=0)


def test_cli_prints_mu_and_writes_it_only_when_asked(tmp_path, capsys, isolated_runs):
    path = tmp_path / "arith-tiny.yaml"
    shutil.copy(WORKLOADS_DIR / "arith-tiny.yaml", path)
    original = path.read_text()

    assert main(["measure-mu", "--workload", str(path), "--repeats", "1"]) == 0
    assert "mu = training / generation" in capsys.readouterr().out
    assert path.read_text() == original

    assert main(["measure-mu", "--workload", str(path), "--repeats", "1", "--write"]) == 0
    written = load_workload(str(path))
    assert written.pipeline.mu != 5.28 and written.pipeline.mu_source.startswith("measured: replaybench measure-mu")
    changed = [(a, b) for a, b in zip(original.splitlines(), path.read_text().splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][0].startswith("pipeline:")  # every other line as it was
    assert written.to_dict() | {"pipeline": None} == load_workload("arith-tiny").to_dict() | {"pipeline": None}


def test_write_into_a_block_section_keeps_comments_and_order(tmp_path):
    path = tmp_path / "w.yaml"
    shutil.copy(WORKLOADS_DIR / "arith-tiny.yaml", path)
    text = path.read_text().replace(
        "pipeline: {devices: 8, workers: 4, trainers: 4, sync_every: 1, mu: 5.28}\n",
        "pipeline:\n  devices: 8\n  workers: 4\n  trainers: 4\n  mu: 5.28\n  # the split\n  sync_every: 1\n")
    path.write_text(text)
    write_mu(path, 2.71828, 'measured: a note with "quotes", commas: and colons')
    lines = path.read_text().splitlines()
    start = lines.index("pipeline:")
    assert lines[start:start + 8] == ["pipeline:", "  devices: 8", "  workers: 4", "  trainers: 4", "  mu: 2.72",
                                      '  mu_source: "measured: a note with \\"quotes\\", commas: and colons"',
                                      "  # the split", "  sync_every: 1"]
    write_mu(path, 3.0, "measured: again")  # a second write replaces both, adds nothing
    assert load_workload(str(path)).pipeline.mu_source == "measured: again"
    assert len(path.read_text().splitlines()) == len(lines)


def test_vllm_engine_missing_is_one_clear_line(monkeypatch, capsys, isolated_runs):
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert main(["measure-mu", "--workload", "arith-tiny", "--engine", "vllm", "--repeats", "1"]) == 2
    assert '.[gpu]' in capsys.readouterr().err


@pytest.mark.parametrize("task", ["openr1_math", "math500"])
def test_measure_mu_on_a_paper_workload_with_the_bundled_data(tiny_checkpoint, task):
    # The paper workload's settings (G = 16, B = 60, its prompts and data) with the CPU model in place of
    # the hub model; the bundled MATH and OpenR1 rows have no `id`.
    workload = load_workload("qwen3-0.6b-openr1", {
        "task": task, "model.source": "tiny", "model.checkpoint": str(tiny_checkpoint), "model.dtype": "float32",
        "data_path": {}, "max_new_tokens": 8})
    m = measure(workload, repeats=1, log=lambda *_: None)
    assert m.rollouts == 48 and m.mu > 0  # 60 // 16 prompts x 16 samples


def test_measure_mu_cli_on_a_paper_workload_with_the_cpu_model(tiny_checkpoint, capsys, isolated_runs):
    tiny = ["--set", "model.source=tiny", "--set", f"model.checkpoint={tiny_checkpoint}",
            "--set", "model.dtype=float32", "--set", "data_path={}", "--set", "max_new_tokens=8"]
    assert main(["measure-mu", "--workload", "qwen3-0.6b-openr1", *tiny, "--repeats", "1"]) == 0
    assert "mu = training / generation" in capsys.readouterr().out
    # mu measured on a modified workload never goes into its file
    assert main(["measure-mu", "--workload", "qwen3-0.6b-openr1", *tiny, "--write"]) == 2
    assert "without --set" in " ".join(capsys.readouterr().err.split())

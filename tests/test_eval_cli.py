"""`replaybench eval`: pass@k of a model on a task, offline with the CPU model, recorded in MLflow; and the
evaluation code it shares with the pipeline."""

import json

import pytest

from benchmark.cli import main
from benchmark.grading.evaluation import evaluate, pass_at_k, pass_at_ks
from benchmark.grading.tasks import load_task
from benchmark.rl.generation import HFEngine
from benchmark.rl.policy import load_pretrained
from benchmark.tracking import client

CPU_MODEL = "tasks/arith_tiny/checkpoint"


def eval_runs(task):
    c = client()
    exp = c.get_experiment_by_name(f"eval/{task}")
    return c, c.search_runs([exp.experiment_id]) if exp else []


def test_eval_math500_offline_with_the_cpu_model(isolated_runs, tmp_path, capsys):
    out = tmp_path / "completions.jsonl"
    code = main(["eval", "--model", CPU_MODEL, "--task", "math500", "--n", "2", "--k", "1,2", "--limit", "3",
                 "--max-new-tokens", "4", "--out", str(out)])
    assert code == 0
    c, [run] = eval_runs("math500")
    p, m = run.data.params, run.data.metrics
    assert (p["model"], p["task"], p["task_version"], p["n"], p["k"], p["limit"]) == (
        CPU_MODEL, "math500", "1.0", "2", "1,2", "3")
    assert (p["temperature_pass1"], p["temperature_pass_k"], p["prompt_format"]) == ("0.1", "1.0", "plain")
    assert 0.0 <= m["pass_at_1"] <= m["pass_at_2"] <= 1.0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3 * 2 * 2  # problems x samples x (pass@1 at 0.1, pass@2 at 1.0)
    assert {line["temperature"] for line in lines} == {0.1, 1.0}
    assert lines[0]["gold"] == load_task("math500").docs("test")[0]["answer"]
    local = c.download_artifacts(run.info.run_id, "completions.jsonl", str(tmp_path))
    assert open(local).read() == out.read_text()
    shown = capsys.readouterr()
    assert "pass@2" in shown.out
    # the bar counts the 3 problems of each pass, never 6 "problems"
    assert "pass 2 of 2: problems sampled (2 each)" in shown.err and "3/3" in shown.err and "6/6" not in shown.err


def test_eval_of_the_warm_started_model_on_its_own_task_is_real(isolated_runs):
    """The tiny model was warm-started to ~25% greedy accuracy on arith_tiny: the path scores it."""
    assert main(["eval", "--model", CPU_MODEL, "--task", "arith_tiny", "--greedy", "--n", "1", "--k", "1",
                 "--limit", "200"]) == 0
    _, [run] = eval_runs("arith_tiny")
    assert 0.1 < run.data.metrics["pass_at_1"] < 0.5


def test_sampled_eval_metrics_are_the_scores_of_the_recorded_completions(isolated_runs, tmp_path):
    out = tmp_path / "completions.jsonl"
    assert main(["eval", "--model", CPU_MODEL, "--task", "arith_tiny", "--n", "4", "--k", "1,4", "--limit", "30",
                 "--out", str(out)]) == 0
    _, [run] = eval_runs("arith_tiny")
    m = run.data.metrics
    task, docs = load_task("arith_tiny"), load_task("arith_tiny").docs("test")[:30]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(line["score"] == task.score(docs[line["problem"]], line["completion"]) for line in lines)
    by_temperature = {t: [line for line in lines if line["temperature"] == t] for t in (0.1, 1.0)}
    for t, k in [(0.1, 1), (1.0, 4)]:
        correct = [sum(line["score"] for line in by_temperature[t] if line["problem"] == i) for i in range(30)]
        assert m[f"pass_at_{k}"] == pytest.approx(sum(pass_at_k(4, int(c), k) for c in correct) / 30)
    assert 0 < m["pass_at_1"] < m["pass_at_4"] < 1  # the start checkpoint solves some problems, not all


def test_in_loop_evaluation_and_the_eval_command_share_the_code():
    model, tokenizer = load_pretrained(CPU_MODEL)
    engine, task = HFEngine(model, tokenizer), load_task("arith_tiny")
    docs = task.docs("test")[:40]
    loop = evaluate(engine, task, docs, temperature=1.0, pass_k=[1, 4], pass_k_samples=4, pass_k_problems=40, seed=7)
    ours, [samples] = pass_at_ks(engine, task, docs, n=4, ks=[4], seed=7)  # pass@k's samples: same seed, same draw
    assert (samples.pass_at(1), ours["pass_at_4"]) == (loop["pass_at_1"], loop["pass_at_4"])
    assert 0 < loop["pass_at_1"] < loop["pass_at_4"]  # non-zero: a scorer that always says 0 would not pass
    greedy, _ = pass_at_ks(engine, task, docs, n=4, ks=[1], seed=7, greedy=True)
    assert greedy["pass_at_1"] == evaluate(engine, task, docs, temperature=0.0, pass_k=[1], pass_k_samples=1,
                                           pass_k_problems=0, seed=7)["accuracy"]
    assert greedy["pass_at_1"] > 0


def test_unbiased_estimator():
    assert pass_at_k(8, 0, 1) == 0.0 and pass_at_k(8, 8, 8) == 1.0
    assert pass_at_k(8, 2, 1) == pytest.approx(0.25)
    assert pass_at_k(8, 1, 4) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 4)


@pytest.mark.parametrize("args, message", [
    (["--n", "4", "--k", "1,8"], "every k must be between 1 and --n (4)"),
    (["--k", "one"], "comma-separated integers"),
    (["--task", "nope"], "unknown task 'nope'"),
    (["--prompt-format", "chat"], "no chat template"),
])
def test_user_errors_are_one_line(args, message, isolated_runs, capsys):
    base = {"--model": CPU_MODEL, "--task": "math500", "--limit": "1", "--max-new-tokens": "2"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    assert main(["eval", *[x for pair in base.items() for x in pair]]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_unreachable_hub_fails_fast_naming_the_fix(monkeypatch, isolated_runs, capsys):
    import time

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    start = time.monotonic()
    assert main(["eval", "--model", "Qwen/Qwen2.5-7B", "--task", "math500", "--limit", "1"]) == 2
    assert time.monotonic() - start < 10
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot be reached" in err and "local folder" in err and "HF_HUB_OFFLINE=1" in err


def test_bfloat16_weights_load_and_hash(tiny_checkpoint):
    import torch

    from benchmark.rl.policy import weights_hash

    model, _ = load_pretrained(str(tiny_checkpoint), dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    assert len(weights_hash(model)) == 64  # numpy has no bfloat16: the hash reads raw bytes


def test_eval_on_a_bundled_sample_says_it_is_one(isolated_runs, capsys):
    assert main(["eval", "--model", CPU_MODEL, "--task", "openr1_math", "--split", "heldout", "--greedy", "--n", "1",
                 "--k", "1", "--limit", "2", "--max-new-tokens", "2"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "is the bundled sample openr1_math_partial_sample.jsonl" in err and "--data-path" in err
    assert load_task("math500").bundled_sample("test") is None and load_task("math500").bundled_sample("train")

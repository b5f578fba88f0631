"""lm-evaluation-harness runs our task definitions (tasks/) on the bundled data, scoring with our verifier."""

import pytest

from benchmark.grading.tasks import TASKS_DIR, load_task
from benchmark.rl.policy import load_pretrained

pytest.importorskip("lm_eval.models.huggingface", reason="needs lm-eval[hf] (the dev extra installs it)")


def test_lm_eval_runs_math500_with_the_cpu_model():
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    model, tokenizer = load_pretrained("tasks/arith_tiny/checkpoint")
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=4, device="cpu", max_length=1024)
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)
    out = simple_evaluate(model=lm, tasks=["math500"], task_manager=manager, limit=4, bootstrap_iters=0,
                          gen_kwargs="max_gen_toks=8", log_samples=True)
    score = out["results"]["math500"]["math_verify,none"]
    assert 0.0 <= score <= 1.0
    assert out["versions"]["math500"] == 1.0 == float(load_task("math500").version)
    # lm-eval's per-document metric is our reward on the same completion
    task = load_task("math500")
    for sample in out["samples"]["math500"]:
        [[completion]] = sample["resps"]
        assert sample["math_verify"] == task.score(sample["doc"], completion)
    assert len(out["samples"]["math500"]) == 4


def test_lm_eval_scores_the_start_checkpoint_on_arith_tiny_as_we_do(monkeypatch):
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    model, tokenizer = load_pretrained(str(TASKS_DIR / "arith_tiny" / "checkpoint"))
    monkeypatch.chdir(TASKS_DIR / "arith_tiny")  # its data_files are relative to its folder (no custom_dataset)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=20, device="cpu", max_length=64)
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)
    out = simple_evaluate(model=lm, tasks=["arith_tiny"], task_manager=manager, limit=20, bootstrap_iters=0,
                          log_samples=True)
    task = load_task("arith_tiny")
    samples = out["samples"]["arith_tiny"]
    assert len(samples) == 20
    scores = []
    for sample in samples:
        [[completion]] = sample["resps"]
        assert sample["exact_match"] == task.score(sample["doc"], completion)
        scores.append(sample["exact_match"])
    # the start checkpoint answers about a quarter greedily: a scorer that always says 0 would not pass
    score = out["results"]["arith_tiny"]["exact_match,none"]
    assert score == pytest.approx(sum(scores) / 20) and 0 < score < 1


@pytest.mark.parametrize("name", ["math500", "openr1_math"])  # openr1_math is evaluated on MATH-500, offline
def test_lm_eval_scores_with_our_verifier(name):
    from lm_eval.tasks import TaskManager

    lm_task = TaskManager(include_path=str(TASKS_DIR), include_defaults=False).load([name])["tasks"][name]
    doc = lm_task.test_docs()[0]
    assert doc == load_task(name).docs("test")[0]  # the same bundled file, found from any working directory
    assert lm_task.process_results(doc, [f"so \\boxed{{{doc['answer']}}}"]) == {"math_verify": 1.0}
    assert lm_task.process_results(doc, ["\\boxed{-12345}"]) == {"math_verify": 0.0}


@pytest.mark.slow
@pytest.mark.e2e
def test_the_docs_lm_eval_command_for_the_cpu_model_runs_as_written():
    import re
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "docs" / "running.md").read_text().replace("\\\n", " ")
    (line,) = [m.group(0) for m in re.finditer(r"lm_eval [^\n]*pretrained=tasks/arith_tiny/checkpoint[^\n]*", readme)]
    lm_eval = Path(sys.executable).with_name("lm_eval")
    result = subprocess.run([str(lm_eval), *shlex.split(line)[1:]], cwd=repo, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "math_verify" in result.stdout

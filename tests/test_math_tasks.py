"""The math tasks (math500, openr1_math): offline loading, prompts, rewards, hub fallbacks, `replaybench grade`."""

import json
import time

import pytest

import benchmark.grading.tasks
from benchmark.cli import main
from benchmark.grading.tasks import TaskError, load_task

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@pytest.fixture
def no_hub(monkeypatch):
    def fail(*args):
        raise AssertionError(f"the hub was asked for {args}")

    monkeypatch.setattr(benchmark.grading.tasks, "_load_hub", fail)


@pytest.mark.parametrize("name, n_train, n_test", [("math500", 1000, 500), ("openr1_math", 44, 500)])
def test_task_loads_offline_from_bundled_data(no_hub, name, n_train, n_test):
    task = load_task(name)
    train, test = task.docs("train"), task.docs("test")
    assert (len(train), len(test)) == (n_train, n_test)
    assert task.metric == "math_verify" and task.max_new_tokens == 4096
    doc = train[0]
    assert task.doc_to_text(doc) == f"{doc['problem']}\n\n{INSTRUCTION}"
    assert task.config["doc_to_target"](doc) == doc["answer"]


def test_task_yaml_is_valid_for_lm_eval():
    from lm_eval.config.task import TaskConfig

    for name in ("math500", "openr1_math"):
        TaskConfig(**load_task(name).config)  # raises on a field lm-eval does not know


def test_rewards_on_reference_answers(no_hub):
    math500 = load_task("math500")
    test = math500.docs("test")
    assert all(math500.score(d, d["solution"]) == 1.0 for d in test)  # MATH reference solutions end in the answer
    assert math500.score(test[0], "\\boxed{-12345}") == 0.0
    openr1 = load_task("openr1_math")
    assert all(openr1.score(d, f"so \\boxed{{{d['answer']}}}") == 1.0 for d in openr1.docs("train"))
    assert openr1.score(openr1.docs("train")[0], "no answer") == 0.0


@pytest.mark.parametrize("name", ["arith_tiny", "math500"])
def test_scoring_a_group_is_scoring_each_in_turn(no_hub, name):
    """Tasks without metadata.score_pairs score a group one completion at a time: the same rewards, in order."""
    task = load_task(name)
    assert "score_pairs" not in task.config["metadata"]
    doc = task.docs("test")[0]
    right = doc["target"] if name == "arith_tiny" else f"\\boxed{{{doc['answer']}}}"
    completions = ["no answer", right, "\\boxed{-12345}", right]
    rewards = task.score_many(doc, completions)
    assert rewards == [task.score(doc, c) for c in completions] and rewards[1] == rewards[3] == 1.0
    assert task.score_pairs([]) == []


def test_openr1_gold_falls_back_to_the_solution():
    target = load_task("openr1_math").config["doc_to_target"]
    assert target({"answer": "", "solution": "First \\boxed{2}; in all, \\boxed{7}."}) == "7"
    assert target({"answer": "3", "solution": "\\boxed{7}"}) == "3"


def test_hub_id_without_network_fails_fast_naming_the_fix(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    task = load_task("openr1_math", data_path={"train": None})  # train from the hub id, as with no override
    start = time.monotonic()
    with pytest.raises(TaskError, match="open-r1/OpenR1-Math-220k.*data_path"):
        task.docs("train")
    assert time.monotonic() - start < 5
    assert len(task.docs("test")) == 500  # the other split keeps the YAML's local file


def test_data_path_override_with_a_parquet_file(tmp_path, no_hub):
    import pyarrow
    import pyarrow.parquet

    rows = [{"problem": "1+1?", "solution": "\\boxed{2}", "answer": "2"},
            {"problem": "2+2?", "solution": "", "answer": "4"}]
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "train.parquet")
    task = load_task("openr1_math", data_path={"train": tmp_path / "train.parquet"})
    assert task.docs("train") == rows
    with pytest.raises(TaskError, match="missing"):
        load_task("openr1_math", data_path=tmp_path / "nowhere.jsonl").docs("train")


def test_grade_command(tmp_path, capsys):
    lines = [{"gold": "\\frac{1}{2}", "completion": "so \\boxed{0.5}"}, {"gold": "3", "completion": "\\boxed{4}"}]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["grade", "--task", "math500", str(src), "--out", str(out)]) == 0
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert verdicts == [{"line": 1, "gold": "\\frac{1}{2}", "correct": True, "extracted": "0.5", "reason": "correct"},
                        {"line": 2, "gold": "3", "correct": False, "extracted": "4", "reason": "wrong"}]
    assert main(["grade", "--task", "arith_tiny", str(src)]) == 2  # no math verifier
    src.write_text('{"gold": "1"}\n')
    assert main(["grade", "--task", "math500", str(src)]) == 2


def test_data_path_override_with_a_folder(tmp_path, monkeypatch, no_hub):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    folder = tmp_path / "openr1"  # laid out as datasets reads a hub snapshot: one file per split
    folder.mkdir()
    rows = [{"problem": "1+1?", "solution": "\\boxed{2}", "answer": "2"}]
    (folder / "train.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert load_task("openr1_math", data_path={"train": folder}).docs("train") == rows

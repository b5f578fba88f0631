"""OpenR1-Math-220k: hub id and configs, prompt and gold columns, the held-out split, pass-rate filtering."""

import json

import pytest

from benchmark.grading.tasks import TaskError, load_task, pass_rate

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def test_definition_matches_the_hub_data_set():
    task = load_task("openr1_math")
    assert (task.config["dataset_path"], task.config["dataset_name"]) == ("open-r1/OpenR1-Math-220k", "default")
    doc = {"problem": "What is 2+2?", "answer": "", "solution": "First \\boxed{3}... so \\boxed{4}."}
    assert task.doc_to_text(doc) == f"What is 2+2?\n\n{INSTRUCTION}"  # prompt column: problem
    assert task.config["doc_to_target"](doc) == "4"  # gold: answer, else the solution's last \boxed{}
    assert task.score(doc, "\\boxed{4}") == 1.0


def test_heldout_split_is_set_aside_from_training(tmp_path):
    rows = [{"problem": f"p{i}", "answer": str(i), "solution": ""} for i in range(100)]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_task("openr1_math", data_path={"train": path}, metadata={"heldout": {"size": 15, "seed": 0}})
    train, held = task.docs("train"), task.docs("heldout")
    assert len(held) == 15 and len(train) == 85
    assert {r["problem"] for r in train} | {r["problem"] for r in held} == {r["problem"] for r in rows}
    again = load_task("openr1_math", data_path={"train": path}, metadata={"heldout": {"size": 15, "seed": 0}})
    assert again.docs("heldout") == held  # seeded: the same rows every time
    capped = load_task("openr1_math", data_path={"train": path}, metadata={"heldout": {"size": 500, "seed": 0}})
    assert len(capped.docs("heldout")) == 20  # at most a fifth of the data
    bundled = load_task("openr1_math")
    assert (len(bundled.docs("train")), len(bundled.docs("heldout"))) == (44, 10)  # of the 54-row sample
    with pytest.raises(TaskError, match="no held-out split"):
        load_task("math500").docs("heldout")


def test_pass_rate_filter_as_open_r1_recipe(tmp_path):
    rows = [
        {"problem": "all wrong", "answer": "1", "pass_rate_rewards": [0.0, 0.0, 0.0, 0.0]},
        {"problem": "one of four", "answer": "1", "pass_rate_rewards": [1.0, 0.0, 0.0, 0.0]},
        {"problem": "half", "answer": "1", "pass_rate_rewards": [1.0, None, 0.0]},  # None ignored
        {"problem": "all right", "answer": "1", "pass_rate_rewards": [1.0, 1.0]},
        {"problem": "no generations", "answer": "1", "pass_rate_rewards": []},
        {"problem": "flags", "answer": "1", "pass_rate_rewards": [True, False, False]},
        {"problem": "a number", "answer": "1", "pass_rate_rewards": 0.9},  # not < 0.9: dropped (strict)
    ]
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"pass_rate": {"column": "pass_rate_rewards", "min": 0.1, "max": 0.9}, "heldout": None}  # no held-out
    kept = load_task("openr1_math", data_path={"train": jsonl}, metadata=spec).docs("train")
    assert [r["problem"] for r in kept] == ["one of four", "half", "flags"]
    assert load_task("openr1_math", data_path={"train": jsonl}, metadata={"heldout": None}).docs("train") == rows
    assert pass_rate([1, 0, None]) == 0.5 and pass_rate(None) is None and pass_rate(0.25) == 0.25
    with pytest.raises(TaskError, match="column 'correctness_math_verify', which the data lacks"):
        load_task("openr1_math", data_path={"train": jsonl},
                  metadata={"pass_rate": {"column": "correctness_math_verify", "min": 0, "max": 1}}).docs("train")
    assert load_task("openr1_math").config["metadata"]["pass_rate"] is None  # off by default

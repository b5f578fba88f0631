"""`replaybench plan`: the paper's steady-state arithmetic, against the paper's numbers and against what the
pipeline measured on the published runs."""

import json
from pathlib import Path

import pytest

from benchmark.cli import main
from benchmark.engine.costs import steady_state

REPO = Path(__file__).resolve().parent.parent


def test_plan_prints_the_papers_gamma_and_replay_ratio(capsys):
    assert main(["plan", "--workload", "qwen2.5-7b-openr1", "--tokens-per-rollout", "1000"]) == 0
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in capsys.readouterr().out.splitlines() if line.startswith("│")}
    assert rows["5,3"][:2] == ["0.425", "3.17"]  # gamma = (1 + 5/3) / 6.28; the paper rounds it to 0.43
    assert rows["6,2"][1] == "1.76" and rows["4,4"][1] == "5.28"  # mu T / W
    assert set(rows) == {f"{w},{8 - w}" for w in range(1, 8)}


def test_plan_reads_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", "--workload", "qwen2.5-7b-openr1", "--tokens-per-rollout", "1000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    # the heading whole on its first line (as the table's title it wrapped to the table's width)
    assert lines[0] == "qwen2.5-7b-openr1: mu = 5.28, W + T = 8, B = 60, N = 84, budget 150,000,000"
    header = next(line for line in lines if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["W,T", "gamma", "replay", "in buffer", "updates",
                                                            "on-policy"]


def shipped_summaries():
    for path in sorted((REPO / "leaderboard" / "runs").glob("*/summary.json")):
        yield json.loads(path.read_text())


def test_the_replay_ratio_of_every_published_fifo_run_is_the_plans_within_5_percent():
    checked = 0
    for s in shipped_summaries():
        if s["strategy"] != "fifo_uniform":  # a FIFO that samples with replacement never starves once full
            continue
        pipe, grpo = s["config"]["workload"]["pipeline"], s["config"]["workload"]["grpo"]
        planned = steady_state(pipe["mu"], pipe["workers"], pipe["trainers"], grpo["batch_size"])
        assert s["replay_ratio"] == pytest.approx(planned.replay_ratio, rel=0.05), (pipe["workers"], s["mlflow_run_id"])
        checked += 1
    assert checked >= 10  # the board's and the calibration sweep's, at five splits


def test_the_updates_a_budget_pays_for_match_the_published_runs():
    """From a run's budget, split and mean completion length as its workers generated them, the plan predicts the
    trainer steps it pays for, buffer or on-policy. The length is each run's own: it varies with the seed enough
    that one run's length misses another's steps by more than 5%."""
    # at the workload's own loss (GRPO): another loss (m2po, asymre) changes the responses' lengths, hence L;
    # runs shipped before token counts were recorded have no measured length
    runs = [s for s in shipped_summaries()
            if s["strategy"] in ("fifo_uniform", "on_policy") and s["config"]["workload"]["grpo"]["loss"] == "grpo"
            and "tokens_generated" in s.get("measured", {})]
    assert len(runs) >= 100 and {s["strategy"] for s in runs} == {"fifo_uniform", "on_policy"}
    for s in runs:
        pipe, b = s["config"]["workload"]["pipeline"], s["config"]["workload"]["grpo"]["batch_size"]
        tokens = s["measured"]["tokens_generated"] / s["rollouts_generated"]
        plan = steady_state(pipe["mu"], pipe["workers"], pipe["trainers"], b, None, tokens, s["compute_used"])
        expected = plan.updates if s["strategy"] == "fifo_uniform" else plan.updates_on_policy
        assert s["trainer_steps"] == pytest.approx(expected, rel=0.05), s["mlflow_run_id"]

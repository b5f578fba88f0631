import pytest

from benchmark.workload import WorkloadError, list_workloads, load_workload, parse_value, split_overrides


def test_every_shipped_workload_validates():
    assert "arith-tiny" in list_workloads()
    for name in list_workloads():
        load_workload(name)


def test_overrides_reach_the_right_field():
    w = load_workload("arith-tiny", {"grpo.lr": 3e-4, "pipeline.workers": 5, "pipeline.trainers": 3, "budget": 1e5})
    assert (w.grpo.lr, w.pipeline.workers, w.pipeline.trainers, w.budget) == (3e-4, 5, 3, 1e5)


def test_workers_plus_trainers_must_fill_the_devices():
    with pytest.raises(WorkloadError, match="must equal pipeline.devices"):
        load_workload("arith-tiny", {"pipeline.workers": 5})


def test_unknown_field_is_named():
    with pytest.raises(WorkloadError, match="unknown field.*lrr"):
        load_workload("arith-tiny", {"grpo.lrr": 1.0})


def test_non_positive_budget_is_refused():
    with pytest.raises(WorkloadError, match="raise --budget"):
        load_workload("arith-tiny", {"budget": 0})


def test_unknown_workload_lists_known_ones():
    with pytest.raises(WorkloadError, match="known: .*arith-tiny"):
        load_workload("no-such-workload")


def test_set_pairs_split_between_workload_and_strategy():
    workload, strategy = split_overrides(["buffer_size=64", "grpo.lr=1e-4", "budget=5000"])
    assert strategy == {"buffer_size": 64}
    assert workload == {"grpo.lr": 1e-4, "budget": 5000}
    assert parse_value("[1, 2]") == [1, 2] and parse_value("true") is True and parse_value("abc") == "abc"
    with pytest.raises(WorkloadError, match="KEY=VALUE"):
        split_overrides(["oops"])


def test_the_cpu_workload_meets_the_scoring_rules_for_evaluation():
    """Rules v2 (leaderboard/README.md): one accuracy point has a standard error <= 0.01, evaluations come at
    least every 2.5% of the budget, and the seeds that set the target are never scored."""
    w = load_workload("arith-tiny")
    (task_name, split), = w.eval_targets()
    n = min(w.eval.num_problems, len(w.load_task(task_name).docs(split)))
    assert (0.25 / n) ** 0.5 <= 0.01
    assert w.eval.every <= 0.025 * w.budget
    assert w.target_seeds and not set(w.target_seeds) & set(w.seeds)
    with pytest.raises(WorkloadError, match="target_seeds must be apart from seeds"):
        load_workload("arith-tiny", {"target_seeds": [3, 10]})

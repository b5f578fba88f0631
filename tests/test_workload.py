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


def test_the_config_keeps_the_types_the_yaml_wrote():
    """Run configs are hashed into group keys: `budget: 4_800_000` stays an int (not 4800000.0), betas a tuple."""
    config = load_workload("arith-tiny", {"eval.every": 5000, "grpo.lr": 3e-4}).to_dict()
    assert type(config["budget"]) is int and type(config["eval"]["every"]) is int
    assert config["grpo"]["betas"] == (0.9, 0.99) and type(config["grpo"]["lr"]) is float
    assert list(config)[:3] == ["name", "task", "version"]  # the fields' order, as the configs on the board hold it


@pytest.mark.parametrize("overrides, message", [
    ({"grpo.lr": "3"}, "arith-tiny.grpo.lr must be a number, not '3'"),  # YAML's "3" is a string, as before
    ({"grpo.batch_size": 4.0}, "arith-tiny.grpo.batch_size must be a whole number, not 4.0"),
    ({"grpo.gradient_checkpointing": 1}, "arith-tiny.grpo.gradient_checkpointing must be true or false, not 1"),
    ({"grpo.betas": [0.9]}, "arith-tiny.grpo.betas must be two numbers, not [0.9]"),
    ({"eval.pass_k": [1, "a"]}, "arith-tiny.eval.pass_k must be a list of whole numbers, not [1, 'a']"),
    ({"pipeline.grid": [[5, 3.0]]}, "arith-tiny.pipeline.grid must be a list of lists of whole numbers, not [[5,"),
    ({"eval.tasks": "arith_tiny"}, "arith-tiny.eval.tasks must be a list of strings, not 'arith_tiny'"),
    ({"model.chat_template_options": [1]}, "arith-tiny.model.chat_template_options must be a mapping, not [1]"),
    ({"grpo": 3}, "arith-tiny.grpo must be a mapping, not 3"),
    ({"grpo.tis_cap": -1}, "arith-tiny.grpo.tis_cap must be a positive number, not -1"),
    ({"grpo.loss": "ppo"},
     "arith-tiny.grpo.loss must be one of grpo, asymre, tis, cispo, m2po, decoupled_ppo, not 'ppo'"),
    ({"limits.nope": 1}, "arith-tiny.limits: unknown field `nope` (known: strategy_seconds, call_seconds,"),
    ({"nope": 1}, "arith-tiny: unknown field `nope` (known: name, task, version,"),
])
def test_a_wrong_field_is_named_with_what_it_must_be(overrides, message):
    with pytest.raises(WorkloadError) as error:
        load_workload("arith-tiny", overrides)
    assert str(error.value).startswith(message)


def test_every_problem_of_a_workload_file_at_once(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("description: d\ngrpo: {lr: fast, lrr: 1}\n")
    with pytest.raises(WorkloadError) as error:
        load_workload(str(path))
    assert str(error.value).split("; ") == [
        "mine: missing field `name`", "mine: missing field `task`",
        "mine.grpo: unknown field `lrr` (known: group_size, batch_size, lr, betas, weight_decay, max_grad_norm, "
        "eps_low, eps_high, aggregation, loss, asymre_delta, tis_cap, m2po_tau, decoupled_cap, temperature, "
        "micro_batch_size, gradient_checkpointing, data_parallel)",
        "mine.grpo.lr must be a number, not 'fast'"]
    path.write_text("- a list\n")
    with pytest.raises(WorkloadError, match=r"^mine must be a mapping, not \['a list'\]$"):
        load_workload(str(path))


@pytest.mark.parametrize("kind", ["workload", "submission"])
def test_the_json_schema_admits_the_shipped_files_and_refuses_an_unknown_key(kind, capsys):
    import json
    from pathlib import Path

    import yaml

    from benchmark.cli import main

    assert main(["schema", kind]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["additionalProperties"] is False
    repo = Path(__file__).resolve().parent.parent
    if kind == "workload":
        documents = [yaml.safe_load(p.read_text()) for p in sorted((repo / "workloads").glob("*.yaml"))]
    else:
        documents = [yaml.safe_load(p.read_text()) for p in sorted((repo / "submissions").glob("*/submission.yaml"))]
        documents += yaml.safe_load((repo / "baselines" / "baselines.yaml").read_text())["entries"]
    jsonschema = pytest.importorskip("jsonschema")
    for document in documents:
        jsonschema.validate(document, schema)
    with pytest.raises(jsonschema.ValidationError, match="lrr"):
        jsonschema.validate({**documents[0], "lrr": 1}, schema)

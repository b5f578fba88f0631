"""The same tuning budget for every entry (leaderboard/README.md, "Tuning"): each entry runs at most the workload's
number of trials from the search space it declares, and is scored at the trial the stated rule picks."""

import dataclasses
import json
import math

import pytest

from benchmark.leaderboard.tuning import final_accuracy, pick, trial_statistics
from benchmark.submission import SubmissionError, load_baselines, parse_entry

FIELDS = {"name": "mine", "authors": "me", "contact": "me@x", "description": "d", "strategy": "fifo_uniform.py",
          "track": "buffer", "workers": 6, "trainers": 2}


def entry(tmp_path=None, **fields):
    from benchmark.paths import BASELINES_DIR

    return parse_entry({**FIELDS, **fields}, BASELINES_DIR, "test entry")


def test_two_entries_with_the_same_grid_get_the_same_number_of_trials():
    grid = {"split": ["6,2", "5,3"], "buffer_size": [90, 180, 360]}  # 6 points
    a, b = entry(name="a", tuning=grid), entry(name="b", tuning=grid)
    for budget in (3, 6, 10):
        assert len(a.tuning_trials(budget)) == len(b.tuning_trials(budget)) == min(budget, 6)
    # more points than trials: a draw seeded by the entry's name, the same every time, in grid order
    drawn = [(t.workers, t.trainers, t.buffer_size) for t in a.tuning_trials(3)]
    assert drawn == [(t.workers, t.trainers, t.buffer_size) for t in a.tuning_trials(3)]
    everything = [(w, t, n) for w, t in ((6, 2), (5, 3)) for n in (90, 180, 360)]
    assert set(drawn) <= set(everything) and drawn == sorted(drawn, key=everything.index)
    # an entry without a search space runs its own settings once
    assert [(t.workers, t.buffer_size) for t in entry(buffer_size=90).tuning_trials(3)] == [(6, 90)]


def test_a_trial_sets_the_split_the_buffer_the_hyperparameters_and_open_track_grpo():
    e = entry(strategy="positive_bias.py", hyperparameters={"delta": 0.25},
              tuning={"split": ["5,3"], "buffer_size": [180], "delta": [0.5]})
    [trial] = e.tuning_trials(3)
    assert (trial.workers, trial.trainers, trial.strategy_params()) == (5, 3, {"buffer_size": 180, "delta": 0.5})
    open_entry = entry(track="open", grpo={"eps_high": 0.28}, tuning={"grpo.lr": [1e-5, 3e-5]})
    assert [t.grpo for t in open_entry.tuning_trials(3)] == [{"eps_high": 0.28, "lr": 1e-5},
                                                             {"eps_high": 0.28, "lr": 3e-5}]
    assert e.grpo == {} and e.buffer_size is None  # the entry itself is unchanged


@pytest.mark.parametrize("tuning, message", [
    ({"grpo.lr": [1e-5]}, "only an open-track entry tunes GRPO settings"),
    ({"split": ["6-2"]}, 'tuning.split must list "W,T" strings'),
    ({"buffer_size": []}, "tuning.buffer_size must list at least one value"),
])
def test_a_search_space_the_rules_do_not_allow_is_refused(tuning, message):
    with pytest.raises(SubmissionError, match=message):
        entry(tuning=tuning)


def curve(accuracies, budget=100.0):
    step = budget / (len(accuracies) - 1)
    return [{"compute": i * step, "accuracy": a} for i, a in enumerate(accuracies)]


def test_the_reference_is_picked_by_its_final_accuracy_the_others_by_compute_to_target():
    fast_then_flat = [{"eval_curve": curve([0.2, 0.8, 0.8, 0.8, 0.8, 0.8])}] * 2
    slow_but_higher = [{"eval_curve": curve([0.2, 0.3, 0.5, 0.7, 0.9, 0.9])}] * 2
    never = [{"eval_curve": curve([0.2, 0.2, 0.2, 0.2, 0.2, 0.2])}] * 2
    assert final_accuracy(curve([0.2, 0.3, 0.5, 0.7, 0.9, 0.9]), 100.0) == pytest.approx(0.9)
    reference = [trial_statistics(r, 100.0, None) for r in (fast_then_flat, slow_but_higher)]
    assert pick(reference, reference=True) == 1  # the higher final accuracy
    trials = [trial_statistics(r, 100.0, 0.75) for r in (never, slow_but_higher, fast_then_flat)]
    assert trials[0]["compute_to_target"] == math.inf
    assert pick(trials, reference=False) == 2  # the least compute to the target
    same = [{"compute_to_target": 40.0, "final_accuracy": 0.8}, {"compute_to_target": 40.0, "final_accuracy": 0.9},
            {"compute_to_target": 40.0, "final_accuracy": 0.9}]
    assert pick(same, reference=False) == 1  # tie: the higher final accuracy, then the first in trial order


def test_the_baselines_declare_no_search_space_of_a_tuned_workload_they_cannot_run():
    for e in load_baselines().entries.values():
        for trial in e.tuning_trials(3):
            assert trial.workers + trial.trainers == 8


@pytest.mark.slow
def test_tune_runs_every_entrys_trials_on_the_tuning_seeds_then_picks_by_the_rule(tiny_checkpoint, isolated_runs,
                                                                                   tmp_path, monkeypatch):
    import yaml
    from conftest import small_overrides

    import benchmark.cli.tune
    from benchmark.cli import main

    base = yaml.safe_load(open("workloads/arith-tiny.yaml"))
    for key, value in small_overrides(tiny_checkpoint, budget=30_000).items():
        section, _, field = key.partition(".")
        base[section] = value if not field else {**base[section], field: value}
    base.update(name="tiny-tuned", tuning={"trials": 2, "seeds": [100]})
    workload = tmp_path / "tiny-tuned.yaml"
    workload.write_text(yaml.safe_dump(base))
    entries = load_baselines().entries
    grids = {"on_policy": {"split": ["6,2", "5,3", "4,4"]}, "fifo_uniform": {"buffer_size": [32, 64]}}
    patched = {n: dataclasses.replace(entries[n], tuning=g) for n, g in grids.items()}
    monkeypatch.setattr(benchmark.cli.tune, "load_baselines", lambda: type("B", (), {"entries": patched})())
    out = tmp_path / "tuning.json"
    args = ["tune", "--workload", str(workload), "--entries", "on_policy", "fifo_uniform", "--jobs", "1",
            "--out", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())["entries"]
    # the same budget: two trials each (the reference's three-point grid drawn down to two), one seed each
    assert [len(result[n]["trials"]) for n in grids] == [2, 2]
    assert all(len(t["run_ids"]) == 1 for n in grids for t in result[n]["trials"])
    ref = result["on_policy"]
    finals = [t["final_accuracy"] for t in ref["trials"]]
    assert ref["picked"] == finals.index(max(finals))  # the reference: its highest final accuracy
    assert result["fifo_uniform"]["picked"] is None  # the others wait for the target frozen from that pick

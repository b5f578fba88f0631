"""The sweep: its plan, its resumption from MLflow, and the figure-1 summary's numbers by hand."""

import math

import pytest

from benchmark.cli import main
from benchmark.leaderboard import scoring
from benchmark.leaderboard.sweep import compute_saved, format_saved


def reaching(k: int, every: float = 100.0, n: int = 11) -> list[dict]:
    """A curve at 0, every, ...: accuracy 0.1 before evaluation k, then 0.5 (1.0 from evaluation 2k)."""
    return [{"compute": i * every, "accuracy": 0.1 if i < k else 0.5 if i < 2 * k else 1.0} for i in range(n)]


def test_compute_saved_against_the_reference_by_hand():
    seeds = [0, 1, 2, 3]
    reference = {s: reaching(4) for s in seeds}  # best of its median curve: 1.0, reached at 800
    faster = {s: reaching(2) for s in seeds}
    out = compute_saved(reference, faster, seeds, 1000.0, fractions=(0.5, 1.0))
    assert out["reference_best"] == 1.0
    first, top = out["levels"]
    assert (first["accuracy"], first["reference_compute"], first["compute"]) == (0.5, 400.0, 200.0)
    assert first["saved"] == pytest.approx(0.5) and top["saved"] == pytest.approx(0.5)  # 1 - 400/800
    assert first["ci95"] == pytest.approx([0.5, 0.5])  # identical seeds: no spread
    assert format_saved(first) == "+50% [+50%, +50%]"
    # a configuration missing half its seeds has a finite lower median; missing three never reaches
    assert compute_saved(reference, {0: reaching(2), 1: reaching(2)}, seeds, 1000.0, (0.5,))["levels"][0]["saved"] \
        == pytest.approx(0.5)
    never = compute_saved(reference, {0: reaching(2)}, seeds, 1000.0, (0.5,))["levels"][0]
    assert never["saved"] == -math.inf and format_saved(never) == "not reached"
    assert compute_saved(reference, {0: reaching(2)}, seeds, 1000.0, (0.5,))["missing_seeds"] == [1, 2, 3]


def test_compute_saved_intervals_are_paired_over_seeds():
    # seed k is hard for both alike: the configuration is always one evaluation faster than the reference
    seeds = list(range(6))
    reference = {s: reaching(3 + s, n=30) for s in seeds}
    config = {s: reaching(2 + s, n=30) for s in seeds}
    level = compute_saved(reference, config, seeds, 3000.0, (0.5,), scoring.seed_draws("t", 6))["levels"][0]
    lo, hi = level["ci95"]
    assert 0 < lo <= level["saved"] <= hi < 0.5  # always saves something: the pairing keeps the sign


@pytest.mark.slow
def test_a_sweep_runs_then_resumes_from_mlflow(isolated_runs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    args = ["sweep", "--strategies", "fifo_uniform", "--splits", "5,3", "4,4", "--buffer-sizes", "96",
            "--seeds", "0", "--jobs", "1", "--set", "budget=40000", "--set", "eval.every=20000",
            "--set", "eval.num_problems=20", "--set", "eval.pass_k_problems=0", "--out", str(isolated_runs / "s.json")]
    assert main(args) == 0
    assert "3 configurations, 3 runs, 0 already finished in MLflow, 3 to run" in capsys.readouterr().err
    assert main(args) == 0  # resumed: everything is finished, nothing runs again
    captured = capsys.readouterr()
    assert "3 configurations, 3 runs, 3 already finished in MLflow, 0 to run" in " ".join(captured.err.split())
    out = captured.out
    for config in ("on_policy (6,2) N=90", "fifo_uniform (5,3) N=96", "fifo_uniform (4,4) N=96"):
        assert config in out
    import json

    summary = json.loads((isolated_runs / "s.json").read_text())
    assert [len(c["run_ids"]) for c in summary["configs"]] == [1, 1, 1]
    ratios = [c["replay_ratio"] for c in summary["configs"]]
    assert ratios[0] <= 1.0 < ratios[1] < ratios[2]  # on-policy uses each rollout at most once; more trainers, more


def test_sweep_errors_are_one_message(capsys):
    assert main(["sweep", "--strategies", "nope"]) == 2
    assert "unknown baseline(s) nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sweep", "--splits", "5:3"])
    assert "a split is W,T" in capsys.readouterr().err


def test_a_sweep_tags_each_entrys_track_as_baselines_does():
    import argparse

    from benchmark.cli import sweep

    parser = argparse.ArgumentParser()
    sweep.add_parsers(parser.add_subparsers())
    configs = sweep.plan(parser.parse_args(["sweep", "--strategies", "rlep", "fifo_uniform", "--seeds", "0"]))
    tags = {c.strategy: c.specs[0].tags for c in configs}
    assert tags == {"on_policy": {}, "rlep": {"track": "open"}, "fifo_uniform": {}}  # untagged: the buffer track

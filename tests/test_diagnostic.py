"""The regime diagnostic (docs/protocols/regime-diagnostic.md): the statistics on hand-made runs whose answers
are known, the probe that measures a run without changing it, and the command end to end."""

import math

import pytest
from conftest import small_overrides, small_workload

from benchmark.leaderboard.diagnostic import THRESHOLDS, diagnose, fresh_data_curve


def run(accuracies: list[float], trained_per_eval: int, probe: dict | None = None) -> dict:
    curve = [{"compute": 100 * i, "samples_trained": trained_per_eval * i, "accuracy": a}
             for i, a in enumerate(accuracies)]
    return {"eval_curve": curve, "probe": probe or {"clip_s9": 0.01, "measurements": 3}}


RISING = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.8]


def test_two_steps_per_batch_that_reach_the_level_on_half_the_fresh_data_give_a_gain_of_two():
    arm_a = [run(RISING, 64 * k) for k in (10, 11, 12, 13)]
    arm_b = [run(RISING, 64 * k) for k in (10, 11, 12, 13)]  # trained twice per batch: half the fresh data
    result = diagnose(arm_a, arm_b)
    u = result["update_limited"]
    assert u["level"] == pytest.approx(0.2 + 0.75 * 0.6)
    # the level 0.65 is crossed halfway between evaluations 4 and 5 of a run: 4.5 x its samples per evaluation
    assert u["fresh_data_to_level"]["A"] == pytest.approx([4.5 * 64 * k for k in (10, 11, 12, 13)])
    assert u["fresh_data_to_level"]["B"] == pytest.approx([4.5 * 32 * k for k in (10, 11, 12, 13)])
    assert u["gain"] == pytest.approx(2.0) and u["ci95"][0] > 1 and u["holds"]
    assert result["headroom"] == {"start": 0.2, "best": 0.8, "ceiling": 1.0, "learned": pytest.approx(0.6),
                                  "holds": True}
    assert result["step_size"]["holds"] and result["passes"]


def test_a_data_limited_workload_fails_and_each_threshold_is_its_own():
    arm_a = [run(RISING, 64 * k) for k in (10, 11, 12, 13)]
    same_data = [run(RISING, 128 * k) for k in (10, 11, 12, 13)]  # two steps, no faster per fresh datum
    result = diagnose(arm_a, same_data)
    assert result["update_limited"]["gain"] == pytest.approx(1.0) and not result["update_limited"]["holds"]
    assert not result["passes"]
    stale = [run(RISING, 64 * k, {"clip_s9": THRESHOLDS["clip_s9"] + 0.01, "measurements": 3}) for k in (10, 11)]
    assert not diagnose(stale, stale)["step_size"]["holds"]
    saturated = [run([0.2, 0.5, 0.97, 0.97], 64) for _ in range(4)]
    assert not diagnose(saturated, saturated)["headroom"]["holds"]
    flat = [run([0.2, 0.25, 0.3, 0.3], 64) for _ in range(4)]  # learns 0.10 < 0.15
    assert not diagnose(flat, flat)["headroom"]["holds"]


def test_a_run_that_never_reaches_the_level_counts_as_infinite_fresh_data():
    arm_a = [run(RISING, 64) for _ in range(4)]
    never = [run([0.2] * 8, 32) for _ in range(4)]
    u = diagnose(arm_a, never)["update_limited"]
    assert u["fresh_data_to_level"]["B"] == [math.inf] * 4 and not u["holds"]


def test_fresh_data_counts_each_batch_once():
    curve = [{"compute": 0, "samples_trained": 0, "accuracy": 0.1}, {"compute": 9, "samples_trained": 256,
                                                                     "accuracy": 0.2}]
    assert [p["compute"] for p in fresh_data_curve(curve, 2)] == [0, 128]


def test_the_probe_measures_a_run_without_changing_it(tiny_checkpoint, coin_task):
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmark.engine.pipeline import Pipeline
    from benchmark.strategy import build_strategy

    runs = []
    for probe in (False, True):
        # 7 workers for 1 trainer: a generation starts at nearly every version, so each staleness has rollouts
        w = small_workload(tiny_checkpoint, **{"budget": 120_000, "grpo.lr": 1e-3, "pipeline.workers": 7,
                                               "pipeline.trainers": 1})
        model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
        tok = AutoTokenizer.from_pretrained(tiny_checkpoint, padding_side="left")
        p = Pipeline(w, coin_task, seed=0, policy=(model, tok, {}))
        if probe:
            p.enable_probe()
        p.attach(build_strategy(Path("baselines/fifo_uniform.py"), {"buffer_size": 32}))
        p.start()
        metrics = [m for c in p.run() for m in c.metrics if not m[0].startswith("wall/")]
        runs.append((p.eval_history, [m for m in metrics if not m[0].startswith("probe/")], p.summary().get("probe"),
                     [m for m in metrics if m[0].startswith("probe/")]))
    assert runs[0][:2] == runs[1][:2] and runs[0][2] is None and runs[0][3] == []
    probe, logged = runs[1][2], runs[1][3]
    assert probe["measurements"] > 0 and probe["relative_update"] > 0
    # the policy 9 steps on has moved further from a rollout's than the policy 1 step on
    assert probe["kl_s9"] > probe["kl_s5"] > probe["kl_s1"] >= 0 and 0 <= probe["clip_s1"] <= probe["clip_s9"] <= 1
    assert {name for name, _, _ in logged} >= {"probe/relative_update", "probe/kl_s1", "probe/clip_s9"}


@pytest.mark.slow
def test_diagnose_runs_both_arms_once_then_diagnoses_from_mlflow(tiny_checkpoint, isolated_runs, tmp_path, capsys):
    import json

    import yaml

    from benchmark.cli import main

    workload = tmp_path / "tiny.yaml"
    base = yaml.safe_load(open("workloads/arith-tiny.yaml"))
    for key, value in small_overrides(tiny_checkpoint, budget=40_000).items():
        section, _, field = key.partition(".")
        if field:
            base[section][field] = value
        else:
            base[section] = value
    base["name"] = "tiny-diagnosed"
    workload.write_text(yaml.safe_dump(base))
    out = tmp_path / "diagnostic.json"
    args = ["diagnose", "--workload", str(workload), "--seeds", "100", "101", "--jobs", "1", "--out", str(out)]
    assert main(args) in (0, 1)
    result = json.loads(out.read_text())
    assert len(result["run_ids"]["A"]) == len(result["run_ids"]["B"]) == 2
    printed = capsys.readouterr()
    assert "regime diagnostic of tiny-diagnosed: 4 runs, 0 already finished in MLflow, 4 to run" in " ".join(
        (printed.out + printed.err).split())
    assert main(args) in (0, 1)  # again: nothing to run, the same verdict
    printed = capsys.readouterr()
    assert "4 already finished in MLflow, 0 to run" in " ".join((printed.out + printed.err).split())
    assert json.loads(out.read_text())["run_ids"] == result["run_ids"]


def test_the_workloads_doc_shows_the_published_diagnostics_generated_not_copied():
    from benchmark.leaderboard.diagnostic import TABLE_END, TABLE_START, read_diagnostics, with_diagnostic_table
    from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT

    doc = (REPO_ROOT / "docs" / "workloads.md").read_text()
    assert TABLE_START in doc and TABLE_END in doc
    diagnostics = read_diagnostics(LEADERBOARD_DIR)
    assert with_diagnostic_table(doc, diagnostics) == doc
    assert {d["workload"] for d in diagnostics} >= {"arith-tiny"}  # arith-tiny is diagnosed beside the others


def test_the_diagnostic_table_words_each_statistic_and_links_its_runs():
    from benchmark.leaderboard.diagnostic import diagnostic_table

    arm_a = [run(RISING, 64 * k) for k in (10, 11, 12, 13)]
    stale = [run(RISING, 64 * k, {"clip_s9": 0.2, "measurements": 3}) for k in (10, 11, 12, 13)]
    d = {"workload": "w", "version": "1", "run_ids": {"A": ["a1"], "B": ["b1"]}, **diagnose(stale, arm_a)}
    table = diagnostic_table([d], "runs/")
    assert "| w v1 | 2.00 [1.54, 2.60] (yes) | 0.200 (no) |" in table and "**no**" in table
    assert "[A1](runs/a1/run.json) [B1](runs/b1/run.json)" in table


def test_every_search_candidate_is_a_valid_workload_and_never_scored():
    from benchmark.paths import WORKLOADS_DIR
    from benchmark.workload import load_workload

    candidates = sorted((WORKLOADS_DIR / "search").glob("*.yaml"))
    assert candidates
    for path in candidates:
        workload = load_workload(str(path))
        assert workload.name == path.stem and workload.version == "search" and workload.seeds == []


def test_the_protocols_and_candidates_were_committed_before_the_published_diagnostics_runs():
    """Pre-registration, checked from the history: each published diagnostic's runs started after the protocol and,
    for a search candidate, after its file and the protocol that named it."""
    import json
    import subprocess

    from benchmark.leaderboard.diagnostic import read_diagnostics
    from benchmark.leaderboard.published import RUNS_FOLDER
    from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT

    def first_commit(path: str) -> int:
        times = subprocess.run(["git", "log", "--diff-filter=A", "--format=%ct", "--", path], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.split()
        assert times, f"{path} is not committed"
        return int(times[-1])

    protocols = {"c": "docs/protocols/regime-diagnostic.md", "d": "docs/protocols/regime-search-2.md"}
    diagnostics = read_diagnostics(LEADERBOARD_DIR)
    for d in diagnostics:
        governing = [protocols["c"]]
        if d["version"] == "search":
            governing += [protocols[d["workload"].rsplit("-", 1)[1][0]], f"workloads/search/{d['workload']}.yaml"]
        committed = max(first_commit(p) for p in governing)
        for run_id in d["run_ids"]["A"] + d["run_ids"]["B"]:
            started = json.loads((LEADERBOARD_DIR / RUNS_FOLDER / run_id / "run.json").read_text())["start_time"]
            assert started / 1000 > committed, (d["workload"], run_id)


def test_a_search_candidates_runs_are_measured_never_scored_and_the_page_links_each():
    from benchmark.leaderboard.build import build_results
    from benchmark.leaderboard.page import render_html
    from benchmark.leaderboard.store import RunRecord

    def record(run_id, workload):
        return RunRecord(run_id, workload, "on_policy", "g", 100, "finished", "FINISHED", "buffer", "search", 0, None)

    results = build_results([record("r2", "arith-search-x"), record("r1", "arith-search-x"),
                             record("r3", "arith-small-steps"), record("r4", "qwen3-0.6b-openr1")], {},
                            resamples=200)
    unscored = results["unscored_workloads"]
    assert unscored["arith-search-x"] == {"runs": 2, "run_ids": ["r1", "r2"], "fix": None,
                                          "why": "measured, never scored (leaderboard/measurements/)"}
    # a workload of workloads/ waits for its target: a campaign's freezes it, any other's is frozen by hand
    small_steps = unscored["arith-small-steps"]
    assert small_steps["fix"] is None and "leaderboard/campaigns/v3.2.yaml" in small_steps["why"]
    assert unscored["qwen3-0.6b-openr1"]["fix"] == "replaybench leaderboard freeze-target --workload qwen3-0.6b-openr1"
    html = render_html({**results, "runs_folder": "runs"})
    assert all(f'href="runs/{r}/"' in html for r in ("r1", "r2", "r3", "r4"))

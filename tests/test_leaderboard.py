"""The leaderboard end to end on fake finished runs in a temp MLflow store (no training)."""

import json
import math
import re
import tempfile
from pathlib import Path

import pytest

import benchmark.leaderboard.build
from benchmark.cli import main
from benchmark.leaderboard.build import SCHEMA, results_json, score_from_mlflow
from benchmark.leaderboard.compliance import differing_settings, digest
from benchmark.leaderboard.render import table_rows
from benchmark.workload import load_workload

WORKLOAD = "arith-tiny"


def fake_curve(budget, every, accs):
    points = [i * every for i in range(int(budget // every) + 1)]
    accs = list(accs) + [accs[-1]] * (len(points) - len(accs))
    return [{"compute": float(c), "trainer_step": 10 * i, "accuracy": a, "pass_at_1": a, "pass_at_4": min(1.0, a + 0.2)}
            for i, (c, a) in enumerate(zip(points, accs))]


def make_run(c, exp, strategy, seed, accs=None, workers=5, trainers=3, status="finished", overrides=None,
             entropy=None, track=None, params=None, replay_ratio=1.0, offpolicy_mean=0.5, workload=WORKLOAD):
    """One MLflow run shaped like the runner's: tags, summary.json artifact, train/entropy metric."""
    w = load_workload(workload, {"pipeline.workers": workers, "pipeline.trainers": trainers, **(overrides or {})})
    config = {"workload": w.to_dict(), "strategy": {"name": strategy, "path": f"baselines/{strategy}.py",
                                                    "sha256": f"sha-{strategy}", "params": params or {}},
              "seed": seed}
    group = digest({k: v for k, v in config.items() if k != "seed"})[:16]
    tags = {"replaybench.workload": workload, "replaybench.workload_version": w.version,
            "replaybench.strategy": strategy, "replaybench.group": group, "replaybench.seed": str(seed),
            "replaybench.status": status}
    if track:
        tags["replaybench.track"] = track
    run = c.create_run(exp, run_name=f"{strategy}-seed{seed}", tags=tags)
    rid = run.info.run_id
    if status == "finished":
        curve = fake_curve(w.budget, w.eval.every, accs)
        best = max(curve, key=lambda p: (p["accuracy"], -p["compute"]))
        summary = {"final": curve[-1], "best": best, "eval_curve": curve, "budget": w.budget,
                   "replay_ratio": replay_ratio, "offpolicy_mean": offpolicy_mean, "config": config,
                   "strategy": strategy, "seed": seed,
                   "mlflow_run_id": rid, "group": group, "workload": workload}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "summary.json"
            path.write_text(json.dumps(summary))
            c.log_artifact(rid, str(path))
        if entropy is not None:
            c.log_metric(rid, "train/entropy", entropy, step=5)
        c.set_terminated(rid)
    elif status.startswith("failed"):
        c.set_terminated(rid, status="FAILED")
    return rid


@pytest.fixture
def store(isolated_runs, tmp_path, monkeypatch):
    from benchmark.tracking import client, experiment_id

    monkeypatch.setenv("COLUMNS", "400")  # rich: no wrapping or cut cells in the captured table
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    c = client()
    exp = experiment_id(c, WORKLOAD)
    ids = {}
    # accuracy per eval checkpoint (every 120k of 2.4M); on_policy peaks at 0.50 -> target 0.49
    ramp = [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]
    for seed in range(4):
        ids[("on_policy", seed)] = make_run(c, exp, "on_policy", seed, ramp + [0.5] * seed, 6, 2, entropy=1.5 + seed)
        ids[("fifo_uniform", seed)] = make_run(c, exp, "fifo_uniform", seed, [0.2, 0.3, 0.4, 0.5, 0.55], entropy=1.0)
    for seed in range(3):  # too few seeds: flagged, still ranked; never reaches the target
        ids[("slowpoke", seed)] = make_run(c, exp, "slowpoke", seed, [0.2, 0.25, 0.3])
    ids["failed"] = make_run(c, exp, "crashy", 0, status="failed: StrategyError: sample() returned 3 rollouts, not 64")
    ids["running"] = make_run(c, exp, "crashy", 1, status="running")
    ids["override"] = make_run(c, exp, "fifo_uniform", 9, [0.9], overrides={"budget": 600_000})
    ids["dup"] = make_run(c, exp, "fifo_uniform", 0, [0.9])  # a later rerun of seed 0: reported, not used
    return {"targets": tmp_path / "targets", "out": tmp_path / "board", "ids": ids}


def lb(*args):
    return main(["leaderboard", *map(str, args)])


def test_freeze_build_and_agree(store, capsys):
    targets, out, ids = store["targets"], store["out"], store["ids"]
    # scoring without a target: a clear message that names the command
    assert lb("--targets", targets) == 2
    assert "replaybench leaderboard freeze-target --workload W" in " ".join(capsys.readouterr().err.split())
    assert lb("--workload", WORKLOAD, "--targets", targets) == 2
    assert f"freeze-target --workload {WORKLOAD}" in " ".join(capsys.readouterr().err.split())

    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", targets) == 0
    target = json.loads((targets / f"{WORKLOAD}.json").read_text())
    assert target["workload"] == WORKLOAD and target["workload_version"] == "1" and target["created"]
    assert sorted(target["run_ids"]) == sorted(ids[("on_policy", s)] for s in range(4))
    assert target["target_accuracy"] == pytest.approx(0.98 * 0.5)
    assert target["reference_compute_to_target"] == 6 * 120_000  # reached 0.5 at the 7th eval
    capsys.readouterr()
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", targets) == 2  # frozen: never recomputed
    assert "already frozen" in capsys.readouterr().err

    assert lb("build", "--targets", targets, "--out", out) == 0
    table = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    md = (out / "LEADERBOARD.md").read_text()
    assert results["schema"] == SCHEMA

    entries = results["entries"]
    assert [e["strategy"] for e in entries] == ["fifo_uniform", "on_policy", "slowpoke"]
    ref = entries[1]
    assert ref["reference"] and ref["workloads"][WORKLOAD]["speedup"]["median"] == 1.0
    assert ref["score"]["speedup_geomean"] == 1.0
    fifo = entries[0]["workloads"][WORKLOAD]
    assert fifo["compute_to_target"]["median"] == 3 * 120_000 and fifo["speedup"]["median"] == 2.0
    assert fifo["n_seeds"] == 4 and ids["dup"] not in fifo["run_ids"]
    assert fifo["pass_at_k_at_best"] == {"pass_at_1": 0.55, "pass_at_4": pytest.approx(0.75)}
    assert fifo["final_entropy"] == 1.0 and ref["workloads"][WORKLOAD]["final_entropy"] == 3.0
    slow = entries[2]
    assert slow["workloads"][WORKLOAD]["compute_to_target"]["median"] == "inf"  # JSON: "inf", not Infinity
    assert slow["workloads"][WORKLOAD]["speedup"]["median"] == 0.0
    assert slow["workloads"][WORKLOAD]["final_entropy"] is None
    assert any("3 seeds" in f for f in slow["flags"])
    assert slow["score"]["speedup_geomean"] == pytest.approx(720_000 / 2_400_001)  # capped at budget + 1
    assert slow["band"] > entries[0]["band"]
    # performance profile: fifo is best (1.0); on_policy at r = 2 -> (4 - 2) / 3; slowpoke never
    assert [e["performance_profile"] for e in entries] == [1.0, pytest.approx(2 / 3), 0.0]

    # every number traces to MLflow run ids
    all_ids = set(ids.values())
    for e in entries:
        assert set(e["workloads"][WORKLOAD]["per_run"]) == set(e["workloads"][WORKLOAD]["run_ids"]) <= all_ids

    # failed, running, non-compliant and duplicate runs are listed with their reasons, never dropped
    reasons = {x["run_id"]: x["reason"] for x in results["excluded_runs"]}
    assert reasons[ids["failed"]].startswith("failed: StrategyError: sample() returned 3 rollouts")
    assert reasons[ids["running"]].startswith("incomplete: still running")
    assert reasons[ids["override"]].startswith("non-compliant") and "budget" in reasons[ids["override"]]
    assert reasons[ids["dup"]].startswith("duplicate of seed 0")
    not_ranked = {n["strategy"]: n for n in results["not_ranked"]}
    assert sorted(not_ranked) == ["crashy", "fifo_uniform"]  # fifo_uniform: the budget-override configuration
    assert not_ranked["crashy"]["run_ids"] == sorted([ids["failed"], ids["running"]])
    assert "non-compliant" in not_ranked["fifo_uniform"]["reason"]
    for text in (table, md):
        assert "sample() returned 3 rollouts" in text and ids["failed"] in text or "crashy" in text
    assert ids["failed"] in md and "failed: StrategyError" in md and "failed: StrategyError" in table

    # the terminal table, the markdown and the JSON list the same entries in the same order, same numbers
    # (the results dict holds never reached as math.inf; results.json spells it "inf")
    scored = score_from_mlflow(targets_dir=targets)
    assert scored["entries"][2]["workloads"][WORKLOAD]["compute_to_target"]["median"] == math.inf
    assert json.loads(results_json(scored))["entries"] == entries
    header, rows = table_rows(scored)
    md_rows = [line for line in md.splitlines() if line.startswith("| ") and re.match(r"\| \d+ \| \d+ \[", line)]
    assert [r.split(" | ")[2] for r in md_rows] == [row[2] for row in rows]
    positions = [table.index(row[2]) for row in rows]
    assert positions == sorted(positions)
    for row in rows:
        assert row[5] in table and row[5] in md  # the score with its interval


def test_build_is_atomic_and_track_filter(store, capsys, monkeypatch):
    targets, out = store["targets"], store["out"]
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", targets) == 0
    assert lb("build", "--targets", targets, "--out", out) == 0
    before = {p.name: p.read_text() for p in out.iterdir()}

    def boom(results):
        raise RuntimeError("disk full")

    monkeypatch.setattr(benchmark.leaderboard.build, "render_markdown", boom)
    with pytest.raises(RuntimeError):
        lb("build", "--targets", targets, "--out", out)
    assert {p.name: p.read_text() for p in out.iterdir()} == before  # no temp files left, nothing half-written

    from benchmark.tracking import client, experiment_id

    c = client()
    make_run(c, experiment_id(c, WORKLOAD), "side_track", 0, [0.6], track="gpu")
    results = score_from_mlflow(WORKLOAD, track="gpu", targets_dir=targets)
    # the track's own entries plus the frozen reference, which every track is measured against
    assert sorted(e["strategy"] for e in results["entries"]) == ["on_policy", "side_track"]
    side = next(e for e in results["entries"] if e["strategy"] == "side_track")
    # met at compute 0: counts at the first eval (120k), a finite speedup; 1 seed: flagged
    assert side["workloads"][WORKLOAD]["speedup"]["median"] == 6.0 and "1 seeds" in side["flags"][0]


def test_memory_settings_never_make_a_run_non_compliant():
    official = {"budget": 2400000.0, "grpo.lr": 1e-4}
    run = {"budget": 2400000.0, "grpo.lr": 1e-4, "grpo.micro_batch_size": 4, "grpo.gradient_checkpointing": True}
    assert differing_settings(run, official) == []
    assert differing_settings({**run, "grpo.lr": 3e-4}, official) == ["grpo.lr"]


"""The leaderboard end to end on fake finished runs in a temp MLflow store (no training)."""

import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import WORKLOAD, fake_curve, make_run

import benchmark.leaderboard.build
from benchmark.cli import main
from benchmark.leaderboard.build import SCHEMA, build_results, results_json, score_from_mlflow
from benchmark.leaderboard.compliance import canonical_workload, differing_settings
from benchmark.leaderboard.page import render_html
from benchmark.leaderboard.render import print_leaderboard, render_markdown, table_rows
from benchmark.leaderboard.store import RunRecord
from benchmark.leaderboard.targets import freeze_target
from benchmark.workload import load_workload

pytestmark = pytest.mark.usefixtures("workloads_as_v2")  # made-up runs of arith-tiny version 2


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
        # the held-out reference seeds (10-13) that set the target
        ids[("on_policy", 10 + seed)] = make_run(c, exp, "on_policy", 10 + seed, ramp, 6, 2)
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
    assert target["workload"] == WORKLOAD and target["workload_version"] == "2" and target["created"]
    assert sorted(target["run_ids"]) == sorted(ids[("on_policy", s)] for s in range(10, 14))  # held out
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
    assert slow["flags"] == ["no counting run of seed 3 on arith-tiny: counted as failed"]
    # never reached: no speedup, ranked below every entry that reaches it, by best accuracy / target
    assert slow["score"]["reached"] is False and slow["score"]["speedup_geomean"] is None
    assert slow["score"]["best_vs_target"] == pytest.approx(0.3 / 0.49)
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
    # one seed of four: the three missing ones are failures, so its median run never reaches the target
    assert not side["score"]["reached"] and side["flags"][0].startswith("no counting run of seeds 1, 2, 3 on")
    assert side["workloads"][WORKLOAD]["per_run"][side["workloads"][WORKLOAD]["run_ids"][0]]["speedup"] == 6.0


def test_a_summary_changed_after_its_run_is_refused_by_the_build(store, capsys):
    """The forgery of the hostile review: a summary.json artifact rewritten in the store (a curve that climbs to
    0.95 early). The run's tag holds the digest of the summary it ended with; the build refuses the forged one with
    a line saying so, and ranks as if the run had not finished."""
    from mlflow.artifacts import download_artifacts

    from benchmark.tracking import client, experiment_id

    c = client()
    honest = make_run(c, experiment_id(c, WORKLOAD), "forger", 0, [0.2, 0.3], digest_tag=True)
    forged = make_run(c, experiment_id(c, WORKLOAD), "forger", 1, [0.2, 0.3], digest_tag=True)
    artifact = Path(download_artifacts(run_id=forged, artifact_path="summary.json"))
    local = Path(c.get_run(forged).info.artifact_uri.removeprefix("file://")) / "summary.json"
    summary = json.loads(artifact.read_text())
    summary["eval_curve"] = fake_curve(summary["budget"], 120_000, [0.2, 0.95])
    summary["best"] = summary["eval_curve"][1]
    local.write_text(json.dumps(summary))
    targets, out = store["targets"], store["out"]
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", targets) == 0
    assert lb("build", "--targets", targets, "--out", out) == 0
    results = json.loads((out / "results.json").read_text())
    reasons = {x["run_id"]: x["reason"] for x in results["excluded_runs"]}
    assert reasons[forged].startswith("refused: summary.json is not the one the run ended with")
    assert honest not in reasons
    assert forged in (out / "LEADERBOARD.md").read_text()


def test_memory_settings_never_make_a_run_non_compliant():
    official = {"budget": 2400000.0, "grpo.lr": 1e-4}
    run = {"budget": 2400000.0, "grpo.lr": 1e-4, "grpo.micro_batch_size": 4, "grpo.gradient_checkpointing": True}
    assert differing_settings(run, official) == []
    assert differing_settings({**run, "grpo.lr": 3e-4}, official) == ["grpo.lr"]


# ---- the rules on in-memory runs (no MLflow) ---------------------------------------------------
EVERY = 120_000  # arith-tiny evaluates every 120k units of its 2.4M budget


def reaching_at(k: int) -> list[float]:
    """Accuracies that first reach 0.5 (above the targets below) at the k-th evaluation (compute k x 120k)."""
    return [0.1] * k + [0.5]


def record(workload, strategy, seed, accs, version="2", workers=5, trainers=3) -> RunRecord:
    """A finished run with its summary, as load_runs returns it; every workload here has arith-tiny's settings."""
    w = load_workload(WORKLOAD, {"pipeline.workers": workers, "pipeline.trainers": trainers})
    run_id = f"{workload}-{strategy}-{seed}-v{version}"
    summary = {"eval_curve": fake_curve(w.budget, EVERY, accs), "mlflow_run_id": run_id, "seed": seed,
               "config": {"workload": w.to_dict(), "seed": seed,
                          "strategy": {"name": strategy, "sha256": f"sha-{strategy}", "params": {}}}}
    return RunRecord(run_id=run_id, workload=workload, strategy=strategy, group=f"group-{strategy}", seed=seed,
                     status="finished", mlflow_status="FINISHED", track="buffer", workload_version=version,
                     start_time=seed, entropy=None, summary=summary)


def frozen(reference_runs: list[RunRecord], reference_ctt: float) -> dict:
    """A target as freeze_target writes it (0.49 target accuracy), for arith-tiny's settings."""
    w = load_workload(WORKLOAD)
    return {"workload_version": "2", "workload_config": canonical_workload(w.to_dict()), "budget": float(w.budget),
            "target_accuracy": 0.49, "reference_compute_to_target": reference_ctt,
            "created": "2026-01-01T00:00:00+00:00", "run_ids": [r.run_id for r in reference_runs],
            "reference": {"workers": 6, "trainers": 2}}


@pytest.fixture(scope="module")
def two_workloads():
    """Two workloads; the reference reaches the target at 960k on both. Entries: `lopsided` 4x as fast on alpha and
    as fast on beta, `even` 2x on both, `two_seeds`, `half_done` (alpha only), `stale` (only runs of another
    workload version), and a run of `even` of another workload version that would beat its other seeds."""
    records, targets = [], {}
    for w in ("alpha", "beta"):
        ref = [record(w, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
        records += ref
        targets[w] = frozen(ref, 8 * EVERY)
        records += [record(w, "lopsided", s, reaching_at(2 if w == "alpha" else 8)) for s in range(4)]
        records += [record(w, "even", s, reaching_at(4)) for s in range(4)]
        records.append(record(w, "even", 4, reaching_at(1), version="0"))
        records += [record(w, "two_seeds", s, reaching_at(6)) for s in range(2)]
        records += [record(w, "stale", s, reaching_at(1), version="0") for s in range(4)]
    records += [record("alpha", "half_done", s, reaching_at(1)) for s in range(4)]
    results = build_results(records, targets, resamples=200)
    return {"results": results, "by_strategy": {e["strategy"]: e for e in results["entries"]},
            "markdown": render_markdown(results)}


def test_score_is_the_geometric_mean_of_the_workload_speedups(two_workloads):
    lopsided, even = two_workloads["by_strategy"]["lopsided"], two_workloads["by_strategy"]["even"]
    assert [lopsided["workloads"][w]["speedup"]["median"] for w in ("alpha", "beta")] == [4.0, 1.0]
    # geometric mean of 4 and 1: 2 (the arithmetic mean would be 2.5 and rank it above `even`)
    assert lopsided["score"]["speedup_geomean"] == pytest.approx(2.0)
    assert even["score"]["speedup_geomean"] == pytest.approx(2.0)
    assert lopsided["rank"] == even["rank"] == 1
    assert two_workloads["by_strategy"]["on_policy"]["score"]["speedup_geomean"] == 1.0


def test_runs_of_another_workload_version_are_not_scored(two_workloads):
    results = two_workloads["results"]
    even = two_workloads["by_strategy"]["even"]
    assert [even["workloads"][w]["n_seeds"] for w in ("alpha", "beta")] == [4, 4]  # the version-0 seed 4 is not used
    assert even["workloads"]["alpha"]["speedup"]["median"] == 2.0
    reasons = {x["run_id"]: x["reason"] for x in results["excluded_runs"]}
    for w in ("alpha", "beta"):
        assert reasons[f"{w}-even-4-v0"] == "non-compliant: workload version 0, the target is for version 2"
    assert "stale" not in two_workloads["by_strategy"]
    stale = next(n for n in results["not_ranked"] if n["strategy"] == "stale")
    assert stale["reason"].startswith("no usable run (8 excluded): non-compliant: workload version 0")
    assert "| alpha | stale | 0 | `alpha-stale-0-v0` | non-compliant: workload version 0" in two_workloads["markdown"]


def test_freeze_target_ignores_reference_runs_of_another_version(tmp_path):
    current = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(10, 14)]
    older = [record(WORKLOAD, "on_policy", s, reaching_at(1), version="0", workers=6, trainers=2)
             for s in range(10, 14)]
    scored = [record(WORKLOAD, "on_policy", s, reaching_at(1), workers=6, trainers=2) for s in range(4)]
    target = freeze_target(WORKLOAD, current + older + scored, tmp_path)
    assert target["run_ids"] == [r.run_id for r in current]  # the held-out seeds only, never the scored ones
    assert target["reference_compute_to_target"] == 8 * EVERY and target["target_seeds"] == [10, 11, 12, 13]
    # by construction within the horizon: at the median curve's maximum half the seeds are at or above it
    assert target["reference_compute_to_target"] <= target["target_horizon"] * target["budget"]


def test_an_entry_missing_a_workload_is_listed_as_incomplete_not_ranked(two_workloads):
    results, md = two_workloads["results"], two_workloads["markdown"]
    assert sorted(results["workloads"]) == ["alpha", "beta"]
    assert sorted(two_workloads["by_strategy"]) == ["even", "lopsided", "on_policy", "two_seeds"]
    half = next(n for n in results["not_ranked"] if n["strategy"] == "half_done")
    assert half["reason"] == "incomplete: no finished compliant run on beta"
    assert half["run_ids"] == [f"alpha-half_done-{s}-v2" for s in range(4)]
    assert "| half_done | incomplete: no finished compliant run on beta | 4 |" in md  # its name, no hex
    # one speedup column per workload, seeds per workload, and the flag of each workload short of seeds
    header = next(line for line in md.splitlines() if line.startswith("| band |"))
    assert "| speedup alpha | speedup beta | flags |" in header
    two = two_workloads["by_strategy"]["two_seeds"]
    assert two["flags"] == ["no counting run of seeds 2, 3 on alpha: counted as failed",
                            "no counting run of seeds 2, 3 on beta: counted as failed"]
    row = next(line for line in md.splitlines() if "| two_seeds |" in line)
    assert "| 2/2 |" in row and row.endswith("| " + "; ".join(two["flags"]) + " |")


def test_never_reached_is_infinite_in_the_results_and_inf_in_json():
    ref = [record("alpha", "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    never = [record("alpha", "never", s, [0.1, 0.2]) for s in range(4)]
    results = build_results(ref + never, {"alpha": frozen(ref, 8 * EVERY)}, resamples=50)
    entry = next(e for e in results["entries"] if e["strategy"] == "never")
    ctt = entry["workloads"]["alpha"]["compute_to_target"]
    assert ctt["median"] == ctt["q1"] == math.inf and ctt["iqr"] is None
    assert entry["score"]["speedup_geomean"] is None and entry["score"]["best_vs_target"] == pytest.approx(0.2 / 0.49)
    assert json.loads(results_json(results))["entries"][1]["workloads"]["alpha"]["compute_to_target"] == {
        "median": "inf", "q1": "inf", "q3": "inf", "iqr": None}
    assert "| ∞ [∞, ∞] |" in render_markdown(results)


def test_importing_the_package_loads_neither_mlflow_nor_matplotlib():
    code = ("import sys, benchmark.cli.leaderboard; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'mlflow', 'matplotlib'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    assert out.strip() == "[]"


def test_an_open_track_entry_may_choose_its_loss_and_clip_range_and_is_ranked():
    def with_choices(rec, track, **settings):
        workload = load_workload(WORKLOAD, {"pipeline.workers": 5, "pipeline.trainers": 3, **settings})
        rec.summary["config"]["workload"] = workload.to_dict()
        rec.track = track
        rec.run_id = rec.summary["mlflow_run_id"] = f"{rec.run_id}-{track}-{len(settings)}"
        return rec

    ref = [record("arith-tiny", "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    asymre = {"grpo.loss": "asymre", "grpo.eps_high": 0.28}
    records = ref + [with_choices(record("arith-tiny", "fifo_uniform", s, reaching_at(4)), "open", **asymre)
                     for s in range(4)]
    records += [with_choices(record("arith-tiny", "fifo_uniform", s, reaching_at(4)), "buffer", **asymre)
                for s in range(4)]
    records += [with_choices(record("arith-tiny", "fifo_uniform", s, reaching_at(6)), "open") for s in range(4)]
    results = build_results(records, {"arith-tiny": frozen(ref, 8 * EVERY)}, resamples=200)
    fifo = [e for e in results["entries"] if e["strategy"] == "fifo_uniform"]
    assert len(fifo) == 2  # the open-track choices make an entry of their own
    chosen = next(e for e in fifo if e["open_track"])
    assert chosen["open_track"] == {"grpo.eps_high": 0.28, "grpo.loss": "asymre"}
    assert chosen["label"].endswith("(eps_high 0.28, loss asymre)")
    assert chosen["score"]["speedup_geomean"] == 2.0 and chosen["rank"] == 1
    # on the buffer track the same choices are non-compliant
    buffer_runs = {x["seed"]: x["reason"] for x in results["excluded_runs"] if x["track"] == "buffer"}
    assert sorted(buffer_runs) == [0, 1, 2, 3]
    assert all(r.startswith("non-compliant") and "grpo.eps_high" in r for r in buffer_runs.values())


def test_failure_never_ties_with_success():
    """Rules v2: an entry at accuracy 0 lands in a band strictly below the reference, and an entry whose median run
    reaches the target (2 of 4 seeds) ranks above one that comes close but never does."""
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    zero = [record(WORKLOAD, "zero", s, [0.0]) for s in range(4)]
    half = [record(WORKLOAD, "half", s, reaching_at(30) if s < 2 else [0.1, 0.3]) for s in range(4)]
    close = [record(WORKLOAD, "close", s, [0.1, 0.48]) for s in range(4)]  # 0.48 < target 0.49 from the start
    results = build_results(ref + zero + half + close, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=500)
    by = {e["strategy"]: e for e in results["entries"]}
    assert [e["strategy"] for e in results["entries"]] == ["on_policy", "half", "close", "zero"]
    assert by["zero"]["band"] > by["on_policy"]["band"] and by["zero"]["rank_interval"][0] > 1
    assert by["half"]["score"]["reached"] and by["half"]["score"]["speedup_geomean"] == pytest.approx(8 / 30)
    assert not by["close"]["score"]["reached"] and by["close"]["score"]["best_vs_target"] == pytest.approx(0.48 / 0.49)
    assert by["half"]["rank"] < by["close"]["rank"]
    md = render_markdown(results)
    row = next(line for line in md.splitlines() if "| close |" in line)
    assert "not reached: best 0.980× target" in row  # never a number that reads like a speedup


def test_an_entry_is_known_by_its_name_not_its_strategy_file():
    """Every submission's file is strategy.py: the board labels entries by submission.yaml's name."""
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]

    def named(rec, name):
        rec.summary["mlflow_run_id"] = f"{name}-{rec.seed}"
        return dataclasses.replace(rec, name=name, group=f"group-{name}", run_id=f"{name}-{rec.seed}")

    kestrel = [named(record(WORKLOAD, "strategy", s, reaching_at(4)), "kestrel") for s in range(4)]
    osprey = [named(record(WORKLOAD, "strategy", s, reaching_at(6)), "osprey") for s in range(4)]
    broken = dataclasses.replace(named(record(WORKLOAD, "strategy", 0, [0.1]), "falcon"), status="failed: oops")
    results = build_results(ref + kestrel + osprey + [broken], {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    labels = [e["label"] for e in results["entries"]]
    assert labels == ["kestrel", "osprey", "on_policy"]
    assert {e["key"].split("@")[0] for e in results["entries"]} == {"kestrel", "osprey", "on_policy"}
    assert [x["name"] for x in results["excluded_runs"]] == ["falcon"]
    assert "falcon" in results["not_ranked"][0]["key"]
    md = render_markdown(results)
    assert "| kestrel |" in md and "| strategy |" not in md


def test_one_baseline_at_two_splits_is_two_entries_labelled_by_split():
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    at_53 = [record(WORKLOAD, "fifo_uniform", s, reaching_at(6)) for s in range(4)]
    at_62 = [dataclasses.replace(r, group="fifo-62", run_id=f"fifo62-{r.seed}")
             for r in (record(WORKLOAD, "fifo_uniform", s, reaching_at(4), workers=6, trainers=2) for s in range(4))]
    for r in at_53 + at_62:
        r.summary["config"]["strategy"]["params"] = {"buffer_size": 90}
    for r in at_62:
        r.summary["mlflow_run_id"] = r.run_id
    results = build_results(ref + at_53 + at_62, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    by_label = {e["label"]: e for e in results["entries"]}
    assert set(by_label) == {"on_policy", "fifo_uniform (5,3) N=90", "fifo_uniform (6,2) N=90"}
    assert by_label["fifo_uniform (6,2) N=90"]["workloads"][WORKLOAD]["run_ids"] == sorted(r.run_id for r in at_62)


def test_the_terminal_table_fits_a_narrow_terminal_and_keeps_every_column_in_a_pipe():
    import io

    from rich.console import Console

    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    close = [record(WORKLOAD, "close", s, [0.1, 0.48]) for s in range(3)]  # seed 3 missing: a flag
    results = build_results(ref + close, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    for width in (80, 100):
        out = io.StringIO()
        print_leaderboard(results, Console(file=out, width=width, force_terminal=True, color_system=None))
        lines = out.getvalue().splitlines()
        assert max(map(len, lines)) <= width
        assert any("│ on_policy" in line for line in lines) and any("│ close" in line for line in lines)
        assert any(line.startswith("close: no counting run of seed 3") for line in lines)
    out = io.StringIO()
    print_leaderboard(results, Console(file=out, width=80))  # not a terminal: a file or a pipe
    assert "AUC" in out.getvalue() and max(map(len, out.getvalue().splitlines())) > 80


def test_the_published_board_ships_its_runs_and_they_load_into_another_store(store, tmp_path, monkeypatch, capsys):
    """Every run id on the published page opens (leaderboard/runs/<id>/), and `import-runs` loads them into an
    empty store from which the same board is built, naming the same runs."""
    import benchmark.cli.leaderboard
    import benchmark.leaderboard.build
    import benchmark.tracking

    published = tmp_path / "published"
    monkeypatch.setattr(benchmark.cli.leaderboard, "LEADERBOARD_DIR", published)
    monkeypatch.setattr(benchmark.leaderboard.build, "LEADERBOARD_DIR", published)
    targets = store["targets"]
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", targets) == 0
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    earlier = build_results(ref, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    earlier = results_json({**earlier, "rules": {**earlier["rules"], "version": 1}, "runs_folder": "runs"})
    published.mkdir()
    (published / "results.json").write_text(earlier)  # a board in force that this one replaces: kept
    assert lb("build", "--publish", "--targets", targets) == 0
    assert lb("build", "--publish", "--targets", targets) == 0  # the same board again: kept once
    board = json.loads((published / "results.json").read_text())
    assert (published / "replaced" / "v1" / "results.json").read_text() == earlier
    assert [r["board"] for r in board["replaced_boards"]] == ["v1"]
    assert 'href="replaced/v1/"' in (published / "index.html").read_text()
    shipped = {p.name for p in (published / "runs").iterdir()}
    assert shipped == set(store["ids"].values())  # scored, held-out, excluded and failed runs alike
    scored = board["entries"][0]["workloads"][WORKLOAD]["run_ids"][0]
    shipped_run = json.loads((published / "runs" / scored / "run.json").read_text())
    assert shipped_run["tags"]["replaybench.seed"] and (published / "runs" / scored / "summary.json").is_file()
    assert f'href="runs/{scored}/"' in (published / "index.html").read_text()
    # where the runs are, for a reader: the shipped folder, never the builder's own store
    builders_store = benchmark.tracking.tracking_uri()
    assert "tracking_uri" not in board["mlflow"] and builders_store not in (published / "results.json").read_text()
    assert " from the runs shipped in [runs/](runs/) (code " in (published / "LEADERBOARD.md").read_text()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.setattr(benchmark.tracking, "RUNS_DIR", fresh)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{fresh / 'mlflow.db'}")
    assert lb("import-runs", published / "runs") == 0
    assert lb("import-runs", published / "runs") == 0  # twice: nothing twice
    assert "imported 0 runs" in " ".join(capsys.readouterr().err.split())
    assert lb("build", "--targets", targets, "--out", tmp_path / "rebuilt") == 0
    rebuilt = json.loads((tmp_path / "rebuilt" / "results.json").read_text())
    assert [(e["label"], e["rank"], e["workloads"][WORKLOAD]["run_ids"], e["score"]) for e in rebuilt["entries"]] == [
        (e["label"], e["rank"], e["workloads"][WORKLOAD]["run_ids"], e["score"]) for e in board["entries"]]
    assert rebuilt["workloads"][WORKLOAD]["target_runs_missing"] == []


def test_a_board_that_replaces_another_keeps_it_with_every_link_opening(tmp_path):
    """A campaign's board published over a board of every target keeps that board in replaced/v2/: its
    results.json byte for byte, its target, its table and page rendered again with their links into the runs folder
    the boards share; rebuilding the same board keeps the record; a board named alike already kept is not
    overwritten. The campaign's targets become the ones in force."""
    from benchmark.leaderboard import LeaderboardError
    from benchmark.leaderboard.render import readme_results
    from benchmark.leaderboard.replaced import replaced_board_files, targets_in_force_files

    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    v2 = {**build_results(ref, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200), "runs_folder": "runs"}
    in_force, board = results_json(v2), tmp_path / "leaderboard"
    (board / "targets").mkdir(parents=True)
    (board / "targets" / f"{WORKLOAD}.json").write_text("the v2 target")
    (board / "results.json").write_text(in_force)
    campaign = {"name": "v3.2", "file": "leaderboard/campaigns/v3.2.yaml", "release": "0" * 40, "kernels": "portable",
                "rules": 2, "seeds_per_arm": 4, "runs_made": 8, "runs_finished": 8, "supersedes": {},
                "runs_foreign": []}
    v3 = {**v2, "generated": "2027-01-02T00:00:00+00:00", "campaign": campaign}

    records, files = replaced_board_files(v3, board)
    assert records == [{"board": "v2", "folder": "replaced/v2", "rules": 2, "generated": v2["generated"],
                        "code_version": v2["code_version"]}]
    kept = board / "replaced" / "v2"
    assert files == {**files, kept / "results.json": in_force, kept / "targets" / f"{WORKLOAD}.json": "the v2 target"}
    assert set(files) == {kept / "results.json", kept / "LEADERBOARD.md", kept / "index.html",
                          kept / "targets" / f"{WORKLOAD}.json"}
    page, md = files[kept / "index.html"], files[kept / "LEADERBOARD.md"]
    run_links = re.findall(r'href="([^"]*runs/[^"]*)"', page)
    assert f"../../runs/{ref[0].run_id}/" in run_links and all(h.startswith("../../runs/") for h in run_links)
    assert 'href="../../README.md"' in page and "(../../README.md)" in md  # the rules, beside the board in force
    said = "Replaced on 2027-01-02 by the board v3.2"
    assert said in " ".join(page.split()) and said in md and "[the board in force](../../)" in md

    class Campaign:
        def targets_dir(self):
            return tmp_path / "campaign-targets"

    (tmp_path / "campaign-targets").mkdir()
    (tmp_path / "campaign-targets" / f"{WORKLOAD}.json").write_text("the campaign's target")
    assert targets_in_force_files(v3, Campaign(), board) == {board / "targets" / f"{WORKLOAD}.json":
                                                             "the campaign's target"}
    assert targets_in_force_files(v2, None, board) == {}

    v3["replaced_boards"] = records
    generated_line = render_markdown(v3).splitlines()[2]  # the build's line, which a rebuild elsewhere lacks
    assert "It replaces the board v2 (scoring rules v2, built " in generated_line
    assert "kept in [replaced/v2/](replaced/v2/)" in generated_line
    assert 'href="replaced/v2/"' in render_html(v3)
    assert "[leaderboard/replaced/v2/](leaderboard/replaced/v2/)" in readme_results(v3)

    (board / "results.json").write_text(results_json(v3))
    assert replaced_board_files({**v3, "generated": "2027-02-01T00:00:00+00:00"}, board) == (records, {})
    v4 = {**v3, "campaign": {**campaign, "name": "v4"}}
    records4, files4 = replaced_board_files(v4, board)
    assert [r["board"] for r in records4] == ["v2", "v3.2"] and board / "replaced/v3.2/index.html" in files4
    (board / "replaced" / "v3.2").mkdir(parents=True)
    (board / "replaced" / "v3.2" / "results.json").write_text("{}")
    with pytest.raises(LeaderboardError, match="already keeps another board named v3.2"):
        replaced_board_files(v4, board)
    (board / "results.json").write_text("{")
    with pytest.raises(LeaderboardError, match="cannot be read"):
        replaced_board_files(v4, board)


def test_the_distributions_are_pooled_over_seeds_and_drawn_on_the_page():
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    fifo = [record(WORKLOAD, "fifo_uniform", s, reaching_at(6)) for s in range(4)]
    for r in ref:
        r.summary.update(offpolicy_distribution={"0": 30, "1": 10}, since_last_use_distribution={"new": 40})
    for r in fifo:
        r.summary.update(offpolicy_distribution={"0": 10, "3": 20, "12": 10},
                         since_last_use_distribution={"new": 10, "2": 25, "7": 5})
    results = build_results(ref + fifo, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    by_name = {e["name"]: e["workloads"][WORKLOAD] for e in results["entries"]}
    assert by_name["on_policy"]["offpolicy_distribution"] == {"0": 0.75, "1": 0.25}
    assert by_name["fifo_uniform"]["since_last_use_distribution"] == {"new": 0.25, "2": 0.625, "7": 0.125}
    assert 'id="distributions-arith-tiny"' in render_html(results)
    for r in fifo[:1]:
        del r.summary["offpolicy_distribution"]  # a run recorded before the distributions: no partial pooling
    again = build_results(ref + fifo, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    assert next(e for e in again["entries"] if e["name"] == "fifo_uniform")["workloads"][WORKLOAD][
        "offpolicy_distribution"] is None


def test_a_sync_period_is_an_entrys_choice_ranked_beside_the_reference_not_as_it():
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    stale = []
    for s in range(4):
        w = load_workload(WORKLOAD, {"pipeline.workers": 6, "pipeline.trainers": 2, "pipeline.sync_every": 4})
        r = dataclasses.replace(record(WORKLOAD, "on_policy", s, reaching_at(10), workers=6, trainers=2),
                                group="sync4", run_id=f"sync4-{s}")
        r.summary.update(mlflow_run_id=r.run_id, config={**r.summary["config"], "workload": w.to_dict()})
        stale.append(r)
    results = build_results(ref + stale, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    assert not results["excluded_runs"]  # compliant: not a changed workload setting
    by_label = {e["label"]: e for e in results["entries"]}
    assert set(by_label) == {"on_policy (6,2)", "on_policy (6,2) sync 4"}  # one name, told apart by the setting
    assert by_label["on_policy (6,2)"]["reference"] and not by_label["on_policy (6,2) sync 4"]["reference"]


def test_the_committed_board_separates_the_control_and_keeps_its_target_apart():
    """The published board itself (leaderboard/results.json): what makes it worth reading."""
    repo = Path(__file__).resolve().parent.parent
    board = json.loads((repo / "leaderboard" / "results.json").read_text())
    w = board["workloads"][WORKLOAD]
    entries = board["entries"]
    reference = next(e for e in entries if e["reference"])
    control = next(e for e in entries if e["name"] == "oldest_first")
    # the control's rank interval lies wholly below the reference's (the v2 bands no longer show it: an entry whose
    # refused seeds count as failed has a rank interval spanning the board, and the band rule chains through it)
    assert len(entries) >= 10 and control["rank_interval"][0] > reference["rank_interval"][1]
    assert reference["workloads"][WORKLOAD]["compute_to_target"]["median"] <= 0.6 * w["budget"]
    assert not set(w["reference_run_ids"]) & set(reference["workloads"][WORKLOAD]["run_ids"])
    shipped = {p.name for p in (repo / "leaderboard" / "runs").iterdir()}
    assert {r for e in entries for r in e["workloads"][WORKLOAD]["run_ids"]} <= shipped  # every number can be opened


def test_the_verdict_in_words_follows_the_interval_and_needs_the_reference():
    from benchmark.leaderboard.render import verdict_words

    def score(lo, mid, hi, reached=True):
        return {"reached": reached, "speedup_geomean": mid, "ci95": [lo, hi], "best_vs_target": 0.9,
                "best_vs_target_ci95": [0.85, 0.95]}

    assert verdict_words(score(1.05, 1.2, 1.3), True) == \
        "speedup 1.200 [1.050, 1.300] against the reference: faster than the reference (interval above 1)"
    assert verdict_words(score(0.7, 0.8, 0.9), True).endswith("slower than the reference (interval below 1)")
    assert verdict_words(score(0.81, 0.96, 1.0), True) == \
        "speedup 0.960 [0.810, 1.000] against the reference: not resolved from it (the interval holds 1)"
    assert verdict_words(score(0.81, 0.96, 0.99996), True).endswith("(the interval holds 1)")  # as the digits read
    assert "slower than the reference" in verdict_words(score(0, 0, 0, reached=False), True)
    alone = verdict_words(score(1.05, 1.2, 1.3), False)
    assert "faster" not in alone and alone.endswith(
        "no comparison yet: run `replaybench leaderboard import-runs`, then `replaybench leaderboard`")


def test_without_the_reference_no_file_shows_a_rank_band_or_profile():
    kestrel = [record(WORKLOAD, "kestrel", s, reaching_at(4)) for s in range(4)]
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(10, 14)]
    results = build_results(kestrel, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=200)
    header, rows = table_rows(results)
    assert "kestrel" in rows[0] and not {"band", "rank [95%]", "perf. profile"} & set(header)
    md, page = render_markdown(results), render_html(results)
    assert "perf. profile" not in md and "Note: no rank, band or performance profile" in md
    assert "perf. profile" not in page and "run `replaybench leaderboard import-runs`" in page


def test_left_out_runs_are_grouped_by_why_folded_on_the_page_and_only_your_own_get_advice(store, capsys):
    """A store after `import-runs`: the published board's interrupted run is somebody else's, so only the store's
    own interrupted run is named as resumable; a preview is drawn beside the board, never "not ranked"."""
    from benchmark.tracking import client, experiment_id

    targets, ids = store["targets"], store["ids"]
    c = client()
    exp = experiment_id(c, WORKLOAD)
    mine = make_run(c, exp, "kestrel", 0, status="interrupted")
    theirs = make_run(c, exp, "fifo_uniform", 2, status="interrupted", workers=4, trainers=4)
    c.set_tag(theirs, "replaybench.published_run_id", theirs)
    preview = make_run(c, exp, "kestrel", 0, [0.3, 0.4], overrides={"budget": 600_000})
    c.set_tag(preview, "replaybench.preview", "true")
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", targets) == 0

    results = score_from_mlflow(targets_dir=targets)
    assert results["resumable_run_ids"] == sorted([mine, ids["running"]])  # crashy's running run is this store's
    assert [p["run_id"] for p in results["previews"]] == [preview]
    assert preview not in {x["run_id"] for x in results["excluded_runs"]}
    assert preview not in {r for n in results["not_ranked"] for r in n["run_ids"]}
    why = {x["run_id"]: x["why"] for x in results["excluded_runs"]}
    assert why[mine] == why[theirs] == why[ids["running"]] == "interrupted"
    assert why[ids["failed"]] == "failed" and why[ids["dup"]] == "duplicate seed"
    assert why[ids[("on_policy", 10)]] == "held out: sets the target"
    assert all("--resume" not in x["reason"] for x in results["excluded_runs"])

    print_leaderboard(results, highlight="kestrel")
    table = " ".join(capsys.readouterr().out.split())
    assert "runs left out, by why" in table and "interrupted │ 3 │" in table
    assert "runs of kestrel left out" in table and mine in table and theirs not in table  # one row a group
    assert f"2 of this store's own runs stopped before the end ({', '.join(sorted([mine, ids['running']]))})" \
        in table and "with --resume" in table
    page = render_html(results)
    assert page.count('<details class="excluded">') == len({x["why"] for x in results["excluded_runs"]})
    assert '<details class="excluded" open' not in page and theirs in page  # folded, and every run still there
    md = render_markdown(results)
    assert "| interrupted | 3 | crashy ×1, fifo_uniform ×1, kestrel ×1 |" in md and "### interrupted (3)" in md


def test_an_interrupted_run_whose_seed_another_run_completed_is_flagged_as_made_again(store):
    """A campaign stopped and resumed leaves runs stopped midway whose seeds were made again: the entry's flags
    tell them apart from runs excluded for any other reason (here fifo_uniform's duplicate of seed 0)."""
    from benchmark.tracking import client, experiment_id

    c = client()
    stopped = make_run(c, experiment_id(c, WORKLOAD), "fifo_uniform", 1, status="interrupted")
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", store["targets"]) == 0
    fifo = next(e for e in score_from_mlflow(targets_dir=store["targets"])["entries"]
                if e["strategy"] == "fifo_uniform")
    assert stopped not in fifo["workloads"][WORKLOAD]["run_ids"] and 1 in fifo["workloads"][WORKLOAD]["seeds"]
    assert fifo["flags"] == ["1 interrupted run(s) made again, see below", "1 run(s) excluded, see below"]


def test_the_published_board_advises_nobody_on_finishing_its_runs(store, tmp_path, monkeypatch):
    monkeypatch.setattr(benchmark.leaderboard.build, "LEADERBOARD_DIR", tmp_path / "published")
    assert lb("freeze-target", "--workload", WORKLOAD, "--targets", store["targets"]) == 0
    assert "resumable_run_ids" in score_from_mlflow(targets_dir=store["targets"])
    results = benchmark.leaderboard.build.build(tmp_path / "published", targets_dir=store["targets"])
    assert "resumable_run_ids" not in results
    assert "resumable_run_ids" not in json.loads((tmp_path / "published" / "results.json").read_text())


def test_a_run_made_by_an_engine_with_uncommitted_changes_is_refused():
    """No commit holds the code behind a +dirty run, so nobody can make it again: it never counts, and a clean rerun
    of its seed does."""
    ref = [record(WORKLOAD, "on_policy", s, reaching_at(8), workers=6, trainers=2) for s in range(4)]
    dirty = [dataclasses.replace(record(WORKLOAD, "kestrel", s, reaching_at(4)), code_version="abc123+dirty")
             for s in range(4)]
    clean = [dataclasses.replace(record(WORKLOAD, "kestrel", s, reaching_at(8)), run_id=f"clean-{s}",
                                 start_time=10 + s, code_version="abc123") for s in range(4)]
    for r in clean:
        r.summary = {**r.summary, "mlflow_run_id": r.run_id}
    results = build_results(ref + dirty + clean, {WORKLOAD: frozen(ref, 8 * EVERY)}, resamples=50)
    why = {x["run_id"]: (x["why"], x["reason"]) for x in results["excluded_runs"]}
    assert all(why[r.run_id][0] == "refused" and "abc123+dirty" in why[r.run_id][1] for r in dirty)
    (kestrel,) = [e for e in results["entries"] if e["strategy"] == "kestrel"]
    assert kestrel["workloads"][WORKLOAD]["run_ids"] == [f"clean-{s}" for s in range(4)]


def test_a_v3_board_of_two_workloads_shows_each_workloads_interval_and_verdict():
    """The campaign's board has two workloads: beside the geometric mean, each workload's tested interval and its
    corrected verdict; an entry that misses the target is ordered by final accuracy, and says so."""
    from benchmark.leaderboard.render import readme_results

    records, targets = [], {}
    for w in ("alpha", "beta"):
        ref = [record(w, "on_policy", s, reaching_at(8 + s % 2), workers=6, trainers=2) for s in range(4)]
        records += ref
        targets[w] = {**frozen(ref, 8 * EVERY), "median_best_accuracy": 0.5}
        records += [record(w, "lopsided", s, reaching_at((2 if w == "alpha" else 8) + s % 2)) for s in range(4)]
        records += [record(w, "never", s, [0.1, 0.2, 0.3]) for s in range(4)]
    results = build_results(records, targets, resamples=200, rules=3)
    header, rows = table_rows(results)
    assert header[header.index("speedup alpha"):header.index("flags")] == [
        "speedup alpha", "vs reference on alpha (corrected p)", "speedup beta", "vs reference on beta (corrected p)"]
    row = dict(zip(header, rows[[e["strategy"] for e in results["entries"]].index("lopsided")]))
    beta = next(e for e in results["entries"] if e["strategy"] == "lopsided")["workloads"]["beta"]
    assert row["speedup beta"] == "1.000 [{:.3f}, {:.3f}]".format(*beta["speedup"]["ci95"])
    assert row["vs reference on alpha (corrected p)"].startswith("resolved faster (")
    assert row["vs reference on beta (corrected p)"] == "not resolved (1.000)"
    never = dict(zip(header, rows[-1]))
    assert never["entry"] == "never" and never["speedup (geo-mean) [95% CI]"].startswith("not reached: final 0.612")
    words = re.search(r'<p class="note">(on each workload, speedup = [^<]*)', render_html(results)).group(1)
    assert "geometric mean" in words and "percentile-bootstrap" in words
    assert "| speedup (geo-mean) [95% CI] | speedup alpha | speedup beta | seeds |" in readme_results(results)
    alone = {**results, "entries": [e for e in results["entries"] if not e["reference"]]}
    assert not any(c.startswith("vs reference") for c in table_rows(alone)[0])  # nothing to compare with
    # the findings read one workload at a time: its own speedup beside its own verdict, not the mean's
    from benchmark.leaderboard.findings import AboveOne, Board, Card, _any

    on_beta = Board(results, {}, on="beta")
    assert Card(_any("lopsided")).render(on_beta).startswith(
        "`lopsided` at (5,3): speedup 1.00 [{:.2f}, {:.2f}], not resolved (corrected p 1.000".format(
            *beta["speedup"]["ci95"]))
    assert Card(_any("never")).render(on_beta).startswith("`never` at (5,3): speedup not reached: final 0.612×")
    assert AboveOne().render(on_beta).endswith("on this board: none")
    assert AboveOne().render(Board(results, {}, on="alpha")).startswith(
        "resolved faster than the reference (corrected) on this board: `lopsided` 3.49 [")


def test_a_campaigns_entry_tuned_apart_on_two_workloads_is_ranked_once_at_each_workloads_pick():
    """A campaign tunes each entry on each workload: an entry whose picks differ is still one entry on its board,
    each workload's split shown where it ran, never two halves that each lack a workload."""
    from benchmark.leaderboard import LeaderboardError
    from benchmark.leaderboard.plots import _legend_label
    from benchmark.leaderboard.render import readme_results, split_note

    records, targets = [], {}
    for w, (workers, trainers) in (("alpha", (5, 3)), ("beta", (6, 2))):
        ref = [record(w, "on_policy", s, reaching_at(8 + s % 2), workers=6, trainers=2) for s in range(4)]
        targets[w] = {**frozen(ref, 8 * EVERY), "median_best_accuracy": 0.5}
        records += ref + [record(w, "fifo", s, reaching_at(4 + s % 2), workers=workers, trainers=trainers)
                          for s in range(4)]
    by_setting = build_results(records, targets, resamples=200, rules=3)
    assert sorted(n["reason"] for n in by_setting["not_ranked"]) == [
        "incomplete: no finished compliant run on alpha", "incomplete: no finished compliant run on beta"]

    results = build_results(records, targets, resamples=200, rules=3, tuned_per_workload=True)
    assert results["not_ranked"] == [] and [e["name"] for e in results["entries"]] == ["fifo", "on_policy"]
    fifo, reference = results["entries"]
    assert (fifo["workers"], fifo["trainers"]) == (None, None) and fifo["reference"] is False
    assert [fifo["workloads"][w]["setting"]["workers"] for w in ("alpha", "beta")] == [5, 6]
    assert reference["reference"] and (reference["workers"], reference["trainers"]) == (6, 2)
    assert "setting" not in reference["workloads"]["alpha"]  # the same on both: held once, as on any board
    header, rows = table_rows(results)
    assert [row[header.index("(W,T)")] for row in rows] == ["(5,3) · (6,2)", "(6,2)"]
    assert _legend_label(fifo, "alpha").endswith("(5,3)") and _legend_label(fifo, "beta").endswith("(6,2)")
    said = "(W,T) a · b: the split its tuning picked on each workload, in the order alpha · beta"
    assert "(5,3) · (6,2)" in render_markdown(results) and said in render_markdown(results)
    assert said in render_html(results) and said in readme_results(results)
    assert split_note(by_setting) is None
    from benchmark.leaderboard.findings import Board, Card, _any

    assert Card(_any("fifo")).render(Board(results, {}, on="alpha")).startswith("`fifo` at (5,3): speedup")
    assert Card(_any("fifo")).render(Board(results, {}, on="beta")).startswith("`fifo` at (6,2): speedup")

    other_pick = record("alpha", "fifo", 3, reaching_at(4), workers=6, trainers=2)
    other_pick = dataclasses.replace(other_pick, run_id="x", summary={**other_pick.summary, "mlflow_run_id": "x"})
    with pytest.raises(LeaderboardError, match="fifo on alpha have two settings"):
        build_results(records + [other_pick], targets, resamples=200, rules=3, tuned_per_workload=True)


def test_rules_v3_compare_two_samples_and_record_what_a_reviewer_needs():
    """Rules v3 on in-memory runs: the reference's scored runs are the comparison's other arm; the majority
    rule, level sensitivity, final accuracy and the corrected verdicts are in results.json."""
    records = [record(WORKLOAD, "on_policy", s, reaching_at(8 + s % 2), workers=6, trainers=2) for s in range(4)]
    target = {**frozen([], 8 * EVERY), "median_best_accuracy": 0.5}
    records += [record(WORKLOAD, "fast", s, reaching_at(2)) for s in range(4)]
    for seed, r in enumerate(records[-4:]):  # the runs' importance-ratio statistics, as executor.RatioTotals gives
        r.summary["ratio_statistics"] = {"clip_fraction_mean": 0.01 * seed, "ratio_mean": 1.0, "ratio_max": 3.0,
                                         "ess_fraction_mean": 0.9, "recomputed_behaviour_fraction": 0.0, "steps": 9}
    records += [record(WORKLOAD, "half", s, reaching_at(3) if s < 2 else [0.1]) for s in range(4)]
    results = build_results(records, {WORKLOAD: target}, resamples=200, rules=3)
    assert results["rules"]["version"] == 3 and "Hodges-Lehmann" in results["rules"]["speedup"]
    by = {e["strategy"]: e["workloads"][WORKLOAD] for e in results["entries"]}
    fast, half, reference = by["fast"], by["half"], by["on_policy"]
    assert fast["speedup"]["median"] > 3 and fast["speedup"]["ci95"][0] > 1
    assert fast["majority"] == {"seeds_reaching": 4, "of": 4, "reached": True}
    assert half["majority"]["reached"] is False and half["speedup"]["median"] == 0.0  # 2 of 4 is no majority
    assert reference["speedup"]["median"] == 1.0 and "comparison" not in reference or \
        "verdict" not in reference["comparison"]
    # 4 against 4, all apart: the smallest two-sided p, 2/70; the verdict follows the corrected one
    assert fast["comparison"]["p_value"] == pytest.approx(2 / 70, abs=1e-3) and fast["comparison"]["poi"] == 1.0
    adjusted = fast["comparison"]["adjusted_p_value"]
    assert adjusted >= fast["comparison"]["p_value"]
    assert fast["comparison"]["verdict"] == ("resolved faster" if adjusted < 0.05 else "not resolved")
    assert [lv["level"] for lv in fast["level_sensitivity"]] == [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    assert all(lv["speedup"] > 1 for lv in fast["level_sensitivity"] if lv["reached"])
    assert fast["final_accuracy"]["mean"] == pytest.approx(0.5) and fast["seeds_scored"] == 4
    assert fast["interval_method"].startswith("Hodges-Lehmann")
    entry = next(e for e in results["entries"] if e["strategy"] == "fast")
    assert entry["score"]["ci95"] == fast["speedup"]["ci95"]  # one workload: the tested interval itself
    assert fast["ratio_statistics"]["clip_fraction_mean"] == pytest.approx(0.015)  # the median over seeds
    assert half["ratio_statistics"] is None  # runs that predate the statistics
    page = render_html(results)  # the level sensitivity is on the page, a column per level; the ratios too
    assert "importance ratios" in page and "effective sample size" in page
    assert "speedup by target level" in page and all(f"<th scope=\"col\">{lv:.0%}</th>" in page
                                                      for lv in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95))
    # one family of claims, corrected together: each entry against the reference, each carrying its runs
    from benchmark.leaderboard.comparisons import oriented

    assert len(results["claims"]) == 3  # every pair of the 3 entries, once
    against = oriented(results["claims"], "fast", "on_policy", WORKLOAD)
    assert against["adjusted_p_value"] == fast["comparison"]["adjusted_p_value"]
    assert against["first_run_ids"] == fast["run_ids"] and against["speedup"] == fast["speedup"]["median"]
    turned = oriented(results["claims"], "on_policy", "fast", WORKLOAD)
    assert turned["speedup"] == pytest.approx(1 / against["speedup"]) and turned["poi"] == 1 - against["poi"]
    # a rank interval reaches from 1 + the entries resolved faster to the size less those resolved slower
    for e in results["entries"]:
        verdicts = [oriented(results["claims"], x["label"], e["label"], WORKLOAD)["verdict"]
                    for x in results["entries"] if x is not e]
        assert e["rank_interval"] == [1 + verdicts.count("resolved faster"), 3 - verdicts.count("resolved slower")]
    # the same runs under the rules their target was frozen with (v2: no rules_version recorded) score as before
    assert build_results(records, {WORKLOAD: target}, resamples=200)["rules"]["version"] == 2

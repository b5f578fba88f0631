"""The runs shipped with the published board (leaderboard/runs/): each strategy file once, by its SHA-256, no
config.json beside the summary.json that holds it, and export then import gives back every artifact, byte for
byte."""

import hashlib
import json
import re
import tempfile
from pathlib import Path

import pytest

from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.published import BY_SHA256, PUBLISHED_ID_TAG, export_runs, import_runs, shared_path

WORKLOAD = "arith-tiny"


def logged_run(strategy: bytes, seed: int, submission: str | None = None) -> str:
    """A finished run logged as the runner logs one (its recorder): the strategy file, summary.json and
    config.json (tuples become lists in both), and an artifact that is not shipped."""
    from benchmark.tracking import RunRecorder

    sha = hashlib.sha256(strategy).hexdigest()
    config = {"strategy": {"name": "prioritized", "path": "baselines/prioritized.py", "sha256": sha,
                           "params": {"alpha": 0.6}}, "seed": seed, "workload": {"betas": (0.9, 0.99)}}
    r = RunRecorder(WORKLOAD, run_name=f"prioritized-seed{seed}", tags={"replaybench.seed": seed},
                    params={"strategy.sha256": sha, "seed": seed})
    r.log_text(strategy.decode(), "prioritized.py")
    if submission:
        r.log_text(submission, "submission.yaml")
    r.log_json({"config": config, "eval_curve": [], "seed": seed}, "summary.json")
    r.log_json(config, "config.json")
    r.log_json([], "eval_samples.json")  # not shipped: scoring does not read it
    r.finish()
    return r.run_id


def board_naming(run_ids) -> dict:
    return {"entries": [], "workloads": {WORKLOAD: {"reference_run_ids": list(run_ids)}}, "not_ranked": [],
            "excluded_runs": []}


def shipped_artifacts(c, run_id: str) -> dict[str, bytes]:
    names = [a.path for a in c.list_artifacts(run_id) if a.path != "eval_samples.json"]
    with tempfile.TemporaryDirectory() as tmp:
        return {n: Path(c.download_artifacts(run_id, n, tmp)).read_bytes() for n in names}


def use_fresh_store(monkeypatch, folder: Path):
    import benchmark.tracking

    folder.mkdir()
    monkeypatch.setattr(benchmark.tracking, "RUNS_DIR", folder)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
    return benchmark.tracking.client()


def test_export_then_import_gives_each_run_its_artifacts_back(isolated_runs, tmp_path, monkeypatch):
    from benchmark.tracking import client

    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    strategy, other = b"def sample(buffer):\n    return buffer\n", b"def sample(buffer):\n    return []\n"
    ids = [logged_run(strategy, s, submission="name: kestrel\n") for s in range(3)] + [logged_run(other, 3)]
    c = client()
    original = {rid: shipped_artifacts(c, rid) for rid in ids}
    assert export_runs(board_naming(ids), tmp_path / "board") == 4

    runs = tmp_path / "board" / "runs"
    assert {p.name for p in (runs / BY_SHA256).iterdir()} == {
        hashlib.sha256(strategy).hexdigest() + ".py", hashlib.sha256(other).hexdigest() + ".py",
        hashlib.sha256(b"name: kestrel\n").hexdigest() + ".yaml"}  # four runs, three distinct files
    for rid in ids:
        assert {p.name for p in (runs / rid).iterdir()} == {"run.json", "summary.json"}
        assert json.loads((runs / rid / "run.json").read_text())["config_from_summary"] is True

    fresh = use_fresh_store(monkeypatch, tmp_path / "fresh")
    assert import_runs(runs) == (4, 0)
    imported = {r.data.tags[PUBLISHED_ID_TAG]: r.info.run_id for r in fresh.search_runs(
        [e.experiment_id for e in fresh.search_experiments()])}
    for rid in ids:  # names and bytes, config.json and the strategy file included
        assert shipped_artifacts(fresh, imported[rid]) == original[rid]
    assert set(original[ids[0]]) == {"prioritized.py", "submission.yaml", "summary.json", "config.json"}

    assert export_runs(board_naming(ids[:3]), tmp_path / "board", c) == 3  # the last run is no longer named
    assert not (runs / ids[3]).exists()
    assert not (runs / shared_path("x.py", hashlib.sha256(other).hexdigest())).exists()  # nor its strategy
    assert (runs / shared_path("x.py", hashlib.sha256(strategy).hexdigest())).is_file()


def test_a_missing_strategy_file_is_named_and_no_run_is_half_imported(isolated_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    rid = logged_run(b"x = 1\n", 0)
    export_runs(board_naming([rid]), tmp_path / "board")
    runs = tmp_path / "board" / "runs"
    strategy_file = runs / shared_path("prioritized.py", hashlib.sha256(b"x = 1\n").hexdigest())
    strategy_file.unlink()
    fresh = use_fresh_store(monkeypatch, tmp_path / "fresh")
    with pytest.raises(LeaderboardError, match=f"{re.escape(str(strategy_file))} is missing: shipped run {rid} "
                                               "names it as its prioritized.py"):
        import_runs(runs)
    assert not fresh.search_runs([e.experiment_id for e in fresh.search_experiments()])
    strategy_file.write_text("x = 2\n")  # changed after it was shipped
    with pytest.raises(LeaderboardError, match="does not hash to its name"):
        import_runs(runs)

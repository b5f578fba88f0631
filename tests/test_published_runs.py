"""The runs shipped with the published board (leaderboard/runs/): each strategy file once, by its SHA-256, no
config.json beside the summary.json that holds it, and export then import gives back every artifact, byte for
byte; every link the page makes into runs/ opens a file that is there."""

import hashlib
import json
import re
import tempfile
from pathlib import Path

import pytest

from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.files import read_results
from benchmark.leaderboard.page import render_html
from benchmark.leaderboard.published import BY_SHA256, PUBLISHED_ID_TAG, export_runs, import_runs, shared_path
from benchmark.paths import LEADERBOARD_DIR

SHIPPED = LEADERBOARD_DIR / "runs"
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
    assert import_runs(runs) == (0, 4)  # the store that made them holds them: nothing twice
    assert {p.name for p in (runs / BY_SHA256).iterdir()} == {
        hashlib.sha256(strategy).hexdigest() + ".py", hashlib.sha256(other).hexdigest() + ".py",
        hashlib.sha256(b"name: kestrel\n").hexdigest() + ".yaml"}  # four runs, three distinct files
    for rid in ids:
        assert {p.name for p in (runs / rid).iterdir()} == {"run.json", "summary.json"}
        assert json.loads((runs / rid / "run.json").read_text())["config_from_summary"] is True

    fresh = use_fresh_store(monkeypatch, tmp_path / "fresh")
    assert import_runs(runs) == (4, 0)
    assert import_runs(runs) == (0, 4)
    imported = {r.data.tags[PUBLISHED_ID_TAG]: r.info.run_id for r in fresh.search_runs(
        [e.experiment_id for e in fresh.search_experiments()])}
    for rid in ids:  # names and bytes, config.json and the strategy file included
        assert shipped_artifacts(fresh, imported[rid]) == original[rid]
    assert set(original[ids[0]]) == {"prioritized.py", "submission.yaml", "summary.json", "config.json"}

    # the last run no longer named (a board replaced by another): it stays shipped, and its strategy file with it;
    # a shared file no shipped run names goes
    orphan = runs / shared_path("t.py", "cd")
    orphan.write_text("named by no run")
    assert export_runs(board_naming(ids[:3]), tmp_path / "board", c) == 3
    assert (runs / ids[3] / "run.json").is_file()
    assert (runs / shared_path("x.py", hashlib.sha256(other).hexdigest())).is_file()
    assert (runs / shared_path("x.py", hashlib.sha256(strategy).hexdigest())).is_file()
    assert not orphan.exists()


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


def test_the_shipped_runs_hold_each_strategy_once_and_no_config_json():
    records = {p.parent.name: json.loads(p.read_text()) for p in SHIPPED.glob("*/run.json")}
    assert len(records) == len([p for p in SHIPPED.iterdir() if p.is_dir()]) - 1  # and by-sha256/
    for rid, record in records.items():
        assert {p.name for p in (SHIPPED / rid).iterdir()} <= {"run.json", "summary.json"}  # no copies, no config.json
        for name, sha in record["by_sha256"].items():
            assert (SHIPPED / shared_path(name, sha)).is_file()
            if name.endswith(".py"):  # the strategy file is the one the run ran
                assert sha == record["params"]["strategy.sha256"]
        if record["config_from_summary"]:
            assert "config" in json.loads((SHIPPED / rid / "summary.json").read_text())
    shared = list((SHIPPED / BY_SHA256).iterdir())
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == p.stem for p in shared)  # named by content: once each
    named = {shared_path(n, sha) for r in records.values() for n, sha in r["by_sha256"].items()}
    assert {f"{BY_SHA256}/{p.name}" for p in shared} == named  # none left over


def test_every_link_of_the_pages_into_the_shipped_runs_opens_and_they_list_every_shipped_run():
    """Links of the committed page, of each board it replaced (replaced/<board>/), and of each page as this code
    renders it from its results.json; between them, every shipped run is listed."""
    from benchmark.leaderboard.replaced import REPLACED_FOLDER

    boards = [LEADERBOARD_DIR, *sorted(p.parent for p in (LEADERBOARD_DIR / REPLACED_FOLDER).glob("*/index.html"))]
    listed = set()
    for folder in boards:
        results = read_results(folder / "results.json")
        if folder != LEADERBOARD_DIR:
            results["runs_folder"] = f"../../{results['runs_folder']}"  # as the kept page is rendered
        runs = results["runs_folder"]
        for page in ((folder / "index.html").read_text(), render_html(results)):
            links = set(re.findall(rf'href="({re.escape(runs)}/[^"]*)"', page))
            assert f"{runs}/" in links  # the folder itself, where the page says the runs are
            links.remove(f"{runs}/")
            folders = {link for link in links if link.endswith("/")}
            assert all((folder / link / "run.json").is_file() for link in folders)
            listed |= {link.rstrip("/").rsplit("/", 1)[1] for link in folders}
            strategies = links - folders
            assert len(strategies) == len({e["strategy_sha256"] for e in results["entries"]})  # every entry's
            assert all((folder / link).is_file() for link in strategies)
    assert listed == {p.parent.name for p in SHIPPED.glob("*/run.json")}  # every shipped run, by id

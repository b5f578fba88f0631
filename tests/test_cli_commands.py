"""`replaybench baselines` and `replaybench submit`, end to end on a tiny budget in a throw-away MLflow store:
what they run, and the tags that put their runs on record."""

import shutil
from pathlib import Path

import pytest
import yaml
from conftest import small_overrides

from benchmark.cli import main
from benchmark.submission import load_submission
from benchmark.tracking import client, find_runs

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "submissions" / "example_entry"
TINY = {"budget": 20_000, "eval.every": 10_000, "eval.num_problems": 10, "eval.pass_k_problems": 0}


def tiny_sets(checkpoint):
    return [f"--set={k}={v}" for k, v in small_overrides(checkpoint, **TINY).items() if k != "budget"]


@pytest.mark.slow
@pytest.mark.e2e
def test_baselines_runs_each_named_baseline_with_its_registered_split(tiny_checkpoint, isolated_runs):
    args = ["baselines", "--strategies", "on_policy", "fifo_uniform", "--seeds", "0", "1", "--budget", "20000",
            "--isolate", *tiny_sets(tiny_checkpoint)]
    assert main(args) == 0
    runs = find_runs("arith-tiny")
    assert sorted((r.data.tags["replaybench.strategy"], r.data.tags["replaybench.seed"]) for r in runs) == [
        ("fifo_uniform", "0"), ("fifo_uniform", "1"), ("on_policy", "0"), ("on_policy", "1")]
    for r in runs:
        tags, params = r.data.tags, r.data.params
        assert tags["replaybench.status"] == "finished" and tags["replaybench.isolated"] == "True"
        workers, trainers = 6, 2  # baselines.yaml: the reference's split, and the rule's pick for the buffers
        assert (params["workload.pipeline.workers"], params["workload.pipeline.trainers"]) == (
            str(workers), str(trainers))
        assert params["workload.budget"] == "20000.0"
        assert params["strategy.params.buffer_size"] == {"on_policy": "90", "fifo_uniform": "360"}[
            tags["replaybench.strategy"]]
        assert "replaybench.submission" not in tags
    seeds = {r.data.tags["replaybench.strategy"]: r.data.tags["replaybench.group"] for r in runs}
    assert len(set(seeds.values())) == 2  # one group per baseline, both seeds in it


def test_baselines_with_an_unknown_name_is_a_user_error(isolated_runs):
    assert main(["baselines", "--strategies", "nope"]) == 2
    assert find_runs("arith-tiny") == []


@pytest.mark.slow
@pytest.mark.e2e
def test_submit_runs_the_entry_sandboxed_with_its_content_hash_on_record(tiny_checkpoint, isolated_runs, tmp_path,
                                                                         capsys):
    entry = tmp_path / "entry"
    shutil.copytree(EXAMPLE, entry)
    (entry / "submission.yaml").write_text(
        (entry / "submission.yaml").read_text().replace("name: example_entry", "name: kestrel"))
    workload = yaml.safe_load((REPO / "workloads" / "arith-tiny.yaml").read_text())
    for key, value in small_overrides(tiny_checkpoint, **TINY).items():
        *parents, last = key.split(".")
        target = workload
        for part in parents:
            target = target[part]
        target[last] = value
    workload_file = tmp_path / "arith-tiny.yaml"
    workload_file.write_text(yaml.safe_dump(workload))

    assert main(["submit", str(entry), "--workload", str(workload_file), "--seeds", "0", "2"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "2 runs, 2 at a time (no finished run of arith-tiny in this store to estimate the time from)" in said
    first_hash = load_submission(entry).content_sha256()
    runs = find_runs("arith-tiny")
    assert sorted(r.data.tags["replaybench.seed"] for r in runs) == ["0", "2"]
    for r in runs:
        tags, params = r.data.tags, r.data.params
        assert tags["replaybench.submission"] == tags["replaybench.name"] == "kestrel"
        assert tags["mlflow.runName"] == f"kestrel-seed{tags['replaybench.seed']}"
        logged = client().download_artifacts(r.info.run_id, "submission.yaml", str(tmp_path / r.info.run_id))
        assert Path(logged).read_text() == (entry / "submission.yaml").read_text()
        assert tags["replaybench.submission_sha256"] == first_hash
        assert tags["replaybench.track"] == "buffer"
        assert tags["replaybench.status"] == "finished" and tags["replaybench.isolated"] == "True"
        assert (params["workload.pipeline.workers"], params["workload.pipeline.trainers"]) == ("5", "3")
        assert params["strategy.params.max_uses"] == "4" and params["strategy.params.buffer_size"] == "256"

    (entry / "strategy.py").write_text((entry / "strategy.py").read_text() + "\n# changed\n")
    assert main(["submit", str(entry), "--workload", str(workload_file), "--seeds", "0"]) == 0
    assert "1 run, 1 at a time: under a minute (from the wall times of 2 finished runs in this store)" in " ".join(
        capsys.readouterr().err.split())
    hashes = {r.data.tags["replaybench.submission_sha256"] for r in find_runs("arith-tiny")}
    assert hashes == {first_hash, load_submission(entry).content_sha256()} and len(hashes) == 2


def test_run_takes_a_name_and_tags_of_the_users_own(tiny_checkpoint, isolated_runs):
    assert main(["run", "--strategy", "baselines/fifo_uniform.py", "--name", "kestrel", "--tag", "team=blue",
                 "--budget", "20000", *tiny_sets(tiny_checkpoint)]) == 0
    (run,) = find_runs("arith-tiny")
    tags = run.data.tags
    assert tags["mlflow.runName"] == "kestrel-seed0" and tags["replaybench.name"] == "kestrel"
    assert tags["team"] == "blue" and tags["replaybench.strategy"] == "fifo_uniform"
    # `mlflow ui` opens a training experiment on its runs, not on the GenAI view
    assert client().get_experiment(run.info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_run_refuses_a_tag_in_the_benchmarks_namespace(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--strategy", "baselines/fifo_uniform.py", "--tag", "replaybench.status=finished"])
    assert exc.value.code == 2 and "the benchmark's own" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.e2e
def test_a_newcomers_journey_from_a_copied_entry_to_the_local_board(tiny_checkpoint, isolated_runs, tmp_path,
                                                                    capsys):
    """Copy the example, rename it, validate, preview; the entry is then seen by its name in the terminal and on
    the local page beside the published reference curve, and the published files are untouched."""
    published = {p.name: p.read_bytes() for p in (REPO / "leaderboard").iterdir() if p.is_file()}
    entry = tmp_path / "kestrel"
    shutil.copytree(EXAMPLE, entry)
    (entry / "submission.yaml").write_text(
        (entry / "submission.yaml").read_text().replace("name: example_entry", "name: kestrel"))
    assert main(["validate", str(entry)]) == 0
    workload = yaml.safe_load((REPO / "workloads" / "arith-tiny.yaml").read_text())
    for key, value in small_overrides(tiny_checkpoint, **{k: v for k, v in TINY.items() if k != "budget"}).items():
        *parents, last = key.split(".")
        target = workload
        for part in parents:
            target = target[part]
        target[last] = value
    workload_file = tmp_path / "arith-tiny.yaml"
    workload_file.write_text(yaml.safe_dump(workload))
    capsys.readouterr()

    assert main(["submit", str(entry), "--workload", str(workload_file), "--preview", "--budget", "20000"]) == 0
    out = capsys.readouterr()
    assert "kestrel: preview (seed 0), not ranked" in out.out and "reference median (published)" in out.out
    assert (isolated_runs / "previews" / "kestrel-arith-tiny.svg").read_text().startswith("<svg")
    (run,) = find_runs("arith-tiny")
    assert run.data.tags["mlflow.runName"] == "kestrel-preview-seed0" and run.data.tags["replaybench.preview"] == "true"

    assert main(["leaderboard", "--workload", str(workload_file)]) == 0
    terminal = capsys.readouterr().out
    assert "previews (`submit --preview`" in terminal and "│ kestrel" in terminal
    assert main(["leaderboard", "build"]) == 0
    page = (isolated_runs / "leaderboard" / "index.html").read_text()
    assert "kestrel (preview, seed 0, not ranked)" in page and "reference of the published board" in page
    assert {p.name: p.read_bytes() for p in (REPO / "leaderboard").iterdir() if p.is_file()} == published


def test_the_time_estimate_comes_from_runs_made_with_the_same_cpu_kernels(monkeypatch):
    """Portable kernels take about twice the native ones' time: a portable campaign must not be timed by native runs."""
    from types import SimpleNamespace

    import benchmark.tracking
    from benchmark.cli.runs import wall_seconds_per_unit

    def made(seconds, kernels):
        params = {"workload.budget": "100", **({"kernels": kernels} if kernels else {})}
        return SimpleNamespace(data=SimpleNamespace(metrics={"wall/total_seconds": seconds}, params=params,
                                                    tags={"replaybench.strategy": "on_policy"}))

    runs = [made(100, None), made(110, "native"), made(200, "portable")]  # no record: made before it, native
    monkeypatch.setattr(benchmark.tracking, "find_runs", lambda name, query: runs)
    assert wall_seconds_per_unit(["w"], "portable")[("w", None)] == [2.0]
    assert wall_seconds_per_unit(["w"], "native")[("w", "on_policy")] == [1.0, 1.1]
    runs[:] = runs[:2]  # none made with the portable kernels: every run rather than no estimate
    assert wall_seconds_per_unit(["w"], "portable")[("w", None)] == [1.0, 1.1]

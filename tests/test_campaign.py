"""A pre-registered campaign (benchmark/campaign.py): its file is checked against the workloads it names, it runs
only on its engine release, phase after phase, resumable, every run tagged with what it was for."""

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import small_overrides

from benchmark.campaign import CAMPAIGNS_DIR, CampaignError, load_campaign
from benchmark.leaderboard.render import README_START
from benchmark.paths import REPO_ROOT

RELEASE = "0123456789abcdef0123456789abcdef01234567"


def tiny_workload(tmp_path, checkpoint, name="tiny-campaign", **fields) -> Path:
    base = yaml.safe_load((REPO_ROOT / "workloads" / "arith-tiny.yaml").read_text())
    for key, value in small_overrides(checkpoint, budget=20_000, **{"eval.every": 10_000}).items():
        section, _, field = key.partition(".")
        base[section] = value if not field else {**base[section], field: value}
    base.pop("tuning", None)  # the campaign's own budget, if any, comes in fields
    base.update(name=name, version="1", **fields)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def campaign_file(tmp_path, workload: Path, **fields) -> Path:
    data = {"name": "trial", "release": RELEASE, "rules": 3, "seeds_per_arm": 2,
            "workloads": {str(workload): {"version": "1", "target_seeds": [10, 11], "scored_seeds": [0, 1],
                                          "confirmation_seeds": [30]}},
            "entries": ["on_policy", "fifo_uniform"], "confirm_top": 1, **fields}
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def two_seed_campaigns(monkeypatch, tmp_path):
    import benchmark.campaign

    monkeypatch.setattr(benchmark.campaign, "MIN_SEEDS_PER_ARM", 2)  # a campaign that fits in a test
    monkeypatch.setattr(benchmark.campaign, "CAMPAIGNS_DIR", tmp_path / "campaigns")


def test_a_campaign_file_is_checked_against_its_workloads(tmp_path, tiny_checkpoint, two_seed_campaigns):
    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    assert load_campaign(campaign_file(tmp_path, workload)).name == "trial"
    problems = {
        "the workload's seeds and target_seeds": {"workloads": {str(workload): {
            "version": "1", "target_seeds": [10, 11], "scored_seeds": [0, 2]}}},
        "seed 0 is both a target and a scored seed": {"workloads": {str(workload): {
            "version": "1", "target_seeds": [0, 11], "scored_seeds": [0, 1]}}},
        "the campaign names version 2, its file is version 1": {"workloads": {str(workload): {
            "version": "2", "target_seeds": [10, 11], "scored_seeds": [0, 1]}}},
    }
    for message, fields in problems.items():
        with pytest.raises(CampaignError, match=message):
            load_campaign(campaign_file(tmp_path, workload, **fields))
    with pytest.raises(CampaignError, match="release"):
        load_campaign(campaign_file(tmp_path, workload, release="HEAD"))
    with pytest.raises(CampaignError, match="entry 'nobody' is neither a baseline nor a submission folder"):
        load_campaign(campaign_file(tmp_path, workload, entries=["on_policy", "nobody"]))
    with pytest.raises(CampaignError, match="workload elsewhere is not the campaign's"):
        load_campaign(campaign_file(tmp_path, workload, variants=[{"entry": "fifo_uniform", "split": "5,3",
                                                                   "workloads": ["elsewhere"]}]))


def test_a_campaign_names_a_submission_from_the_repositorys_root_wherever_it_is_run(
        tmp_path, tiny_checkpoint, two_seed_campaigns, monkeypatch):
    from benchmark.cli.tune import entry_of

    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    monkeypatch.chdir(tmp_path)  # not the repository
    file = campaign_file(tmp_path, workload, entries=["on_policy", "submissions/example_entry"])
    assert load_campaign(file).entries[-1] == "submissions/example_entry"
    entry, isolated = entry_of("submissions/example_entry")
    assert isolated and entry.name == "example_entry"


def test_the_confirmed_entries_are_named_as_the_campaign_file_names_them(tmp_path, tiny_checkpoint,
                                                                        two_seed_campaigns, monkeypatch):
    """A submission's runs carry its submission.yaml name; the confirmation reaches it by its folder."""
    import benchmark.cli.campaign as campaign_cli
    import benchmark.leaderboard.build

    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    campaign = load_campaign(campaign_file(tmp_path, workload, confirm_top=2,
                                           entries=["on_policy", "fifo_uniform", "submissions/example_entry"]))
    board = [{"name": "on_policy", "rank": 1}, {"name": "fifo_uniform", "rank": 3},
             {"name": "example_entry", "rank": 2}]
    monkeypatch.setattr(campaign_cli, "made_by", lambda *a: [])
    monkeypatch.setattr(campaign_cli, "load_target", lambda *a: {})
    monkeypatch.setattr(benchmark.leaderboard.build, "build_results", lambda *a, **k: {"entries": board})
    top = campaign_cli.top_entries(campaign, str(workload), {})
    assert top == ["submissions/example_entry", "fifo_uniform"]
    assert [campaign_cli.entry_of(name)[0].name for name in top] == ["example_entry", "fifo_uniform"]


def test_the_releases_checkout_reaches_a_submission_by_its_runs_name(tmp_path, tiny_checkpoint, two_seed_campaigns):
    from benchmark.cli.campaign import reach_submissions_by_name

    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    campaign = load_campaign(campaign_file(tmp_path, workload, entries=["on_policy", "submissions/example_entry"]))
    checkout = tmp_path / "release"
    shutil.copytree(REPO_ROOT / "submissions" / "example_entry", checkout / "submissions" / "example_entry")
    reach_submissions_by_name(campaign, checkout)
    reach_submissions_by_name(campaign, checkout)  # again, on resume: the link is there already
    link = checkout / "example_entry"
    assert link.is_symlink() and str(link.readlink()) == "submissions/example_entry"
    assert (link / "submission.yaml").is_file() and not (checkout / "on_policy").exists()


def test_seeds_per_arm_is_at_least_the_power_analysis_floor(tmp_path, tiny_checkpoint):
    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    with pytest.raises(CampaignError, match="seeds_per_arm must be at least 10"):
        load_campaign(campaign_file(tmp_path, workload))


def test_a_campaign_runs_only_on_its_release(tmp_path, tiny_checkpoint, two_seed_campaigns, capsys):
    """On another engine it runs from a checkout of the release; a release this repository lacks is refused."""
    from benchmark.cli import main

    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    assert main(["campaign", "run", str(campaign_file(tmp_path, workload))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"runs only on its release {RELEASE}" in err and "fetch that commit" in err
    assert not (REPO_ROOT / ".campaign" / RELEASE[:12]).exists()


def test_a_superseded_campaign_is_not_run_again(tmp_path, tiny_checkpoint, two_seed_campaigns, capsys):
    from benchmark.cli import main

    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    old = campaign_file(tmp_path, workload)
    newer = yaml.safe_load(old.read_text())
    newer.update(name="trial2", supersedes={"trial": "its runs were made with the wrong kernels"})
    (tmp_path / "trial2.yaml").write_text(yaml.safe_dump(newer))
    assert main(["campaign", "run", str(old)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the campaign trial is superseded by trial2 (its runs were made with the wrong kernels)" in err
    assert "instead; its runs so far stay shipped" in err


def test_a_campaign_runs_only_with_its_kernels(tmp_path, tiny_checkpoint, two_seed_campaigns, monkeypatch, capsys):
    """Runs made with other kernels than the campaign's would differ from its runs in the last bits: refused."""
    import benchmark.tracking
    from benchmark.cli import main

    monkeypatch.setattr(benchmark.tracking, "code_version", lambda: RELEASE)
    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    assert main(["campaign", "run", str(campaign_file(tmp_path, workload, kernels="portable"))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "computes with portable kernels, this process with native ones" in err and "unset REPLAYBENCH_KERNELS" in err


@pytest.mark.slow
@pytest.mark.e2e
def test_a_campaign_runs_its_phases_in_order_tags_every_run_and_resumes(tmp_path, tiny_checkpoint, isolated_runs,
                                                                        two_seed_campaigns, monkeypatch, capsys):
    import benchmark.cli.tune
    import benchmark.runner
    import benchmark.tracking
    from benchmark.cli import main
    from benchmark.leaderboard.store import finished_runs
    from benchmark.submission import load_baselines

    monkeypatch.setattr(benchmark.tracking, "code_version", lambda: RELEASE)  # this checkout stands for the release
    monkeypatch.setattr(benchmark.runner, "code_version", lambda: RELEASE)
    entries = load_baselines().entries
    grids = {"on_policy": {"split": ["6,2", "5,3"]}, "fifo_uniform": {"buffer_size": [32, 64]}}
    patched = {n: dataclasses.replace(entries[n], tuning=g) for n, g in grids.items()}
    monkeypatch.setattr(benchmark.cli.tune, "load_baselines", lambda: type("B", (), {"entries": patched})())
    # the real start checkpoint: its accuracy is not 0, so the target frozen from it means something; the campaign
    # runs the workload at another version and seeds than its file's, as v3.2 runs arith-tiny
    workload = tiny_workload(tmp_path, REPO_ROOT / "tasks" / "arith_tiny" / "checkpoint", seeds=[5, 6],
                             target_seeds=[7, 8], tuning={"trials": 2, "seeds": [100]})
    file = campaign_file(tmp_path, workload, variants=[{"entry": "fifo_uniform", "split": "5,3", "buffer_size": 48}])
    data = yaml.safe_load(file.read_text())
    data["workloads"][str(workload)].update(version="2", overrides={"version": "2", "seeds": [0, 1],
                                                                    "target_seeds": [10, 11]})
    file.write_text(yaml.safe_dump(data))
    assert main(["campaign", "run", str(file), "--jobs", "1"]) == 0
    runs = finished_runs("tiny-campaign")
    assert {r.kernels for r in runs} == {"native"}  # the campaign's, as the file says by default
    phases = [r.campaign for r in runs]
    # tuning: 2 trials x 1 seed each entry; target: 2 seeds; scored: 2 entries x 2 seeds; the variant: 2 seeds;
    # confirmation: 2 entries
    assert {p: phases.count(p) for p in set(phases)} == {
        "trial/tuning-reference": 2, "trial/target": 2, "trial/tuning": 2, "trial/scored": 4, "trial/variants": 2,
        "trial/confirmation": 2}
    assert [r.start_time for r in sorted(runs, key=lambda r: r.start_time)] == sorted(r.start_time for r in runs)
    order = [r.campaign for r in sorted(runs, key=lambda r: r.start_time)]
    assert order == sorted(order, key=["trial/tuning-reference", "trial/target", "trial/tuning", "trial/scored",
                                       "trial/variants", "trial/confirmation"].index)
    target = json.loads((tmp_path / "trial" / "targets" / "tiny-campaign.json").read_text())
    assert target["rules_version"] == 3 and sorted(target["per_run"][i]["seed"] for i in target["run_ids"]) == [10, 11]
    assert target["workload_version"] == "2" and target["workload_config"]["seeds"] == [0, 1]  # the campaign's
    # the scored runs of each entry are at its picked trial: one configuration per entry
    scored = [r for r in runs if r.campaign == "trial/scored"]
    assert len({(r.strategy, r.group) for r in scored}) == 2
    # up front, the whole campaign: 2 + 2 + 2 + 4 + 2 + 2 runs, none timed yet in this store
    first = " ".join(capsys.readouterr().err.split())
    assert "campaign trial: 14 runs in all, 0 done, 14 left (no finished run of tiny-campaign" in first
    assert main(["campaign", "run", str(file), "--jobs", "1"]) == 0  # resumed: nothing left to make
    assert len(finished_runs("tiny-campaign")) == len(runs)
    assert main(["campaign", "status", str(file)]) == 0
    status = " ".join(capsys.readouterr().err.split())
    assert "scored: 4 of 4 runs done" in status and "confirmation: 2 of 2 runs done" in status
    assert "campaign trial: 14 runs in all, 14 done, 0 left: about 0.0 hours" in status
    # shipped by phase, each run's folder beside the published board's
    import benchmark.paths

    monkeypatch.setattr(benchmark.paths, "LEADERBOARD_DIR", tmp_path / "board")
    assert main(["campaign", "ship", str(file)]) == 0
    shipped = json.loads((tmp_path / "board" / "measurements" / "campaign-trial.json").read_text())["run_ids"]
    assert {p: len(ids) for p, ids in shipped.items()} == {p.split("/")[1]: phases.count(p) for p in set(phases)}
    assert all((tmp_path / "board" / "runs" / r.run_id / "run.json").is_file() for r in runs)
    # the board built from the campaign lists every run it made, by what it was for
    from benchmark.leaderboard.build import build_results
    from benchmark.leaderboard.page import render_html
    from benchmark.leaderboard.store import load_runs
    from benchmark.leaderboard.targets import load_target

    results = build_results(load_runs(["tiny-campaign"]), {"tiny-campaign": load_target(
        "tiny-campaign", tmp_path / "trial" / "targets")}, rules=3, resamples=200)
    assert sum(map(len, results["campaign_runs"].values())) == len(runs)
    html = render_html(results)
    assert 'id="campaign-runs"' in html and all(r.run_id in html for r in runs)
    assert html.count('class="campaign-phase"') == len(results["campaign_runs"])  # one folded list a phase
    # the campaign's own board: its scored runs only, against the targets it froze; the rest listed by phase
    assert main(["leaderboard", "build", "--campaign", str(file), "--out", str(tmp_path / "campaign-board")]) == 0
    board = json.loads((tmp_path / "campaign-board" / "results.json").read_text())
    scored_ids = {r.run_id for r in scored}
    assert {e["strategy"] for e in board["entries"]} == {"on_policy", "fifo_uniform"}
    assert {i for e in board["entries"] for i in e["workloads"]["tiny-campaign"]["run_ids"]} == scored_ids
    assert not board["excluded_runs"] and board["workloads"]["tiny-campaign"]["target_runs_missing"] == []
    assert board["workloads"]["tiny-campaign"]["target_file"].endswith("trial/targets/tiny-campaign.json")
    assert board["campaign"]["name"] == "trial" and board["campaign"]["runs_finished"] == len(runs)
    assert "Made by the campaign trial" in (tmp_path / "campaign-board" / "index.html").read_text()
    assert main(["leaderboard", "build", "--campaign", str(file), "--workload", str(workload), "--out",
                 str(tmp_path / "one-workload")]) == 0  # its one workload: the same board
    one = json.loads((tmp_path / "one-workload" / "results.json").read_text())
    assert [e["workloads"] for e in one["entries"]] == [e["workloads"] for e in board["entries"]]
    # the confirmed entry's claim, tested again on its confirmation seed (one seed an arm: nothing resolves)
    [row] = board["confirmation"]
    assert row["verdict"] in ("nothing to replicate", "not replicated") and len(row["run_ids"]) == 1
    assert "Confirmation on fresh seeds" in (tmp_path / "campaign-board" / "LEADERBOARD.md").read_text()
    assert 'id="confirmation"' in (tmp_path / "campaign-board" / "index.html").read_text()
    assert 'id="variants"' in (tmp_path / "campaign-board" / "index.html").read_text()
    # the variant against the reference, for the findings, never ranked; the findings read per workload
    [variant] = board["variants"]
    assert variant["variant"] == "fifo_uniform (5,3) N=48" and len(variant["run_ids"]) == 2
    assert variant["verdict"] in ("resolved faster", "resolved slower", "not resolved")
    findings = (tmp_path / "campaign-board" / "FINDINGS.md").read_text()
    assert "the CPU tier (tiny-campaign v2)" in findings and "`fifo_uniform (5,3) N=48`: replay ratio" in findings
    assert "Made by the campaign trial" in findings and "Confirmation on fresh seeds" in findings
    # the reference's scored run made again by this engine, set beside its shipped twin; not the campaign's
    capsys.readouterr()
    assert main(["campaign", "reproduce", str(file), "--seeds", "1", "--jobs", "1"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "1 of 1 identical digit for digit" in said
    again = [r for r in finished_runs("tiny-campaign") if r.run_id not in {x.run_id for x in runs}]
    assert [(r.strategy, r.seed, r.campaign) for r in again] == [("on_policy", 1, None)]
    # published, the campaign done, into a copy of the checkout's README and docs: each gets the campaign's board
    import shutil

    import benchmark.cli.leaderboard
    import benchmark.leaderboard.build

    checkout = tmp_path / "checkout"
    for doc in ("README.md", "docs/findings.md", "docs/workloads.md"):
        (checkout / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / doc, checkout / doc)
    for module in (benchmark.cli.leaderboard, benchmark.leaderboard.build):
        monkeypatch.setattr(module, "LEADERBOARD_DIR", checkout / "leaderboard")
    assert main(["leaderboard", "build", "--campaign", str(file), "--publish"]) == 0
    published = json.loads((checkout / "leaderboard" / "results.json").read_text())
    assert published["campaign"]["name"] == "trial" and published["runs_folder"] == "runs"
    assert all((checkout / "leaderboard" / "runs" / i / "run.json").is_file() for i in scored_ids)
    assert "Made by the campaign trial" in (checkout / "README.md").read_text().split(README_START)[1]
    assert "Made by the campaign trial" in (checkout / "docs" / "findings.md").read_text()


def test_a_campaign_made_again_needs_its_runs_and_its_own_seeds(tmp_path, tiny_checkpoint, two_seed_campaigns,
                                                                 isolated_runs, capsys):
    from benchmark.cli import main

    file = campaign_file(tmp_path, tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11]))
    for args, message in ((["--seeds", "0", "7"], "seeds 7 are not scored seeds of tiny-campaign"),
                          (["--workloads", "other"], "other: not a workload of the campaign trial"),
                          ([], "this store holds none of the campaign trial's runs: `replaybench leaderboard "
                               "import-runs`")):
        assert main(["campaign", "reproduce", str(file), *args]) == 2
        assert message in " ".join(capsys.readouterr().err.split())


def test_every_committed_campaign_precedes_the_runs_it_names():
    """A campaign file's commit comes before every shipped run tagged with its campaign, and each such run was made
    by the campaign's release, clean, with the campaign's kernels."""
    from benchmark.leaderboard.published import RUNS_FOLDER
    from benchmark.paths import LEADERBOARD_DIR

    for path in sorted(CAMPAIGNS_DIR.glob("*.yaml")):
        committed = subprocess.run(["git", "log", "--diff-filter=A", "--format=%ct", "--", str(path)], cwd=REPO_ROOT,
                                   capture_output=True, text=True).stdout.split()
        assert committed, f"{path} is not committed"
        campaign = load_campaign(path)
        for record in (LEADERBOARD_DIR / RUNS_FOLDER).glob("*/run.json"):
            run = json.loads(record.read_text())
            if run["tags"].get("replaybench.campaign", "").startswith(f"{campaign.name}/"):
                assert run["start_time"] / 1000 > int(committed[-1]), (path, run["run_id"])
                assert run["params"]["code_version"] == campaign.release, (path, run["run_id"])
                assert run["params"].get("kernels", "native") == campaign.kernels, (path, run["run_id"])


def test_the_board_lists_every_campaign_run_by_what_it_was_for():
    from benchmark.leaderboard.build import campaign_runs
    from benchmark.leaderboard.store import RunRecord

    def record(run_id, campaign):
        return RunRecord(run_id, "w", "s", "g", 0, "failed: x" if run_id == "r3" else "finished", "FINISHED", "buffer",
                         "1", 0, None, campaign=campaign)

    records = [record("r1", "v3/scored"), record("r2", "v3/tuning"), record("r3", "v3/scored"), record("r4", None),
               record("r5", "v3.1/target")]
    assert campaign_runs(records) == {"v3/scored": ["r1", "r3"], "v3/tuning": ["r2"], "v3.1/target": ["r5"]}
    # the failed one too; campaign by campaign, each in the order it runs its phases
    assert list(campaign_runs(records)) == ["v3/tuning", "v3/scored", "v3.1/target"]
    assert campaign_runs([record("r4", None)]) == {}


def test_a_campaign_board_before_any_target_is_one_clear_message(tmp_path, tiny_checkpoint, two_seed_campaigns,
                                                                 isolated_runs, capsys):
    from benchmark.cli import main

    file = campaign_file(tmp_path, tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11]))
    assert main(["leaderboard", "build", "--campaign", str(file), "--out", str(tmp_path / "board")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the campaign trial has frozen no target yet" in err and "campaign status" in err
    assert not (tmp_path / "board").exists()


def test_a_campaign_board_of_one_workload_is_one_of_the_campaigns_and_never_published(
        tmp_path, tiny_checkpoint, two_seed_campaigns, isolated_runs, monkeypatch, capsys):
    import benchmark.cli.leaderboard
    import benchmark.leaderboard.build
    from benchmark.cli import main

    for module in (benchmark.cli.leaderboard, benchmark.leaderboard.build):
        monkeypatch.setattr(module, "LEADERBOARD_DIR", tmp_path / "board")
    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    file = campaign_file(tmp_path, workload)
    assert main(["leaderboard", "build", "--campaign", str(file), "--workload", "arith-tiny", "--out",
                 str(tmp_path / "one")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "arith-tiny is not a workload of the campaign trial: pick one of tiny-campaign" in err
    assert main(["leaderboard", "build", "--campaign", str(file), "--workload", str(workload), "--publish",
                 "--force"]) == 2
    assert "drop --workload" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "one").exists() and not (tmp_path / "board").exists()


def test_a_campaign_board_is_published_only_once_the_campaign_is_done(tmp_path, tiny_checkpoint, two_seed_campaigns,
                                                                     isolated_runs, monkeypatch, capsys):
    import benchmark.cli.leaderboard
    import benchmark.leaderboard.build
    from benchmark.cli import main

    for module in (benchmark.cli.leaderboard, benchmark.leaderboard.build):
        monkeypatch.setattr(module, "LEADERBOARD_DIR", tmp_path / "board")
    file = campaign_file(tmp_path, tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11]))
    assert main(["leaderboard", "build", "--campaign", str(file), "--publish"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert ("the campaign trial is not done: target (2 of 2 runs left); scored (4 of 4 runs left); confirmation "
            "(waits: the confirmation on") in err
    squeezed = "".join(err.split())  # a long path may wrap anywhere
    assert "".join(f"`replaybench campaign run {file}`".split()) in squeezed
    assert "no leaderboard file was changed" in err
    assert not (tmp_path / "board").exists()
    # once the published board is the campaign's, a plain --publish rebuilds it as the campaign's board
    (tmp_path / "board").mkdir()
    published = json.dumps({"campaign": {"name": "trial", "file": str(file)}})
    (tmp_path / "board" / "results.json").write_text(published)
    assert main(["leaderboard", "build", "--publish"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the published board is a campaign's: rebuilt as its board" in err
    assert "the campaign trial is not done" in err
    assert (tmp_path / "board" / "results.json").read_text() == published


def test_a_campaign_board_with_no_ranked_entry_yet_says_why_and_points_at_the_campaign():
    from benchmark.leaderboard.render import store_notes

    file = "leaderboard/campaigns/trial.yaml"
    notes = " ".join(store_notes({"entries": [], "workloads": {}, "campaign": {"file": file}}))
    assert f"replaybench campaign status {file}" in notes and f"replaybench campaign run {file}" in notes
    assert "import-runs" not in notes and "replaybench baselines" not in notes  # they would not rank anything here
    assert "holds none of the campaign's scored runs" in notes
    assert "replaybench baselines" in " ".join(store_notes({"entries": [], "workloads": {}}))
    halfway = " ".join(store_notes({"entries": [], "workloads": {}, "campaign": {"file": file},
                                    "not_ranked": [{"name": "fifo_uniform"}]}))
    assert "no entry has its scored runs on every workload yet" in halfway and "holds none" not in halfway


def test_a_superseded_campaigns_runs_are_marked_and_its_workloads_wait_for_the_campaign_in_force():
    """v3.2 supersedes v3 and v3.1: the board lists their runs as superseded; a workload only a campaign scores is not
    advised a freeze-target of its own."""
    from benchmark.leaderboard.build import _unscored, superseded_campaigns
    from benchmark.leaderboard.render import campaign_phase_label

    superseded = superseded_campaigns()
    assert superseded["v3"]["by"] == "v3.2" and "native CPU kernels" in superseded["v3"]["why"]
    assert superseded["v3.1"]["by"] == "v3.2" and "square root" in superseded["v3.1"]["why"]
    results = {"superseded_campaigns": superseded}
    assert campaign_phase_label(results, "v3.1/tuning-reference") == "v3.1/tuning-reference (superseded by v3.2)"
    assert campaign_phase_label(results, "v3.2/scored") == "v3.2/scored"
    waiting = _unscored("arith-small-steps", ["a"])
    assert waiting["fix"] is None and "leaderboard/campaigns/v3.2.yaml" in waiting["why"]


def test_a_campaigns_overrides_make_a_new_version_of_a_published_workload(tmp_path, tiny_checkpoint,
                                                                          two_seed_campaigns):
    """The file keeps the version its board was made on; the campaign runs the next one."""
    workload = tiny_workload(tmp_path, tiny_checkpoint, seeds=[0, 1], target_seeds=[10, 11])
    fields = {"workloads": {str(workload): {
        "version": "2", "target_seeds": [20, 21], "scored_seeds": [0, 1, 2], "confirmation_seeds": [30],
        "overrides": {"version": "2", "seeds": [0, 1, 2], "target_seeds": [20, 21]}}}, "seeds_per_arm": 3}
    campaign = load_campaign(campaign_file(tmp_path, workload, **fields))
    from benchmark.cli.campaign import _specs_at
    from benchmark.cli.tune import entry_of

    entry, isolated = entry_of("on_policy")
    [spec] = _specs_at(entry, isolated, str(workload), [0], campaign, "scored")
    assert (spec.workload.version, spec.workload.seeds, spec.tags["campaign"]) == ("2", [0, 1, 2], "trial/scored")


def test_a_published_campaign_board_scores_only_runs_its_release_made_with_its_kernels():
    from benchmark.leaderboard.published import RUNS_FOLDER
    from benchmark.paths import LEADERBOARD_DIR

    results = json.loads((LEADERBOARD_DIR / "results.json").read_text())
    if "campaign" not in results:
        pytest.skip("the published board is not a campaign's yet")
    c = results["campaign"]
    for entry in results["entries"]:
        for w in entry["workloads"].values():
            for run_id in w["run_ids"]:
                run = json.loads((LEADERBOARD_DIR / RUNS_FOLDER / run_id / "run.json").read_text())
                assert run["params"]["code_version"] == c["release"], run_id  # never +dirty, never another engine
                assert run["params"].get("kernels", "native") == c["kernels"], run_id
                assert run["tags"]["replaybench.campaign"] == f"{c['name']}/scored", run_id


def test_a_campaign_run_loaded_by_import_runs_is_listed_and_shipped_by_its_published_id(monkeypatch):
    """A campaign resumed on another machine starts from the shipped runs (`import-runs`): shipping again must not
    copy them under the new ids that store gave them."""
    from types import SimpleNamespace

    import benchmark.cli.campaign
    import benchmark.tracking
    from benchmark.cli.campaign import started_runs

    def stored(run_id, tags):
        return SimpleNamespace(info=SimpleNamespace(run_id=run_id),
                               data=SimpleNamespace(tags={"replaybench.campaign": "v9/target", **tags}))

    runs = [stored("made-here", {}), stored("new-id", {"replaybench.published_run_id": "first-id"})]
    monkeypatch.setattr(benchmark.tracking, "find_runs", lambda name, query: runs)
    monkeypatch.setattr(benchmark.cli.campaign, "name_of", lambda workload: workload)
    campaign = SimpleNamespace(name="v9", workloads={"w": None})
    assert started_runs(campaign) == {"target": ["made-here", "first-id"]}


CHILD_STOPPING_SLOWLY = """
import pathlib, sys, time
out = pathlib.Path(sys.argv[1])
out.write_text("ready")
try:
    time.sleep(60)
except KeyboardInterrupt:  # as the campaign's runner does: its runs record their interruption, which takes a while
    time.sleep(1)
    out.write_text("recorded its interruption")
    sys.exit(130)
"""


# Ctrl-C's default handling set explicitly: a pytest-xdist worker ignores SIGINT, and its children inherit that
INTERACTIVE = "signal.signal(signal.SIGINT, signal.default_int_handler)"


def start_parent(child_source: str, out: Path, signal_setup: str, **popen) -> subprocess.Popen:
    """A process that runs `child_source` (with `out` as its argument) through run_until_stopped, in its own group as
    a terminal's foreground job; `signal_setup` is its signal handling, as a command line would set it."""
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", "import signal, sys; from benchmark.cli.campaign import run_until_stopped; "
                               f"{signal_setup}; "
                               f"sys.exit(run_until_stopped([sys.executable, '-c', {child_source!r}, {str(out)!r}]))"],
        cwd=REPO_ROOT, start_new_session=True, **popen)


def wait_for(out: Path, state: str) -> str:
    """The child's report once it starts with `state` (or whatever it says after 60 s)."""
    import time

    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text().startswith(state)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return out.read_text()


def test_ctrl_c_lets_the_releases_process_record_its_interrupted_runs(tmp_path):
    """`campaign run` from another commit runs the release in a child process: a terminal's Ctrl-C (SIGINT to the
    whole foreground group) must reach the child once and wait for it, not kill it and orphan its workers."""
    import os
    import signal

    out = tmp_path / "child.txt"
    parent = start_parent(CHILD_STOPPING_SLOWLY, out, INTERACTIVE)
    assert wait_for(out, "ready") == "ready"
    os.killpg(parent.pid, signal.SIGINT)
    assert parent.wait(timeout=30) == 130
    assert out.read_text() == "recorded its interruption"


def test_a_campaign_started_in_the_background_stops_on_sigterm(tmp_path):
    """`nohup replaybench campaign run ... &` starts with SIGINT ignored; the release's process must not inherit
    that, or the SIGINT a SIGTERM is forwarded as would not stop it."""
    import signal

    out = tmp_path / "child.txt"
    parent = start_parent(CHILD_STOPPING_SLOWLY, out,  # SIGTERM handled as the command line does
                          "from benchmark.cli.parallel import interrupt; signal.signal(signal.SIGTERM, interrupt)",
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert wait_for(out, "ready") == "ready"
    parent.terminate()
    assert parent.wait(timeout=30) == 130
    assert out.read_text() == "recorded its interruption"


CHILD_THAT_HANGS_ON_STOP = """
import pathlib, signal, subprocess, sys, time
out = pathlib.Path(sys.argv[1])
worker = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                                                 "time.sleep(60)"])  # a pool worker: it ignores SIGINT
out.write_text(f"ready {worker.pid}")
try:
    time.sleep(60)
except KeyboardInterrupt:  # a runner stuck while it stops
    out.write_text(f"stopping {worker.pid}")
    time.sleep(60)
"""


def ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return True


def test_a_second_ctrl_c_ends_the_releases_process_and_its_workers(tmp_path):
    """If the child hangs while it stops, a second Ctrl-C ends its whole group (its workers too) and exits 130."""
    import os
    import signal
    import time

    out = tmp_path / "child.txt"
    parent = start_parent(CHILD_THAT_HANGS_ON_STOP, out, INTERACTIVE)
    worker = int(wait_for(out, "ready").split()[1])
    os.killpg(parent.pid, signal.SIGINT)
    assert wait_for(out, "stopping") == f"stopping {worker}"
    assert parent.poll() is None and not ended(worker)  # one Ctrl-C waits for the child
    os.killpg(parent.pid, signal.SIGINT)
    assert parent.wait(timeout=30) == 130
    deadline = time.monotonic() + 10
    while not ended(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ended(worker)

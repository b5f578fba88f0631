import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.cli.runs import dry_run_error, submission_specs
from benchmark.errors import UserError
from benchmark.submission import SubmissionError, load_baselines, load_submission
from benchmark.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "submissions" / "example_entry"


def test_example_entry_loads_with_pinned_seeds_and_sandboxed_runs():
    sub = load_submission(EXAMPLE)
    assert (sub.track, sub.workers, sub.trainers) == ("buffer", 5, 3)
    specs = submission_specs(sub, "arith-tiny")
    assert [s.seed for s in specs] == load_workload("arith-tiny").seeds  # the workload's pinned seeds
    assert all(s.isolated for s in specs)
    assert specs[0].strategy_params == {"max_uses": 4, "buffer_size": 256}
    assert specs[0].workload.grpo.loss == "grpo" and specs[0].workload.grpo.lr == 1e-4  # pinned by the workload


def test_content_hash_changes_with_any_file(tmp_path):
    entry = tmp_path / "entry"
    shutil.copytree(EXAMPLE, entry)
    before = load_submission(entry).content_sha256()
    assert load_submission(entry).content_sha256() == before
    (entry / "strategy.py").write_text((entry / "strategy.py").read_text() + "\n# tweak\n")
    assert load_submission(entry).content_sha256() != before


def write(tmp_path, text):
    (tmp_path / "strategy.py").write_text("")
    (tmp_path / "submission.yaml").write_text(text)
    return tmp_path


BASE = ("name: x\nauthors: [a]\ncontact: c\ndescription: d\nstrategy: strategy.py\n"
        "workers: 5\ntrainers: 3\n")


@pytest.mark.parametrize("extra, message", [
    ("track: fast\n", "track must be one of buffer, open"),
    ("track: buffer\nloss: asymre\n", "the buffer track fixes the loss to grpo"),
    ("track: open\nloss: ppo\n", "loss must be one of grpo, asymre"),
    ("track: buffer\nlr: 0.1\n", "unknown field `lr`"),
    ("track: buffer\nhyperparameters: {buffer_size: 3}\n", "set buffer_size at the top level"),
    ("track: buffer\ngrpo: {eps_high: 0.28}\n", "the buffer track fixes the GRPO settings"),
    ("track: open\ngrpo: {group_size: 16}\n",
     "grpo must be a mapping of some of asymre_delta, decoupled_cap, eps_low, eps_high, lr, m2po_tau, tis_cap"),
    ("track: open\ngrpo: {lr: -1}\n", "grpo must be a mapping of some of"),
])
def test_schema_problems_are_named(tmp_path, extra, message):
    with pytest.raises(SubmissionError, match=message):
        load_submission(write(tmp_path, BASE + extra))


@pytest.mark.parametrize("text, message", [
    (BASE.replace("workers: 5", "workers: true") + "track: buffer\n", "workers must be a positive integer, not True"),
    (BASE + "track: buffer\nbuffer_size: 2.5\n", "buffer_size must be a positive integer, not 2.5"),
    (BASE + "track: buffer\nsync_every: 0\n", "sync_every must be a positive integer, not 0"),
    (BASE.replace("strategy: strategy.py", "strategy: ../elsewhere.py") + "track: buffer\n",
     "strategy '../elsewhere.py' is outside the entry's folder"),
    (BASE.replace("name: x", "name: \"x' OR 1=1\"") + "track: buffer\n", "name must be 1-64 letters"),
    (BASE.replace("strategy: strategy.py", "strategy: submission.yaml") + "track: buffer\n",
     "strategy must be a .py file"),
    (BASE.replace("workers: 5", "workers: '5'") + "track: buffer\n", "workers must be a positive integer, not '5'"),
    (BASE + "track: buffer\nbuffer_size: null\n", "buffer_size must be a positive integer, not None"),
    (BASE.replace("authors: [a]", "authors: 5") + "track: buffer\n", "authors must be a list of strings or a string"),
    (BASE + "track: open\ngrpo: {lr: true}\n", "grpo must be a mapping of some of"),
    (BASE + "track: buffer\nhyperparameters: [1]\n", r"hyperparameters must be a mapping \(name: value\), not \[1\]"),
])
def test_values_a_yaml_reader_would_accept_are_refused(tmp_path, text, message):
    entry = tmp_path / "entry"
    entry.mkdir()
    (tmp_path / "elsewhere.py").write_text("")  # exists, but the content hash covers the entry's folder only
    with pytest.raises(SubmissionError, match=message):
        load_submission(write(entry, text))


def test_an_entry_holds_its_own_files_only(tmp_path):
    entry = tmp_path / "entry"
    shutil.copytree(EXAMPLE, entry)
    (entry / "data").symlink_to("/dev/zero")  # hashing it would never end
    with pytest.raises(SubmissionError, match="an entry holds no symbolic links"):
        load_submission(entry)
    (entry / "data").unlink()
    with (entry / "data").open("wb") as f:
        f.truncate(17 * 2**20)
    with pytest.raises(SubmissionError, match="an entry may hold at most 16 MB"):
        load_submission(entry)


def test_every_problem_is_one_line_missing_then_unknown_then_wrong(tmp_path):
    text = BASE.replace("name: x\n", "").replace("workers: 5", "workers: 0") + "track: buffer\nloss: asymre\nlr: 1\n"
    with pytest.raises(SubmissionError) as error:
        load_submission(write(tmp_path, text))
    assert str(error.value).split("\n")[1:] == [
        "  - missing field `name`",
        "  - unknown field `lr` (known: name, authors, contact, description, strategy, track, workers, trainers, "
        "buffer_size, hyperparameters, loss, sync_every, grpo, tuning)",
        "  - workers must be a positive integer, not 0",
        "  - the buffer track fixes the loss to grpo: remove `loss` or use track: open"]


def test_validate_refuses_a_broken_entry_in_one_message(tmp_path, isolated_runs, capsys):
    from benchmark.cli import main

    assert main(["validate", str(write(tmp_path, BASE + "track: fast\n"))]) == 2
    err = capsys.readouterr().err
    assert "track must be one of buffer, open, prompt, not 'fast'" in " ".join(err.split()) and "Traceback" not in err


def test_open_track_may_choose_a_registered_loss_and_its_clip_range(tmp_path):
    sub = load_submission(write(tmp_path, BASE + "track: open\nloss: asymre\ngrpo: {eps_high: 0.28, lr: 5.0e-5}\n"))
    grpo = sub.workload_for("arith-tiny").grpo
    assert (grpo.loss, grpo.eps_high, grpo.lr, grpo.eps_low) == ("asymre", 0.28, 5e-5, 0.2)


def test_missing_folder_names_the_fix(tmp_path):
    with pytest.raises(SubmissionError, match="copy submissions/example_entry"):
        load_submission(tmp_path / "nothing")


ENTRIES = sorted(p.parent for p in (REPO / "submissions").glob("*/submission.yaml"))


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("entry", ENTRIES, ids=[p.name for p in ENTRIES])
def test_every_entry_in_submissions_validates_with_a_sandboxed_dry_run(entry, isolated_runs):
    """What a pull request adds under submissions/ is checked here, in CI: schema, names, a short dry run."""
    # as the docs write it (`replaybench validate submissions/example_entry`), through the console script
    script = Path(sys.executable).with_name("replaybench")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "benchmark.cli"]
    result = subprocess.run([*command, "validate", str(entry.relative_to(REPO))], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "sandboxed dry run" in result.stderr and "trainer steps" in result.stderr
    assert "dry run: 120,000 compute units of arith-tiny" in " ".join(result.stderr.split())  # said before it runs


def test_validate_checks_hyperparameter_names_before_any_dry_run(tmp_path, isolated_runs):
    """A name the constructor does not take is found by reading the file, in the schema step: exit 2 with the
    whole message (every parameter the strategy accepts), and no dry run."""
    entry = tmp_path / "entry"
    shutil.copytree(EXAMPLE, entry)
    text = (entry / "submission.yaml").read_text()
    (entry / "submission.yaml").write_text(text.replace("{max_uses: 4}", "{max_uses: 4, fresh_frac: 0.5}"))
    result = subprocess.run([sys.executable, "-m", "benchmark.cli", "validate", str(entry)], cwd=REPO,
                            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    # where each one goes: buffer_size has a field of its own, under hyperparameters it is refused
    assert said.endswith("strategy.py does not take fresh_frac; its parameters are: buffer_size (the top-level "
                         "field buffer_size), max_uses (under hyperparameters)")
    assert "dry run" not in said


def example_copy(tmp_path, edit):
    entry = tmp_path / "entry"
    shutil.copytree(EXAMPLE, entry)
    (entry / "submission.yaml").write_text(edit((entry / "submission.yaml").read_text()))
    return entry


def test_a_left_out_buffer_size_is_the_workloads_default_and_validate_says_so(tmp_path):
    from benchmark.strategy import build_strategy

    sub = load_submission(example_copy(tmp_path, lambda t: t.replace("buffer_size: 256\n", "")))
    workload = sub.workload_for("arith-tiny")
    # what the run builds (ledger.open_strategy): the workload's strategy_defaults fill in what the entry omits
    assert build_strategy(sub.strategy, sub.strategy_params(), workload.strategy_defaults).buffer_size == 90
    assert sub.buffer_size_in_words(workload) == ("buffer_size: not set, arith-tiny's default 90 (its "
                                                  "strategy_defaults) applies, not the constructor's 256")
    bare = load_workload("arith-tiny", {"strategy_defaults": {}})
    assert sub.buffer_size_in_words(bare) == "buffer_size: not set, the constructor's default 256 applies"
    (sub.strategy).write_text(sub.strategy.read_text().replace("buffer_size: int = 256, ", ""))
    assert sub.buffer_size_in_words(workload) == "buffer_size: not set, and the strategy takes none"


def test_validate_refuses_a_buffer_smaller_than_a_batch_before_the_dry_run(tmp_path, isolated_runs, capsys):
    from benchmark.cli import main

    entry = example_copy(tmp_path, lambda t: t.replace("buffer_size: 256", "buffer_size: 32"))
    assert main(["validate", str(entry)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert ("buffer_size 32 is smaller than one batch of arith-tiny, 64 rollouts a trainer step (grpo.batch_size: "
            "8 prompts x group_size 8), so the buffer never holds a batch: set buffer_size to at least 64") in err
    assert "dry run" not in err
    sub = load_submission(example_copy(tmp_path / "b", lambda t: t.replace("buffer_size: 256", "buffer_size: 64")))
    assert sub.workload_for("arith-tiny").grpo.batch_size == 64  # one batch exactly is enough


def test_a_split_that_misses_the_devices_names_the_entrys_fields(tmp_path):
    sub = load_submission(example_copy(tmp_path, lambda t: t.replace("workers: 5", "workers: 4")))
    with pytest.raises(UserError) as error:
        sub.workload_for("arith-tiny")
    assert "workers + trainers (the entry's own fields) must equal pipeline.devices (8); got 4 + 3" in str(error.value)
    assert "pipeline.workers" not in str(error.value)


def test_a_dry_runs_multi_line_message_is_kept_whole():
    stderr = ("seed 0 ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━   0% of budget  step 0  acc nan 0:00:03\n"
              "error: entry/submission.yaml:\n  - missing field `name`\n  - track must be one of buffer, open\n")
    assert dry_run_error(stderr) == ("entry/submission.yaml:\n  - missing field `name`\n"
                                     "  - track must be one of buffer, open")
    assert dry_run_error("Traceback (most recent call last):\n  File x\n    boom()\nRuntimeError: boom\n") == (
        "  File x\n    boom()\nRuntimeError: boom")


# ---- the reference baselines: entries in the same format, checked by the same validator ----------
BASELINES = REPO / "baselines" / "baselines.yaml"


def test_baselines_are_entries_with_the_settings_they_are_ranked_in():
    baselines = load_baselines()
    assert baselines.default == ["on_policy", "fifo_uniform"]  # what the main job runs
    settings = {name: (e.track, e.workers, e.trainers, e.strategy.relative_to(REPO).as_posix(), e.strategy_params())
                for name, e in baselines.entries.items()}
    fifo = {"buffer_size": 360}  # the rule's pick at (6,2) over N = 90 (the paper's N/B = 1.4 at B = 64), 180, 360
    assert settings == {  # the run configs (and so the group keys) of the published runs depend on these
        "on_policy": ("buffer", 6, 2, "baselines/on_policy.py", {"buffer_size": 90}),
        "fifo_uniform": ("buffer", 6, 2, "baselines/fifo_uniform.py", fifo),
        "positive_bias": ("buffer", 6, 2, "baselines/positive_bias.py", {"buffer_size": 360, "delta": 0.25}),
        "without_replacement": ("buffer", 6, 2, "baselines/without_replacement.py", fifo),
        "prefer_unused": ("buffer", 6, 2, "baselines/prefer_unused.py", fifo),
        "sharded": ("buffer", 6, 2, "baselines/sharded.py", fifo),
        "prioritized": ("buffer", 6, 2, "baselines/prioritized.py", {"buffer_size": 360, "alpha": 0.6, "beta": 0.4}),
        "rlep": ("open", 6, 2, "baselines/rlep.py",
                 {"trained_for": 0.25, "pool_prompts": 3600, "pool_samples": 4, "replay_k": 2, "recompute": True,
                  "refresh": False}),
        "oldest_first": ("buffer", 5, 3, "baselines/oldest_first.py", {"buffer_size": 90}),  # the control
        # the 2025-26 methods, at settings fixed before any run of theirs
        "fresh_anchored": ("buffer", 6, 2, "baselines/fresh_anchored.py", {"buffer_size": 360, "tau_max": 8}),
        "staleness_bounded": ("buffer", 7, 1, "baselines/staleness_bounded.py", {"max_staleness": 4}),
        "m2po": ("open", 5, 3, "baselines/fifo_uniform.py", {"buffer_size": 90}),
        "prompt_replay": ("prompt", 6, 2, "baselines/prompt_replay.py", {"buffer_size": 90}),
        "asymre": ("open", 5, 3, "baselines/fifo_uniform.py", {"buffer_size": 90}),
    }
    # the order the run configs record: buffer_size first
    assert list(baselines.entries["prioritized"].strategy_params()) == ["buffer_size", "alpha", "beta"]


def copy_baselines(tmp_path, edit):
    folder = tmp_path / f"baselines-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(BASELINES.parent, folder)
    (folder / "strategy.py").write_text("")  # the file BASE names
    (folder / "baselines.yaml").write_text(edit(BASELINES.read_text()))
    return folder / "baselines.yaml"


@pytest.mark.parametrize("extra, message", [
    ("track: fast\n", "track must be one of buffer, open"),
    ("track: buffer\nloss: asymre\n", "the buffer track fixes the loss to grpo"),
    ("track: buffer\nlr: 0.1\n", "unknown field `lr`"),
    ("track: buffer\nhyperparameters: {buffer_size: 3}\n", "set buffer_size at the top level"),
])
def test_a_wrong_field_in_the_baselines_fails_as_it_would_in_a_submission(tmp_path, extra, message):
    with pytest.raises(SubmissionError) as in_submission:
        load_submission(write(tmp_path, BASE + extra))
    problem = str(in_submission.value).split("\n", 1)[1]  # below the file's name: the problems

    indented = "".join(f"    {line}\n" for line in (BASE.replace("name: x", "name: wrong") + extra).splitlines())
    path = copy_baselines(tmp_path, lambda text: text + "\n  - " + indented.lstrip())
    with pytest.raises(SubmissionError) as in_baselines:
        load_baselines(path)
    assert str(in_baselines.value) == f"{path}, entry wrong:\n{problem}"
    assert message in problem


def test_the_baselines_file_names_its_own_problems(tmp_path):
    unknown_default = copy_baselines(tmp_path, lambda t: t.replace("default: [on_policy, fifo_uniform]",
                                                                   "default: [on_policy, fifo]"))
    with pytest.raises(SubmissionError, match="`default` names no entry fifo"):
        load_baselines(unknown_default)
    twice = copy_baselines(tmp_path, lambda t: t.replace("name: sharded", "name: fifo_uniform"))
    with pytest.raises(SubmissionError, match="entry fifo_uniform: the name is taken by an earlier entry"):
        load_baselines(twice)
    old_layout = copy_baselines(tmp_path, lambda _: "on_policy:\n  strategy: on_policy.py\n  workers: 6\n")
    with pytest.raises(SubmissionError, match="must be a mapping of `default`.*found top-level keys on_policy"):
        load_baselines(old_layout)


def test_an_entry_may_choose_its_sync_period(tmp_path):
    entry = load_submission(write(tmp_path, BASE + "track: buffer\nsync_every: 4\n"))
    assert entry.workload_for("arith-tiny").pipeline.sync_every == 4
    assert load_submission(write(tmp_path, BASE + "track: buffer\n")).workload_for(
        "arith-tiny").pipeline.sync_every == 1  # the workload's

"""User errors end with one clear line and exit code 2, never a traceback."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark.cli import main
from benchmark.strategy import StrategyError

REPO = Path(__file__).resolve().parent.parent


def replaybench(*args):
    return subprocess.run([sys.executable, "-m", "benchmark.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, message", [
    (["run", "--strategy", "baselines/nope.py"], "strategy file not found"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--workload", "nope"], "unknown workload 'nope'"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--workers", "6"], "must equal pipeline.devices"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--set", "bufsize=3"], "does not take bufsize"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--budget", "5", "--set", "eval.num_problems=10",
      "--set", "eval.pass_k_problems=0"], "before the first trainer step"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--budget", "0"], "raise --budget"),
    (["run", "--strategy", "tests/conftest.py"], "exactly one subclass"),
    (["run", "--strategy", "README.md"], "strategy file is not Python"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--summary-json", "/nonexistent/s.json"],
     "--summary-json: no folder /nonexistent"),
    (["leaderboard", "build", "--out", "README.md"], "cannot write the leaderboard into README.md"),
    (["leaderboard", "serve", "--port", "99999999", "--dir", "leaderboard"], "ports are 0-65535"),
    (["leaderboard", "--workload", "arith-tinyy"],
     "unknown workload 'arith-tinyy'; known: arith-small-steps, arith-tiny"),
])
def test_user_errors_are_one_clear_message(args, message, isolated_runs, monkeypatch, capsys):
    """In this process (the console script's exit path is tested by the commands run as written below)."""
    monkeypatch.chdir(REPO)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


@pytest.mark.parametrize("setting, message", [
    ("grpo.lr=abc", "arith-tiny.grpo.lr must be a number, not 'abc'"),
    ("eval.every=abc", "arith-tiny.eval.every must be a number, not 'abc'"),
    ("budget=abc", "arith-tiny.budget must be a number, not 'abc'"),
    ("pipeline.workers=4.5", "arith-tiny.pipeline.workers must be a whole number, not 4.5"),
    ("grpo.batch_size=true", "arith-tiny.grpo.batch_size must be a whole number, not True"),
    ("fresh_frac=0.5", "does not take fresh_frac; its parameters are: buffer_size"),
    ("buffer_size=abc", "fifo_uniform.py: buffer_size must be a whole number, not 'abc'"),
    ("buffer_size=2.5", "fifo_uniform.py: buffer_size must be a whole number, not 2.5"),
    ("limits.call_seconds=0", "limits.strategy_seconds, call_seconds, memory_mb and reply_mb must be positive"),
    ("grpo.loss=ppo", "arith-tiny.grpo.loss must be one of grpo, asymre, tis, cispo, m2po, decoupled_ppo, not 'ppo'"),
    ("grpo.lrr=1", "arith-tiny.grpo: unknown field `lrr` (known: group_size, batch_size, lr,"),
])
@pytest.mark.parametrize("isolate", [[], ["--isolate"]])
def test_a_config_error_is_the_users_and_records_no_run(setting, message, isolate, isolated_runs, capsys):
    code = main(["run", "--strategy", "baselines/fifo_uniform.py", "--set", setting, *isolate])
    assert code == 2 and message in " ".join(capsys.readouterr().err.split())
    assert not (isolated_runs / "mlflow.db").exists()  # nothing was recorded as a run


def test_the_parameters_of_an_untrusted_file_are_read_without_running_it(tmp_path):
    from benchmark.strategy import declared_params

    path = tmp_path / "entry.py"
    path.write_text("import os\nos.system('touch ran')\nfrom benchmark import ReplayStrategy\n\n"
                    "class Entry(ReplayStrategy):\n    def __init__(self, buffer_size=8, *, alpha=0.5):\n"
                    "        pass\n")
    assert declared_params(path) == ["buffer_size", "alpha"]
    assert not (tmp_path / "ran").exists()
    path.write_text("from benchmark import ReplayStrategy\nclass A(ReplayStrategy):\n"
                    "    def __init__(self, **kwargs):\n        pass\n")
    assert declared_params(path) is None  # **kwargs: the box decides


def test_the_kinds_of_parameters_come_from_annotations_or_literal_defaults(tmp_path):
    from benchmark.strategy import check_params, declared_param_kinds

    path = tmp_path / "entry.py"
    path.write_text("from benchmark import ReplayStrategy\n\nclass Entry(ReplayStrategy):\n"
                    "    def __init__(self, size: int, frac=0.5, *, on=False, name='x', other=None, sh: tuple = ()):\n"
                    "        pass\n")
    assert declared_param_kinds(path) == {"size": "int", "frac": "float", "on": "bool", "name": "str"}
    check_params(path, {"size": 3, "frac": 1, "on": True, "other": "anything"}, None)  # an int is a number
    with pytest.raises(StrategyError, match="size must be a whole number, not True; on must be true or false"):
        check_params(path, {"size": True, "on": 1}, None)


def test_a_damaged_store_is_one_message_and_stays_as_it_was(isolated_runs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # the store's path whole on its line
    store = isolated_runs / "mlflow.db"
    store.write_bytes(b"SQLite format 3\x00" + b"\x07" * 3000)  # a truncated, unreadable database
    before = store.read_bytes()
    for args in (["run", "--strategy", "baselines/fifo_uniform.py", "--budget", "20000"], ["leaderboard"]):
        assert main(args) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"the MLflow store {store} cannot be read" in err and "mv " in err and "Traceback" not in err
    assert store.read_bytes() == before and not (isolated_runs / "checkpoints").exists()


def test_a_damaged_target_is_one_message_and_nothing_is_written(isolated_runs, tmp_path, capsys):
    targets, out = tmp_path / "targets", tmp_path / "board"
    targets.mkdir()
    (targets / "arith-tiny.json").write_text('{"schema": ')  # cut short
    for args in (["leaderboard", "--workload", "arith-tiny"], ["leaderboard", "build", "--out", str(out)]):
        assert main([*args, "--targets", str(targets)]) == 2
        err = "".join(capsys.readouterr().err.split())  # the console wraps long paths anywhere
        assert "arith-tiny.jsoncannotberead" in err and "freeze-target--workloadarith-tiny--force" in err
    assert not out.exists()


def test_a_folder_that_is_not_a_model_names_the_fix(tmp_path, capsys):
    assert main(["eval", "--model", str(tmp_path), "--task", "arith_tiny"]) == 2
    assert "Pass a local folder with config.json and weights" in " ".join(capsys.readouterr().err.split())


def test_grading_a_file_that_is_not_utf8_names_the_fix(tmp_path, capsys):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"gold": "5", "completion": "caf\xe9 \\boxed{5}"}\n')
    assert main(["grade", "--task", "math500", str(path)]) == 2
    assert "is not UTF-8 text" in " ".join(capsys.readouterr().err.split())


def test_workloads_lists_and_checks():
    result = replaybench("workloads", "--check")
    assert result.returncode == 0 and "arith-tiny" in result.stdout


# ---- `baselines`: the runs (stubbed here: no training), then the leaderboard's ranking ------------
def stub_training(monkeypatch, fail=()):
    """Replace training by a record of what would run; strategies named in `fail` fail as a bad strategy would."""
    import benchmark.runner

    specs = []

    def run(spec, **_):
        specs.append(spec)
        if spec.strategy_name in fail:
            raise StrategyError(f"{spec.strategy_name}: sample() returned 3 rollouts, not 64")
        return summary_of(spec)

    monkeypatch.setattr(benchmark.runner, "run", run)
    return specs


def summary_of(spec, **fields) -> dict:
    """What the progress rows read of a finished run's summary."""
    return {"compute_used": spec.workload.budget, "trainer_steps": 10, "final": {"accuracy": 0.5}, **fields}


def test_baselines_prints_the_leaderboards_ranking(isolated_runs, arith_tiny_v2, tmp_path, monkeypatch, capsys):
    from helpers import make_run

    import benchmark.leaderboard.targets
    from benchmark.leaderboard.build import score_from_mlflow
    from benchmark.tracking import client, experiment_id

    c = client()
    exp = experiment_id(c, "arith-tiny")
    for seed in range(4):  # fifo_uniform reaches the target sooner: first on the leaderboard
        make_run(c, exp, "on_policy", seed, [0.2, 0.3, 0.4, 0.5], workers=6, trainers=2)
        make_run(c, exp, "on_policy", 10 + seed, [0.2, 0.3, 0.4, 0.5], workers=6, trainers=2)  # held out
        make_run(c, exp, "fifo_uniform", seed, [0.2, 0.5, 0.5, 0.6])
    monkeypatch.setattr(benchmark.leaderboard.targets, "TARGETS_DIR", tmp_path / "targets")
    monkeypatch.setenv("COLUMNS", "400")  # rich: no cut cells in the captured table
    assert main(["leaderboard", "freeze-target", "--workload", "arith-tiny"]) == 0
    capsys.readouterr()
    specs = stub_training(monkeypatch)

    assert main(["baselines", "--seeds", "0", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "ReplayBench leaderboard: arith-tiny v2" in out and "speedup (geo-mean)" in out
    assert out.index("fifo_uniform") < out.index("on_policy (reference)")
    # the reference pair, each in its entry's settings; untagged, like the runs already on record
    assert [(s.strategy_name, s.workload.pipeline.workers, s.workload.pipeline.trainers, s.strategy_params, s.tags)
            for s in specs] == [("on_policy", 6, 2, {"buffer_size": 90}, {}),
                                ("fifo_uniform", 6, 2, {"buffer_size": 360}, {})]
    # untagged runs are in the buffer track, the track of every baseline entry
    assert {e["strategy"] for e in score_from_mlflow("arith-tiny", track="buffer")["entries"]} == {
        "on_policy", "fifo_uniform"}


def test_baselines_without_a_target_says_why_in_one_line_and_lists_failures(isolated_runs, tmp_path, monkeypatch,
                                                                               capsys):
    import benchmark.leaderboard.targets

    monkeypatch.setattr(benchmark.leaderboard.targets, "TARGETS_DIR", tmp_path / "no-targets")
    stub_training(monkeypatch, fail={"fifo_uniform"})

    assert main(["baselines", "--seeds", "0", "--jobs", "1"]) == 1  # a failed run, as before
    err = capsys.readouterr().err
    reason = next(line for line in err.splitlines() if line.startswith("no ranking:"))
    assert "no frozen target for workload arith-tiny" in reason
    assert "replaybench leaderboard freeze-target --workload arith-tiny" in reason
    assert "Traceback" not in err
    assert "failed fifo_uniform (6,2) seed 0: fifo_uniform: sample() returned 3 rollouts" in " ".join(err.split())


def _published_files() -> dict:
    """The published board's files, and the README and findings whose numbers it writes."""
    files = [*(p for p in (REPO / "leaderboard").iterdir() if p.is_file()), REPO / "README.md",
             REPO / "docs" / "findings.md"]
    return {p.name: p.read_bytes() for p in files}


def test_a_plain_build_writes_the_local_board_and_publishing_needs_the_target_runs(isolated_runs, monkeypatch,
                                                                                   tmp_path, capsys):
    """A fresh clone's store holds none of the runs behind the published target: `build` writes runs/leaderboard/
    and says what is missing; `build --publish` refuses, leaving the published files byte-identical."""
    import benchmark.cli.leaderboard
    import benchmark.leaderboard.build

    before = _published_files()
    assert main(["leaderboard", "build"]) == 0
    out = capsys.readouterr()
    assert (isolated_runs / "leaderboard" / "index.html").is_file() and _published_files() == before
    said = " ".join((out.out + out.err).split())
    assert "this store holds 0 of the 4 reference runs that set the target" in said
    assert "no entry is ranked yet: `replaybench leaderboard import-runs` loads the published board's runs" in said
    local = json.loads((isolated_runs / "leaderboard" / "results.json").read_text())
    published = json.loads((REPO / "leaderboard" / "results.json").read_text())
    ref = next(e for e in published["entries"] if e["reference"])["workloads"]["arith-tiny"]
    shown = local["workloads"]["arith-tiny"]["published_reference"]  # the newcomer's runs get a curve to compare
    assert shown["run_ids"] == ref["run_ids"] and shown["accuracy_curve"] == ref["accuracy_curve"]
    page = (isolated_runs / "leaderboard" / "index.html").read_text()
    assert "reference of the published board" in page and 'id="curves-arith-tiny"' in page

    assert main(["leaderboard", "build", "--publish"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "lacks the reference runs that set the published target" in said
    assert "no leaderboard file was changed" in said
    assert _published_files() == before

    published = tmp_path / "published"  # --force writes the published folder all the same (a copy here)
    monkeypatch.setattr(benchmark.cli.leaderboard, "LEADERBOARD_DIR", published)
    monkeypatch.setattr(benchmark.leaderboard.build, "LEADERBOARD_DIR", published)
    assert main(["leaderboard", "build", "--publish"]) == 2 and not (published / "results.json").exists()
    assert main(["leaderboard", "build", "--publish", "--force"]) == 0 and (published / "results.json").is_file()


def test_the_leaderboard_takes_a_workload_file_as_submit_suggests(isolated_runs):
    from benchmark.workload import load_workload

    result = replaybench("leaderboard", "--workload", "workloads/arith-tiny.yaml")
    assert result.returncode == 0 and f"arith-tiny v{load_workload('arith-tiny').version}" in result.stdout


def test_workloads_never_folds_a_name_in_a_narrow_terminal():
    result = subprocess.run([sys.executable, "-m", "benchmark.cli", "workloads"], cwd=REPO, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    for name in ("arith-tiny", "llama3.2-3b-openr1", "qwen3-0.6b-openr1", "qwen3-8b-minif2f"):
        assert any(f"│ {name} " in line for line in lines), name
    # the descriptions below the table, a line each, not a word a line in a narrow column
    assert "arith-tiny: Integer addition learned by a tiny char-level model" in lines
    assert "│ Qwen/Qwen2.5-7B " in " ".join(lines)  # a hub id whole where it fits


def test_version():
    result = replaybench("--version")
    assert result.returncode == 0 and result.stdout.startswith("replaybench 0.")


def test_grade_names_each_verdicts_line_and_gold_and_wants_a_box(tmp_path):
    path = tmp_path / "completions.jsonl"
    path.write_text('{"gold": "5", "completion": "I think it\'s 5"}\n\n{"gold": "5", "completion": "\\\\boxed{5}"}\n')
    result = replaybench("grade", "--task", "math500", str(path))
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(v["line"], v["gold"], v["correct"], v["reason"]) for v in verdicts] == [
        (1, "5", False, "no_answer"), (3, "5", True, "correct")]


def test_warmstart_help_lists_only_the_options_it_uses():
    result = replaybench("warmstart", "--help")
    assert result.returncode == 0 and "--out" in result.stdout and "default: arith-tiny" in " ".join(
        result.stdout.split())
    assert not any(flag in result.stdout for flag in ("--budget", "--workers", "--trainers", "--isolate"))


def test_help_loads_none_of_the_engine():
    """`replaybench --help` and each command's help stay fast: parsing the command line imports no torch."""
    code = ("import sys; from benchmark.cli.app import build_parser; build_parser(); "
            "heavy = [m for m in ('torch', 'transformers', 'mlflow', 'matplotlib') if m in sys.modules]; "
            "assert not heavy, heavy")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


# The user-facing documents: the README, docs/, ARCHITECTURE.md and every folder's README (not the generated
# leaderboard/LEADERBOARD.md, nor the published runs' folders).
def doc_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
    for folder in ("submissions", "leaderboard", "baselines", "benchmarks", "workloads", "tasks"):
        files += [p for p in sorted((REPO / folder).glob("**/README.md")) if "runs" not in p.relative_to(REPO).parts]
    return [p for p in files if p.exists()]


# The programs the set-up's environment puts on the PATH (README, Quick start).
DOC_PROGRAMS = ("replaybench", "lm_eval", "mlflow")


def block_commands(block: str) -> list[str]:
    """The commands of one shell block, continuation lines joined and comments cut, with the `$NAME`s the block
    itself defines (`W=...`; a loop's first value, `for seed in 0 1`; `set -- $split`) put in; any other `$NAME`
    is left as written."""
    values: dict[str, str] = {}

    def put_in(text):
        return re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: values.get(m[1] or m[2], m[0]), text)

    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split(" #")[0].strip()
        if (m := re.fullmatch(r"(\w+)=(\S+)", line)) or (m := re.fullmatch(r"for (\w+) in (.+?);\s*do", line)):
            values[m[1]] = shlex.split(m[2])[0]
        elif m := re.fullmatch(r"set -- (.+)", line):
            values.update((str(i), v) for i, v in enumerate(shlex.split(put_in(m[1])), start=1))
        elif line.split(" ")[0] in DOC_PROGRAMS:
            commands.append(put_in(" ".join(line.split())))
    return commands


def doc_commands() -> list[tuple[str, str]]:
    """Every command of the docs (`replaybench ...`, `lm_eval ...`, `mlflow ...`) as (document, command): the lines
    of their shell blocks and the code spans of their text that start with one of those programs."""
    commands = []
    for path in doc_files():
        name = str(path.relative_to(REPO))
        parts = path.read_text().split("```")
        for i, part in enumerate(parts):
            if i % 2:
                commands += [(name, c) for c in block_commands(part)]
            else:
                for span in re.findall(r"`([^`]+)`", part):
                    span = " ".join(span.split())
                    if span.split(" ")[0] in DOC_PROGRAMS and " " in span:
                        commands.append((name, span))
    return commands


# What a synopsis's placeholders stand for when it is parsed (`--workload W`, `<your_entry>`, `FILE.jsonl`).
METAVARIABLES = {"W": "arith-tiny", "T": "buffer", "N": "2", "NAME": "example_entry", "FILE.jsonl": "x.jsonl",
                 "D": "leaderboard", "DIR": "leaderboard", "UNITS": "100000", "HEX": "00ff", "P": "8",
                 "PATH_OR_HUB_ID": "tasks/arith_tiny/checkpoint", "FILE": "leaderboard/campaigns/v3.2.yaml",
                 "S": "0"}


def placeholders(command: str) -> list[str]:
    """What keeps a command from running exactly as written: optional parts, `<...>`, `...`, a `$NAME` its block does
    not define, a metavariable (W, NAME, FILE.jsonl, pretrained=PATH_OR_HUB_ID)."""
    return [token for token in command.split(" ") if re.search(r"[\[\]<>$]|^\.\.\.$", token)
            or re.fullmatch(r"(.*=)?[A-Z][A-Z0-9_]*(\.\w+)?", token)]


def as_example(command: str) -> list[str]:
    """A synopsis's arguments with its optional parts in and its placeholders filled in."""
    args = []
    for token in command.replace("[", " ").replace("]", " ").split():
        if token == "...":
            continue
        if re.search(r"<\w+>", token):
            token = re.sub(r"<\w+>", "example_entry", token)
        elif m := re.fullmatch(r"(.*=)?([A-Z][A-Z0-9_]*(\.\w+)?)", token):
            assert m[2] in METAVARIABLES, f"{command}: add {m[2]} to METAVARIABLES"
            token = (m[1] or "") + METAVARIABLES[m[2]]
        assert "$" not in token, f"{command}: {token} is not defined by its shell block"
        args.append(token)
    return args


def test_readme_and_docs_put_replaybench_on_the_path_one_way():
    """One way to put `replaybench` on the PATH (README, Quick start: `source .venv/bin/activate`), so the docs write
    `replaybench ...`, never `.venv/bin/replaybench ...` or `python -m benchmark.cli ...`."""
    for name in ("README.md", "docs/running.md", "docs/submitting.md", "docs/gpus.md", "submissions/README.md"):
        text = " ".join((REPO / name).read_text().split())
        assert "source .venv/bin/activate" in text and "puts `replaybench`, `mlflow` and `lm_eval` on your PATH" in text
    for path in doc_files():
        text = path.read_text()
        assert ".venv/bin/replaybench" not in text and "-m benchmark.cli" not in text, path


@pytest.mark.parametrize("document, command", [c for c in doc_commands() if c[1].startswith("replaybench ")],
                         ids=lambda value: value)
def test_every_readme_command_parses(document, command):
    """Every `replaybench` command of the docs is one the command line accepts: a synopsis with its optional parts
    and placeholders filled in, a command's name in the text (`replaybench eval`) one that exists. The ones that
    fit in CI also run, below."""
    from benchmark.cli.app import build_parser

    parser = build_parser()
    args = as_example(command)[1:] if placeholders(command) else shlex.split(command)[1:]
    if len(args) == 1 and not placeholders(command):  # the command's name, in a sentence
        assert args[0] in parser._subparsers._group_actions[0].choices, (document, command)
        return
    parser.parse_args(args)  # SystemExit (exit 2) on an unknown flag or command


def test_every_command_help_shows_an_example_that_parses():
    from benchmark.cli.app import EXAMPLES, build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) - {"warmstart"} == set(EXAMPLES)
    for name, command in commands.items():
        assert "example: replaybench " in command.format_help().replace("\n", " "), name
        for sub in (command._subparsers._group_actions[0].choices.values() if command._subparsers else []):
            assert sub.format_help()  # every help formats (a stray % in a help text would raise here)
    for example in EXAMPLES.values():
        parser.parse_args(shlex.split(example)[1:])


# The doc commands that run in CI, exactly as written, in this order (each a full match of the command; each must
# match one): import-runs first, so that plan, the board and `measure-mu --from-runs` see the published runs.
DOC_COMMANDS_RUN_IN_CI = (
    r"replaybench doctor",
    r"replaybench workloads( --check)?",
    r"replaybench schema (workload|submission)",
    r"replaybench leaderboard import-runs",
    r"replaybench plan --workload [\w.-]+( --tokens-per-rollout \d+)?",
    r"replaybench leaderboard( --workload arith-tiny)?",
    r"replaybench leaderboard build",  # into the fresh store's leaderboard/, not the published one
    r"replaybench measure-mu --from-runs",
    r"replaybench eval --model tasks/arith_tiny/checkpoint .*",  # ~15 s
)
# Run as written by another test, which checks more of what they print (each runs once in the suite).
DOC_COMMANDS_RUN_ELSEWHERE = (
    (r"replaybench validate submissions/example_entry",
     "tests/test_submission.py::test_every_entry_in_submissions_validates_with_a_sandboxed_dry_run"),
    (r"lm_eval .* pretrained=tasks/arith_tiny/checkpoint .*",
     "tests/test_lm_eval.py::test_the_docs_lm_eval_command_for_the_cpu_model_runs_as_written"),
)
# The doc commands written to run as they are that CI does not run, and why.
DOC_COMMANDS_LEFT_OUT = (
    (r"replaybench (run|sweep|baselines|submit|warmstart|diagnose|tune|campaign (run|reproduce))( .*)?",
     "trains for minutes to hours (docs/gpus.md's Ray run: 1.5 min; tests/test_ray_executor.py covers it; "
     "warmstart also rewrites the start checkpoint; tests/test_diagnostic.py, test_tuning.py and test_campaign.py "
     "run the others on tiny workloads)"),
    (r"replaybench campaign status .*", "names a campaign file: tests/test_campaign.py runs it on its own"),
    (r"replaybench leaderboard build --campaign .*", "a campaign's board needs the targets its campaign freezes: "
     "tests/test_campaign.py builds one from a tiny campaign"),
    (r"replaybench eval --model Qwen/.*", "needs the model hub"),
    (r"replaybench measure-mu .*--engine vllm.*", "needs a GPU, and --write rewrites the workload file"),
    (r"replaybench leaderboard --workload qwen2.5-7b-openr1", "needs the GPU runs of the loop before it"),
    (r"replaybench leaderboard build --publish", "rewrites the published board, leaderboard/"),
    (r"replaybench leaderboard serve|mlflow (ui|server)( .*)?", "serves until stopped"),
    (r"replaybench (eval|grade|plan|validate)", "a command's name in a sentence"),
)


def test_every_readme_command_runs_in_ci_or_says_why_not():
    """A command added to the docs that runs as written is run below, or left out with its reason."""
    left_out = [pattern for pattern, _ in DOC_COMMANDS_LEFT_OUT + DOC_COMMANDS_RUN_ELSEWHERE]
    for _, command in doc_commands():
        if not placeholders(command):
            run, why_not = (any(re.fullmatch(p, command) for p in ps) for ps in (DOC_COMMANDS_RUN_IN_CI, left_out))
            assert run != why_not, command  # one or the other: a new command needs a place in one of the lists


@pytest.mark.slow
@pytest.mark.e2e
def test_readme_commands_that_fit_in_ci_run_as_written(tmp_path):
    """The docs' commands that fit in CI, run as a user types them after the README's set-up: through the console
    scripts of this environment, first on the PATH, on a fresh clone's empty store."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "replaybench").exists():
        pytest.skip(f"no replaybench console script in {bin_dir} (the package is not installed: make setup)")
    written = list(dict.fromkeys(c for _, c in doc_commands() if not placeholders(c)))
    commands = [c for pattern in DOC_COMMANDS_RUN_IN_CI for c in written if re.fullmatch(pattern, c)]
    # an edit of the docs must not drop one silently
    assert all(any(re.fullmatch(p, c) for c in commands) for p in DOC_COMMANDS_RUN_IN_CI), commands
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["REPLAYBENCH_RUNS_DIR"] = str(tmp_path)  # a fresh clone's empty store
    git = ["git", "-C", str(REPO), "status", "--porcelain"] if shutil.which("git") else ["true"]
    status = subprocess.run(git, capture_output=True, text=True).stdout
    seconds = {}
    for command in commands:
        start = time.monotonic()
        result = subprocess.run(shlex.split(command), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        seconds[command] = round(time.monotonic() - start, 1)
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
        assert "Traceback" not in result.stderr, command
    print(seconds)
    assert subprocess.run(git, capture_output=True, text=True).stdout == status  # none wrote into the checkout


def test_a_folder_store_is_refused_before_any_work(monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "./mlruns")
    start = time.monotonic()
    assert main(["eval", "--model", "tasks/arith_tiny/checkpoint", "--task", "arith_tiny", "--limit", "5"]) == 2
    assert time.monotonic() - start < 5  # refused before the model loads, not after the evaluation
    assert "sqlite:///./mlruns.db" in " ".join(capsys.readouterr().err.split())


def test_every_error_a_user_can_cause_is_a_user_error():
    """The command line prints a UserError as one message and exits 2; any other exception is a bug."""
    import benchmark.cli.eval
    import benchmark.engine.executor
    import benchmark.grading
    import benchmark.grading.grade_file
    import benchmark.grading.prompts
    import benchmark.leaderboard
    import benchmark.rl.generation
    import benchmark.rl.policy
    import benchmark.strategy
    import benchmark.submission
    import benchmark.tracking
    import benchmark.workload
    from benchmark.errors import UserError

    kinds = [benchmark.workload.WorkloadError, benchmark.submission.SubmissionError, benchmark.strategy.StrategyError,
             benchmark.strategy.StrategyFailure, benchmark.engine.executor.RunError, benchmark.grading.TaskError,
             benchmark.rl.policy.PolicyError, benchmark.rl.generation.EngineError, benchmark.tracking.TrackingError,
             benchmark.leaderboard.LeaderboardError, benchmark.cli.eval.EvalError,
             benchmark.grading.grade_file.GradingError, benchmark.grading.prompts.PromptError]
    assert all(issubclass(kind, UserError) for kind in kinds)


def test_submits_table_of_its_seeds_gives_a_speedup_per_seed_only_under_rules_v2(monkeypatch, capsys):
    """Rules v3 score an entry's runs against the reference's as two samples: no seed has a speedup of its own."""
    from benchmark.cli.runs import print_seeds

    monkeypatch.setenv("COLUMNS", "200")
    runs = {"r0": {"seed": 0, "compute_to_target": 1.2e6, "best_accuracy": 0.81, "replay_ratio": 1.0, "speedup": 1.25},
            "someone-elses": {"seed": 1, "compute_to_target": 2e6, "best_accuracy": 0.7, "speedup": 0.75}}
    print_seeds({"label": "kestrel", "workloads": {"arith-tiny": {"per_run": runs}}}, {"r0"})
    out = "".join(capsys.readouterr())
    assert "speedup" in out and "1.250" in out and "r0" in out and "someone-elses" not in out
    v3 = {run_id: {k: v for k, v in r.items() if k != "speedup"} for run_id, r in runs.items()}
    print_seeds({"label": "kestrel", "workloads": {"arith-tiny": {"per_run": v3}}}, {"r0"})
    out = "".join(capsys.readouterr())
    assert "speedup" not in out and "1.20M" in out and "0.810" in out and "r0" in out


def test_submit_into_a_store_without_the_reference_gives_no_rank_and_names_import_runs(isolated_runs, monkeypatch,
                                                                                       capsys):
    """A fresh clone: the entry's runs are the store's only ones, so `submit` and the board give its own numbers,
    never band 1, and the command that loads the reference; once the reference's runs are in, the ranking."""
    from helpers import make_run

    import benchmark.runner
    from benchmark.leaderboard.targets import load_target
    from benchmark.tracking import client, experiment_id
    from benchmark.workload import load_workload

    c = client()
    exp = experiment_id(c, "arith-tiny")

    def fake_training(spec, **_):  # a finished run that reaches the target in half the reference's compute
        run_id = make_run(c, exp, "strategy", spec.seed, [0.3] * 10 + [0.8], spec.workload.pipeline.workers,
                          spec.workload.pipeline.trainers)
        c.set_tag(run_id, "replaybench.name", spec.name)
        return summary_of(spec, mlflow_run_id=run_id)

    monkeypatch.setattr(benchmark.runner, "run", fake_training)
    monkeypatch.setenv("COLUMNS", "400")
    seeds = load_workload("arith-tiny").seeds  # the published board's
    assert main(["submit", str(REPO / "submissions" / "example_entry"), "--jobs", "1"]) == 0
    out = capsys.readouterr()
    said = " ".join((out.out + out.err).split())
    assert "against the frozen reference compute-to-target; no comparison yet: run " \
           "`replaybench leaderboard import-runs`, then `replaybench leaderboard`" in said
    assert "band" not in said and "rank" not in said
    assert "example_entry: its runs, as scored" in said  # a row a seed: its compute to target (and speedup: v2)
    # rules v2: the first evaluation at the target, and a speedup per seed; v3: interpolated between evaluations
    cells = "1.20M │ 2.200" if load_target("arith-tiny").get("rules_version", 2) == 2 else "1.18M"
    assert all(f"arith-tiny │ {seed} │ {cells} │ 0.800 │ 1.00 │" in said for seed in seeds)

    assert main(["leaderboard", "--workload", "arith-tiny"]) == 0
    table = capsys.readouterr().out
    said = " ".join(table.split())
    assert "no rank, band or performance profile: this store holds no scored runs of the reference" in said
    assert "run `replaybench leaderboard import-runs`" in said
    assert "band" not in table.splitlines()[1] + table.splitlines()[2] and "perf. profile" not in table
    assert "│ example_entry" in table

    for seed in seeds:  # the reference on the scored seeds: now the board can rank
        make_run(c, exp, "on_policy", seed, [0.3] * 21 + [0.8], workers=6, trainers=2)
    assert main(["leaderboard", "--workload", "arith-tiny"]) == 0
    table = capsys.readouterr().out
    assert "perf. profile" in table and "no rank, band" not in table and "on_policy (reference)" in table


def test_a_batch_of_runs_shows_run_k_of_n_and_the_time_left_for_them_all(isolated_runs, monkeypatch, capsys):
    stub_training(monkeypatch)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["baselines", "--strategies", "on_policy", "--seeds", "0", "1", "--jobs", "1"]) == 0
    err = capsys.readouterr().err  # the progress rows are on stderr, the ranking on stdout
    assert "run 1 of 2: on_policy (6,2) seed 0" in err and "run 2 of 2: on_policy (6,2) seed 1" in err
    assert "all 2 runs" in err


def test_the_time_left_comes_from_the_batchs_pace_so_far():
    from benchmark.cli.parallel import time_left

    assert time_left(60, 0.01) == "time left: after the first 2%"  # too early to say
    assert time_left(600, 0.25) == "about 30 min left"  # a quarter done in 10 minutes
    assert time_left(30, 0.9) == "under a minute left"
    assert time_left(3600, 0.25) == "about 3.0 h left"

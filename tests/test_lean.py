"""The Lean verifier (benchmark.grading.lean) and the miniF2F tasks, without a Lean toolchain: message parsing and
verdicts on recorded real Lean output (tests/fixtures/lean/README.md), process handling with a fake
`lake` that replays it, hangs, crashes or prints garbage, and the one clear message on a Lean-less machine."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import benchmark.grading.tasks
from benchmark.cli import main
from benchmark.grading import lean, lean_output
from benchmark.grading.lean import LeanUnavailable
from benchmark.grading.lean_output import Message, judge, parse_plain, parse_repl, read_repl_responses
from benchmark.grading.tasks import load_task

FIXTURES = Path(__file__).parent / "fixtures" / "lean"
REPORTS = (FIXTURES / "axiom_reports.txt").read_text().splitlines()
STANDARD_REPORT = REPORTS[2]  # 'Classical.em' depends on axioms: [Classical.choice, propext, Quot.sound]
GOLD = "import Mathlib\n\nopen Real\n\n/-- Show that 1 + 1 = 2. -/\ntheorem one_add_one : (1 : ℕ) + 1 = 2 := by\n"


def repl_responses(path: str) -> list[dict]:
    return read_repl_responses((FIXTURES / path).read_text())


# ---------------------------------------------------------------------------------------------------------
# Parsing Lean's messages


def test_repl_messages_on_recorded_v4_24_output():
    assert repl_responses("repl_v4.24/def_eval.expected.out")[0] == {"env": 0}
    clean, info, error = (parse_repl(r) for r in repl_responses("repl_v4.24/dup_msg.expected.out"))
    assert clean == [] and info == [Message("info", "f : Nat", 1, 0)]
    assert error == [Message("error", "Unknown identifier `g`", 1, 7)]
    first, second = (parse_repl(r) for r in repl_responses("repl_v4.24/incomplete.expected.out"))
    assert [m.severity for m in second] == ["error", "error"] and second[0].text.startswith("unsolved goals\ncase pos")
    sorry = parse_repl(repl_responses("repl_v4.24/tactic_sorry.expected.out")[0])
    assert sorry == [Message("warning", "declaration uses 'sorry'", 1, 4)]
    tactic_failure = parse_repl(repl_responses("repl_v4.24/unknown_tactic.expected.out")[1])
    assert tactic_failure == [Message("error", "Lean error:\n<input>:1:1: unknown tactic")]
    mathlib = repl_responses("repl_v4.24/mathlib_exact.expected.out")
    assert mathlib[0] == {"env": 0} and parse_repl(mathlib[2])[0].text.startswith("Try this:")


def test_plain_messages_on_recorded_lean_output():
    messages = parse_plain((FIXTURES / "plain/1007.lean.expected.out").read_text())
    assert [m.severity for m in messages] == ["warning"] * 8 + ["error"]
    assert (messages[0].line, messages[0].column, messages[0].text) == (8, 9, "declaration uses 'sorry'")
    assert messages[-1].text == ("failed to synthesize\n  IsLin fun x => sum fun i => norm x\n"
                                 "use `set_option diagnostics true` to get diagnostic information")
    assert parse_plain((FIXTURES / "plain/1011.lean.expected.out").read_text()) == [
        Message("error", "unknown identifier 'A'", 5, 11)]
    traced = parse_plain((FIXTURES / "plain/1079.lean.expected.out").read_text())
    assert len(traced) == 1 and traced[0].text.endswith("False → False ==> True")  # bare lines continue it
    # without a position (older Lean prints info messages bare; lake prints `error: ...`)
    assert parse_plain(REPORTS[0] + "\n") == [Message("info", REPORTS[0])]
    assert parse_plain("error: unknown executable repl\n") == [Message("error", "unknown executable repl")]
    assert parse_plain("") == []


def test_garbage_is_not_a_repl_response():
    with pytest.raises(ValueError):
        read_repl_responses("{\"env\": 0}\n\nnot json at all\n")
    with pytest.raises(ValueError):
        read_repl_responses("[1, 2]\n")


# ---------------------------------------------------------------------------------------------------------
# The verdict


def test_verdicts_on_recorded_messages():
    report = [Message("info", STANDARD_REPORT.replace("Classical.em", "one_add_one"))]
    assert judge(report, "one_add_one").correct
    error = parse_repl(repl_responses("repl_v4.24/incomplete.expected.out")[0])
    assert judge(error + report, "one_add_one").reason == lean_output.LEAN_ERROR
    kernel = parse_repl(repl_responses("repl_v4.24/app_type_mismatch.expected.out")[0])
    assert judge(kernel + report, "one_add_one").detail.startswith("(kernel) declaration has metavariables")
    for fixture in ("repl_v4.24/tactic_sorry.expected.out", "repl_v4.33/tactic_sorry.expected.out"):
        warning = parse_repl(repl_responses(fixture)[0])  # 'sorry' (v4.24) and `sorry` (v4.33)
        assert judge(warning + report, "one_add_one").reason == lean_output.SORRY
    assert judge([Message("info", REPORTS[3])], "contra").reason == lean_output.SORRY  # sorryAx
    native = judge([Message("info", REPORTS[1])], "false_theorem")  # native_decide's axioms
    assert native.reason == lean_output.AXIOM and "Lean.ofReduceBool" in native.detail
    assert judge([], "one_add_one").reason == lean_output.GARBAGE  # no report: no evidence of a proof
    assert judge([Message("info", "'Nat.foo'' does not depend on any axioms")], "foo'").correct  # primed name
    # the last report counts: a proof cannot print a fake one before ours
    fake = Message("info", STANDARD_REPORT.replace("Classical.em", "false_theorem"))
    assert not judge([fake, Message("info", REPORTS[1])], "false_theorem").correct


@pytest.mark.parametrize("proof, reason", [
    ("  sorry", lean_output.SORRY), ("  nlinarith\n  admit", lean_output.SORRY),
    ("  exact (by sorry)", lean_output.SORRY),
    ("  simp\n\naxiom cheat : 1 + 1 = 3", lean_output.AXIOM),
    ("  norm_num -- no sorry here\n  /- admit -/", None), ("  exact sorry_free_lemma", None),
    ("  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]", None),
])
def test_forbidden_text(proof, reason):
    found = lean_output.forbidden_in_text(proof)
    assert (found[0] if found else None) == reason


def test_statement_helpers():
    assert lean_output.theorem_name(GOLD) == "one_add_one"
    assert lean_output.theorem_name("/-- theorem fake -/\ntheorem real_name (x : ℕ) : x = x := by\n") == "real_name"
    header, statement = lean_output.split_header(GOLD)
    assert header == "import Mathlib\n\nopen Real\n\n" and statement.startswith("/-- Show")
    source = lean_output.build_source(GOLD, "  norm_num\n", "one_add_one")
    assert source.endswith("  norm_num\n\n#print axioms one_add_one\n")


# ---------------------------------------------------------------------------------------------------------
# Processes: a fake `lake` that plays Lean


FAKE_LAKE = textwrap.dedent("""\
    #!{python}
    import json, os, re, signal, subprocess, sys, time

    mode = os.environ.get("FAKE_LEAN_MODE", "clean")
    report = os.environ["FAKE_LEAN_REPORT"]  # a recorded `#print axioms` message, its name replaced
    seconds_per_proof = float(os.environ.get("FAKE_LEAN_SECONDS", "0"))  # how long Lean "thinks" on a proof

    def hang():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.environ["FAKE_LEAN_PIDS"], "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(600)

    if sys.argv[1:] == ["--version"]:
        print("Lake version 5.0.0-fake (Lean version 4.24.0)")
    elif sys.argv[1:3] == ["env", "lean"]:
        source = open(sys.argv[3], encoding="utf-8").read()
        name = re.search(r"#print axioms (\\S+)", source).group(1)
        time.sleep(seconds_per_proof)
        if mode == "clean" and "wrong" in source:  # a proof that names `wrong` fails, to tell verdicts apart
            print(f"{{sys.argv[3]}}:9:8: error: unknown identifier 'wrong'")
            sys.exit(1)
        elif mode == "clean":
            if os.environ.get("FAKE_LEAN_POSITIONED"):
                print(f"{{sys.argv[3]}}:9:0: info: " + report.replace("NAME", name))
            else:
                print(report.replace("NAME", name))
        elif mode == "replay":
            sys.stdout.write(open(os.environ["FAKE_LEAN_OUTPUT"], encoding="utf-8").read())
            sys.exit(int(os.environ.get("FAKE_LEAN_RC", "0")))
        elif mode == "hang":
            hang()
        elif mode == "crash":
            print("INTERNAL PANIC: unreachable code has been reached", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        elif mode == "garbage":
            print("\\x00\\x7f}}{{ ]] not lean output ::: 12:ab")
            sys.exit(int(os.environ.get("FAKE_LEAN_RC", "0")))
        elif mode == "hog":
            blob = bytearray(2 * 2**30)  # 2 GiB
            print(report.replace("NAME", name))
    elif sys.argv[1] == "env" and sys.argv[2].endswith("/.lake/build/bin/repl"):  # how LeanInteract starts it
        log = open(os.environ["FAKE_LEAN_LOG"], "a")
        buffer = ""
        for line in sys.stdin:
            buffer += line
            if line.strip() or not buffer.strip():
                continue
            command, buffer = json.loads(buffer), ""
            log.write(json.dumps(command) + "\\n")
            log.flush()
            if "env" not in command:  # the header
                print(json.dumps({{"env": 0}}) + "\\n", flush=True)
                continue
            time.sleep(seconds_per_proof)
            if mode == "clean" and "wrong" in command["cmd"]:
                message = {{"severity": "error", "pos": {{"line": 9, "column": 8}},
                           "data": "unknown identifier 'wrong'"}}
                print(json.dumps({{"messages": [message], "env": 1}}) + "\\n", flush=True)
            elif mode == "clean":
                name = re.search(r"#print axioms (\\S+)", command["cmd"]).group(1)
                message = {{"severity": "info", "pos": {{"line": 9, "column": 0}},
                           "data": report.replace("NAME", name)}}
                print(json.dumps({{"messages": [message], "env": 1}}, indent=1) + "\\n", flush=True)
            elif mode == "replay":
                response = open(os.environ["FAKE_LEAN_OUTPUT"], encoding="utf-8").read().split("\\n\\n")[0]
                print(response + "\\n", flush=True)
            elif mode == "hang":
                hang()
            elif mode == "crash":
                sys.stderr.write("PANIC at Lean.Elab: unreachable\\n")
                sys.exit(134)
            elif mode == "garbage":
                print("<<< not json >>>\\n", flush=True)
            elif mode == "hog":
                blob = bytearray(2 * 2**30)  # 2 GiB
                name = re.search(r"#print axioms (\\S+)", command["cmd"]).group(1)
                message = {{"severity": "info", "pos": {{"line": 9, "column": 0}},
                           "data": report.replace("NAME", name)}}
                print(json.dumps({{"messages": [message], "env": 1}}) + "\\n", flush=True)
    else:
        sys.exit(f"fake lake: unexpected arguments {{sys.argv[1:]}}")
""")


@pytest.fixture
def fake_lean(tmp_path, monkeypatch):
    """A fake `lake` first on PATH and a Lean project with a (fake) Mathlib; set FAKE_LEAN_* to steer it."""
    bin_dir, project = tmp_path / "bin", tmp_path / "project"
    bin_dir.mkdir()
    (project / ".lake" / "packages" / "mathlib").mkdir(parents=True)
    (project / "lakefile.toml").write_text('name = "check"\n')
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.24.0\n")
    repl = project / ".lake" / "packages" / "REPL"  # the REPL as setup_lean.sh builds it
    (repl / ".lake" / "build" / "bin").mkdir(parents=True)
    (repl / ".lake" / "build" / "bin" / "repl").write_text("")
    (repl / "lean-toolchain").write_text("leanprover/lean4:v4.24.0\n")
    lake = bin_dir / "lake"
    lake.write_text(FAKE_LAKE.format(python=sys.executable))
    lake.chmod(lake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(lean.PROJECT_ENV, str(project))
    monkeypatch.setenv("FAKE_LEAN_REPORT", STANDARD_REPORT.replace("Classical.em", "NAME"))
    monkeypatch.setenv("FAKE_LEAN_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("FAKE_LEAN_LOG", str(tmp_path / "repl.log"))
    monkeypatch.delenv(lean.MODE_ENV, raising=False)
    monkeypatch.delenv(lean.TIMEOUT_ENV, raising=False)
    monkeypatch.setenv(lean.MEMORY_ENV, "4")
    return tmp_path


def checker(mode="file", timeout=None, workers=1):
    return lean.LeanChecker(lean.lean_setup(timeout=timeout, mode=mode), workers=workers)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"  # a zombie has ended
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("positioned", [False, True])
def test_file_mode_clean_proof_passes(fake_lean, monkeypatch, positioned):
    if positioned:
        monkeypatch.setenv("FAKE_LEAN_POSITIONED", "1")
    verdict = checker().check(GOLD, "  norm_num\n")
    assert verdict.correct and verdict.reason == lean_output.CORRECT, verdict


def test_file_mode_replays_recorded_errors_and_sorry(fake_lean, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_LEAN_MODE", "replay")
    monkeypatch.setenv("FAKE_LEAN_OUTPUT", str(FIXTURES / "plain/1011.lean.expected.out"))
    monkeypatch.setenv("FAKE_LEAN_RC", "1")
    verdict = checker().check(GOLD, "  exact A\n")
    assert (verdict.reason, verdict.detail) == (lean_output.LEAN_ERROR, "unknown identifier 'A'")
    warnings_only = tmp_path / "sorry.out"  # the sorry warnings of 1007, without its error: Lean exits 0
    warnings_only.write_text("".join((FIXTURES / "plain/1007.lean.expected.out").read_text().splitlines(True)[:8]))
    monkeypatch.setenv("FAKE_LEAN_OUTPUT", str(warnings_only))
    monkeypatch.setenv("FAKE_LEAN_RC", "0")
    assert checker().check(GOLD, "  exact helper\n").reason == lean_output.SORRY


def test_text_check_fails_before_lean_runs(fake_lean, monkeypatch):
    monkeypatch.setenv("FAKE_LEAN_MODE", "hang")  # Lean would hang: it must not be started
    assert checker(timeout=30).check(GOLD, "  sorry\n").reason == lean_output.SORRY
    assert checker(timeout=30).check(GOLD, "  exact cheat\naxiom cheat : (1 : ℕ) + 1 = 2\n").reason == lean_output.AXIOM
    assert checker(timeout=30).check("no statement here", "  simp").reason == lean_output.NO_STATEMENT


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "repl"])
def test_hang_is_killed_with_its_whole_process_group(fake_lean, monkeypatch, mode):
    monkeypatch.setenv("FAKE_LEAN_MODE", "hang")
    start = time.monotonic()
    verdict = checker(mode, timeout=1.5).check(GOLD, "  norm_num\n")
    elapsed = time.monotonic() - start
    assert verdict.reason == lean_output.TIMEOUT
    # the limit plus start-up slack; LeanInteract also runs gc.collect() each time it kills a REPL (twice on a
    # time-out), which takes seconds in a process with a large heap, as the full suite's is
    assert elapsed < 1.5 + (3.0 if mode == "file" else 8.0)
    pids = [int(p) for p in (fake_lean / "pids").read_text().split()]
    deadline = time.monotonic() + 2
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(gone(p) for p in pids), "the fake Lean or its child outlived the timeout"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "repl"])
def test_crash_and_garbage(fake_lean, monkeypatch, mode):
    monkeypatch.setenv("FAKE_LEAN_MODE", "crash")
    crash = checker(mode).check(GOLD, "  norm_num\n")
    assert crash.reason == lean_output.CRASHED and "PANIC" in crash.detail
    monkeypatch.setenv("FAKE_LEAN_MODE", "garbage")
    assert checker(mode).check(GOLD, "  norm_num\n").reason == lean_output.GARBAGE
    if mode == "file":
        monkeypatch.setenv("FAKE_LEAN_RC", "3")  # garbage and a strange exit status: Lean did not finish
        assert checker(mode).check(GOLD, "  norm_num\n").reason == lean_output.CRASHED


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "repl"])
def test_memory_limit_applies_to_lean(fake_lean, monkeypatch, mode):
    monkeypatch.setenv("FAKE_LEAN_MODE", "hog")  # allocates 2 GiB, then reports
    monkeypatch.setenv(lean.MEMORY_ENV, "1")
    assert checker(mode).check(GOLD, "  norm_num\n").reason == lean_output.CRASHED
    monkeypatch.setenv(lean.MEMORY_ENV, "0")  # no limit
    assert checker(mode).check(GOLD, "  norm_num\n").correct


def test_the_repl_is_the_default_when_the_project_has_it_built(fake_lean, monkeypatch):
    assert lean.lean_setup().mode == "repl"
    monkeypatch.setenv(lean.MODE_ENV, "file")
    assert lean.lean_setup().mode == "file"
    monkeypatch.delenv(lean.MODE_ENV)
    shutil.rmtree(fake_lean / "project" / ".lake" / "packages" / "REPL")
    assert lean.lean_setup().mode == "file"  # the fallback: no REPL to drive
    monkeypatch.setenv(lean.MODE_ENV, "repl")
    with pytest.raises(lean.LeanUnavailable, match="no Lean REPL built.*setup_lean.sh"):
        lean.lean_setup()


@pytest.mark.slow
def test_repl_mode_loads_the_header_once_and_replays_recorded_output(fake_lean, monkeypatch):
    pool = checker("repl", timeout=30)
    try:
        assert pool.check(GOLD, "  norm_num\n").correct
        assert pool.check(GOLD, "  simp\n").correct
        monkeypatch.setenv("FAKE_LEAN_MODE", "replay")  # read by REPLs started from now on
        monkeypatch.setenv("FAKE_LEAN_OUTPUT", str(FIXTURES / "repl_v4.24/incomplete.expected.out"))
        assert pool.check(GOLD + "theorem other : True := by\n", "  trivial\n").correct  # reuses the REPL
    finally:
        pool.close()
    commands = [json.loads(line) for line in (fake_lean / "repl.log").read_text().splitlines()]
    assert [("env" in c) for c in commands] == [False, True, True, True]  # one header, then three proofs
    assert commands[0]["cmd"] == "import Mathlib\n\nopen Real\n\n"
    assert commands[1]["cmd"].startswith("/-- Show that") and commands[1]["cmd"].endswith(
        "#print axioms one_add_one\n")
    fresh = checker("repl", timeout=30)  # a new REPL replays the recorded error
    try:
        verdict = fresh.check(GOLD, "  apply Nat.succ\n")
    finally:
        fresh.close()
    assert (verdict.reason, verdict.detail) == (lean_output.LEAN_ERROR, "unsolved goals")


@pytest.mark.slow
def test_pool_keeps_order(fake_lean):
    proofs = ["  norm_num\n", "  sorry\n", "  simp\n", "  admit\n"]
    verdicts = lean.check_many([(GOLD, p) for p in proofs], workers=2)
    assert [v.correct for v in verdicts] == [True, False, True, False]


@pytest.fixture
def shared_checkers(monkeypatch):
    """Empty the process's shared checkers for the test, and close the REPLs it started."""
    checkers = {}
    monkeypatch.setattr(lean, "_checkers", checkers)
    yield
    for pool in checkers.values():
        pool.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "repl"])
def test_a_group_is_scored_concurrently_in_order(fake_lean, monkeypatch, shared_checkers, mode):
    """Four completions, one second of Lean each, four workers: about one second in all, not four."""
    monkeypatch.setenv("FAKE_LEAN_SECONDS", "1")
    monkeypatch.setenv(lean.MODE_ENV, mode)
    monkeypatch.setenv(lean.WORKERS_ENV, "4")
    task = load_task("minif2f")
    doc = task.docs("test")[0]
    proofs = ["  norm_num\n", "  exact wrong\n", "  simp\n", "  exact wrong.elim\n"]
    start = time.monotonic()
    rewards = task.score_many(doc, proofs)
    elapsed = time.monotonic() - start
    assert rewards == [1.0, 0.0, 1.0, 0.0]
    assert elapsed < 2.5, f"4 proofs of 1 s on 4 workers took {elapsed:.1f} s: not checked concurrently"


@pytest.mark.slow
def test_evaluation_checks_a_batch_of_problems_concurrently(fake_lean, monkeypatch, shared_checkers):
    """Greedy evaluation (one completion per problem) still checks the batch's problems concurrently."""
    from types import SimpleNamespace

    from benchmark.grading.evaluation import sample

    class OneProofEngine:
        def generate(self, prompts, n, temperature, max_new_tokens, seed):
            return [[SimpleNamespace(text="  exact wrong\n" if i % 2 else "  norm_num\n")] * n
                    for i in range(len(prompts))]

    monkeypatch.setenv("FAKE_LEAN_SECONDS", "1")
    monkeypatch.setenv(lean.WORKERS_ENV, "4")
    task = load_task("minif2f")
    start = time.monotonic()
    samples = sample(OneProofEngine(), task, task.docs("test")[:4], n=1, temperature=0.0, seed=0)
    elapsed = time.monotonic() - start
    assert samples.scores == [[1.0], [0.0], [1.0], [0.0]]
    assert elapsed < 2.5, f"4 problems of 1 s on 4 workers took {elapsed:.1f} s: not checked concurrently"


def test_lean_workers_setting(monkeypatch):
    monkeypatch.delenv(lean.WORKERS_ENV, raising=False)
    assert lean.lean_workers() == min(8, os.cpu_count())
    monkeypatch.setenv(lean.WORKERS_ENV, "3")
    assert lean.lean_workers() == 3
    for bad in ("0", "-2", "four"):
        monkeypatch.setenv(lean.WORKERS_ENV, bad)
        with pytest.raises(benchmark.grading.TaskError, match="REPLAYBENCH_LEAN_WORKERS=.*whole number"):
            lean.lean_workers()


# ---------------------------------------------------------------------------------------------------------
# A machine without Lean: one clear message


@pytest.fixture
def no_lean(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no lake anywhere
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "no-elan"))
    monkeypatch.delenv(lean.PROJECT_ENV, raising=False)
    return tmp_path


def test_lean_unavailable_says_what_is_missing_and_how_to_install(no_lean, tmp_path, monkeypatch):
    with pytest.raises(LeanUnavailable) as error:
        lean.lean_setup()
    message = str(error.value)
    for words in ("`lake` is not on PATH", "REPLAYBENCH_LEAN_PROJECT is not set", "elan", "lean-lang.org",
                  "setup_lean.sh", "lake exe cache get", "export REPLAYBENCH_LEAN_PROJECT="):
        assert words in message
    assert "\n" not in message
    monkeypatch.setenv(lean.PROJECT_ENV, str(tmp_path))  # a folder, but not a Lean project
    assert "not a Lean project" in str(pytest.raises(LeanUnavailable, lean.lean_setup).value)
    (tmp_path / "lakefile.lean").write_text("")
    assert "has no Mathlib" in str(pytest.raises(LeanUnavailable, lean.lean_setup).value)


def test_grade_without_lean_is_one_message_and_exit_2(no_lean, tmp_path, capsys):
    src = tmp_path / "proofs.jsonl"
    src.write_text(json.dumps({"name": "mathd_algebra_10", "completion": "  norm_num"}) + "\n"
                   + json.dumps({"gold": GOLD, "completion": "  norm_num"}) + "\n")
    assert main(["grade", "--task", "minif2f", str(src)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Lean is not available" in err and "Traceback" not in err
    src.write_text(json.dumps({"name": "no_such_problem", "completion": "  norm_num"}) + "\n")
    assert main(["grade", "--task", "minif2f", str(src)]) == 2
    assert "no document named 'no_such_problem'" in " ".join(capsys.readouterr().err.split())  # rich wraps lines


def test_grade_command_end_to_end_without_lean(no_lean, tmp_path):
    """The installed entry point, in a fresh process: the one message on stderr, no traceback, exit 2."""
    src = tmp_path / "proofs.jsonl"
    src.write_text(json.dumps({"name": "mathd_algebra_10", "completion": "  norm_num"}) + "\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    result = subprocess.run([sys.executable, "-m", "benchmark.cli", "grade", "--task", "minif2f", str(src)],
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "Lean is not available" in result.stderr
    assert result.stdout == ""


def test_grade_with_fake_lean_writes_verdicts(fake_lean, tmp_path):
    src, out = tmp_path / "proofs.jsonl", tmp_path / "verdicts.jsonl"
    src.write_text(json.dumps({"name": "mathd_algebra_10", "completion": "  norm_num"}) + "\n"
                   + json.dumps({"gold": GOLD, "completion": "  sorry"}) + "\n")
    assert main(["grade", "--task", "minif2f", str(src), "--out", str(out)]) == 0
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(v["correct"], v["reason"]) for v in verdicts] == [(True, "correct"), (False, "sorry")]


def test_training_on_minif2f_without_lean_stops_before_anything_starts(no_lean, tmp_path, capsys, isolated_runs):
    workload = tmp_path / "minif2f-tiny.yaml"
    arith = (Path(__file__).resolve().parent.parent / "workloads" / "arith-tiny.yaml").read_text()
    workload.write_text(arith.replace("task: arith_tiny", "task: minif2f"))
    code = main(["run", "--workload", str(workload), "--strategy", "baselines/fifo_uniform.py"])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Lean is not available" in err and "Traceback" not in err
    assert not (isolated_runs / "mlflow.db").exists()  # no MLflow run was started


# ---------------------------------------------------------------------------------------------------------
# The miniF2F tasks


@pytest.fixture
def no_hub(monkeypatch):
    def fail(*args):
        raise AssertionError(f"the hub was asked for {args}")

    monkeypatch.setattr(benchmark.grading.tasks, "_load_hub", fail)


@pytest.mark.parametrize("name, header_start", [("minif2f", "import Mathlib\n\nset_option"),
                                                ("minif2f_deepseek", "import Mathlib\nimport Aesop\n")])
def test_minif2f_loads_offline_from_bundled_data(no_hub, name, header_start):
    task = load_task(name)
    train, test = task.docs("train"), task.docs("test")
    assert (len(train), len(test)) == (244, 244)
    assert {d["split"] for d in train} == {"valid"} and {d["split"] for d in test} == {"test"}
    assert not {d["name"] for d in train} & {d["name"] for d in test}
    assert task.metric == "lean_proof" and task.config["metadata"]["verifier"] == "lean"
    for doc in train + test:
        prompt = task.doc_to_text(doc)
        assert prompt.startswith(header_start) and prompt.endswith(":= by\n")
        assert task.config["doc_to_target"](doc) == prompt
        assert lean_output.theorem_name(prompt) == doc["name"]


def test_minif2f_yaml_is_valid_for_lm_eval():
    from lm_eval.config.task import TaskConfig

    for name in ("minif2f", "minif2f_deepseek"):
        TaskConfig(**load_task(name).config)


def test_docs_are_normalised_from_other_layouts(tmp_path, no_hub):
    row = {"id": "toy", "formal_statement": "import Mathlib\n\ntheorem toy : (2 : ℕ) = 2 := by sorry"}
    (tmp_path / "toy.jsonl").write_text(json.dumps(row) + "\n")
    doc = load_task("minif2f", data_path={"valid": tmp_path / "toy.jsonl"}).docs("train")[0]
    assert (doc["name"], doc["header"], doc["informal_prefix"]) == ("toy", "import Mathlib\n\n", "")
    assert doc["formal_statement"] == "theorem toy : (2 : ℕ) = 2 := by\n"


def test_reward_without_lean_raises_the_clear_error(no_lean):
    task = load_task("minif2f")
    with pytest.raises(LeanUnavailable, match="Lean is not available"):
        task.score(task.docs("test")[0], "  norm_num")


def test_evaluating_minif2f_without_lean_stops_before_the_model_loads(no_lean, tmp_path, capsys):
    code = main(["eval", "--model", str(tmp_path / "no-such-model"), "--task", "minif2f", "--limit", "1"])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Lean is not available" in err and "Traceback" not in err


def test_grade_where_every_proof_crashes_stops_naming_the_cause(fake_lean, tmp_path, monkeypatch, capsys):
    """A toolchain that fails on everything must not read as "0 correct" with exit 0."""
    monkeypatch.setenv("FAKE_LEAN_MODE", "crash")
    src, out = tmp_path / "proofs.jsonl", tmp_path / "verdicts.jsonl"
    src.write_text(json.dumps({"name": "mathd_algebra_10", "completion": "  norm_num"}) + "\n")
    assert main(["grade", "--task", "minif2f", str(src), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Lean crashed on all 1 proofs so far" in err and "replaybench doctor" in err
    assert json.loads(out.read_text())["reason"] == "crashed"  # the verdicts are kept


def test_a_run_stops_when_lean_has_crashed_on_every_proof(fake_lean, monkeypatch):
    c = checker(workers=4)
    assert c.check_many([(GOLD, "  norm_num\n")])[0].correct  # Lean judges: later crashes are the proofs'
    monkeypatch.setenv("FAKE_LEAN_MODE", "crash")
    assert all(v.reason == lean_output.CRASHED for v in c.check_many([(GOLD, "  norm_num\n")] * 16))
    fresh = checker(workers=4)
    with pytest.raises(lean.LeanBroken, match="crashed on all 16 proofs so far"):
        fresh.check_many([(GOLD, "  norm_num\n")] * 16)


def test_the_setup_script_pins_the_tasks_versions():
    script = Path(__file__).resolve().parent.parent / "tasks" / "minif2f" / "setup_lean.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text, meta = script.read_text(), load_task("minif2f").config["metadata"]
    assert f'LEAN_TOOLCHAIN="{meta["lean_version"]}"' in text
    tag = re.search(r'MATHLIB_TAG="([^"]+)"', text).group(1)
    assert f"tag {tag} " in meta["mathlib"]

"""The Lean verifier: whole-proof checking of `header + statement + proof` with Lean 4 and Mathlib.

A gold is a checkable statement (imports, options, the theorem ending in `:= by`); a completion is the
proof that continues it. The file checked is `gold + completion + "#print axioms <theorem>"`. A proof
passes only with positive evidence: Lean ran to the end, reported no error, no `sorry`, and printed the
theorem's axioms, all of them among propext, Classical.choice and Quot.sound. It fails if
- the completion contains `sorry`/`admit` or declares an `axiom` (checked in the text, before Lean runs);
- Lean reports an error, or the warning "declaration uses 'sorry'" (any quoting);
- `#print axioms` names anything else (sorryAx, Lean.ofReduceBool from native_decide, a new axiom), or
  is missing (output we cannot read is no proof).

Two ways to run Lean, both in a Lean project with Mathlib built (REPLAYBENCH_LEAN_PROJECT):
- "repl" (the default when the project has the Lean REPL built, as tasks/minif2f/setup_lean.sh does): the
  Lean REPL (leanprover-community/repl) run through LeanInteract, which owns the process and its JSON
  protocol (`{"cmd": ...}` -> `{"messages": [...], "env": n}`). Each REPL loads the header (Mathlib) once
  and checks proofs in that environment, which saves seconds of import on every proof.
- "file" (the fallback, no REPL needed): `lake env lean FILE` with the project as working directory, one
  process per proof; Lean's plain-text messages (`FILE:LINE:COL: error: ...`) are parsed.
Each proof has a wall-time limit, after which the whole process group is killed, and each Lean process a
memory limit (RLIMIT_AS). Lean maps all of Mathlib's .olean files, so it needs more address space than
resident memory: lower REPLAYBENCH_LEAN_MEMORY_GB with care (0 = no limit). Training and evaluation check
a batch of proofs (a group of completions) REPLAYBENCH_LEAN_WORKERS Lean processes at a time (default
min(8, CPU count)); in repl mode each is a REPL with Mathlib loaded, kept for the next batch, so memory
grows with the worker count.
"""

from __future__ import annotations

import atexit
import os
import queue
import re
import resource
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmark.grading import TaskError
from benchmark.grading.lean_output import (
    CRASHED,
    GARBAGE,
    LEAN_ERROR,
    NO_STATEMENT,
    TIMEOUT,
    LeanVerdict,
    build_source,
    forbidden_in_text,
    judge,
    parse_plain,
    parse_repl,
    split_header,
    theorem_name,
)

DEFAULT_TIMEOUT = 300.0  # seconds per proof (DeepSeek-Prover's checker also allows minutes, not seconds)
DEFAULT_MEMORY_GB = 32.0  # address space per Lean process
MAX_DEFAULT_WORKERS = 8  # Lean processes at a time when REPLAYBENCH_LEAN_WORKERS is unset (and CPUs allow)
PROJECT_ENV, TIMEOUT_ENV, MEMORY_ENV, MODE_ENV, WORKERS_ENV = (
    "REPLAYBENCH_LEAN_PROJECT", "REPLAYBENCH_LEAN_TIMEOUT", "REPLAYBENCH_LEAN_MEMORY_GB", "REPLAYBENCH_LEAN_MODE",
    "REPLAYBENCH_LEAN_WORKERS")


INSTALL_HINT = (
    "To install, on a machine with the internet: `bash tasks/minif2f/setup_lean.sh [FOLDER]` (elan, and a Lean "
    f"project with Mathlib at minif2f's pinned versions), then `export {PROJECT_ENV}=FOLDER`. By hand: (1) elan, "
    "the Lean toolchain manager (lean-lang.org, Install), which puts `lean` and `lake` in ~/.elan/bin; (2) a Lean "
    "project with Mathlib pinned to Lean/Mathlib v4.24.0 for minif2f (docs/workloads.md, miniF2F), then `lake exe "
    f"cache get` in it; (3) `export {PROJECT_ENV}=/path/to/it`. `replaybench doctor` checks the result.")


class LeanUnavailable(TaskError):
    """No Lean toolchain or no Lean project with Mathlib on this machine; the message says what to install."""


# ---------------------------------------------------------------------------------------------------------
# The toolchain


@dataclass(frozen=True)
class LeanSetup:
    lake: str  # path of the lake executable
    project: Path  # a Lean project with Mathlib built
    mode: str = "file"  # "file" or "repl"
    timeout: float = DEFAULT_TIMEOUT
    memory_gb: float = DEFAULT_MEMORY_GB


def find_lake() -> str | None:
    """`lake` on PATH, else elan's ~/.elan/bin/lake."""
    found = shutil.which("lake")
    if found:
        return found
    elan = Path(os.environ.get("ELAN_HOME", Path.home() / ".elan")) / "bin" / "lake"
    return str(elan) if elan.is_file() and os.access(elan, os.X_OK) else None


def project_problems(project: Path) -> list[str]:
    """What is wrong with a Lean project folder for checking Mathlib proofs (empty: nothing)."""
    if not project.is_dir():
        return [f"{PROJECT_ENV}={project} is not a folder"]
    if not any((project / f).is_file() for f in ("lakefile.lean", "lakefile.toml")):
        return [f"{project} is not a Lean project (no lakefile.lean or lakefile.toml)"]
    if not ((project / ".lake" / "packages" / "mathlib").is_dir() or (project / "Mathlib.lean").is_file()):
        return [f"{project} has no Mathlib (no .lake/packages/mathlib: add Mathlib as a dependency, "
                "then `lake exe cache get`)"]
    return []


def repl_folder(project: Path) -> Path | None:
    """The Lean REPL's package folder in the project (a `require` of leanprover-community/repl, built), or None."""
    for binary in sorted(project.glob(".lake/packages/*/.lake/build/bin/repl")):
        return binary.parents[3]
    return None


def lean_setup(project: str | Path | None = None, timeout: float | None = None, mode: str | None = None) -> LeanSetup:
    """The toolchain and project to check proofs with, from the arguments or the environment
    (REPLAYBENCH_LEAN_PROJECT, _TIMEOUT, _MEMORY_GB, _MODE). Raises LeanUnavailable naming what is missing."""
    lake = find_lake()
    project = project or os.environ.get(PROJECT_ENV)
    missing = []
    if lake is None:
        missing.append("no Lean toolchain (`lake` is not on PATH and ~/.elan/bin/lake does not exist)")
    if not project:
        missing.append(f"no Lean project with Mathlib ({PROJECT_ENV} is not set)")
    else:
        missing += project_problems(Path(project).expanduser())
    if missing:
        raise LeanUnavailable(f"Lean is not available: {'; '.join(missing)}. {INSTALL_HINT}")
    project = Path(project).expanduser().resolve()
    mode = mode or os.environ.get(MODE_ENV) or ("repl" if repl_folder(project) else "file")
    if mode not in ("file", "repl"):
        raise LeanUnavailable(f"{MODE_ENV}={mode!r}: use repl or file")
    if mode == "repl" and repl_folder(project) is None:
        raise LeanUnavailable(f"{MODE_ENV}=repl, but {project} has no Lean REPL built (no .lake/packages/*/.lake/"
                              f"build/bin/repl): run tasks/minif2f/setup_lean.sh, which adds and builds it, or use "
                              f"{MODE_ENV}=file")
    return LeanSetup(lake, project, mode,
                     float(timeout or os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT),
                     float(os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_GB))


def lean_workers() -> int:
    """How many Lean processes check a batch at a time: REPLAYBENCH_LEAN_WORKERS, else min(8, CPU count)."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return min(MAX_DEFAULT_WORKERS, os.cpu_count() or 1)
    if not raw.isdigit() or int(raw) < 1:
        raise TaskError(f"{WORKERS_ENV}={raw!r}: set it to a whole number of Lean processes at a time, 1 or more "
                        f"(unset: min({MAX_DEFAULT_WORKERS}, CPU count))")
    return int(raw)


def _limit_memory(memory_gb: float):
    """preexec_fn: the child's address-space limit (it runs in the child, before exec)."""
    limit = int(memory_gb * 2**30)

    def apply():
        if limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the process and everything it started (it leads its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _crash_verdict(returncode: int, output: str) -> LeanVerdict:
    tail = output.strip()[-500:]
    if returncode < 0:
        what = f"killed by signal {-returncode}"
    else:
        what = f"exit status {returncode}"
    if re.search(r"out of memory|bad_alloc|Cannot allocate memory", output):
        what += " (out of memory: raise REPLAYBENCH_LEAN_MEMORY_GB)"
    return LeanVerdict(False, CRASHED, f"Lean ended without a verdict, {what}: {tail}")


def check_file(setup: LeanSetup, source: str, name: str) -> LeanVerdict:
    """Run `lake env lean` on `source` in the project; the verdict from its plain-text output."""
    with tempfile.TemporaryDirectory(prefix="replaybench-lean-") as tmp:
        path = Path(tmp) / "Proof.lean"
        path.write_text(source, encoding="utf-8")
        process = subprocess.Popen([setup.lake, "env", "lean", str(path)], cwd=setup.project,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=_limit_memory(setup.memory_gb))
        try:
            output, _ = process.communicate(timeout=setup.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            return LeanVerdict(False, TIMEOUT, f"no verdict within {setup.timeout:g} s")
    output = output.decode("utf-8", errors="replace")
    messages = parse_plain(output)
    verdict = judge(messages, name)
    # Lean exits 1 when it reports errors; any other failure to finish is a crash, whatever it printed.
    if process.returncode != 0 and not (process.returncode == 1 and verdict.reason == LEAN_ERROR):
        return _crash_verdict(process.returncode, output)
    return verdict


class ReplProcess:
    """One Lean REPL with the header loaded, run by LeanInteract (its `LeanServer`: the process, the JSON
    protocol, the timeout that kills the process tree, the memory limit); the verdict is ours."""

    def __init__(self, setup: LeanSetup, header: str):
        from lean_interact import LeanREPLConfig, LeanServer, LocalProject

        self.setup, self.header = setup, header
        memory_mb = int(setup.memory_gb * 1024) or None
        config = LeanREPLConfig(
            project=LocalProject(directory=setup.project, lake_path=setup.lake, auto_build=False),
            local_repl_path=repl_folder(setup.project), build_repl=False, lake_path=setup.lake,
            memory_hard_limit_mb=memory_mb)
        self.server = LeanServer(config)
        response = self.send({"cmd": header})
        if "env" not in response or any(m.severity == "error" for m in parse_repl(response)):
            self.close()
            raise RuntimeError(f"the Lean REPL could not load the header: {response}")
        self.env = response["env"]

    def send(self, command: dict) -> dict:
        """The response to `command`. Raises TimeoutError, ConnectionAbortedError or ChildProcessError (the
        REPL ended) or ValueError (not JSON)."""
        return self.server.run_dict(command, timeout=self.setup.timeout)

    def check(self, body: str, name: str) -> LeanVerdict:
        """The verdict on `body` (statement + proof + axiom report) in the header's environment; the process
        is closed (and must be replaced) after anything but a verdict from Lean."""
        process = self.server._proc  # its exit status outlives LeanInteract's handle on a crash
        try:
            response = self.send({"cmd": body, "env": self.env})
        except TimeoutError:
            self.close()
            return LeanVerdict(False, TIMEOUT, f"no verdict within {self.setup.timeout:g} s")
        except (ConnectionAbortedError, ChildProcessError) as exc:
            self.close()
            # the message holds the REPL's stdout and stderr, then LeanInteract's general hints
            return _crash_verdict(process.wait(), str(exc).split("\nIf stdout and stderr")[0])
        except ValueError as exc:
            self.close()
            return LeanVerdict(False, GARBAGE, f"the Lean REPL answered something that is not JSON: {exc}")
        if not isinstance(response, dict):
            self.close()
            return LeanVerdict(False, GARBAGE, f"the Lean REPL answered {type(response).__name__}, not an object")
        return judge(parse_repl(response), name)

    def alive(self) -> bool:
        return self.server.is_alive()

    def close(self) -> None:
        if self.server._proc is not None:  # None: LeanInteract already killed it (a time-out, a crash)
            self.server.kill()


class LeanChecker:
    """Checks (gold, completion) pairs on a pool of `workers` Lean processes at a time."""

    def __init__(self, setup: LeanSetup, workers: int = 2):
        self.setup, self.workers = setup, workers
        self._idle: queue.LifoQueue = queue.LifoQueue()  # REPL processes waiting for a proof (repl mode)
        self.crashes, self.verdicts = 0, 0  # Lean's own verdicts (crashes excluded) since the checker started

    def check(self, gold: str, completion: str) -> LeanVerdict:
        name = theorem_name(gold)
        if name is None:
            return LeanVerdict(False, NO_STATEMENT, "the gold has no `theorem NAME ... := by` statement")
        forbidden = forbidden_in_text(completion)
        if forbidden:
            return LeanVerdict(False, *forbidden)
        if self.setup.mode == "file":
            return check_file(self.setup, build_source(gold, completion, name), name)
        header, statement = split_header(gold)
        repl = self._take_repl(header)
        verdict = repl.check(build_source(statement, completion, name), name)
        if repl.alive():
            self._idle.put(repl)
        return verdict

    def check_many(self, pairs, workers: int | None = None) -> list[LeanVerdict]:
        """check() over (gold, completion) pairs, `workers` (default: the checker's) at a time, in order;
        LeanBroken once CRASHES_BEFORE_STOP proofs crashed and Lean has yet to judge one."""
        with ThreadPoolExecutor(workers or self.workers) as pool:
            verdicts = list(pool.map(lambda pair: self.check(*pair), pairs))
        crashed = [v for v in verdicts if v.reason == CRASHED]
        self.crashes += len(crashed)
        self.verdicts += len(verdicts) - len(crashed)
        if self.verdicts == 0 and self.crashes >= CRASHES_BEFORE_STOP:
            raise LeanBroken(broken_message(self.crashes, crashed[0].detail, self.setup))
        return verdicts

    def _take_repl(self, header: str) -> ReplProcess:
        kept = []
        try:
            while True:
                repl = self._idle.get_nowait()
                if repl.header == header and repl.alive():
                    return repl
                kept.append(repl)
        except queue.Empty:
            return ReplProcess(self.setup, header)
        finally:
            for repl in kept:
                self._idle.put(repl)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


CRASHES_BEFORE_STOP = 16  # a toolchain that crashed on every proof so far would train on reward 0 everywhere


class LeanBroken(TaskError):
    """Lean crashed on every proof so far: the toolchain or the project is broken, not the proofs."""


def broken_message(crashes: int, first_detail: str, setup: LeanSetup) -> str:
    return (f"Lean crashed on all {crashes} proofs so far, without judging one ({first_detail[:300]}): the toolchain "
            f"or the project {setup.project} is broken, not the proofs. Run `replaybench doctor`, and check that "
            "`lake env lean --version` runs in the project")


_checkers: dict[LeanSetup, LeanChecker] = {}


@atexit.register
def _close_checkers() -> None:
    # REPL processes lead their own process groups: they would outlive this process otherwise.
    for checker in _checkers.values():
        checker.close()


def _shared_checker(timeout: float | None) -> LeanChecker:
    """This process's checker for the current setup: its REPL processes stay loaded between calls."""
    setup = lean_setup(timeout=timeout)
    return _checkers.setdefault(setup, LeanChecker(setup))


def check(gold: str, completion: str, timeout: float | None = None) -> LeanVerdict:
    """Is `completion` a proof of the statement `gold` (header included)? Raises LeanUnavailable without Lean."""
    return _shared_checker(timeout).check(gold, completion)


def check_concurrently(pairs, timeout: float | None = None) -> list[LeanVerdict]:
    """check() over (gold, completion) pairs, REPLAYBENCH_LEAN_WORKERS Lean processes at a time, in order."""
    return _shared_checker(timeout).check_many(list(pairs), workers=lean_workers())


def check_many(pairs, timeout: float | None = None, workers: int = 2) -> list[LeanVerdict]:
    """check() over (gold, completion) pairs, `workers` Lean processes at a time, in order."""
    checker = LeanChecker(lean_setup(timeout=timeout), workers)
    try:
        return checker.check_many(list(pairs))
    finally:
        checker.close()

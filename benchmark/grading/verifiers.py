"""The math verifier: math-verify on the last \\boxed{} of a completion, under a time limit.

math-verify's own time limits use signal.alarm, which only works on the main thread, and sympy can
spend minutes in C code that holds the GIL (it computes `10^{10^{10}}` exactly), which no thread
can interrupt. So math-verify runs with its limits off (`parsing_timeout=None`,
`timeout_seconds=None`) in worker processes, and the caller enforces the limit:

- `grade(gold, completion, timeout)` sends the pair to an idle worker process (started on first use,
  then reused) and waits at most `timeout` seconds for the verdict. A worker that overruns is killed
  and the pair graded incorrect with reason "timeout". Safe from any thread.
- `grade_many(pairs, timeout, workers)` grades a batch on a pool of `workers` such processes with the
  same per-pair limit; a stuck worker is killed and replaced, so it never holds up the rest.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from math_verify import parse, verify

from benchmark.paths import REPO_ROOT

DEFAULT_TIMEOUT = 5.0  # seconds per (gold, completion) pair
STARTUP_TIMEOUT = 120.0  # seconds for a new worker process to import math-verify (not part of any pair's limit)

# Workers import this package even where it is on sys.path but not installed.
_WORKER_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}

# A pair that takes math-verify's whole path (parse, then verify), so a new worker pays sympy's lazy imports before
# it says it is ready, not inside its first pair's time limit. "\\boxed{1}" against "1" would not: the cheap string
# comparison in _verify answers it first.
_WARM_UP = ("\\frac{1}{2}", "so $\\boxed{0.5}$")

# Reasons a verdict gives.
CORRECT, WRONG, NO_ANSWER, NO_GOLD, TIMEOUT, ERROR = "correct", "wrong", "no_answer", "no_gold", "timeout", "error"


@dataclass(frozen=True)
class Verdict:
    correct: bool
    extracted: str | None  # the answer taken from the completion (last \\boxed{} content), if any
    reason: str  # one of the reasons above; "error: ..." carries the exception

    def to_dict(self) -> dict:
        return asdict(self)


class _QuietTimeoutWarning(logging.Filter):
    # math-verify warns once per process that its timeouts are off; we enforce our own.
    def filter(self, record):
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_QuietTimeoutWarning())

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\s+|\\[,!;: ]")


def last_boxed(text: str) -> str | None:
    """The content of the last complete \\boxed{...} (or \\fbox{...}) in text, braces matched; None if none."""
    for match in reversed(list(_BOX.finditer(text))):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[start:i]
    return None


def _normalise(answer: str) -> str:
    """Spacing removed, \\text{} unwrapped, \\dfrac spelled \\frac: answers equal as strings after this are equal."""
    return _SPACING.sub("", re.sub(r"\\[dt]frac", r"\\frac", _TEXT.sub(r"\1", answer)))


def _verify(gold: str, completion: str) -> Verdict:
    """math-verify without its signal-based timeouts: call it through grade(), which bounds the time."""
    gold = last_boxed(gold) or gold  # a gold solution stands for its last boxed answer
    if not gold.strip():
        return Verdict(False, None, NO_GOLD)
    boxed = last_boxed(completion)
    if boxed is not None and _normalise(boxed) == _normalise(gold):
        return Verdict(True, boxed, CORRECT)  # e.g. "4:30 \\text{ p.m.}", which math-verify reads as 4/30
    gold_parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=None)
    if not gold_parsed:
        return Verdict(False, boxed, NO_GOLD)
    if boxed is None:  # the task's rule: the answer is the last \\boxed{}; "I think it's 5" states none
        return Verdict(False, None, NO_ANSWER)
    answer, extracted = parse(f"\\boxed{{{boxed}}}", parsing_timeout=None), boxed
    if not answer:
        return Verdict(False, extracted, NO_ANSWER)
    correct = verify(gold_parsed, answer, timeout_seconds=None)
    return Verdict(bool(correct), extracted, CORRECT if correct else WRONG)


def _serve(conn) -> None:
    """A worker process: verdicts for the (gold, completion) pairs that arrive on `conn`, until it closes."""
    _verify(*_WARM_UP)
    conn.send("ready")
    while True:
        try:
            gold, completion = conn.recv()
        except EOFError:
            return
        try:
            verdict = _verify(gold, completion)
        except Exception as exc:  # a verifier bug grades the pair incorrect, it does not end the worker
            verdict = Verdict(False, last_boxed(completion), f"{ERROR}: {type(exc).__name__}: {exc}")
        conn.send(verdict)


class _Worker:
    """One worker process (a fresh interpreter: no fork of a threaded process, no re-import of __main__)
    and the pipe to it."""

    def __init__(self):
        self.conn, child = multiprocessing.Pipe()
        code = f"from multiprocessing.connection import Connection; from benchmark.grading.verifiers import _serve; " \
               f"_serve(Connection({child.fileno()}))"
        self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[child.fileno()],
                                        stdin=subprocess.DEVNULL, env=_WORKER_ENV)
        child.close()
        self.owner = os.getpid()
        try:
            ready = self.conn.poll(STARTUP_TIMEOUT) and self.conn.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise RuntimeError(f"a math-verify worker process did not start within {STARTUP_TIMEOUT:g} s")

    def grade(self, gold: str, completion: str, timeout: float) -> Verdict | None:
        """The verdict, or None (and the worker killed) if it takes longer than `timeout` seconds."""
        self.conn.send((gold, completion))
        if self.conn.poll(timeout):
            return self.conn.recv()
        self.kill()
        return None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.conn.close()


_idle: queue.LifoQueue = queue.LifoQueue()  # workers waiting for a pair


def _take_worker() -> _Worker:
    while True:
        try:
            worker = _idle.get_nowait()
        except queue.Empty:
            return _Worker()
        if worker.owner == os.getpid() and worker.process.poll() is None:
            return worker  # (a forked child must not share its parent's workers)


def grade(gold: str, completion: str, timeout: float = DEFAULT_TIMEOUT) -> Verdict:
    """Is `completion`'s final answer equal to `gold`? At most `timeout` seconds of verification; any thread.
    (Starting a worker process, once, is not counted.)"""
    worker = _take_worker()
    try:
        verdict = worker.grade(str(gold), completion, timeout)
    except (EOFError, OSError) as exc:  # the worker died (killed, out of memory)
        worker.kill()
        return Verdict(False, last_boxed(completion), f"{ERROR}: worker died ({type(exc).__name__})")
    if verdict is None:
        return Verdict(False, last_boxed(completion), TIMEOUT)
    _idle.put(worker)
    return verdict


def grade_many(pairs, timeout: float = DEFAULT_TIMEOUT, workers: int = 2) -> list[Verdict]:
    """grade() over (gold, completion) pairs, `workers` at a time, in order."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda pair: grade(*pair, timeout=timeout), pairs))

"""The math verifier: math-verify on the last \\boxed{} of a completion, under a time limit.

math-verify's own time limits use signal.alarm, which only works on the main thread. We switch them
off (`parsing_timeout=None`, `timeout_seconds=None`) and enforce our own limit instead:

- `grade(gold, completion)` runs math-verify in a daemon thread and returns a "timeout" verdict when
  the limit passes. It works from any thread and never blocks much longer than the limit, as long as
  math-verify stays in Python code (sympy does); the stuck thread is then interrupted.
- `grade_many(pairs)` grades in a process pool with the same per-item limit; a worker stuck in C
  code past the limit is killed, and the pool replaced, so it cannot hang the batch.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass

from math_verify import parse, verify

DEFAULT_TIMEOUT = 5.0  # seconds per (gold, completion) pair

# Reasons a verdict gives.
CORRECT, WRONG, NO_ANSWER, NO_GOLD, TIMEOUT, ERROR = "correct", "wrong", "no_answer", "no_gold", "timeout", "error"


@dataclass(frozen=True)
class Verdict:
    correct: bool
    extracted: str | None  # the answer taken from the completion (last \boxed{} content), if any
    reason: str  # one of the reasons above; "error: ..." carries the exception

    def to_dict(self) -> dict:
        return asdict(self)


class _Interrupt(BaseException):
    """Raised inside a verification thread that ran past its limit (BaseException: not swallowed by
    the `except Exception` handlers in math-verify and sympy)."""


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
    if boxed is not None:
        answer, extracted = parse(f"\\boxed{{{boxed}}}", parsing_timeout=None), boxed
    else:  # no box: math-verify's own extraction on the whole completion
        answer = parse(completion, parsing_timeout=None)
        extracted = str(answer[-1]) if answer else None
    if not answer:
        return Verdict(False, extracted, NO_ANSWER)
    correct = verify(gold_parsed, answer, timeout_seconds=None)
    return Verdict(bool(correct), extracted, CORRECT if correct else WRONG)


def grade(gold: str, completion: str, timeout: float = DEFAULT_TIMEOUT) -> Verdict:
    """Is `completion`'s final answer equal to `gold`? Bounded by `timeout` seconds; any thread."""
    box: dict = {}

    def target():
        try:
            box["verdict"] = _verify(str(gold), completion)
        except _Interrupt:
            pass
        except Exception as exc:  # a verifier bug must not crash the caller: grade it incorrect
            box["verdict"] = Verdict(False, last_boxed(completion), f"{ERROR}: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=target, name="math-verify", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        # Stop the runaway thread at its next Python instruction (CPython API; C code is not interrupted).
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Interrupt))
        return Verdict(False, last_boxed(completion), TIMEOUT)
    return box["verdict"]


# --- batches in a process pool ---------------------------------------------------------------------

_started = None  # in a worker: the queue on which it announces each item it starts


def _init_worker(started) -> None:
    global _started
    _started = started
    _verify("1", "\\boxed{1}")  # math-verify's lazy initialisation, outside any item's time limit


def _grade_item(grader, index: int, gold: str, completion: str, timeout: float) -> Verdict:
    _started.put(index)
    return grader(gold, completion, timeout=timeout)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    for process in list((pool._processes or {}).values()):  # no public API for this before Python 3.14
        process.kill()


def grade_many(pairs, timeout: float = DEFAULT_TIMEOUT, workers: int = 2, grace: float = 2.0,
               grader=grade) -> list[Verdict]:
    """grade() over (gold, completion) pairs in `workers` processes, in order. An item still running
    `timeout + grace` seconds after it started is graded incorrect ("timeout"); its worker is killed
    and the items not yet graded go to a fresh pool. `grader` (a module-level function) is for tests."""
    pairs = [(str(gold), completion) for gold, completion in pairs]
    results: list[Verdict | None] = [None] * len(pairs)
    while any(r is None for r in results):
        todo = [i for i, r in enumerate(results) if r is None]
        # fork is fast but unsafe once a process runs other threads; spawn re-imports the main module.
        context = multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")
        started_queue = context.SimpleQueue()
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(started_queue,))
        futures = {pool.submit(_grade_item, grader, i, *pairs[i], timeout): i for i in todo}
        started: dict[int, float] = {}
        pending, stuck, failure = set(futures), None, "no worker started"
        while pending and stuck is None:
            done, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            now = time.monotonic()
            while not started_queue.empty():
                started.setdefault(started_queue.get(), now)
            for future in done:
                index = futures[future]
                try:
                    results[index] = future.result()
                except Exception as exc:  # the worker died (crash, out of memory): that item is lost
                    failure = f"{ERROR}: {type(exc).__name__}: {exc}"
                    if index in started:
                        results[index] = Verdict(False, None, failure)
            stuck = next((futures[f] for f in pending if now - started.get(futures[f], now) > timeout + grace), None)
        if stuck is not None:
            results[stuck] = Verdict(False, last_boxed(pairs[stuck][1]), TIMEOUT)
            _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        if all(results[i] is None for i in todo):
            # No progress: the workers fail at start-up (a script without `if __name__ == "__main__":`?).
            for i in todo:
                results[i] = results[i] or Verdict(False, None, failure)
    return results

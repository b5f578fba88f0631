"""Runs side by side (`--jobs N`): each in a worker process of its own, all recording in one MLflow store, with
one progress row per run; and the progress bar that one run in this process shows.

Workers come from a ProcessPoolExecutor with the "spawn" start method: a forked child would inherit torch's
thread pools and locks held by other threads of this process. A worker runs one run after another, as this
process does with --jobs 1 (each run sets its own thread count and seeds); keeping the workers (no
max_tasks_per_child) means they are all spawned at the start, where Ctrl-C can be kept from them (see _submit).
Pickling carries the run specs in and the summaries and errors (StrategyError, RunError, ...) back, so the caller
sees what --jobs 1 would raise.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import signal
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from benchmark.cli.options import console, quiet_libraries
from benchmark.strategy import StrategyError
from benchmark.tracking import prepare_store

if TYPE_CHECKING:  # the engine (torch) loads when a run starts, not when the command line is parsed
    from benchmark.runner import RunSpec

POLL_SECONDS = 0.25  # how often the parent redraws the rows
STOP_SECONDS = 60.0  # after Ctrl-C, how long the runs have to record that they stopped (a train step, usually)


def default_jobs() -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup CPU quota (a container's), never the
    machine's count, which would oversubscribe a container or a pinned process."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota()
    return max(1, min(cpus, math.floor(quota)) if quota else cpus)


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> float | None:
    """CPUs' worth of time the cgroup may use (cgroup v2 cpu.max, or v1's cfs quota over period); None when
    unlimited or unknown."""
    try:
        quota, period = Path(root, "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int(Path(root, "cpu", "cpu.cfs_quota_us").read_text())
        period = int(Path(root, "cpu", "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"),
                    TimeElapsedColumn(), console=console, transient=False)


def progress_status(compute_used: float, budget: float, trainer_step: int, accuracy: float) -> str:
    return f"{compute_used / budget:4.0%} of budget  step {trainer_step}  acc {accuracy:.3f}"


def last_accuracy(executor) -> float:
    return executor.eval_history[-1]["accuracy"] if executor.eval_history else math.nan


def interrupt(signum, frame) -> None:
    """SIGTERM handled as Ctrl-C: a run it stops is recorded as interrupted and stays resumable, not left running."""
    raise KeyboardInterrupt


# ---- in each worker ---------------------------------------------------------------------------------
_updates = None  # the parent's queue of (run index, compute used, trainer step, accuracy)
_stop = None  # set by the parent (Ctrl-C, or another run's error): runs stop at their next progress report
_terminated = False  # set by a SIGTERM to this worker: its run stops at its next progress report too


def _terminate(signum, frame) -> None:
    """A kill of the whole group, or of this worker: the run records that it stopped, at its next progress report.
    Raising KeyboardInterrupt here instead would stop the run wherever it is, inside a write to the store
    included, and the sqlite lock that write holds can then outlast the other runs' wait for it ("database is
    locked" as they record their own stop)."""
    global _terminated
    _terminated = True


def _stopping() -> bool:
    return _terminated or _stop.is_set()


def _start_worker(updates, stop) -> None:
    global _updates, _stop
    _updates, _stop = updates, stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle, through `stop`
    signal.signal(signal.SIGTERM, _terminate)
    # a worker's exit must not wait for the parent to read its last progress reports
    updates.cancel_join_thread()
    quiet_libraries()


def _run_in_worker(index: int, spec: RunSpec) -> dict:
    from benchmark.runner import run
    if _stopping():  # queued before the stop and handed out after it: never started, so nothing to record
        raise KeyboardInterrupt

    def progress(executor):
        if _stopping():
            raise KeyboardInterrupt  # as an interrupt in process would: the run stays resumable, not failed
        _updates.put((index, executor.compute_used, executor.trainer_step, last_accuracy(executor)))

    _updates.put((index, 0.0, 0, math.nan))  # started: its row appears
    return run(spec, progress=progress)


# ---- in the parent ----------------------------------------------------------------------------------
def run_parallel(runs: list[tuple[RunSpec, str]], jobs: int) -> list[dict | StrategyError]:
    """Each run's summary, or the StrategyError it failed with, in the order of `runs` (spec, label). Any other
    error stops every run and is raised (the first in that order), as is Ctrl-C."""
    from benchmark.engine.executor import executor_class

    for workload_name, experiment in dict.fromkeys(
            (spec.workload.name, executor_class(spec.executor).experiment(spec.workload.name)) for spec, _ in runs):
        prepare_store(workload_name, experiment)
    context = multiprocessing.get_context("spawn")
    updates, stop = context.Queue(), context.Event()
    outcomes: dict[int, dict | StrategyError] = {}
    errors: dict[int, BaseException] = {}
    with progress_bar() as bar, ProcessPoolExecutor(min(jobs, len(runs)), mp_context=context,
                                                    initializer=_start_worker, initargs=(updates, stop)) as pool:
        rows = RunRows(bar, runs)
        futures = _submit(pool, runs)
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                rows.read(updates)
                for future in done:
                    index = futures[future]
                    if future.cancelled():
                        continue
                    try:
                        outcomes[index] = future.result()
                        rows.finished(index, outcomes[index])
                    except StrategyError as exc:  # recorded in MLflow as failed; the other runs go on
                        outcomes[index] = exc
                        rows.failed(index, "failed")
                    except KeyboardInterrupt:  # stopped after another run's error
                        rows.failed(index, "stopped")
                    except Exception as exc:
                        errors[index] = exc
                        rows.failed(index, "error")
                        _stop_all(stop, futures)
        except KeyboardInterrupt:
            _stop_all(stop, futures)
            wait(futures, timeout=STOP_SECONDS)  # each run records its interruption in MLflow, then returns
            _end_workers(pool)
            raise
    if errors:
        raise errors[min(errors)]
    return [outcomes[i] for i in range(len(runs))]


def _submit(pool: ProcessPoolExecutor, runs: list[tuple[RunSpec, str]]) -> dict:
    # submit() spawns the workers; spawned while SIGINT is ignored, they ignore it from birth (Python keeps an
    # inherited SIG_IGN), so a Ctrl-C in the terminal, sent to every process of the group, reaches this one only
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return {pool.submit(_run_in_worker, index, spec): index for index, (spec, _) in enumerate(runs)}
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop_all(stop, futures: dict) -> None:
    stop.set()
    for future in futures:
        future.cancel()  # those not started yet


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """End the workers now rather than through their interpreter's teardown, which can wait forever on a thread
    a library left behind (once seen after Ctrl-C, inside a full test suite): their runs are recorded already."""
    for process in list(pool._processes.values()):  # no public handle on a pool's processes
        process.kill()


def time_left(elapsed: float, fraction_done: float) -> str:
    """The whole batch's time left, from its pace so far (the runs of a batch share one budget and machine)."""
    if fraction_done < 0.02:
        return "time left: after the first 2%"
    seconds = elapsed * (1 - fraction_done) / fraction_done
    return "under a minute left" if seconds < 60 else (
        f"about {seconds / 60:.0f} min left" if seconds < 5400 else f"about {seconds / 3600:.1f} h left")


class RunRows:
    """One progress row per run ("run k of n: ..."), added when the run starts, a finished run's row keeping its
    final state; above them, with several runs, one row for them all with the time left."""

    def __init__(self, bar: Progress, runs: list[tuple[RunSpec, str]]):
        self.bar, self.runs = bar, runs
        self.rows: dict[int, int] = {}  # run index -> the bar's task id
        self.done: set[int] = set()
        self.compute: dict[int, float] = {}  # run index -> its compute used (its budget once it ended)
        self.started = time.monotonic()
        self.budget = sum(spec.workload.budget for spec, _ in runs)
        self.total = bar.add_task(f"all {len(runs)} runs", total=self.budget, status="") if len(runs) > 1 else None

    def row(self, index: int) -> int:
        if index not in self.rows:
            label = self.runs[index][1]
            if len(self.runs) > 1:
                label = f"run {index + 1} of {len(self.runs)}: {label}"
            self.rows[index] = self.bar.add_task(label, total=self.runs[index][0].workload.budget, status="")
        return self.rows[index]

    def count(self, index: int, compute: float) -> None:
        self.compute[index] = min(compute, self.runs[index][0].workload.budget)
        if self.total is not None:
            done = sum(self.compute.values())
            self.bar.update(self.total, completed=done,
                            status=time_left(time.monotonic() - self.started, done / self.budget))

    def read(self, updates) -> None:
        while True:
            try:
                index, compute_used, trainer_step, accuracy = updates.get_nowait()
            except queue.Empty:
                return
            if index not in self.done:  # a report can arrive after its run's result
                self.show(index, compute_used, trainer_step, accuracy)

    def show(self, index: int, compute_used: float, trainer_step: int, accuracy: float) -> None:
        budget = self.runs[index][0].workload.budget
        self.bar.update(self.row(index), completed=min(compute_used, budget),
                        status=progress_status(compute_used, budget, trainer_step, accuracy))
        self.count(index, compute_used)

    def finished(self, index: int, summary: dict) -> None:
        self.show(index, summary["compute_used"], summary["trainer_steps"], summary["final"]["accuracy"])
        self.done.add(index)

    def failed(self, index: int, what: str) -> None:
        self.bar.update(self.row(index), status=f"[red]{what}[/]")
        self.done.add(index)
        self.count(index, self.runs[index][0].workload.budget)  # what it left undone will not run

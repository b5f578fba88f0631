"""Untrusted strategies run in a box: a separate process that holds no model, optimiser or verifier.

`IsolatedStrategy` stands in for the strategy inside the engine. Each call crosses a pipe by value
(rollouts are pickled; the strategy never sees the engine's objects). The child process runs
under a memory limit (RLIMIT_AS), every call under a wall-clock limit, and a Python audit hook
refuses writes outside the child's temp folder, new processes and network connections. Any
failure ends the run with a verdict, `StrategyFailure("<kind>: <detail>")`:

    raised      the strategy raised an exception
    timeout     a call took longer than the limit (the process is killed)
    memory      the strategy exceeded its memory limit
    crashed     the process died
    forbidden   it tried to write outside its temp folder, start a process or open a connection
    garbage / fabricated / tampered    (from the engine's own batch checks, see pipeline.py)

The audit hook stops honest mistakes and casual misuse in Python code; it is not a security
boundary against native code. Run untrusted entries in a container or VM as well.

The child keeps the strategy's RNG (seeded like the engine's) and a mirror of the use counts,
updated before each `sample` with the previous batch (trained by then), so a strategy sees the
same context, and makes the same decisions, in the box as in-process.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np

from benchmark.paths import REPO_ROOT
from benchmark.strategy import ReplayStrategy, StrategyContext, StrategyFailure

# Limits of official runs; REPLAYBENCH_STRATEGY_TIMEOUT / REPLAYBENCH_STRATEGY_MEMORY_MB change them.
DEFAULT_CALL_TIMEOUT = 10.0  # seconds per call
DEFAULT_MEMORY_MB = 2048
STARTUP_TIMEOUT = 60.0


# ---- the child process ---------------------------------------------------------------------
def _guard(sandbox_dir: str) -> dict:
    """Install the audit hook; returns the dict where the first violation is recorded."""
    violation = {}
    allowed = os.path.realpath(sandbox_dir)

    def hook(event, args):
        problem = None
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            mode, flags = args[1], args[2] or 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
            path = os.path.realpath(os.fsdecode(args[0]))
            if writing and not (path == allowed or path.startswith(allowed + os.sep)):
                problem = f"wrote outside its temp folder ({path})"
        elif event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.truncate"):
            path = os.path.realpath(os.fsdecode(args[0])) if args and isinstance(args[0], (str, bytes)) else ""
            if not path.startswith(allowed + os.sep):
                problem = f"{event} outside its temp folder ({path})"
        elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork", "pty.spawn"):
            problem = f"started a process ({event})"
        elif event in ("socket.connect", "socket.bind"):
            problem = f"opened a network connection ({event})"
        elif event == "ctypes.dlopen":
            problem = "loaded native code (ctypes)"
        if problem:
            violation.setdefault("problem", problem)
            raise PermissionError(f"sandbox: {problem}")

    sys.addaudithook(hook)
    return violation


def serve(fd: int, strategy_path: str, params: dict, defaults: dict, rng_seed: int, memory_mb: int,
          sandbox_dir: str) -> None:
    """Child main loop: load the strategy, then answer calls until the pipe closes."""
    import resource
    from multiprocessing.connection import Connection

    from benchmark.strategy import build_strategy

    conn = Connection(fd)
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(sandbox_dir)
    rng = np.random.default_rng(rng_seed)
    use_count: dict[int, int] = {}
    try:
        strategy = build_strategy(strategy_path, params, defaults)
    except Exception as exc:
        conn.send(("raised", f"{type(exc).__name__}: {exc}"))
        return
    violation = _guard(sandbox_dir)  # after imports: loading modules may write caches
    conn.send(("ready", None))

    def ctx(step, version, trainers):
        return StrategyContext(step, version, rng, MappingProxyType(use_count), trainers)

    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        kind, args = message[0], message[1:]
        start = time.process_time()
        try:
            if kind == "add":
                rollouts, step, version, trainers = args
                result = strategy.add(rollouts, ctx(step, version, trainers))
                result = None
            elif kind == "sample":
                batch_size, step, version, trainers, trained_ids = args
                for rid in trained_ids:
                    use_count[rid] = use_count.get(rid, 0) + 1
                result = strategy.sample(batch_size, ctx(step, version, trainers))
            elif kind == "pool_request":
                result = strategy.pool_request()
            elif kind == "add_pool":
                rollouts, step, version, trainers = args
                strategy.add_pool(rollouts, ctx(step, version, trainers))
                result = None
            elif kind == "state_dict":
                result = {"strategy": strategy.state_dict(), "rng": rng.bit_generator.state,
                          "use_count": dict(use_count)}
            elif kind == "load_state_dict":
                [state] = args
                strategy.load_state_dict(state["strategy"])
                rng.bit_generator.state = state["rng"]
                use_count.clear()
                use_count.update(state["use_count"])
                result = None
            else:
                raise ValueError(f"unknown call {kind}")
            reply = ("ok", result)
        except MemoryError:
            reply = ("memory", f"{kind}() exceeded the {memory_mb} MB memory limit")
        except Exception as exc:
            reply = ("raised", f"{kind}() raised {type(exc).__name__}: {exc}")
        if "problem" in violation:
            reply = ("forbidden", violation["problem"])
        try:
            conn.send((*reply, time.process_time() - start))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            conn.send(("garbage", f"{kind}() returned something that cannot leave the box: {exc}", 0.0))
        except MemoryError:
            conn.send(("memory", f"{kind}() result exceeded the memory limit", 0.0))


# ---- the engine side -----------------------------------------------------------------------
class IsolatedStrategy(ReplayStrategy):
    """The engine's handle on a strategy running in its own process."""

    def __init__(self, strategy_path: str | Path, params: dict, rng_seed: int, defaults: dict | None = None,
                 call_timeout: float | None = None, memory_mb: int | None = None):
        self.call_timeout = call_timeout or float(os.environ.get("REPLAYBENCH_STRATEGY_TIMEOUT", DEFAULT_CALL_TIMEOUT))
        memory_mb = memory_mb or int(os.environ.get("REPLAYBENCH_STRATEGY_MEMORY_MB", DEFAULT_MEMORY_MB))
        self.sandbox = tempfile.TemporaryDirectory(prefix="replaybench-strategy-")
        self.conn, child = multiprocessing.Pipe()
        code = ("import sys; from benchmark.engine.sandbox import serve; "
                f"serve({child.fileno()}, {str(Path(strategy_path).resolve())!r}, {params!r}, {defaults or {}!r}, "
                f"{rng_seed}, "
                f"{memory_mb}, {self.sandbox.name!r})")
        python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": python_path,
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "TMPDIR": self.sandbox.name,
               "HOME": self.sandbox.name, "PYTHONDONTWRITEBYTECODE": "1"}
        self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[child.fileno()], env=env,
                                        stdin=subprocess.DEVNULL, cwd=self.sandbox.name)
        child.close()
        self.last_batch_ids: list[int] = []
        self.call_seconds: list[float] = []  # CPU seconds the strategy spent per call
        self.overhead_seconds = 0.0  # wall time of the calls, pipe and pickling included
        status, detail = self._receive(STARTUP_TIMEOUT, "start")
        if status != "ready":
            self.close()
            raise StrategyFailure(f"{status}: {detail}")

    def _receive(self, timeout: float, what: str):
        try:
            ready = self.conn.poll(timeout)
            reply = self.conn.recv() if ready else None
        except (EOFError, OSError) as exc:
            code = self.process.wait(timeout=5)
            self.close()
            if code == -9 or code == 137:
                raise StrategyFailure(f"memory: the strategy process was killed during {what}()") from exc
            raise StrategyFailure(f"crashed: the strategy process died during {what}() (exit code {code})") from exc
        except Exception as exc:  # a reply the engine cannot unpickle
            self.close()
            raise StrategyFailure(f"garbage: {what}() returned something the engine cannot read ({exc})") from exc
        if not ready:
            self.close()
            raise StrategyFailure(f"timeout: {what}() took longer than {timeout:g} s")
        return reply

    def _call(self, kind: str, *args):
        start = time.perf_counter()
        try:
            self.conn.send((kind, *args))
        except (OSError, pickle.PicklingError) as exc:
            self.close()
            raise StrategyFailure(f"crashed: cannot reach the strategy process ({exc})") from exc
        status, result, cpu_seconds = self._receive(self.call_timeout, kind)
        self.overhead_seconds += time.perf_counter() - start
        self.call_seconds.append(cpu_seconds)
        if status != "ok":
            self.close()
            raise StrategyFailure(f"{status}: {result}")
        return result

    def add(self, rollouts, ctx):
        self._call("add", list(rollouts), ctx.trainer_step, ctx.policy_version, ctx.num_trainers)

    def sample(self, batch_size, ctx):
        trained, self.last_batch_ids = self.last_batch_ids, []
        result = self._call("sample", batch_size, ctx.trainer_step, ctx.policy_version, ctx.num_trainers, trained)
        rollouts = getattr(result, "rollouts", result)
        if isinstance(rollouts, (list, tuple)):
            self.last_batch_ids = [getattr(r, "rollout_id", None) for r in rollouts]
        return result

    def pool_request(self):
        return self._call("pool_request")

    def add_pool(self, rollouts, ctx):
        self._call("add_pool", list(rollouts), ctx.trainer_step, ctx.policy_version, ctx.num_trainers)

    def state_dict(self):
        return {"box": self._call("state_dict"), "last_batch_ids": self.last_batch_ids}

    def load_state_dict(self, state):
        self._call("load_state_dict", state["box"])
        self.last_batch_ids = state["last_batch_ids"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.conn.close()
        self.sandbox.cleanup()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

"""Untrusted strategies run in a box: a separate process that holds no model, optimiser or verifier.

`IsolatedStrategy` stands in for the strategy inside the engine. Only plain data crosses the pipe,
as JSON in both directions: rollouts go in as lists of numbers, and what comes back is parsed
strictly (rollout ids, weights, regroup lists, a pool request), never unpickled, so nothing a
strategy returns can run code in the engine. The engine trains only on its own copies of the
rollouts the ids name. A strategy's checkpoint state is opaque bytes that only the box loads, and
every reply has a size cap; the limits are the workload's (`limits:` in its file).

The child process runs under a memory limit (RLIMIT_AS) and every call under a wall-clock limit.
A Python audit hook, installed before the strategy's module is imported, refuses writes outside the
child's temp folder, new processes, network connections and native code (ctypes). Any failure ends
the run with a verdict, `StrategyFailure("<kind>: <detail>")`:

    raised      the strategy raised an exception
    timeout     a call took longer than the limit (the process is killed)
    memory      the strategy exceeded its memory limit
    crashed     the process died
    forbidden   it tried to write outside its temp folder, start a process, connect or load native code
    garbage     it returned something that is not what the API asks for, or a reply over the size cap
    fabricated / tampered    a rollout the engine never produced, or one that differs from its own

The audit hook stops honest mistakes and casual misuse in Python code; it is not a security
boundary against native code. Run untrusted entries in a container or VM as well.

The child keeps the strategy's RNG (seeded like the engine's) and a mirror of the use counts,
updated before each `sample` with the previous batch (trained by then), so a strategy sees the
same context, and makes the same decisions, in the box as in-process.
"""

from __future__ import annotations

import base64
import dataclasses
import json
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

from benchmark.engine.boundary import box_command, set_limits
from benchmark.paths import REPO_ROOT
from benchmark.rollout import Rollout
from benchmark.strategy import Batch, ReplayStrategy, StrategyContext, StrategyFailure
from benchmark.workload import LimitsConfig

STARTUP_TIMEOUT = 60.0
# What the box keeps of the engine's environment: the locale, the search path, and the OpenBLAS settings
# some processors need for correct results.
BOX_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ROLLOUT_FIELDS = tuple(f.name for f in dataclasses.fields(Rollout))
SEQUENCE_FIELDS = ("prompt_ids", "completion_ids", "behaviour_logprobs")


def encode(message) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def plain_rollout(r: Rollout) -> list:
    return [getattr(r, name) for name in ROLLOUT_FIELDS]


def rollout_from_plain(values: list) -> Rollout:
    fields = dict(zip(ROLLOUT_FIELDS, values))
    for name in SEQUENCE_FIELDS:
        fields[name] = tuple(fields[name])
    return Rollout(**fields)


@dataclasses.dataclass(frozen=True)
class SampledIds:
    """A batch from the box: ids of the engine's own rollouts, with the weights and regroup lists as sent."""

    ids: list[int]
    weights: object = None
    regroup: object = None
    recompute_behaviour: object = None

    def resolve(self, known: dict[int, Rollout]) -> Batch:
        missing = next((rid for rid in self.ids if rid not in known), None)
        if missing is not None:
            raise StrategyFailure(f"fabricated: rollout {missing} was never produced by the engine")
        return Batch([known[rid] for rid in self.ids], self.weights, self.regroup, self.recompute_behaviour)


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


class Box:
    """The child's side: the strategy, its RNG, the use-count mirror and a fingerprint of every rollout
    handed over (to tell a returned rollout that was altered)."""

    def __init__(self, strategy: ReplayStrategy, rng_seed: int):
        self.strategy = strategy
        self.rng = np.random.default_rng(rng_seed)
        self.use_count: dict[int, int] = {}
        self.fingerprints: dict[int, int] = {}

    def ctx(self, step: int, version: int, trainers: int) -> StrategyContext:
        return StrategyContext(step, version, self.rng, MappingProxyType(self.use_count), trainers)

    def rollouts(self, plain: list) -> list[Rollout]:
        rollouts = [rollout_from_plain(values) for values in plain]
        self.fingerprints.update((r.rollout_id, hash(r)) for r in rollouts)
        return rollouts

    def batch(self, sampled) -> dict | None:
        """What `sample` returned, as plain data: rollout ids, weights, regroup lists."""
        if sampled is None:
            return None
        weights = regroup = recompute = None
        if isinstance(sampled, Batch):
            sampled, weights, regroup, recompute = (sampled.rollouts, sampled.weights, sampled.regroup,
                                                    sampled.recompute_behaviour)
        if not isinstance(sampled, (list, tuple)):
            return {"not_a_list": type(sampled).__name__}
        for r in sampled:
            if not isinstance(r, Rollout):
                raise StrategyFailure(f"garbage: sample() returned a {type(r).__name__}, not a Rollout")
            if r.rollout_id in self.fingerprints and hash(r) != self.fingerprints[r.rollout_id]:
                raise StrategyFailure(f"tampered: rollout {r.rollout_id} differs from the one the engine handed over")
        return {"ids": [r.rollout_id for r in sampled],
                "weights": None if weights is None else list(weights),
                "regroup": None if regroup is None else [list(p) for p in regroup],
                "recompute_behaviour": None if recompute is None else list(recompute)}

    def answer(self, message: dict):
        call = message["call"]
        if call == "add":
            self.strategy.add(self.rollouts(message["rollouts"]), self.ctx(*message["ctx"]))
            return None
        if call == "add_pool":
            self.strategy.add_pool(self.rollouts(message["rollouts"]), self.ctx(*message["ctx"]))
            return None
        if call == "sample":
            for rid in message["trained"]:
                self.use_count[rid] = self.use_count.get(rid, 0) + 1
            return self.batch(self.strategy.sample(message["batch_size"], self.ctx(*message["ctx"])))
        if call == "pool_request":
            request = self.strategy.pool_request()
            return list(request) if isinstance(request, (list, tuple)) else request
        if call == "state_dict":
            state = {"strategy": self.strategy.state_dict(), "rng": self.rng.bit_generator.state,
                     "use_count": self.use_count, "fingerprints": self.fingerprints}
            return base64.b64encode(pickle.dumps(state)).decode()
        if call == "load_state_dict":
            state = pickle.loads(base64.b64decode(message["state"]))  # the box's own bytes, loaded in the box
            self.strategy.load_state_dict(state["strategy"])
            self.rng.bit_generator.state = state["rng"]
            self.use_count, self.fingerprints = state["use_count"], state["fingerprints"]
            return None
        raise ValueError(f"unknown call {call}")


def serve(fd: int, strategy_path: str, params: dict, defaults: dict, rng_seed: int, memory_mb: int,
          cpu_seconds: float, sandbox_dir: str) -> None:
    """Child main loop: guard, load the strategy, then answer calls until the pipe closes."""
    from multiprocessing.connection import Connection

    from benchmark.strategy import build_strategy

    conn = Connection(fd)
    set_limits(memory_mb, cpu_seconds)
    os.chdir(sandbox_dir)
    violation = _guard(sandbox_dir)  # before the strategy's module runs a single line

    def reply(status: str, result=None, cpu: float = 0.0, call: str = "start") -> None:
        if "problem" in violation:
            status, result = "forbidden", violation["problem"]
        try:
            data = encode({"status": status, "result": result, "cpu": cpu})
        except (TypeError, ValueError) as exc:
            data = encode({"status": "garbage", "result": f"{call}() returned something that is not plain data "
                                                          f"({exc})", "cpu": cpu})
        except MemoryError:
            data = encode({"status": "memory", "result": "the reply exceeded the memory limit", "cpu": cpu})
        conn.send_bytes(data)

    try:
        box = Box(build_strategy(strategy_path, params, defaults), rng_seed)
    except Exception as exc:
        reply("raised", f"{type(exc).__name__}: {exc}")
        return
    reply("ready")

    while True:
        try:
            message = json.loads(conn.recv_bytes())
        except EOFError:
            return
        start = time.process_time()
        try:
            status, result = "ok", box.answer(message)
        except StrategyFailure as exc:
            status, _, result = str(exc).partition(": ")
        except MemoryError:
            status, result = "memory", f"{message['call']}() exceeded the {memory_mb} MB memory limit"
        except Exception as exc:
            status, result = "raised", f"{message['call']}() raised {type(exc).__name__}: {exc}"
        reply(status, result, time.process_time() - start, message["call"])


# ---- the engine side -----------------------------------------------------------------------
def over_budget(limits: LimitsConfig) -> str:
    return f"timeout: the strategy's calls took more than {limits.strategy_seconds:g} s in this run"


class IsolatedStrategy(ReplayStrategy):
    """The engine's handle on a strategy running in its own process."""

    def __init__(self, strategy_path: str | Path, params: dict, rng_seed: int, defaults: dict | None = None,
                 limits: LimitsConfig | None = None):
        self.limits = limits = limits or LimitsConfig()
        self.call_timeout, self.total_seconds = limits.call_seconds, limits.strategy_seconds
        self.max_reply_bytes = int(limits.reply_mb * 1024 * 1024)
        self.sandbox = tempfile.TemporaryDirectory(prefix="replaybench-strategy-")
        self.conn, child = multiprocessing.Pipe()
        code = ("import sys; from benchmark.engine.sandbox import serve; "
                f"serve({child.fileno()}, {str(Path(strategy_path).resolve())!r}, {params!r}, {defaults or {}!r}, "
                f"{rng_seed}, {limits.memory_mb}, {self.total_seconds!r}, {self.sandbox.name!r})")
        python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        # Nothing else of the engine's environment (it may hold tokens and store URIs). PYTHONHASHSEED: the
        # box's rollout fingerprints (hashes of their fields) must survive a resume.
        env = {**{k: v for k, v in os.environ.items() if k in BOX_ENVIRONMENT}, "PYTHONPATH": python_path,
               "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "TMPDIR": self.sandbox.name, "HOME": self.sandbox.name, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = box_command([sys.executable, "-c", code], self.sandbox.name, Path(strategy_path))
        self.process = subprocess.Popen(argv, pass_fds=[child.fileno()], env=env, stdin=subprocess.DEVNULL,
                                        cwd=self.sandbox.name)
        child.close()
        self.last_batch_ids: list[int] = []
        self.call_seconds: list[float] = []  # CPU seconds the strategy spent per call
        self.overhead_seconds = 0.0  # wall time of the calls, pipe and encoding included
        status, detail = self._receive(STARTUP_TIMEOUT, "start")
        if status != "ready":
            self.close()
            raise StrategyFailure(f"{status}: {detail}")

    def _receive(self, timeout: float, what: str) -> tuple[str, object]:
        """(status, result) of the box's reply, read as JSON under the size cap; never unpickled."""
        try:
            ready = self.conn.poll(timeout)
            data = self.conn.recv_bytes(self.max_reply_bytes) if ready else None
        except EOFError as exc:
            code = self.process.wait(timeout=5)
            self.close()
            if code == -9 or code == 137:
                raise StrategyFailure(f"memory: the strategy process was killed during {what}()") from exc
            if code in (-24, 128 + 24):  # SIGXCPU: the CPU-time limit, the run's whole strategy budget
                raise StrategyFailure(f"timeout: the strategy used more than {self.total_seconds:g} s of CPU "
                                      "in this run") from exc
            raise StrategyFailure(f"crashed: the strategy process died during {what}() (exit code {code})") from exc
        except OSError as exc:  # multiprocessing refuses a message over maxlength
            self.close()
            raise StrategyFailure(f"garbage: {what}() sent a reply over the {self.max_reply_bytes // 2**20} MB "
                                  "limit") from exc
        if not ready:
            self.close()
            raise StrategyFailure(f"timeout: {what}() took longer than {timeout:g} s")
        try:
            reply = json.loads(data)
            status, result, cpu = reply["status"], reply["result"], float(reply["cpu"])
            if not isinstance(status, str):
                raise TypeError("status is not a string")
        except (ValueError, TypeError, KeyError) as exc:
            self.close()
            raise StrategyFailure(f"garbage: {what}() sent a reply the engine cannot read ({exc})") from exc
        self.call_seconds.append(cpu)
        return status, result

    def _call(self, call: str, **fields):
        start = time.perf_counter()
        try:
            self.conn.send_bytes(encode({"call": call, **fields}))
        except OSError as exc:
            self.close()
            raise StrategyFailure(f"crashed: cannot reach the strategy process ({exc})") from exc
        left = self.total_seconds - self.overhead_seconds
        try:
            status, result = self._receive(max(min(self.call_timeout, left), 0.0), call)
        except StrategyFailure as exc:
            if left < self.call_timeout and str(exc).startswith("timeout"):
                raise StrategyFailure(over_budget(self.limits)) from None
            raise
        self.overhead_seconds += time.perf_counter() - start
        if status != "ok":
            self.close()
            raise StrategyFailure(f"{status}: {result}")
        if self.overhead_seconds > self.total_seconds:
            self.close()
            raise StrategyFailure(over_budget(self.limits))
        return result

    @staticmethod
    def _hand_over(rollouts) -> list:
        return [plain_rollout(r) for r in rollouts]

    @staticmethod
    def _ctx(ctx: StrategyContext) -> list:
        return [ctx.trainer_step, ctx.policy_version, ctx.num_trainers]

    def add(self, rollouts, ctx):
        self._call("add", rollouts=self._hand_over(rollouts), ctx=self._ctx(ctx))

    def add_pool(self, rollouts, ctx):
        self._call("add_pool", rollouts=self._hand_over(rollouts), ctx=self._ctx(ctx))

    def sample(self, batch_size, ctx):
        trained, self.last_batch_ids = self.last_batch_ids, []
        reply = self._call("sample", batch_size=batch_size, ctx=self._ctx(ctx), trained=trained)
        batch = self._batch(reply, batch_size)
        if batch is not None:
            self.last_batch_ids = list(batch.ids)
        return batch

    def _batch(self, reply, batch_size: int) -> SampledIds | None:
        """The reply to `sample`, read strictly: rollout ids, weights, regroup (the ledger checks the rest)."""
        if reply is None:
            return None
        if not isinstance(reply, dict):
            raise StrategyFailure("garbage: sample() sent a reply the engine cannot read")
        if "not_a_list" in reply:
            raise StrategyFailure(f"garbage: sample() must return a list of exactly {batch_size} rollouts or None, "
                                  f"got {reply['not_a_list']}")
        ids = reply.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise StrategyFailure("garbage: sample() sent a reply the engine cannot read")
        return SampledIds(ids, reply.get("weights"), reply.get("regroup"), reply.get("recompute_behaviour"))

    def pool_request(self):
        return self._call("pool_request")

    def state_dict(self):
        """The box's state as opaque bytes (base64 text): only the box ever loads them."""
        return {"box": self._call("state_dict"), "last_batch_ids": self.last_batch_ids}

    def load_state_dict(self, state):
        self._call("load_state_dict", state=state["box"])
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

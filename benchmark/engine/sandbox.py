"""Untrusted strategies run in a box: a separate process that holds no model, optimiser, verifier or data.

`IsolatedStrategy` stands in for the strategy inside the engine. The box (benchmark/engine/box.py) runs inside
the operating-system boundary (benchmark/engine/boundary.py). Only plain data crosses the pipe, as JSON in both
directions: the strategy's source, parameters and RNG seed go in with the start message (never on a command line),
rollouts go in as lists of numbers, and what comes back is parsed strictly (rollout ids, weights, regroup lists, a
pool request), never unpickled, so nothing a strategy returns can run code in the engine. The engine trains only
on its own copies of the rollouts the ids name. A strategy's checkpoint state is opaque bytes that only the box
loads.

The engine reads every reply against a deadline (the call's wall-clock limit, so a box that stalls mid-message
cannot hold it), under a size cap announced before the bytes (1 MB for a call, the workload's `reply_mb` for a
checkpoint state), and counts the box's CPU time as the kernel reports it, every thread of it and between calls
too: no call may use more than `call_seconds` of it, and the whole run no more than `floor_seconds` plus
`cpu_share` of the engine's own CPU time. Any failure ends the run with a verdict,
`StrategyFailure("<kind>: <detail>")`:

    raised      the strategy raised an exception
    timeout     a call took longer than the limit, or the strategy used more time than the run allows
    memory      the strategy exceeded its memory limit
    crashed     the process died
    forbidden   it tried what the box refuses (write a file, start a process, connect, load native code), or
                what its track's rules do not allow
    garbage     it returned something that is not what the API asks for, or a reply over the size cap
    fabricated / tampered    a rollout the engine never produced, or one that differs from its own
                (or a prompt to replay that the run never generated)
    stalled     admission control holds every worker while sample() waits for data: nothing can change

The box keeps the strategy's RNG (seeded like the engine's) and a mirror of the use counts, updated before each
`sample` with the previous batch (trained by then), so a strategy sees the same context, and makes the same
decisions, in the box as in-process.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
import time
from pathlib import Path

from benchmark.engine.boundary import BoxError, exec_program, sandbox_mode, start_box
from benchmark.engine.box import HEADER, SampledIds, encode, plain_rollout
from benchmark.strategy import HOOKS, ReplayStrategy, StrategyContext, StrategyError, StrategyFailure, UpdateFeedback
from benchmark.workload import LimitsConfig

STARTUP_TIMEOUT = 60.0  # the strategy's import and constructor
CALL_REPLY_BYTES = 1 << 20  # a reply to add, sample or pool_request (a sample's is a few kB)
MAX_SOURCE_BYTES = 4 << 20  # a strategy file


class ReplyTooLarge(Exception):
    pass


def read_frame(sock: socket.socket, deadline: float, limit: int) -> bytes:
    """One framed message from the box, all of it before `deadline` (time.monotonic()); its announced length is
    checked against `limit` before a byte of it is read."""
    (size,) = HEADER.unpack(_read_exactly(sock, HEADER.size, deadline))
    if size > limit:
        raise ReplyTooLarge(size)
    return _read_exactly(sock, size, deadline)


def _read_exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        received = sock.recv_into(view[got:])
        if received == 0:
            raise EOFError
        got += received
    return bytes(buffer)


def over_budget(limits: LimitsConfig) -> str:
    return f"timeout: the strategy's calls took more than {limits.strategy_seconds:g} s in this run"


class IsolatedStrategy(ReplayStrategy):
    """The engine's handle on a strategy running in its box."""

    def __init__(self, strategy_path: str | Path, params: dict, rng_seed: int, defaults: dict | None = None,
                 limits: LimitsConfig | None = None, source: bytes | None = None):
        self.limits = limits = limits or LimitsConfig()
        self.call_timeout, self.total_seconds = limits.call_seconds, limits.strategy_seconds
        self.state_reply_bytes = int(limits.reply_mb * 1024 * 1024)
        source = Path(strategy_path).read_bytes() if source is None else source
        if len(source) > MAX_SOURCE_BYTES:
            raise StrategyError(f"{Path(strategy_path).name} is over {MAX_SOURCE_BYTES >> 20} MB: a strategy is a "
                                "Python file, not a place for data")
        try:
            text = source.decode()
        except UnicodeDecodeError:
            raise StrategyError(f"{Path(strategy_path).name} is not UTF-8 text") from None
        self.sock, box_end = socket.socketpair()
        self.engine_cpu_start, self.call_start = time.process_time(), time.monotonic()
        self.cpu_seen = 0.0  # the box's CPU seconds at the last check
        sandboxed = sandbox_mode() == "bwrap"
        try:
            self.box = start_box(f"from benchmark.engine.box import main; main({box_end.fileno()}, {sandboxed})",
                                 [box_end.fileno()], sandboxed)
        except BoxError as exc:
            self.sock.close()
            raise StrategyFailure(f"crashed: {exc}") from None
        finally:
            box_end.close()
        self.last_batch_ids: list[int] = []  # the batch handed out, its step not yet recorded
        self.trained_ids: list[int] = []  # batches trained since the box last heard: its use counts to come
        self.call_seconds: list[float] = []  # CPU seconds the strategy spent per call, as the box reports them
        self.overhead_seconds = 0.0  # wall time of the calls, pipe and encoding included
        start = {"source": text, "path": str(strategy_path), "params": params, "defaults": defaults or {},
                 "rng_seed": rng_seed, "limits": limits.model_dump(),
                 "seccomp": base64.b64encode(exec_program()).decode() if sandboxed else None}
        deadline = time.monotonic() + STARTUP_TIMEOUT
        self._send(start, deadline, "start")
        status, detail = self._receive(deadline, "start", CALL_REPLY_BYTES)
        if status != "ready":
            self.close()
            raise StrategyFailure(f"{status}: {detail}")
        if not (isinstance(detail, dict) and isinstance(detail.get("hooks"), list)
                and set(detail["hooks"]) <= set(HOOKS) and type(detail.get("feedback_after_update")) is bool):
            self.close()
            raise StrategyFailure("garbage: the box's start reply is not what the engine reads")
        self.hooks = tuple(h for h in HOOKS if h in detail["hooks"])  # the optional calls its class defines
        self.feedback_after_update = detail["feedback_after_update"]

    def _died(self, what: str) -> StrategyFailure:
        code = self.box.process.wait(timeout=5)
        last_words = self.box.output.last_words() if what == "start" else ""
        self.close()
        if code in (-9, 128 + 9):
            return StrategyFailure(f"memory: the strategy process was killed during {what}()")
        if code in (-24, 128 + 24):  # SIGXCPU: the CPU-time limit, the run's whole strategy budget
            return StrategyFailure(f"timeout: the strategy used more than {self.total_seconds:g} s of CPU in this run")
        return StrategyFailure(f"crashed: the strategy process died during {what}() (exit code {code})"
                               + (f": {last_words}" if last_words else ""))

    def _send(self, message: dict, deadline: float, what: str) -> None:
        try:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            data = encode(message)
            self.sock.sendall(HEADER.pack(len(data)) + data)
        except TimeoutError:  # the box stopped reading
            self.close()
            raise StrategyFailure(f"timeout: {what}() took longer than {self.call_timeout:g} s") from None
        except OSError as exc:
            raise self._died(what) from exc

    def _receive(self, deadline: float, what: str, limit: int) -> tuple[str, object]:
        """(status, result) of the box's reply, read as JSON under the size cap and the deadline; never
        unpickled. Then the box's CPU time against its limits."""
        try:
            data = read_frame(self.sock, deadline, limit)
        except (EOFError, ConnectionError) as exc:
            raise self._died(what) from exc
        except TimeoutError:
            self.close()
            raise StrategyFailure(f"timeout: {what}() took longer than {deadline - self.call_start:g} s") from None
        except ReplyTooLarge:
            self.close()
            raise StrategyFailure(f"garbage: {what}() sent a reply over the {limit / 2**20:g} MB limit") from None
        try:
            reply = json.loads(data)
            status, result, cpu = reply["status"], reply["result"], float(reply["cpu"])
            if not isinstance(status, str):
                raise TypeError("status is not a string")
        except RecursionError:
            self.close()
            raise StrategyFailure(f"garbage: {what}() sent a reply nested too deep for the engine to read") from None
        except (ValueError, TypeError, KeyError) as exc:
            self.close()
            raise StrategyFailure(f"garbage: {what}() sent a reply the engine cannot read ({exc})") from None
        self.call_seconds.append(cpu)
        self._check_cpu(what)
        return status, result

    def _check_cpu(self, what: str) -> None:
        """The box's CPU time, counted by the kernel: per call (with any time spent between calls), and for the
        run against its allowance, a share of the engine's own CPU time."""
        total = self.box.cpu_seconds()
        used, self.cpu_seen = total - self.cpu_seen, total
        limits = self.limits
        if used > limits.call_seconds:
            self.close()
            raise StrategyFailure(f"timeout: {what}() used {used:.1f} s of CPU (with what ran since the call before "
                                  f"it), more than the {limits.call_seconds:g} s of one call")
        allowance = limits.floor_seconds + limits.cpu_share * (time.process_time() - self.engine_cpu_start)
        if total > allowance:
            self.close()
            raise StrategyFailure(f"timeout: the strategy used {total:.1f} s of CPU in this run, more than its "
                                  f"allowance of {limits.floor_seconds:g} s + {limits.cpu_share:.0%} of the "
                                  f"engine's CPU time ({allowance:.1f} s)")

    def _call(self, call: str, **fields):
        self.call_start = time.monotonic()
        left = self.total_seconds - self.overhead_seconds
        deadline = self.call_start + max(min(self.call_timeout, left), 0.0)
        limit = self.state_reply_bytes if call == "state_dict" else min(CALL_REPLY_BYTES, self.state_reply_bytes)
        self._send({"call": call, **fields}, deadline, call)
        try:
            status, result = self._receive(deadline, call, limit)
        except StrategyFailure as exc:
            if left < self.call_timeout and str(exc).startswith(f"timeout: {call}() took longer"):
                raise StrategyFailure(over_budget(self.limits)) from None
            raise
        self.overhead_seconds += time.monotonic() - self.call_start
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

    def _ctx(self, ctx: StrategyContext) -> dict:
        """The context's plain fields, and the batches trained since the box last heard (its use counts)."""
        trained, self.trained_ids = self.trained_ids, []
        return {"ctx": [ctx.policy_version, ctx.num_trainers, ctx.generations_in_flight, ctx.group_size,
                        ctx.batch_size], "trained": trained}

    def trained(self) -> None:
        """The batch last sampled has been trained (the engine recorded its step)."""
        self.trained_ids += self.last_batch_ids
        self.last_batch_ids = []

    def add(self, rollouts, ctx):
        self._call("add", rollouts=self._hand_over(rollouts), **self._ctx(ctx))

    def add_pool(self, rollouts, ctx):
        self._call("add_pool", rollouts=self._hand_over(rollouts), **self._ctx(ctx))

    def sample(self, batch_size, ctx):
        reply = self._call("sample", batch_size=batch_size, **self._ctx(ctx))
        batch = SampledIds.from_message(reply, batch_size)
        if batch is not None:
            self.last_batch_ids = list(batch.ids)
        return batch

    def admit(self, ctx):
        return self._call("admit", **self._ctx(ctx))

    def next_prompt(self, ctx):
        return self._call("next_prompt", **self._ctx(ctx))

    def on_update(self, feedback: UpdateFeedback, ctx):
        self._call("on_update", feedback=dataclasses.asdict(feedback), **self._ctx(ctx))

    def pool_request(self):
        return self._call("pool_request")

    def state_dict(self):
        """The box's state as opaque bytes (base64 text): only the box ever loads them."""
        return {"box": self._call("state_dict"), "last_batch_ids": self.last_batch_ids,
                "trained_ids": self.trained_ids}

    def load_state_dict(self, state):
        self._call("load_state_dict", state=state["box"])
        self.last_batch_ids, self.trained_ids = state["last_batch_ids"], state.get("trained_ids", [])

    def close(self) -> None:
        if getattr(self, "box", None) is not None:
            self.box.kill()
        self.sock.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

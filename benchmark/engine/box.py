"""What runs inside the box: the strategy, and the loop that answers the engine's calls.

The engine starts this module inside its operating-system boundary (`benchmark/engine/boundary.py`), with
`python -S -s -B`: it imports only the standard library, numpy and the strategy API (benchmark/strategy.py,
benchmark/rollout.py, benchmark/errors.py), which is all the box's file system holds. Before the strategy's
module runs a line, `main` reads its start message from the pipe (the strategy's source, parameters, RNG seed,
limits), sets the kernel's resource limits, adds a seccomp filter that refuses `execve` (compiled by the engine),
and installs an audit hook. The kernel refuses what the box may not do (the boundary's namespaces, seccomp filter
and limits); the hook only turns the attempts it sees into clear verdicts (`forbidden: ...`), and switching it
off gains nothing.

Messages are JSON, each framed by a 4-byte length, over a socket pair the engine made; this file holds the
framing both sides use.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pickle
import resource
import signal
import socket
import struct
import sys
import time
from types import MappingProxyType

import numpy as np

from benchmark.rollout import Rollout
from benchmark.strategy import (
    Batch,
    ReplayStrategy,
    StrategyContext,
    StrategyFailure,
    UpdateFeedback,
    build_strategy,
    checked_admission,
    checked_prompt_choice,
    defined_hooks,
)

HEADER = struct.Struct("!I")  # the length of the JSON message that follows
ROLLOUT_FIELDS = tuple(f.name for f in dataclasses.fields(Rollout))
SEQUENCE_FIELDS = ("prompt_ids", "completion_ids", "behaviour_logprobs")
MAX_THREADS = 16  # RLIMIT_NPROC in the box, where no process can start: threads (numpy's BLAS runs on one)
MAX_OPEN_FILES = 64
PR_SET_PDEATHSIG, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 22, 2  # <linux/prctl.h>, <linux/seccomp.h>


@dataclasses.dataclass(frozen=True)
class SampledIds:
    """A batch from the box: ids of the engine's own rollouts, with the weights and regroup lists as sent."""

    ids: list[int]
    weights: object = None
    regroup: object = None
    recompute_behaviour: object = None

    @staticmethod
    def from_message(reply, batch_size: int) -> SampledIds | None:
        """The reply to `sample` (Box.batch), read strictly: rollout ids, weights, regroup (the ledger checks
        the rest)."""
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

    def resolve(self, known: dict[int, Rollout]) -> Batch:
        missing = next((rid for rid in self.ids if rid not in known), None)
        if missing is not None:
            raise StrategyFailure(f"fabricated: rollout {missing} was never produced by the engine")
        return Batch([known[rid] for rid in self.ids], self.weights, self.regroup, self.recompute_behaviour)


def encode(message) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def send_message(sock: socket.socket, message) -> None:
    send_frame(sock, encode(message))


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(HEADER.pack(len(data)) + data)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket):
    """The engine's next message (the box side: blocking; the engine reads the box's with a deadline)."""
    (size,) = HEADER.unpack(_recv_exactly(sock, HEADER.size))
    return json.loads(_recv_exactly(sock, size))


def plain_rollout(r: Rollout) -> list:
    return [getattr(r, name) for name in ROLLOUT_FIELDS]


def rollout_from_plain(values: list) -> Rollout:
    fields = dict(zip(ROLLOUT_FIELDS, values))
    for name in SEQUENCE_FIELDS:
        fields[name] = tuple(fields[name])
    return Rollout(**fields)


# ---- before the strategy's module runs ---------------------------------------------------------
def set_limits(memory_mb: int, cpu_seconds: float) -> None:
    """The kernel's limits on this process, which it cannot raise again (no capability): address space, CPU time
    (the run's whole strategy budget; the engine counts CPU against a tighter allowance as the run goes), threads,
    open files; no file may grow (the file system is read-only anyway) and no core file is written."""
    limits = {"RLIMIT_AS": memory_mb * 1024 * 1024, "RLIMIT_CPU": int(cpu_seconds) + 1, "RLIMIT_NPROC": MAX_THREADS,
              "RLIMIT_NOFILE": MAX_OPEN_FILES, "RLIMIT_FSIZE": 0, "RLIMIT_CORE": 0, "RLIMIT_MEMLOCK": 0,
              "RLIMIT_MSGQUEUE": 0}
    for name, value in limits.items():
        if hasattr(resource, name):  # RLIMIT_MSGQUEUE is Linux's only
            resource.setrlimit(getattr(resource, name), (value, value))


def die_with_the_engine() -> None:
    """SIGKILL when the box's parent (bubblewrap's monitor, or the engine) dies: the setting bubblewrap made was
    cleared when setpriv changed the uid, and a box must never outlive its run."""
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def add_seccomp_filter(program: bytes) -> None:
    """A second seccomp filter (compiled by the engine with libseccomp), added once this Python runs: no `execve`
    either (the boundary's filter had to let bubblewrap start it). Filters only ever add up: nothing in the box can
    remove one. No new privileges is already set, so the kernel takes it from an unprivileged process."""
    import ctypes

    class SockFprog(ctypes.Structure):  # struct sock_fprog: 8-byte instructions and their count
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(SockFprog(len(program) // 8, program)), 0, 0):
        raise OSError(ctypes.get_errno(), "the box could not add its seccomp filter")


PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork", "os.forkpty",
                  "pty.spawn", "os.spawn")
FILE_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.truncate", "os.link",
               "os.symlink", "os.chmod", "os.chown")


def guard() -> dict:
    """The audit hook: the first attempt it sees at what the box may not do, recorded for the verdict and
    refused; returns the dict that holds it."""
    violation = {}

    def hook(event, args):
        problem = None
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            mode, flags = args[1], args[2] or 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
            if writing and os.fsdecode(args[0]) != os.devnull:
                problem = f"tried to write a file ({os.fsdecode(args[0])}): the box's file system is read-only"
        elif event in FILE_EVENTS:
            problem = f"tried to change the file system ({event}): the box's file system is read-only"
        elif event in PROCESS_EVENTS:
            problem = f"started a process ({event})"
        elif event in ("socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
            problem = f"opened a network connection ({event})"
        elif event == "ctypes.dlopen":
            problem = "loaded native code (ctypes)"
        if problem:
            violation.setdefault("problem", problem)
            raise PermissionError(f"sandbox: {problem}")

    sys.addaudithook(hook)
    return violation


# ---- the strategy's side of the calls ------------------------------------------------------------
class Box:
    """The strategy, its RNG, the use-count mirror and a fingerprint of every rollout handed over (to tell a
    returned rollout that was altered)."""

    def __init__(self, strategy: ReplayStrategy, rng_seed: int):
        self.strategy = strategy
        self.rng = np.random.default_rng(rng_seed)
        self.use_count: dict[int, int] = {}
        self.fingerprints: dict[int, int] = {}

    def ctx(self, message: dict) -> StrategyContext:
        """The context of a call, after counting the uses of the batches trained since the last one."""
        for rid in message["trained"]:
            self.use_count[rid] = self.use_count.get(rid, 0) + 1
        version, trainers, in_flight, group_size, batch_size = message["ctx"]
        return StrategyContext(version, self.rng, MappingProxyType(self.use_count), trainers, in_flight, group_size,
                               batch_size)

    def rollouts(self, plain: list) -> list[Rollout]:
        rollouts = [rollout_from_plain(values) for values in plain]
        self.fingerprints.update((r.rollout_id, hash(r)) for r in rollouts)
        return rollouts

    def batch(self, sampled) -> dict | None:
        """What `sample` returned, as the message the engine reads (SampledIds.from_message)."""
        if sampled is None:
            return None
        batch = Batch.of(sampled)
        if not isinstance(batch.rollouts, (list, tuple)):
            return {"not_a_list": type(batch.rollouts).__name__}
        for r in batch.rollouts:
            if not isinstance(r, Rollout):
                raise StrategyFailure(f"garbage: sample() returned a {type(r).__name__}, not a Rollout")
            if r.rollout_id in self.fingerprints and hash(r) != self.fingerprints[r.rollout_id]:
                raise StrategyFailure(f"tampered: rollout {r.rollout_id} differs from the one the engine handed over")
        return {"ids": [r.rollout_id for r in batch.rollouts],
                "weights": None if batch.weights is None else list(batch.weights),
                "regroup": None if batch.regroup is None else [list(p) for p in batch.regroup],
                "recompute_behaviour": None if batch.recompute_behaviour is None else list(batch.recompute_behaviour)}

    def answer(self, message: dict):
        call = message["call"]
        if call == "add":
            self.strategy.add(self.rollouts(message["rollouts"]), self.ctx(message))
            return None
        if call == "add_pool":
            self.strategy.add_pool(self.rollouts(message["rollouts"]), self.ctx(message))
            return None
        if call == "sample":
            return self.batch(self.strategy.sample(message["batch_size"], self.ctx(message)))
        if call == "admit":
            return checked_admission(self.strategy.admit(self.ctx(message)))
        if call == "next_prompt":
            return checked_prompt_choice(self.strategy.next_prompt(self.ctx(message)))
        if call == "on_update":
            self.strategy.on_update(UpdateFeedback(**message["feedback"]), self.ctx(message))
            return None
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


def main(fd: int, sandboxed: bool = True) -> None:
    """The box's main loop: its start message, its limits and guards, the strategy, then one reply per call
    until the engine closes the pipe."""
    die_with_the_engine()
    sock = socket.socket(fileno=fd)
    start = recv_message(sock)
    limits = start["limits"]
    set_limits(limits["memory_mb"], limits["strategy_seconds"])
    if sandboxed:
        add_seccomp_filter(base64.b64decode(start["seccomp"]))
    violation = guard()  # before the strategy's module runs a single line

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
        try:
            send_frame(sock, data)
        except OSError:  # the engine has ended the run (a verdict of its own): nothing to tell it
            sys.exit(0)

    try:
        source = start["source"].encode()
        box = Box(build_strategy(start["path"], start["params"], start["defaults"], source), start["rng_seed"])
    except Exception as exc:
        reply("raised", f"{type(exc).__name__}: {exc}")
        return
    reply("ready", {"hooks": list(defined_hooks(box.strategy)),
                    "feedback_after_update": bool(getattr(box.strategy, "feedback_after_update", False))})

    while True:
        try:
            message = recv_message(sock)
        except EOFError:
            return
        started = time.process_time()
        try:
            status, result = "ok", box.answer(message)
        except StrategyFailure as exc:
            status, _, result = str(exc).partition(": ")
        except MemoryError:
            status, result = "memory", f"{message['call']}() exceeded the {limits['memory_mb']} MB memory limit"
        except Exception as exc:
            status, result = "raised", f"{message['call']}() raised {type(exc).__name__}: {exc}"
        reply(status, result, time.process_time() - started, message["call"])

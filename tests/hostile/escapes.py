"""The hostile review's attacks on the box, one per name (`attack=`), each run in `add()` after the first step of
every real attack: switching the audit hook off (it is a plain closure that gc finds) and wiping the violation it
recorded. What is left is the kernel's boundary. Each attack ends by raising

    RuntimeError("contained: <what the kernel answered>")   the attack failed, as it must
    RuntimeError("ESCAPED: <what it reached>")               the attack worked

so the run's verdict says which (`raised: add() raised RuntimeError: ...`). `targets` are host paths the attack
aims at (the store, a canary to create, the evaluation set, ...): the test passes real ones.
"""

import ctypes
import errno
import gc
import os
import platform
import sys
import types

from benchmark import ReplayStrategy

# system calls that glibc has no wrapper for, by architecture: keyctl, bpf, userfaultfd, perf_event_open,
# io_uring_setup
SYSCALLS = {"x86_64": {"keyctl": 250, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "io_uring_setup": 425},
            "aarch64": {"keyctl": 219, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "io_uring_setup": 425}}
MS_REMOUNT, MS_BIND, MNT_DETACH, CLONE_NEWUSER, CLONE_NEWNS = 32, 4096, 2, 0x10000000, 0x00020000


def switch_off_the_audit_hook() -> None:
    def inert():
        violation = None

        def hook(event, args):
            return violation and None

        return hook.__code__

    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__name__ == "hook" and "box" in obj.__code__.co_filename:
            obj.__closure__[0].cell_contents.clear()  # the self-reported verdict, wiped
            obj.__code__ = inert()


def refused(what: str, call) -> str:
    """`call()` must fail: the reason, or an escape."""
    try:
        result = call()
    except (OSError, RuntimeError, ImportError, ValueError) as exc:
        return f"{what}: {type(exc).__name__}: {exc}"
    raise RuntimeError(f"ESCAPED: {what} worked ({result!r})")


def libc_refused(what: str, result: int) -> str:
    if result != -1:
        raise RuntimeError(f"ESCAPED: {what} returned {result}")
    return f"{what}: {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}"


class Escapes(ReplayStrategy):
    def __init__(self, attack="remount", targets=()):
        self.attack, self.targets = attack, list(targets)

    def add(self, rollouts, ctx):
        switch_off_the_audit_hook()
        answer = getattr(self, self.attack)()
        raise RuntimeError(f"contained: {answer}")

    def sample(self, batch_size, ctx):
        return None

    # ---- the file system -----------------------------------------------------------------------
    def remount(self):
        """Remount the read-only root read-write and lazily unmount what hides the store, as the review did."""
        libc = ctypes.CDLL(None, use_errno=True)
        answers = [libc_refused("remount / read-write", libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None)),
                   libc_refused("umount2 /box/lib", libc.umount2(b"/box/lib", MNT_DETACH))]
        for target in self.targets:
            mounted = libc.mount(b"none", target.encode(), b"tmpfs", 0, None)
            answers.append(libc_refused(f"mount over {target}", mounted))
        return "; ".join(answers)

    def write_files(self):
        """Canaries outside, the box's own library, its strategy file, a big file and many inodes in its folder."""
        answers = [refused(f"write {path}", lambda p=path: open(p, "w").write("escaped")) for path in
                   [*self.targets, "/box/lib/benchmark/strategy.py", __file__, "/var/tmp/canary", "canary"]]
        answers.append(refused("1.5 GB in the working folder", lambda: open("big", "wb").write(b"x" * 2**20)))
        answers.append(refused("200,000 inodes", lambda: [open(f"f{i}", "w") for i in range(200_000)]))
        answers.append(refused("mkdir", lambda: os.mkdir("/box/x")))
        return "; ".join(answers)

    def read_files(self):
        """What the engine did not hand over: the store, the evaluation set, the target, the shipped runs, the
        start checkpoint, the trainer's code, other boxes' folders; and the process's own command line."""
        answers = [refused(f"read {path}", lambda p=path: open(p, "rb").read(16) if not os.path.isdir(p)
                           else os.listdir(p)) for path in [*self.targets, "/proc/self/cmdline", "/proc/1/environ"]]
        return "; ".join(answers)

    def import_torch(self):
        """The copy-of-the-policy attack needs torch: on the path the engine's own environment uses, or any."""
        sys.path[:0] = self.targets
        return refused("import torch", lambda: __import__("torch"))

    # ---- processes, privileges ------------------------------------------------------------------
    def processes(self):
        import subprocess  # with the hook off, straight to _posixsubprocess.fork_exec

        answers = [refused("os.fork", os.fork), refused("os.forkpty", os.forkpty),
                   refused("os.posix_spawn", lambda: os.posix_spawn("/usr/bin/true", ["true"], {})),
                   refused("os.execv", lambda: os.execv("/usr/bin/true", ["true"])),
                   refused("subprocess", lambda: subprocess.run(["/usr/bin/true"]))]
        return "; ".join(answers)

    def privileges(self):
        libc = ctypes.CDLL(None, use_errno=True)
        held = [cap for cap in range(41) if libc.prctl(23, cap, 0, 0, 0) == 1]  # PR_CAPBSET_READ
        if held or os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError(f"ESCAPED: uid {os.getuid()}, capabilities {held} in the bounding set")
        if libc.prctl(39, 0, 0, 0, 0) != 1:  # PR_GET_NO_NEW_PRIVS
            raise RuntimeError("ESCAPED: no_new_privs is not set")
        answers = [refused("setuid(0)", lambda: os.setuid(0)),
                   libc_refused("unshare(CLONE_NEWUSER)", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)),
                   libc_refused("ptrace(PTRACE_ATTACH, 1)", libc.ptrace(16, 1, None, None))]
        numbers = SYSCALLS.get(platform.machine(), {})
        for name, number in numbers.items():
            answers.append(libc_refused(name, libc.syscall(number, 0, 0, 0, 0, 0)))
        return f"uid {os.getuid()}, no capability, no new privileges; " + "; ".join(answers)

    # ---- network, channels, memory --------------------------------------------------------------
    def network(self):
        import socket

        libc = ctypes.CDLL(None, use_errno=True)
        answers = [refused("socket(AF_INET)", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1)),
                   refused("AF_UNIX sendto", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(
                       b"escaped", self.targets[0] if self.targets else "/run/x.sock")),
                   libc_refused("libc socket()", libc.socket(2, 1, 0))]
        return "; ".join(answers)

    def channels(self):
        """What two boxes side by side could signal each other through: locks on the files both read, watches
        on them, a temp folder they share."""
        import fcntl

        shared = open("/box/lib/benchmark/rollout.py", "rb")
        libc = ctypes.CDLL(None, use_errno=True)
        answers = [refused("flock", lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                   refused("fcntl lock", lambda: fcntl.lockf(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                   libc_refused("inotify_init", libc.inotify_init()),
                   refused("list the temp folder", lambda: os.listdir(os.environ.get("TMPDIR", "/tmp")))]
        return "; ".join(answers)

    def memory(self):
        """Memory past the address-space limit: memfd, shared memory, threads by the thousand."""
        import threading

        libc = ctypes.CDLL(None, use_errno=True)
        answers = [refused("memfd_create", lambda: os.memfd_create("hoard")),
                   libc_refused("shmget", libc.shmget(0, 2**30, 0o1600)),
                   refused("/dev/shm", lambda: open("/dev/shm/hoard", "wb").write(b"x" * 2**20))]
        started = []
        try:
            for _ in range(3000):
                thread = threading.Thread(target=threading.Event().wait, daemon=True)
                thread.start()
                started.append(thread)
        except RuntimeError as exc:
            answers.append(f"threads: {len(started)} started, then {exc}")
        else:
            raise RuntimeError("ESCAPED: 3000 threads started")
        return "; ".join(answers)

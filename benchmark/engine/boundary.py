"""The operating-system boundary around an untrusted strategy's process (`benchmark/engine/box.py` runs inside).

bubblewrap (Debian's `bubblewrap`, `bwrap`) starts the box in namespaces of its own (user, mount, process,
network with nothing in it, IPC, UTS, cgroup). Inside:

- The box runs as uid and gid 1000 of its user namespace, which is an unprivileged uid on the host:
  BOX_HOST_UID when the engine runs as root, the engine's own uid otherwise. bubblewrap alone maps only the uid
  that starts it (a box started by root would hold host uid 0), so the engine writes the namespace's map itself
  (`--userns-block-fd`) and `setpriv` takes the box to uid 1000 before Python starts. Every capability is dropped
  (bounding set included), no new privileges can be gained, and a seccomp filter (compiled by libseccomp) refuses
  new processes, mounts, namespaces, ptrace, keyrings, BPF, io_uring, sockets, shared memory, file locks and file
  watches; the box adds one more that refuses execve once its Python runs.
- Its file system is an allow-list, all of it read-only: /usr and the Python runtime with their site-packages
  hidden, the box's library folder (numpy and the strategy API only; torch and the engine's other modules are not
  there) and /dev/null. No /proc, /tmp, home folder, data, evaluation sets,
  targets, workloads, runs, checkpoints or other boxes, and no folder to write to, so that nothing of a box
  outlives it and nothing the box did can be found on the host after it.
- Limits the kernel enforces: the box's own rlimits (box.py: address space, CPU time, threads, open files), a
  single process (no fork), and nothing in the box that holds memory past the address-space limit (no memfd, no
  shared memory, no writable tmpfs). The engine counts the box's CPU time as the kernel reports it
  (sandbox.py).

Where bubblewrap is missing or cannot make its namespaces (macOS, a container without user namespaces), official
runs refuse to start and name the fix; REPLAYBENCH_UNSANDBOXED=1 runs the box without this layer, for development
only, and every such run is tagged `replaybench.sandbox = none` in MLflow.
"""

from __future__ import annotations

import errno
import functools
import glob
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmark.paths import REPO_ROOT

UNSANDBOXED_ENV = "REPLAYBENCH_UNSANDBOXED"
BOX_UID = BOX_GID = 1000  # inside the box's user namespace
BOX_HOST_UID = BOX_HOST_GID = 1_000_000_000  # what the box is on the host when the engine runs as root
BOX_LIB = Path("/box/lib")  # the box's whole library: numpy and the strategy API
API_FILES = ("__init__.py", "errors.py", "kernels.py", "rollout.py", "strategy.py", "engine/__init__.py",
             "engine/box.py")
# What the box keeps of the engine's environment (nothing else: it may hold tokens and store URIs): the locale,
# and the OpenBLAS settings some processors need for correct results.
BOX_ENVIRONMENT = ("LANG", "LC_ALL", "LC_CTYPE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# PYTHONHASHSEED: the box's rollout fingerprints (hashes of their fields) must survive a resume.
BOX_SETTINGS = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "PYTHONDONTWRITEBYTECODE": "1"}
START_SECONDS = 30.0  # bubblewrap's setup, up to the box's first word
OUTPUT_LINES = 200  # of the box's output forwarded to the engine's stderr, per box; the rest is dropped
MISSING = ("isolated runs need bubblewrap for their operating-system boundary: install it (Debian/Ubuntu: "
           "apt-get install bubblewrap); on a machine without it (macOS), set REPLAYBENCH_UNSANDBOXED=1 for "
           "development only: such runs are tagged replaybench.sandbox=none and are not official")

# The seccomp filter's refusals (EPERM unless stated). Some names are missing on some architectures or in older
# libseccomp: those are skipped.
REFUSED_SYSCALLS = (
    "fork", "vfork",  # clone is refused below unless it makes a thread; clone3 answers ENOSYS (glibc falls back)
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "unshare", "setns",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "pidfd_open", "pidfd_send_signal",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm",
    "lookup_dcookie", "name_to_handle_at", "open_by_handle_at", "personality", "vhangup", "uselib", "ustat",
    "sysfs", "_sysctl", "mbind", "set_mempolicy", "migrate_pages", "move_pages",
    "socket", "socketpair", "connect", "bind", "listen",  # the box's only socket is the pipe the engine made
    "memfd_create", "memfd_secret", "shmget", "shmat", "msgget", "semget", "mq_open",  # memory past RLIMIT_AS
    "flock", "inotify_init", "inotify_init1", "fanotify_init",  # channels to other boxes through shared files
)
CLONE_THREAD = 0x00010000
CLONE_NEW_NAMESPACES = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                        0x40000000)  # NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
# fcntl's locks and leases (F_GETLK, F_SETLK, F_SETLKW, F_OFD_*, F_SETLEASE, F_GETLEASE, F_NOTIFY)
FCNTL_LOCKS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)


class BoxError(RuntimeError):
    """The box could not be started; the message says why (bubblewrap's own words included)."""


@functools.cache
def boundary_problem() -> str | None:
    """Why no box can start here, the whole boundary included, and the fix; None when one can."""
    if shutil.which("bwrap") is None or shutil.which("setpriv") is None:
        return MISSING
    try:
        box = start_box("pass", keep_fds=[], sandboxed=True, forward=False)
        code = box.process.wait(timeout=30)
        reason = f"exit code {code}: {box.output.last_words()}" if code else None
    except (BoxError, OSError, subprocess.SubprocessError, ImportError) as exc:
        reason = str(exc)
    return reason and (f"bubblewrap is installed but cannot start a strategy's box here ({reason}): it needs user "
                       "namespaces (on Ubuntu 24.04: sysctl kernel.apparmor_restrict_unprivileged_userns=0) and "
                       f"libseccomp; or set {UNSANDBOXED_ENV}=1 for development only (runs tagged "
                       "replaybench.sandbox=none, not official)")


def bwrap_works() -> bool:
    return boundary_problem() is None


def sandbox_mode() -> str:
    """"bwrap" (the official boundary) or "none" (REPLAYBENCH_UNSANDBOXED=1, development only); otherwise
    a RuntimeError naming the fix."""
    if os.environ.get(UNSANDBOXED_ENV) == "1":
        return "none"
    problem = boundary_problem()
    if problem:
        raise RuntimeError(problem)
    return "bwrap"


@functools.cache
def seccomp_program() -> bytes:
    """The boundary's seccomp filter as BPF, compiled by libseccomp for this machine's architecture."""
    import pyseccomp as seccomp

    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED_SYSCALLS:
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):  # not a system call on this architecture
            pass
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # its flags are out of a filter's reach
    rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))  # a process, not a thread
    for flag in CLONE_NEW_NAMESPACES:
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    for command in FCNTL_LOCKS:
        rules.add_rule(refuse, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
    return _compiled(rules)


@functools.cache
def exec_program() -> bytes:
    """The filter the box adds once its Python runs (box.add_seccomp_filter): no execve, no execveat."""
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in ("execve", "execveat"):
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    return _compiled(rules)


def _compiled(rules) -> bytes:
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


# ---- the box's file system ------------------------------------------------------------------------
def python_roots() -> list[Path]:
    """The trees the box reads its Python from: /usr (the C library, libseccomp) and the runtime's prefix."""
    executable = Path(os.path.realpath(sys.executable))
    roots = [Path("/usr"), Path(sys.base_prefix).resolve()]
    if not any(executable.is_relative_to(r) for r in roots):
        roots.append(executable.parent)
    return [r for i, r in enumerate(roots) if not any(r.is_relative_to(o) for o in roots[:i])]


def hidden_paths(roots: list[Path]) -> list[Path]:
    """What lies inside the Python roots but is not the box's: installed packages (torch among them), and the
    checkout, the environment, the run store, the home and temp folders where a machine keeps them there."""
    from benchmark.tracking import RUNS_DIR

    patterns = ("lib*/python3*/site-packages", "lib*/python3*/dist-packages", "lib/python3/dist-packages",
                "local/lib*/python3*/site-packages", "local/lib*/python3*/dist-packages")
    found = [Path(p) for r in roots for pattern in patterns for p in glob.glob(str(r / pattern))]
    private = [REPO_ROOT, Path(sys.prefix), Path.home(), Path(tempfile.gettempdir()), RUNS_DIR]
    found += [p.resolve() for p in private if any(p.resolve().is_relative_to(r) for r in roots)]
    return [p for p in dict.fromkeys(found) if p.is_dir()]


def library_files() -> list[tuple[Path, Path]]:
    """(host path, box path) of the box's library: numpy and the strategy API."""
    import numpy

    package = Path(numpy.__file__).parent
    pairs = [(package, BOX_LIB / "numpy")]
    if package.with_suffix(".libs").is_dir():  # the wheel's own OpenBLAS, found through $ORIGIN/../numpy.libs
        pairs.append((package.with_suffix(".libs"), BOX_LIB / "numpy.libs"))
    pairs += [(REPO_ROOT / "benchmark" / name, BOX_LIB / "benchmark" / name) for name in API_FILES]
    return pairs


def _ancestors(paths: list[Path]) -> list[Path]:
    """The folders above `paths`, outermost first, that the box's root must hold before they are mounted (mode
    0755: bubblewrap makes them 0700, which the box's uid could not enter)."""
    above = [a for p in paths for a in reversed(p.parents) if a != Path("/")]
    return [a for a in dict.fromkeys(above) if a not in paths]


def bwrap_arguments() -> list[str]:
    """bubblewrap's options for the box's namespaces and file system (the descriptors are added at start)."""
    roots = python_roots()
    library = library_files()
    top = [Path(p) for p in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")]
    links = [(Path(os.readlink(p)), p) for p in top if p.is_symlink()]  # merged /usr: /lib -> usr/lib
    plain = [p for p in top if p.is_dir() and not p.is_symlink()]
    mounts = roots + plain + [dest for _, dest in library] + [Path("/dev/null")]
    args = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--as-pid-1",
            "--uid", str(BOX_UID), "--gid", str(BOX_GID), "--cap-drop", "ALL",
            # kept for setpriv alone, which drops them (and the bounding set) before Python starts
            "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP", "--chdir", "/"]
    for folder in _ancestors(mounts):
        if not any(folder.is_relative_to(r) for r in roots + plain):  # those are the host's own, read-only
            args += ["--perms", "0755", "--dir", str(folder)]
    for path in roots + plain:
        args += ["--ro-bind", str(path), str(path)]
    for target, link in links:
        args += ["--symlink", str(target), str(link)]
    for path in hidden_paths(roots):
        args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    for source, dest in library:
        args += ["--ro-bind", str(source), str(dest)]
    args += ["--dev-bind", "/dev/null", "/dev/null", "--remount-ro", "/"]
    return args


# ---- starting a box -------------------------------------------------------------------------------
class BoxOutput:
    """The box's stdout and stderr, read on a thread: printable text only (no control characters, so no
    terminal escapes), each line marked as the strategy's, OUTPUT_LINES of them forwarded to the engine's stderr;
    the last lines kept to explain a box that did not start."""

    def __init__(self, stream, forward: bool):
        self.stream, self.forward, self.tail, self.lines = stream, forward, [], 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for raw in iter(lambda: self.stream.readline(4096), b""):
            line = re.sub(r"[^\t\x20-\x7e\u00a0-\uffff]", "", raw.decode(errors="replace")).rstrip()
            self.tail = (self.tail + [line])[-5:]
            self.lines += 1
            if self.forward and self.lines <= OUTPUT_LINES:
                print(f"strategy> {line}", file=sys.stderr, flush=True)
            elif self.forward and self.lines == OUTPUT_LINES + 1:
                print(f"strategy> (more output than {OUTPUT_LINES} lines: the rest is not shown)", file=sys.stderr)

    def last_words(self) -> str:
        self.thread.join(timeout=1)
        return "; ".join(t for t in self.tail if t)


class BoxProcess:
    """A started box: bubblewrap's process, the box's Python as the host sees it (for its CPU time) and its
    output."""

    def __init__(self, process: subprocess.Popen, pid: int, output: BoxOutput):
        self.process, self.pid, self.output = process, pid, output

    def cpu_seconds(self) -> float:
        """CPU time of the box, all its threads, as the kernel counts it (the box cannot start a process)."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:  # gone: the engine reads the verdict from the pipe
            return 0.0
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime

    def kill(self) -> None:
        """The box's process itself, then bubblewrap's (which setpriv's change of uid made the box outlive)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def box_python_path(sandboxed: bool) -> list[str]:
    if sandboxed:
        return [str(BOX_LIB)]
    import numpy

    return [str(Path(numpy.__file__).parent.parent), str(REPO_ROOT)]


def start_box(code: str, keep_fds: list[int], sandboxed: bool, forward: bool = True) -> BoxProcess:
    """`python -S -s -B -c code` in a box (or, unsandboxed, as a plain process), `keep_fds` passed to it."""
    environment = {**{k: v for k, v in os.environ.items() if k in BOX_ENVIRONMENT}, **BOX_SETTINGS}
    python = os.path.realpath(sys.executable)
    argv = [python, "-S", "-s", "-B", "-c", f"import sys; sys.path[:0] = {box_python_path(sandboxed)!r}; {code}"]
    if not sandboxed:
        process = subprocess.Popen(argv, pass_fds=keep_fds, env=environment, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        return BoxProcess(process, process.pid, BoxOutput(process.stdout, forward))

    as_root = os.geteuid() == 0
    host_uid, host_gid = (BOX_HOST_UID, BOX_HOST_GID) if as_root else (os.getuid(), os.getgid())
    seccomp = os.memfd_create("replaybench-seccomp")
    os.write(seccomp, seccomp_program())
    os.lseek(seccomp, 0, os.SEEK_SET)
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    setpriv = [shutil.which("setpriv"), f"--reuid={BOX_UID}", f"--regid={BOX_GID}", "--keep-groups",
               "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    command = ["bwrap", *bwrap_arguments(), "--seccomp", str(seccomp), "--info-fd", str(info_write),
               "--userns-block-fd", str(block_read), *setpriv, *argv]
    try:
        process = subprocess.Popen(command, pass_fds=[*keep_fds, seccomp, info_write, block_read], env=environment,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, **({"extra_groups": []} if as_root else {}))
    finally:
        for fd in (seccomp, info_write, block_read):
            os.close(fd)
    output = BoxOutput(process.stdout, forward)
    try:
        pid = json.loads(_read_all(info_read, START_SECONDS) or "{}").get("child-pid")
        if pid is None:
            process.kill()
            process.wait()
            raise BoxError(f"bubblewrap could not start the box: {output.last_words() or 'no reason given'}")
        # The box's uid 1000 is an unprivileged uid of the host; uid 0 (root only) is bubblewrap's, for its setup:
        # the box's own process never holds it.
        _write(f"/proc/{pid}/setgroups", "deny")
        root_line = "0 0 1\n" if as_root else ""
        _write(f"/proc/{pid}/uid_map", f"{root_line}{BOX_UID} {host_uid} 1\n")
        _write(f"/proc/{pid}/gid_map", f"{root_line}{BOX_GID} {host_gid} 1\n")
        os.write(block_write, b"1")
    except OSError as exc:
        process.kill()
        process.wait()
        raise BoxError(f"could not set up the box's user namespace ({exc})") from exc
    finally:
        os.close(info_read)
        os.close(block_write)
    return BoxProcess(process, pid, output)


def _read_all(fd: int, timeout: float) -> str:
    chunks, deadline = [], time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)

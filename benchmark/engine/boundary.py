"""The operating-system boundary around an untrusted strategy's process (the audit hook in sandbox.py
is the second layer, inside it).

With bubblewrap (Debian's `bubblewrap`, `bwrap`), the box runs in its own namespaces: no network (a
network namespace with nothing in it), its own process tree, the host's file system read-only, and
hidden behind empty folders: /tmp, the home folders, the MLflow run store and checkpoints, and the
other entries' folders. Only the box's own temp folder is writable. Resource limits (address space,
file size, CPU time, processes, open files) are set before the strategy's module is imported.

Where bubblewrap is missing (macOS, a container without user namespaces), official runs refuse to
start and name the fix; REPLAYBENCH_UNSANDBOXED=1 runs the box without this layer, for development
only, and every such run is tagged `replaybench.sandbox = none` in MLflow.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmark.paths import REPO_ROOT, SUBMISSIONS_DIR

UNSANDBOXED_ENV = "REPLAYBENCH_UNSANDBOXED"
MAX_FILE_MB = 256  # the largest file the box may write in its folder
MAX_OPEN_FILES = 256
MISSING = ("isolated runs need bubblewrap for their operating-system boundary: install it (Debian/Ubuntu: "
           "apt-get install bubblewrap); on a machine without it (macOS), set REPLAYBENCH_UNSANDBOXED=1 for "
           "development only: such runs are tagged replaybench.sandbox=none and are not official")


@functools.cache
def bwrap_works() -> bool:
    """bwrap is installed and may create its namespaces here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def sandbox_mode() -> str:
    """"bwrap" (the official boundary) or "none" (REPLAYBENCH_UNSANDBOXED=1, development only); otherwise
    a RuntimeError naming the fix."""
    if bwrap_works():
        return "bwrap"
    if os.environ.get(UNSANDBOXED_ENV) == "1":
        return "none"
    raise RuntimeError(MISSING)


def hidden_paths() -> list[Path]:
    """What the box must not see: the run store and checkpoints, the home folders, other entries."""
    from benchmark.tracking import RUNS_DIR, tracking_uri

    hidden = [Path("/tmp"), Path("/root"), Path("/home"), Path.home(), RUNS_DIR, SUBMISSIONS_DIR]
    uri = tracking_uri()
    if uri.startswith("sqlite:///"):
        hidden.append(Path(uri[len("sqlite:///"):]).parent)
    return [p for p in dict.fromkeys(p.resolve() for p in hidden) if p.is_dir()]


def box_command(argv: list[str], box_dir: str, strategy_path: Path) -> list[str]:
    """`argv` (the box's Python) wrapped in bubblewrap, or as it is without the boundary."""
    if sandbox_mode() == "none":
        return argv
    needed = [Path(sys.base_prefix), Path(sys.prefix), REPO_ROOT / "benchmark", strategy_path.resolve().parent]
    command = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
               "--dev", "/dev", "--proc", "/proc"]
    for path in hidden_paths():
        command += ["--tmpfs", str(path)]
    for path in needed:  # what the box reads, put back where an empty folder hid it
        command += ["--ro-bind", str(path.resolve()), str(path.resolve())]
    command += ["--bind", box_dir, box_dir, "--chdir", box_dir]
    return command + argv


def set_limits(memory_mb: int, cpu_seconds: float) -> None:
    """In the box, before the strategy's module is imported."""
    import resource

    cpu = int(cpu_seconds) + 1
    for limit, value in ((resource.RLIMIT_AS, memory_mb * 1024 * 1024), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, MAX_FILE_MB * 1024 * 1024),
                         (resource.RLIMIT_NOFILE, MAX_OPEN_FILES)):
        resource.setrlimit(limit, (value, value))

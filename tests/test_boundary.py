"""The operating-system boundary around an isolated strategy, attacked as the hostile review did: every attack
switches the audit hook off first, so what holds is the kernel's (namespaces, seccomp, rlimits, a read-only
allow-listed file system). Each attack runs in a box of its own, straight through IsolatedStrategy (no training),
as the engine runs it here (as root in CI) and, in one more pass, with the engine an unprivileged user."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
from conftest import needs_bubblewrap

from benchmark.engine.boundary import sandbox_mode
from benchmark.engine.ledger import PendingGroup, build_rollouts, strategy_seed
from benchmark.engine.sandbox import IsolatedStrategy
from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT, TASKS_DIR
from benchmark.rl.generation import Completion
from benchmark.strategy import StrategyContext, StrategyFailure
from benchmark.workload import LimitsConfig

HOSTILE = Path(__file__).resolve().parent / "hostile"
UNPRIVILEGED_PASS = "REPLAYBENCH_TEST_ENGINE_UNPRIVILEGED"

pytestmark = needs_bubblewrap


def one_group() -> list:
    completion = Completion(prompt_ids=(1, 2), completion_ids=(3,), logprobs=(-0.1,), text="3")
    return build_rollouts(PendingGroup("p", [completion], [1.0], 0), 0, 0, 0, 0.0)


def ctx() -> StrategyContext:
    return StrategyContext(0, np.random.default_rng(0), MappingProxyType({}), 1)


def verdict_of_add(file: str, params: dict, limits: LimitsConfig | None = None, calls: int = 1,
                   rng_seed: int = 0) -> str:
    strategy = IsolatedStrategy(HOSTILE / file, params, rng_seed=rng_seed, limits=limits)
    try:
        for _ in range(calls):
            strategy.add(one_group(), ctx())
    except StrategyFailure as exc:
        return str(exc)
    finally:
        strategy.close()
    return "no verdict"


def host_targets(tmp: Path) -> dict:
    """What the attacks aim at on the host: canaries to create, secrets to read, torch to import."""
    import torch

    from benchmark.tracking import RUNS_DIR

    shipped = next((LEADERBOARD_DIR / "runs").glob("*/summary.json"))
    return {  # canaries: files that must not appear, where the review found the box could write
        "canaries": [str(tmp / "escaped.txt"), "/var/tmp/replaybench-canary", str(REPO_ROOT / "canary.txt"),
                     str(LEADERBOARD_DIR / "canary.txt"), str(Path(sys.prefix) / "canary.txt"),
                     str(REPO_ROOT / "benchmark" / "canary.py")],
        "secrets": [str(TASKS_DIR / "arith_tiny" / "data" / "eval_large.jsonl"), str(shipped),
                    str(TASKS_DIR / "arith_tiny" / "checkpoint"),
                    str(LEADERBOARD_DIR / "targets"), str(REPO_ROOT / "benchmark" / "rl" / "grpo.py"),
                    str(REPO_ROOT / "workloads" / "arith-tiny.yaml"), str(RUNS_DIR), tempfile.gettempdir(),
                    *[str(p) for p in Path.home().iterdir() if p.is_file()][:3], "/etc/shadow"],
        "torch": [str(Path(torch.__file__).parent.parent)],
    }


KERNEL_ATTACKS = {  # attack -> which of host_targets it aims at
    "remount": "canaries", "write_files": "canaries", "read_files": "secrets", "import_torch": "torch",
    "processes": None, "privileges": None, "network": "socket", "channels": None, "memory": None,
}


@pytest.mark.parametrize("attack", sorted(KERNEL_ATTACKS))
def test_the_kernel_refuses_what_the_audit_hook_no_longer_sees(attack, tmp_path):
    import socket

    targets = host_targets(tmp_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as host_socket:  # a host socket to send to
        host_socket.bind(str(tmp_path / "host.sock"))
        host_socket.settimeout(0.1)
        targets["socket"] = [str(tmp_path / "host.sock")]
        aims = targets[KERNEL_ATTACKS[attack]] if KERNEL_ATTACKS[attack] else []
        verdict = verdict_of_add("escapes.py", {"attack": attack, "targets": aims})
        with pytest.raises(TimeoutError):
            host_socket.recv(16)  # nothing came through
    assert verdict.startswith("raised: add() raised RuntimeError: contained: "), verdict
    assert not any(Path(p).exists() for p in targets["canaries"])


@pytest.mark.slow
def test_the_same_boundary_holds_when_the_engine_is_not_root():
    """The attacks again with the engine an unprivileged user (as CI runs strangers' validate), where this machine
    lets root start one."""
    if os.environ.get(UNPRIVILEGED_PASS) or os.geteuid() != 0:
        pytest.skip("this pass is the unprivileged one already")
    command = [str(REPO_ROOT / ".ci" / "unprivileged"), sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               str(Path(__file__)), "-k", "kernel_refuses or reading_of_replies"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, UNPRIVILEGED_PASS: "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"{len(KERNEL_ATTACKS) + 3} passed" in result.stdout, result.stdout[-2000:]


def test_the_box_is_an_unprivileged_uid_of_the_host():
    strategy = IsolatedStrategy(HOSTILE / "sleeps_under_the_limit.py", {}, rng_seed=0)
    try:
        status = Path(f"/proc/{strategy.box.pid}/status").read_text()
    finally:
        strategy.close()
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert fields["Uid"].split()[0] != "0" and fields["Gid"].split()[0] != "0"
    if os.geteuid() == 0:
        assert fields["Uid"].split()[0] == "1000000000"
    assert {fields[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0000000000000000"}
    assert fields["NoNewPrivs"].strip() == "1" and fields["Seccomp"].strip() == "2"


@pytest.mark.parametrize("how, verdict", [
    ("stalls", "timeout: add() took longer than 1 s"),
    ("nests", "garbage: add() sent a reply nested too deep for the engine to read"),
    ("oversize", "garbage: add() sent a reply over the 1 MB limit"),
])
def test_the_engines_reading_of_replies_cannot_be_stalled_or_exhausted(how, verdict):
    assert verdict_of_add("replies_badly.py", {"how": how}, LimitsConfig(call_seconds=1)).startswith(verdict)


@pytest.mark.parametrize("how, limits, verdict", [
    # the spinning thread's CPU between calls is counted at the next call, against one call's limit
    ("between", LimitsConfig(call_seconds=0.5, floor_seconds=100), "timeout: add() used"),
    # three threads spinning inside each call: more CPU than the run's allowance, in a fraction of the wall time
    ("calls", LimitsConfig(call_seconds=2, floor_seconds=0.5), "timeout: the strategy used"),
])
def test_every_thread_of_the_boxs_cpu_time_is_counted(how, limits, verdict):
    import time

    strategy = IsolatedStrategy(HOSTILE / "burns_cpu.py", {"how": how, "seconds": 0.1}, rng_seed=0, limits=limits)
    try:
        with pytest.raises(StrategyFailure) as failure:
            for _ in range(20):
                strategy.add(one_group(), ctx())
                time.sleep(1.5 if how == "between" else 0.1)  # the engine's own work between calls
    finally:
        strategy.close()
    assert str(failure.value).startswith(verdict)


def test_a_submitted_runs_strategy_seed_cannot_be_inverted():
    # public derivation (baselines: reproducible by anyone): the box finds the run's seed
    assert verdict_of_add("inverts_its_seed.py", {}, rng_seed=strategy_seed(3)).startswith(
        "raised: add() raised RuntimeError: ESCAPED: the run's seed is 3")
    # keyed with the run's secret (submit): it cannot
    assert verdict_of_add("inverts_its_seed.py", {}, rng_seed=strategy_seed(3, "a secret")).startswith(
        "raised: add() raised RuntimeError: contained")


def test_the_boxs_output_reaches_the_console_marked_and_without_control_characters(capfd):
    assert verdict_of_add("writes_to_the_console.py", {}) == "no verdict"
    import time

    time.sleep(0.2)  # the reader thread forwards it
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "finished" in line.lower()]
    assert lines and all(line.startswith("strategy> ") for line in lines)
    assert not any(c in err for c in "\x1b\x07\r")


def test_the_sandbox_mode_is_the_boundary():
    assert sandbox_mode() == "bwrap"

"""User errors end with one clear line and exit code 2, never a traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def replaybench(*args):
    return subprocess.run([sys.executable, "-m", "benchmark.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, message", [
    (["run", "--strategy", "baselines/nope.py"], "strategy file not found"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--workload", "nope"], "unknown workload 'nope'"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--workers", "6"], "must equal pipeline.devices"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--set", "bufsize=3"], "does not take bufsize"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--budget", "5"], "before the first trainer step"),
    (["run", "--strategy", "baselines/fifo_uniform.py", "--budget", "0"], "raise --budget"),
    (["run", "--strategy", "tests/conftest.py"], "exactly one subclass"),
])
def test_user_errors_are_one_clear_message(args, message, isolated_runs):
    result = replaybench(*args)
    assert result.returncode == 2
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_workloads_lists_and_checks():
    result = replaybench("workloads", "--check")
    assert result.returncode == 0 and "arith-tiny" in result.stdout

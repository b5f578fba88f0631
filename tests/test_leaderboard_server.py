"""The scorer and `leaderboard build` against a real `mlflow server` (SQLite backend, one worker, artifacts
served through it) on 127.0.0.1: the same results as against the embedded SQLite store, and a server that
stops mid-build gives a clear error (exit code 2) and leaves the previous leaderboard files intact.

One server for the whole module (~8 s to start); it is always terminated, and the last test kills it."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import WORKLOAD, make_run

from benchmark.cli import main
from benchmark.leaderboard import store

pytestmark = pytest.mark.usefixtures("workloads_as_v2")  # made-up runs of arith-tiny version 2

FILES = ("results.json", "LEADERBOARD.md", "index.html")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> None:
    """Stop the server and its worker (one process group); SIGKILL if SIGTERM takes too long."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    mlflow = Path(sys.executable).with_name("mlflow")
    if not mlflow.exists():
        pytest.skip(f"{mlflow} is missing: install the package (make setup)")
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{root / 'db'}",
         "--default-artifact-root", "mlflow-artifacts:/", "--artifacts-destination", str(root / "art"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    try:
        yield {"url": f"http://127.0.0.1:{port}", "proc": proc, "log": root / "server.log"}
    finally:
        stop(proc)
        log.close()


def wait_until_up(server: dict, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(server["url"] + "/health", timeout=2):
                return
        except OSError:
            assert server["proc"].poll() is None, f"mlflow server exited: {server['log'].read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"mlflow server did not come up in {timeout} s"
            time.sleep(0.3)


def populate(ids: dict) -> None:
    """The same synthetic runs, in whatever store MLFLOW_TRACKING_URI names."""
    from benchmark.tracking import client, experiment_id

    c = client()
    exp = experiment_id(c, WORKLOAD)
    for seed in range(4):
        ramp = [0.2 + 0.03 * i + 0.01 * seed for i in range(12)]
        ids["on_policy", seed] = make_run(c, exp, "on_policy", seed, ramp, 6, 2, entropy=0.3 + 0.01 * seed,
                                          offpolicy_mean=1.0 + 0.1 * seed)
        ids["on_policy", 10 + seed] = make_run(c, exp, "on_policy", 10 + seed, ramp, 6, 2)  # held out: the target
        ids["fifo_uniform", seed] = make_run(c, exp, "fifo_uniform", seed, ramp[:8] + [0.6], entropy=0.2,
                                             replay_ratio=3.1, offpolicy_mean=8.0 + seed)
    for seed in range(2):
        ids["slowpoke", seed] = make_run(c, exp, "slowpoke", seed, [0.2, 0.25, 0.3])
    ids["failed"] = make_run(c, exp, "crashy", 0, status="failed: StrategyError: sample() returned 3 rollouts")
    ids["override"] = make_run(c, exp, "fifo_uniform", 9, [0.9], overrides={"budget": 600_000})


@pytest.fixture(scope="module")
def boards(server, tmp_path_factory):
    """The same runs in the embedded store and in the server; each frozen and built with the CLI. The
    embedded store is filled while the server is still starting."""
    import benchmark.runner
    import benchmark.tracking

    root = tmp_path_factory.mktemp("boards")
    out = {}
    for name, uri in (("embedded", f"sqlite:///{root / 'runs' / 'mlflow.db'}"), ("server", server["url"])):
        if name == "server":
            wait_until_up(server)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(benchmark.tracking, "RUNS_DIR", root / "runs")
            mp.setattr(benchmark.runner, "RUNS_DIR", root / "runs")
            mp.setenv("MLFLOW_TRACKING_URI", uri)
            mp.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
            ids = {}
            populate(ids)
            targets, board = root / name / "targets", root / name / "board"
            assert main(["leaderboard", "freeze-target", "--workload", WORKLOAD, "--targets", str(targets)]) == 0
            assert main(["leaderboard", "build", "--targets", str(targets), "--out", str(board)]) == 0
            out[name] = {"ids": ids, "targets": targets, "board": board, "uri": uri}
    return out


def normalised(text: str, ids: dict, uri: str) -> str:
    """Run ids -> what the run is, the store's URI and every timestamp -> placeholders."""
    names = {rid: f"<run {key}>" for key, rid in ids.items()}
    text = re.sub(r"\b[0-9a-f]{32}\b", lambda m: names.get(m.group(0), m.group(0)), text)
    text = text.replace(uri, "<tracking uri>")
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "<time>", text)


@pytest.mark.slow
def test_server_gives_the_same_leaderboard_as_the_embedded_store(boards):
    a, b = boards["embedded"], boards["server"]
    assert set(a["ids"]) == set(b["ids"]) and not set(a["ids"].values()) & set(b["ids"].values())
    target_a = json.loads((a["targets"] / f"{WORKLOAD}.json").read_text())
    target_b = json.loads((b["targets"] / f"{WORKLOAD}.json").read_text())
    assert target_b["target_accuracy"] == target_a["target_accuracy"]
    assert target_b["reference_compute_to_target"] == target_a["reference_compute_to_target"] == 11 * 120_000

    results = json.loads((b["board"] / "results.json").read_text())
    assert results["mlflow"]["tracking_uri"] == b["uri"]
    assert [e["strategy"] for e in results["entries"]] == ["fifo_uniform", "on_policy", "slowpoke"]
    assert len(results["excluded_runs"]) == 2 + 4  # a failed and a non-compliant run; the 4 held-out reference runs
    # the same numbers, run for run, in all three files: only run ids, the URI and timestamps differ
    for name in FILES:
        assert normalised((b["board"] / name).read_text(), b["ids"], b["uri"]) == normalised(
            (a["board"] / name).read_text(), a["ids"], a["uri"]), name


@pytest.mark.slow
def test_server_stopping_mid_build_leaves_the_files_intact(boards, server, tmp_path, monkeypatch, capsys):
    b = boards["server"]
    out = tmp_path / "board"
    shutil.copytree(b["board"], out)
    before = {name: (out / name).read_bytes() for name in FILES}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server["url"])
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    # the server dies once the runs are listed, while their summaries are being downloaded
    read_summary, lock = store.read_summary, threading.Lock()

    def dying(client, run):
        with lock:
            stop(server["proc"], signal.SIGKILL)
        return read_summary(client, run)

    monkeypatch.setattr(store, "read_summary", dying)
    start = time.monotonic()
    assert main(["leaderboard", "build", "--targets", str(b["targets"]), "--out", str(out)]) == 2
    assert time.monotonic() - start < 30  # no minutes of HTTP retries
    err = " ".join(capsys.readouterr().err.split())
    assert server["url"] in err and "start the tracking server" in err and "Connection refused" in err
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no temp files left behind

    # a server that is already down: the same clear error, from the build and from the terminal table
    monkeypatch.setattr(store, "read_summary", read_summary)
    start = time.monotonic()
    assert main(["leaderboard", "build", "--targets", str(b["targets"]), "--out", str(out)]) == 2
    assert main(["leaderboard", "--targets", str(b["targets"])]) == 2
    assert time.monotonic() - start < 30
    err = " ".join(capsys.readouterr().err.split())
    assert err.count(f"cannot read the MLflow tracking store {server['url']}") == 2
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # the fail-fast settings do not leak

"""`replaybench doctor`: one line per component, optional parts never fail the CPU tier, no tracebacks."""

import json
import os
import stat
from pathlib import Path

import pytest

from benchmark.cli import doctor, main
from benchmark.grading import lean


@pytest.fixture
def no_lean(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty-bin'}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "no-elan"))
    monkeypatch.delenv(lean.PROJECT_ENV, raising=False)


def lines_by_component(text: str) -> dict[str, str]:
    rows = [line for line in text.splitlines() if not line.startswith("CPU tier")]
    return {line.split()[1]: line for line in rows}


def test_doctor_on_a_lean_less_machine(no_lean, capsys):
    assert main(["doctor"]) == 0  # the CPU tier is usable without the optional parts
    out = capsys.readouterr().out
    rows = lines_by_component(out)
    assert list(rows) == ["python/torch", "transformers", "math-verify", "lm-eval", "mlflow", "checkpoint",
                          "sandbox", "browser", "lean", "vllm", "ray", "gpu"]
    for name in ("python/torch", "transformers", "math-verify", "lm-eval", "mlflow", "checkpoint"):
        assert rows[name].startswith("ok ")
    assert rows["lean"].startswith("optional ") and "REPLAYBENCH_LEAN_PROJECT not set" in rows["lean"]
    assert "lake exe cache get" in rows["lean"] and "elan" in rows["lean"]
    last = out.splitlines()[-1]  # the sandbox is missing too on a machine without bubblewrap
    assert last.startswith("CPU tier: usable; optional parts missing: ") and "lean" in last


def lean_install(tmp_path, monkeypatch, pinned="leanprover/lean4:v4.24.0", lake_says="Lake version 5.0.0 (Lean "
                 "version 4.24.0)", mathlib_rev="f897ebcf72cd16f89ab4577d0c826cd14afaafc7"):
    bin_dir, project = tmp_path / "bin", tmp_path / "project"
    bin_dir.mkdir()
    for tool, version in (("lake", lake_says), ("lean", "Lean (version 4.24.0)")):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho '{version}'\n" if version else "#!/bin/sh\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (project / ".lake" / "packages" / "mathlib").mkdir(parents=True)
    (project / "lakefile.lean").write_text("")
    (project / "lean-toolchain").write_text(pinned + "\n")
    (project / "lake-manifest.json").write_text(json.dumps({"packages": [{"name": "mathlib", "rev": mathlib_rev}]}))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(lean.PROJECT_ENV, str(project))


@pytest.mark.parametrize("setting, problem", [
    ({"pinned": "leanprover/lean4:v4.9.0"}, "is pinned to leanprover/lean4:v4.9.0; minif2f expects "
                                            "leanprover/lean4:v4.24.0"),
    ({"lake_says": ""}, "--version reports no version"),
    ({"mathlib_rev": "0123456789ab" * 3 + "0123"}, "its Mathlib is rev 0123456789ab; minif2f expects f897ebcf72cd"),
])
def test_doctor_flags_a_lean_install_other_than_the_tasks(setting, problem, tmp_path, monkeypatch, capsys):
    lean_install(tmp_path, monkeypatch, **setting)
    doctor.run_doctor()
    row = " ".join(lines_by_component(capsys.readouterr().out)["lean"].split())
    assert not row.startswith("ok ") and problem in row


def test_doctor_sees_a_lean_toolchain_and_project(tmp_path, monkeypatch, capsys):
    lean_install(tmp_path, monkeypatch)
    assert doctor.run_doctor() == 0
    row = lines_by_component(capsys.readouterr().out)["lean"]
    assert row.startswith("ok ") and "Lake version 5.0.0" in row and "Lean (version 4.24.0)" in row
    assert "leanprover/lean4:v4.24.0" in row and "fix:" not in row
    assert "no Lean REPL built" in " ".join(row.split())  # says which way proofs will be checked
    (tmp_path / "project" / ".lake" / "packages" / "REPL" / ".lake" / "build" / "bin").mkdir(parents=True)
    (tmp_path / "project" / ".lake" / "packages" / "REPL" / ".lake" / "build" / "bin" / "repl").write_text("")
    doctor.run_doctor()
    assert "checked by the Lean REPL" in " ".join(lines_by_component(capsys.readouterr().out)["lean"].split())


def test_doctor_fails_when_a_required_part_is_missing(no_lean, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "REPO_ROOT", tmp_path)  # no start checkpoint there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens there
    assert doctor.run_doctor() == 1
    out = capsys.readouterr().out
    rows = lines_by_component(out)
    assert rows["checkpoint"].startswith("MISSING ") and "replaybench warmstart" in rows["checkpoint"]
    assert rows["mlflow"].startswith("MISSING ") and "unreachable" in rows["mlflow"]
    assert "NOT usable (mlflow, checkpoint)" in out


def test_a_check_that_raises_is_a_line_not_a_traceback(no_lean, monkeypatch, capsys):
    def check_broken():
        raise ImportError("no module named torch")

    monkeypatch.setattr(doctor, "REQUIRED", [check_broken, *doctor.REQUIRED[1:]])
    assert doctor.run_doctor() == 1
    row = lines_by_component(capsys.readouterr().out)["broken"]
    assert row.startswith("MISSING ") and "ImportError: no module named torch" in row


def test_doctor_names_the_browser_of_the_page_tests_and_its_install(tmp_path, monkeypatch, capsys):
    """Chromium and chromedriver, found on PATH as tests/test_leaderboard_page.py finds them: an optional line
    with the Debian packages to install, never a failed CPU tier."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert doctor.run_doctor() == 0
    row = lines_by_component(capsys.readouterr().out)["browser"]
    assert row.startswith("optional ") and "no chromium, chromedriver" in row
    assert row.endswith("fix: apt-get install -y chromium chromium-driver")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, says in (("chromium", "Chromium 150.0.1 built on Debian"),
                       ("chromedriver", "ChromeDriver 150.0.1 (abc)")):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho '{says}'\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    finding = doctor.check_browser()
    assert finding.ok and finding.detail.startswith("Chromium 150.0.1, ChromeDriver 150.0.1, selenium ")


def test_mlflow_store_is_read_without_being_created(tmp_path, monkeypatch):
    store = tmp_path / "runs" / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    finding = doctor.check_mlflow()
    assert finding.ok and "created by the first run" in finding.detail
    assert not Path(store).exists() and not store.parent.exists()

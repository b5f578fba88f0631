"""`replaybench doctor`: what this machine has, one line per component, and how to fix what is missing.

Required for the CPU tier: Python with torch, transformers, math-verify, lm-eval, a reachable MLflow store
and the tiny start checkpoint. Optional: the strategy's box (bubblewrap: validate, submit, --isolate), headless
Chromium + chromedriver (the leaderboard page's browser tests), Lean + Mathlib (miniF2F), vLLM, Ray, a GPU. The
exit status is 0 when every required component is ok, whatever the optional ones say.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import socket
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from benchmark.paths import REPO_ROOT

PROBE_TIMEOUT = 3.0  # seconds to reach a tracking server
VERSION_TIMEOUT = 30.0  # seconds for `lean --version` / `lake --version` (elan may first resolve a toolchain)


@dataclass
class Finding:
    component: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False

    def line(self) -> str:
        status = "ok" if self.ok else ("optional" if self.optional else "MISSING")
        text = f"{status:<9}{self.component:<15}{self.detail}"
        return text + (f"; fix: {self.fix}" if self.fix and not self.ok else "")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_torch() -> Finding:
    import torch

    from benchmark.cli.parallel import default_jobs

    threads = os.environ.get("REPLAYBENCH_THREADS", "1")
    return Finding("python/torch", True, f"Python {sys.version.split()[0]}, torch {torch.__version__}, "
                   f"runs use {threads} thread(s) (REPLAYBENCH_THREADS) each, {default_jobs()} at once by default "
                   f"(the CPUs this process may use; the machine has {os.cpu_count()})")


def check_transformers() -> Finding:
    import transformers

    return Finding("transformers", True, transformers.__version__)


def check_math_verify() -> Finding:
    from math_verify import parse, verify

    agrees = verify(parse("$\\frac{1}{2}$"), parse("$0.5$"))
    return Finding("math-verify", bool(agrees), f"{_version('math-verify')}, 1/2 == 0.5: {bool(agrees)}",
                   "reinstall: pip install -e '.[dev]'")


def check_lm_eval() -> Finding:
    from lm_eval.config.task import TaskConfig  # noqa: F401  (what the task loader relies on)

    return Finding("lm-eval", True, _version("lm_eval") or "installed")


def check_mlflow() -> Finding:
    from benchmark.tracking import store_problem, tracking_uri

    uri = tracking_uri()
    fix = "set MLFLOW_TRACKING_URI to a reachable store, or unset it for the default runs/mlflow.db"
    if store_problem(uri):
        return Finding("mlflow", False, f"{_version('mlflow')}, store {uri}: a folder store", store_problem(uri))
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        if path.is_file():
            with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as db:
                count = db.execute("select count(*) from runs").fetchone()[0]
            return Finding("mlflow", True, f"{_version('mlflow')}, store {uri} ({count} run{'s' * (count != 1)})")
        parent = next(p for p in [path.parent, *path.parents] if p.exists())
        writable = os.access(parent, os.W_OK)
        return Finding("mlflow", writable, f"{_version('mlflow')}, store {uri} (created by the first run"
                       + ("" if writable else f"; {parent} is not writable") + ")", fix)
    url = urlparse(uri)
    if url.scheme in ("http", "https"):
        try:
            socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                     timeout=PROBE_TIMEOUT).close()
        except OSError as exc:
            return Finding("mlflow", False, f"tracking server {uri} unreachable ({exc})", fix)
        return Finding("mlflow", True, f"{_version('mlflow')}, tracking server {uri} reachable")
    return Finding("mlflow", True, f"{_version('mlflow')}, store {uri} (not probed)")


def check_checkpoint() -> Finding:
    folder = REPO_ROOT / "tasks" / "arith_tiny" / "checkpoint"
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (folder / f).is_file()]
    if missing:
        return Finding("checkpoint", False, f"arith-tiny start checkpoint lacks {', '.join(missing)}",
                       "replaybench warmstart --workload arith-tiny")
    return Finding("checkpoint", True, f"arith-tiny start checkpoint in {folder.relative_to(REPO_ROOT)}")


def _run_version(command: list[str], cwd: Path | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=VERSION_TIMEOUT, check=False)
    said = (result.stdout.strip() or result.stderr.strip()).splitlines()
    return said[0] if result.returncode == 0 and said else ""


def expected_lean_versions() -> tuple[str, str | None]:
    """The minif2f task's Lean toolchain and Mathlib revision (its metadata)."""
    import re

    from benchmark.grading.tasks import load_task

    meta = load_task("minif2f").config.get("metadata") or {}
    rev = re.search(r"\brev ([0-9a-f]{40})", str(meta.get("mathlib", "")))
    return str(meta.get("lean_version")), rev.group(1) if rev else None


def _manifest_rev(manifest: Path, package: str) -> str | None:
    try:
        packages = json.loads(manifest.read_text()).get("packages", [])
    except (OSError, ValueError, AttributeError):
        return None
    return next((p.get("rev") for p in packages if isinstance(p, dict) and p.get("name") == package), None)


def check_lean() -> Finding:
    from benchmark.grading import lean

    lake = lean.find_lake()
    project = os.environ.get(lean.PROJECT_ENV)
    expected_lean, expected_mathlib_rev = expected_lean_versions()
    parts, missing = [], []
    if lake:
        version = _run_version([lake, "--version"])
        if version:
            parts.append(version)
        else:
            missing.append(f"{lake} --version reports no version (a broken toolchain)")
        lean_exe = Path(lake).with_name("lean")
        if lean_exe.is_file():
            parts.append(_run_version([str(lean_exe), "--version"]) or "lean (no version)")
    else:
        missing.append("no lake/lean on PATH or in ~/.elan/bin")
    if project:
        folder = Path(project).expanduser()
        problems = lean.project_problems(folder)
        missing += problems
        if not problems:
            toolchain = folder / "lean-toolchain"
            pinned = toolchain.read_text().strip() if toolchain.is_file() else "no lean-toolchain"
            if pinned != expected_lean:
                missing.append(f"project {project} is pinned to {pinned}; minif2f expects {expected_lean}")
            else:
                parts.append(f"project {project} with Mathlib, {pinned}")
            mathlib_rev = _manifest_rev(folder / "lake-manifest.json", "mathlib")
            if expected_mathlib_rev and mathlib_rev and mathlib_rev != expected_mathlib_rev:
                missing.append(f"its Mathlib is rev {mathlib_rev[:12]}; minif2f expects {expected_mathlib_rev[:12]}")
            repl = lean.repl_folder(folder.resolve())
            parts.append(f"proofs checked by the Lean REPL in {repl} (LeanInteract)" if repl else
                         "no Lean REPL built: proofs checked with `lake env lean`, one process per proof "
                         "(setup_lean.sh builds the REPL)")
    else:
        missing.append(f"{lean.PROJECT_ENV} not set")
    detail = "; ".join(parts + missing) + " (optional: needed for minif2f only)"
    return Finding("lean", not missing, detail, lean.INSTALL_HINT, optional=True)


def _optional_package(component: str, module: str, distribution: str, extra: str) -> Finding:
    if importlib.util.find_spec(module) is None:
        return Finding(component, False, f"not installed ({extra} extra)", f"pip install -e '.[{extra}]'",
                       optional=True)
    return Finding(component, True, f"{_version(distribution) or 'installed'} (optional, {extra} extra)", optional=True)


def check_gpu() -> Finding:
    import torch

    if not torch.cuda.is_available():
        return Finding("gpu", False, f"no CUDA device visible to torch {torch.__version__} (the CPU tier needs none)",
                       "on an NVIDIA machine install a CUDA build of torch (docs/gpus.md, Installing for GPUs)",
                       optional=True)
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return Finding("gpu", True, f"{len(names)} x {', '.join(sorted(set(names)))} (optional)", optional=True)


def check_sandbox() -> Finding:
    """The strategy's box (docs/sandbox.md): `validate`, `submit` and `--isolate` need it; baselines do not."""
    from benchmark.engine.boundary import boundary_problem

    problem = boundary_problem()
    if problem:
        return Finding("sandbox", False, "no strategy's box can start here (validate, submit and --isolate need one)",
                       problem, optional=True)
    return Finding("sandbox", True, "bubblewrap starts a strategy's box here (for validate, submit and --isolate)",
                   optional=True)


BROWSER_INSTALL = "apt-get install -y chromium chromium-driver"


def check_browser() -> Finding:
    """The leaderboard page's browser tests (tests/test_leaderboard_page.py) drive headless Chromium through
    chromedriver and selenium, found as those tests find them; without them the tests skip (CI fails them)."""
    import shutil

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    selenium = _version("selenium")
    missing = [name for name, found in (("chromium", chromium), ("chromedriver", driver), ("selenium", selenium))
               if not found]
    if missing:
        fixes = ([BROWSER_INSTALL] if chromium is None or driver is None else []) + (
            ["pip install -e '.[dev]' (selenium)"] if selenium is None else [])
        return Finding("browser", False, f"no {', '.join(missing)}: the leaderboard page's browser tests skip",
                       "; ".join(fixes), optional=True)
    # the first words of each: "Chromium 150.0.7871.100", "ChromeDriver 150.0.7871.100"
    versions = [_run_version([chromium, "--version"]).split(" built on")[0] or "chromium (no version)",
                _run_version([driver, "--version"]).split(" (")[0] or "chromedriver (no version)"]
    return Finding("browser", True, f"{', '.join(versions)}, selenium {selenium} (for the leaderboard page's "
                   "browser tests)", optional=True)


REQUIRED = [check_torch, check_transformers, check_math_verify, check_lm_eval, check_mlflow, check_checkpoint]
OPTIONAL = [
    check_sandbox,
    check_browser,
    check_lean,
    lambda: _optional_package("vllm", "vllm", "vllm", "gpu"),
    lambda: _optional_package("ray", "ray", "ray", "distributed"),
    check_gpu,
]


def diagnose() -> list[Finding]:
    """Every component's finding; a check that raises is a finding too, never a traceback."""
    findings = []
    for required, checks in ((True, REQUIRED), (False, OPTIONAL)):
        for check in checks:
            try:
                findings.append(check())
            except Exception as exc:  # a broken install is what doctor is for
                name = getattr(check, "__name__", "check").removeprefix("check_")
                findings.append(Finding(name, False, f"check failed: {type(exc).__name__}: {exc}",
                                        "reinstall: make setup", optional=not required))
    return findings


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("doctor",
                              help="check what this machine has: Python stack, MLflow, sandbox, browser, Lean, GPU "
                                   "(one line each)")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args) -> int:
    return run_doctor()


def run_doctor() -> int:
    findings = diagnose()
    for finding in findings:
        print(finding.line())
    broken = [f.component for f in findings if not f.ok and not f.optional]
    print(f"CPU tier: {'usable' if not broken else 'NOT usable (' + ', '.join(broken) + ')'}; "
          f"optional parts missing: {', '.join(f.component for f in findings if not f.ok and f.optional) or 'none'}")
    return 0 if not broken else 1

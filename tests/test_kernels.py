"""The CPU kernels runs compute with (benchmark/kernels.py): pinned unless told otherwise, recorded on every run."""

import json
import os
import subprocess
import sys

import pytest
from conftest import small_workload

from benchmark import kernels
from benchmark.paths import REPO_ROOT

PINS = ("REPLAYBENCH_KERNELS", "MKL_CBWR", "ATEN_CPU_CAPABILITY")
PROBE = ("import json, benchmark, torch; from benchmark import kernels; torch.ones(4, 4) @ torch.ones(4, 4); "
         "print(json.dumps(kernels.in_force()))")
x86_with_avx2 = pytest.mark.skipif(not {"avx2", "fma"} <= kernels._cpu_flags(), reason="needs an x86 CPU with AVX2")


def _probe(**env) -> tuple[dict, str]:
    clean = {k: v for k, v in os.environ.items() if k not in PINS}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**clean, "MKL_VERBOSE": "1", **env}, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout


@x86_with_avx2
def test_import_benchmark_pins_the_kernels_before_torch_computes_unless_told_native():
    portable, mkl_log = _probe()
    assert (portable["kernels"], portable["aten_capability"], portable["mkl_cbwr"]) == ("portable", "AVX2",
                                                                                         "COMPATIBLE")
    assert "CNR:COMPATIBLE" in mkl_log  # MKL itself took the branch, not only the environment
    native, mkl_log = _probe(REPLAYBENCH_KERNELS="native")
    assert native["kernels"] == "native" and native["mkl_cbwr"] == "off" and "CNR:OFF" in mkl_log
    by_hand, _ = _probe(MKL_CBWR="AVX2")  # a setting made by hand is kept, and the run is not called portable
    assert (by_hand["mkl_cbwr"], by_hand["kernels"]) == ("AVX2", "native")


def test_a_child_asked_for_native_kernels_loses_only_the_pins_this_process_set(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", kernels.PORTABLE_MKL)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    monkeypatch.setattr(kernels, "_PINNED", {"MKL_CBWR": kernels.PORTABLE_MKL})
    native = kernels.environment("native")
    assert "MKL_CBWR" not in native and native["ATEN_CPU_CAPABILITY"] == "avx512"
    assert native["REPLAYBENCH_KERNELS"] == "native"
    assert kernels.environment("portable")["MKL_CBWR"] == kernels.PORTABLE_MKL


def test_every_run_records_its_kernels_and_cpu(tiny_checkpoint, isolated_runs):
    from benchmark.leaderboard.store import finished_runs
    from benchmark.runner import RunSpec, run
    from benchmark.tracking import client

    summary = run(RunSpec(small_workload(tiny_checkpoint, budget=20_000, **{"eval.every": 10_000}),
                          REPO_ROOT / "baselines" / "on_policy.py", {}, seed=0))
    recorded = client().get_run(summary["mlflow_run_id"]).data
    here = kernels.in_force()
    assert recorded.params["kernels"] == here["kernels"] == "native"  # the suite runs native (conftest)
    assert recorded.tags["replaybench.cpu"] == kernels.cpu_model() != ""
    assert recorded.tags["replaybench.cpu_id"] == kernels.cpu_id()
    assert recorded.tags["replaybench.aten_capability"] == here["aten_capability"]
    assert [r.kernels for r in finished_runs("arith-tiny")] == ["native"]


def test_the_cpu_is_named_by_vendor_family_model_and_stepping(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n"
                    "model name\t: AMD EPYC\nstepping\t: 0\nflags\t\t: fpu avx2 fma\n\n"
                    "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: other\n")
    real_path = kernels.Path
    monkeypatch.setattr(kernels, "Path", lambda p: info if p == "/proc/cpuinfo" else real_path(p))
    monkeypatch.setattr(kernels, "_cpuinfo", kernels._cpuinfo.__wrapped__)  # uncached: the cache keeps the real CPU
    assert kernels.cpu_id() == "AuthenticAMD family 23 model 49 stepping 0"
    assert kernels.cpu_model() == "AMD EPYC" and kernels._cpu_flags() == {"fpu", "avx2", "fma"}
    monkeypatch.setattr(kernels, "Path", lambda p: tmp_path / "no such file")
    assert kernels.cpu_id() == "" and kernels._cpu_flags() == set()


def test_make_baselines_makes_the_published_reference_again_with_its_campaigns_kernels():
    """The quick reproduction makes the published board's reference runs again as their campaign made them, with its
    kernels: the ones that give the same bits on any x86-64 CPU with AVX2."""
    import re

    from benchmark.campaign import load_campaign
    from benchmark.leaderboard.published import RUNS_FOLDER
    from benchmark.paths import LEADERBOARD_DIR

    results = json.loads((LEADERBOARD_DIR / "results.json").read_text())
    makefile = (REPO_ROOT / "Makefile").read_text()
    campaign_file = re.search(r"^CAMPAIGN \?= (\S+)$", makefile, re.M).group(1)
    assert results["campaign"]["file"] == campaign_file
    campaign = load_campaign(REPO_ROOT / campaign_file)
    reference = next(e for e in results["entries"] if e["reference"])
    made_with = {json.loads((LEADERBOARD_DIR / RUNS_FOLDER / run_id / "run.json").read_text())["params"]["kernels"]
                 for run_id in reference["workloads"]["arith-tiny"]["run_ids"]}
    assert made_with == {campaign.kernels}
    recipe = makefile[makefile.index("\nbaselines: setup"):makefile.index("\nboard: setup")]
    assert "$(BIN)/replaybench campaign reproduce $(CAMPAIGN) --workloads arith-tiny" in recipe
    assert "$(BIN)/replaybench leaderboard build --campaign $(CAMPAIGN)" in recipe
    assert "REPLAYBENCH_KERNELS" not in recipe  # reproduce refuses kernels other than the campaign's


def test_baselines_say_which_runs_reproduce_the_published_ones_digit_for_digit(tmp_path):
    from benchmark.cli.runs import reproduction_rows

    curve = [{"compute": 0.0, "accuracy": 0.2}, {"compute": 10.0, "accuracy": 0.4}, {"compute": 20.0, "accuracy": 0.5}]
    config = {"strategy": {"name": "on_policy", "sha256": "abc", "params": {}},
              "workload": {"name": "w", "version": "2", "pipeline": {"workers": 6, "trainers": 2},
                           "strategy_defaults": {"buffer_size": 90}}}
    params = {"strategy.sha256": "abc", "workload.name": "w", "workload.version": "2", "workload.pipeline.workers": "6",
              "workload.pipeline.trainers": "2", "strategy.params.buffer_size": "90"}  # as MLflow holds them
    for run_id, seed in (("published0", 0), ("published1", 1)):
        folder = tmp_path / "runs" / run_id
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({
            "run_id": run_id, "start_time": 1, "params": params,
            "tags": {"replaybench.seed": str(seed), "replaybench.status": "finished",
                     **({"replaybench.cpu": "AMD EPYC", "replaybench.cpu_id": "AuthenticAMD family 23 model 49"}
                        if seed == 0 else {})}}))
        (folder / "summary.json").write_text(json.dumps({"eval_curve": curve}))
    drifted = [*curve[:2], {"compute": 20.0, "accuracy": 0.504}]
    rows = reproduction_rows([{"strategy": "on_policy", "config": config, "seed": 0, "eval_curve": curve},
                              {"strategy": "on_policy", "config": config, "seed": 1, "eval_curve": drifted},
                              {"strategy": "on_policy", "config": config, "seed": 2, "eval_curve": curve}], tmp_path)
    assert [r["same"] for r in rows] == [True, False, None]
    assert rows[1]["first_difference"] == 2 and rows[1]["published_run_id"] == "published1"
    assert rows[1]["published"] == "native kernels, CPU not recorded"  # a run from before the record
    assert rows[0]["published"] == "native kernels, AMD EPYC (AuthenticAMD family 23 model 49)"
    assert rows[0]["mine"].endswith(f"{kernels.cpu_model()}" + (f" ({kernels.cpu_id()})" if kernels.cpu_id() else ""))


def test_the_trainer_takes_the_fused_adamw_with_the_portable_kernels_only(monkeypatch):
    import torch

    from benchmark.rl.grpo import make_optimizer

    model = torch.nn.Linear(4, 4)
    assert not make_optimizer(model, 1e-3, (0.9, 0.99), 0.0).defaults["fused"]  # native: as runs before the pin
    monkeypatch.setattr(kernels, "in_force", lambda: {"kernels": "portable"})
    assert make_optimizer(model, 1e-3, (0.9, 0.99), 0.0).defaults["fused"]

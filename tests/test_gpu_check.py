"""benchmarks/gpu_check.sh: its peak table, and the CPU smoke run it falls back to without a GPU."""

import importlib.util
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_peak_flops_of_the_gpus_it_knows():
    gpu_check = load_gpu_check()
    assert gpu_check.peak_flops("NVIDIA H200") == 989e12
    assert gpu_check.peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert gpu_check.peak_flops("NVIDIA H100 PCIe") == 756e12
    assert gpu_check.peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert gpu_check.peak_flops("Tesla T4") is None


def test_without_a_gpu_it_says_so_and_exits_0_after_a_cpu_smoke_run():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "no GPU" in result.stdout
    assert "transformers" in result.stdout.split("engine", 2)[-1]  # a row of the table


def test_the_ray_run_shards_its_trainers_when_each_has_a_gpu_of_its_own():
    gpu_check = load_gpu_check()
    assert gpu_check.ray_setting(8) == (2, 2, "fsdp", 1.0)
    assert gpu_check.ray_setting(3) == (1, 2, "fsdp", 1.0)
    assert gpu_check.ray_setting(1) == (1, 1, "ddp", 0.5)  # NCCL cannot put two ranks on one GPU

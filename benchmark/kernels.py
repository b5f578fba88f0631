"""The CPU kernels runs compute with, pinned so that a seed gives the same metrics on any x86-64 CPU with AVX2.

PyTorch picks its vectorised kernels by the CPU's instruction set (AVX-512 or AVX2), and MKL, which does its matrix
products, picks its code by the processor's vendor and model. Each choice rounds differently: the same run made on
two kinds of CPU agrees for a few hundred updates, then drifts apart. Pinned ("portable", the default): ATen's AVX2
kernels and MKL's COMPATIBLE branch, the one MKL documents as giving the same results on Intel and other processors.
The price is speed: about 1.6x the native kernels' time (benchmarks/full_run.py --native-kernels).
REPLAYBENCH_KERNELS=native opts out; every run records which kernels it used and on which CPU. One more CPU-dependent
path is MKL's vectorised square root (torch.sqrt), which even the COMPATIBLE branch computes to other bits on another
CPU: the trainer's AdamW is the fused one, whose square root is exact (benchmark.rl.grpo.make_optimizer).
benchmarks/kernels_portability.py checks all of it on emulated Intel and AMD CPUs.

Both libraries read their setting once, when first used, so `pin` must run before torch computes anything:
`import benchmark` calls it, and processes started from here inherit it.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

KERNELS_ENV = "REPLAYBENCH_KERNELS"  # portable (default) or native
PORTABLE_ATEN = "avx2"
PORTABLE_MKL = "COMPATIBLE"
_PINNED: dict[str, str] = {}  # what `pin` set in this process (not what the user set by hand)


@functools.cache  # the CPU does not change under a process: read once, not per field asked for
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo; empty where there is no such file."""
    fields: dict[str, str] = {}
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return fields
    for line in lines:
        if not line.strip() and fields:
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _cpu_flags() -> set[str]:
    return set(_cpuinfo().get("flags", "").split())


def cpu_model() -> str:
    return _cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown"


def cpu_id() -> str:
    """Vendor, family, model and stepping: which kind of CPU it is, where the model name may be only "AMD EPYC"."""
    info = _cpuinfo()
    if "vendor_id" not in info:
        return ""
    return " ".join([info["vendor_id"], *(f"{label} {info[key]}" for key, label in
                                          (("cpu family", "family"), ("model", "model"), ("stepping", "stepping"))
                                          if key in info)])


def wanted() -> str:
    return "native" if os.environ.get(KERNELS_ENV, "portable").strip().lower() == "native" else "portable"


def pin() -> None:
    """Pin the kernels unless asked for the native ones. A setting the user made by hand is left alone."""
    if wanted() == "native" or platform.machine().lower() not in ("x86_64", "amd64"):
        return
    pins = {"MKL_CBWR": PORTABLE_MKL}
    # ATen trusts this variable without checking the CPU: set it only where AVX2 kernels can run
    if {"avx2", "fma"} <= _cpu_flags():
        pins["ATEN_CPU_CAPABILITY"] = PORTABLE_ATEN
    for name, value in pins.items():
        if name not in os.environ:
            os.environ[name] = _PINNED[name] = value


def environment(kind: str) -> dict:
    """This process's environment for a child that is to compute with `kind` kernels ("portable" or "native")."""
    env = {k: v for k, v in os.environ.items() if not (kind == "native" and _PINNED.get(k) == v)}
    env[KERNELS_ENV] = kind
    return env


def in_force() -> dict:
    """What the run computes with, as recorded on it: `kernels` is "portable" only when both pins hold."""
    import torch

    aten = torch.backends.cpu.get_cpu_capability()
    mkl = os.environ.get("MKL_CBWR", "off")
    portable = aten.lower() == PORTABLE_ATEN and mkl.split(",")[0].strip().upper() == PORTABLE_MKL
    return {"kernels": "portable" if portable else "native", "cpu": cpu_model(), "cpu_id": cpu_id(),
            "aten_capability": aten, "mkl_cbwr": mkl}

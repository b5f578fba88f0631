"""Do the portable CPU kernels give the same numbers on another kind of CPU? A training probe's digest on this CPU
and on emulated ones.

    python benchmarks/kernels_portability.py [--cpus Haswell-v4 EPYC-Rome-v2] [--steps 3]

The probe is three steps of what a run's trainer does to the arith-tiny start model, on fixed tokens: forward,
log-softmax, backward, gradient clipping and the trainer's own AdamW (benchmark.rl.grpo.make_optimizer); its
digest covers the logits of every step and the final weights, so one differing bit anywhere changes it. It runs
here, then under QEMU's user-mode emulator (`qemu-x86_64 -cpu MODEL`, Debian's qemu-user) as an Intel and an AMD
CPU, each with the portable kernels and the native ones (benchmark/kernels.py). The emulated CPU answers the CPUID
queries by which PyTorch and MKL pick their code, so the native kernels are expected to differ between the two
emulated CPUs and the portable ones not. Emulation executes the same instructions with IEEE arithmetic in software:
an approximate instruction (rsqrtps, rcpps) gives other bits there than on hardware, so a digest that differs
between this CPU and the emulated ones points to one on the path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def probe(steps: int) -> dict:
    sys.path.insert(0, str(REPO))
    import torch

    from benchmark import kernels  # importing benchmark pins the kernels before torch computes anything
    from benchmark.rl.grpo import make_optimizer
    from benchmark.rl.policy import load_pretrained, set_threads

    set_threads()
    model, _ = load_pretrained(str(REPO / "tasks" / "arith_tiny" / "checkpoint"))
    ids = torch.randint(0, model.config.vocab_size, (16, 24), generator=torch.Generator().manual_seed(0))
    optimizer = make_optimizer(model, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.0)
    digest = hashlib.sha256()
    for _ in range(steps):
        logits = model(input_ids=ids).logits
        loss = -logits.log_softmax(-1)[:, :-1].gather(-1, ids[:, 1:, None]).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        digest.update(logits.detach().numpy().tobytes())
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    here = kernels.in_force()
    return {"kernels": here["kernels"], "aten": here["aten_capability"], "digest": digest.hexdigest()[:16]}


def child(kind: str, steps: int, cpu: str | None) -> dict:
    from benchmark import kernels

    command = [sys.executable, __file__, "--probe", "--steps", str(steps)]
    if cpu:
        command = ["qemu-x86_64", "-cpu", cpu, *command]
    done = subprocess.run(command, env=kernels.environment(kind), capture_output=True, text=True, timeout=3600)
    if done.returncode:
        return {"kernels": kind, "aten": "-", "digest": f"failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpus", nargs="*", default=["Haswell-v4", "EPYC-Rome-v2"],
                        help="QEMU CPU models to emulate (qemu-x86_64 -cpu help)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.steps)))
        return 0
    sys.path.insert(0, str(REPO))
    from benchmark.kernels import cpu_model

    os.environ.pop("REPLAYBENCH_KERNELS", None)
    cpus = args.cpus if shutil.which("qemu-x86_64") else []
    if not cpus:
        print("(qemu-x86_64 not found: this CPU only; apt-get install qemu-user for the emulated ones)")
    rows = {(None, kind): child(kind, args.steps, None) for kind in ("portable", "native")}
    rows |= {(cpu, kind): child(kind, args.steps, cpu) for cpu in cpus for kind in ("portable", "native")}
    print(f"{args.steps} training steps of the arith-tiny start model, one thread\n")
    print("CPU | kernels | ATen | digest | same as this CPU's")
    print("--- | --- | --- | --- | ---")
    for (cpu, kind), r in rows.items():
        same = "-" if cpu is None else ("yes" if r["digest"] == rows[(None, kind)]["digest"] else "no")
        print(f"{cpu or 'this CPU (' + cpu_model() + ')'} | {kind} | {r['aten']} | {r['digest']} | {same}")
    for kind in ("portable", "native"):
        digests = {rows[(cpu, kind)]["digest"] for cpu in cpus}
        if len(cpus) > 1:
            print(f"\n{kind}: the emulated CPUs {'agree' if len(digests) == 1 else 'differ'}", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What several commands share: the stderr console, the libraries kept quiet, the workload and executor options,
and the workload those options select."""

from __future__ import annotations

from rich.console import Console

from benchmark.workload import load_workload, split_overrides

console = Console(stderr=True)


def quiet_libraries() -> None:
    """Our progress bar is the one to read: silence the libraries' bars and info logs."""
    import logging
    import os

    from transformers.utils import logging as hf_logging

    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def add_workload_options(p, run_options: bool = True) -> None:
    """--workload and --set; with run_options, those of a training run too (budget, split, sandbox)."""
    p.add_argument("--workload", default="arith-tiny",
                   help="workload name or path of a workload .yaml (default: arith-tiny)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a workload field (grpo.lr=1e-4) or a strategy hyperparameter (buffer_size=64)")
    if not run_options:
        return
    p.add_argument("--budget", type=float, help="compute budget in normalised units (default: the workload's)")
    p.add_argument("--workers", type=int, help="inference workers W (W + T must equal the workload's devices)")
    p.add_argument("--trainers", type=int, help="trainers T")
    p.add_argument("--isolate", action="store_true",
                   help="run the strategy in its own process under time and memory limits (as official runs do)")


def add_executor_option(p) -> None:
    p.add_argument("--executor", choices=["sim", "ray"], default="sim",
                   help="sim: the virtual-time pipeline (the reference); ray: real Ray actors "
                        "(needs the distributed extra; recorded under replaybench-ray/<workload>)")


def workload_from_args(args):
    """The workload with --set, --budget, --workers and --trainers applied, and the strategy hyperparameters
    among the --set pairs."""
    overrides, strategy_params = split_overrides(args.set or [])
    if getattr(args, "budget", None) is not None:
        overrides["budget"] = args.budget
    for key in ("workers", "trainers"):
        if getattr(args, key, None) is not None:
            overrides[f"pipeline.{key}"] = getattr(args, key)
    return load_workload(args.workload, overrides), strategy_params

"""The CPU workload must be learnable: a benchmark on which nothing learns ranks noise."""

from pathlib import Path

import pytest

from benchmark.runner import RunSpec, run
from benchmark.workload import load_workload

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.e2e
def test_on_policy_grpo_improves_on_the_start_checkpoint(isolated_runs):
    # 30% of the real workload's budget, one seed, 500 evaluation problems: the full run gains far more (README)
    workload = load_workload("arith-tiny", {"pipeline.workers": 6, "pipeline.trainers": 2, "eval.pass_k_problems": 0,
                                            "eval.num_problems": 500})
    workload.budget *= 0.3
    workload.eval.every = workload.budget / 4
    summary = run(RunSpec(workload, REPO / "baselines" / "on_policy.py", {}, seed=0))
    assert summary["best"]["accuracy"] - summary["start_accuracy"] >= 0.10
    assert summary["max_uses_of_a_rollout"] == 1

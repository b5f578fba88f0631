"""The Ray executor (`--executor ray`): the pipeline on real Ray actors, on a local 2-CPU Ray cluster.

Real asynchrony is not deterministic: which rollouts a step sees depends on the order in which
generations and steps really finish, so two runs with the same seed differ. The checks compare the
Ray run with the virtual-time pipeline in kind (the same order of magnitude), never bit for bit.
"""

import importlib.util
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark.cli import app as cli
from benchmark.runner import RunSpec, run
from benchmark.tracking import client
from benchmark.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
FIFO = REPO / "baselines" / "fifo_uniform.py"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason='ray is not installed: pip install -e ".[distributed]"')

# arith-tiny (its real start checkpoint), W = 2, T = 2, FIFO of 256, budget 200k, evaluations every 100k.
CONFIG = {"pipeline.devices": 4, "pipeline.workers": 2, "pipeline.trainers": 2, "budget": 200_000,
          "eval.every": 100_000, "eval.num_problems": 200, "eval.pass_k_problems": 20}
# The virtual-time pipeline on CONFIG, seed 0 (deterministic; rerun it to refresh): replay ratio
# close to mu*T/W = 5.28, mean off-policiness in trainer steps. A paced Ray run gave 4.74 and 10.9.
SIM_REPLAY_RATIO, SIM_OFFPOLICY_MEAN = 5.05, 11.4
# Wall seconds per normalised unit: the roles run at the workload's relative speeds (mu = 5.28)
# although this CPU's own mu is near 1; the real work fits inside the paced durations.
PACE = 5e-4


def test_without_ray_the_executor_names_the_extra(monkeypatch, isolated_runs, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = cli.main(["run", "--executor", "ray", "--strategy", str(FIFO)])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert 'pip install -e ".[distributed]"' in err and "Traceback" not in err


def test_resume_is_refused_on_ray(monkeypatch, isolated_runs, capsys):
    pytest.importorskip("ray", reason='ray is not installed: pip install -e ".[distributed]"')
    code = cli.main(["run", "--executor", "ray", "--resume", "--strategy", str(FIFO)])
    assert code == 2 and "keeps no checkpoints" in " ".join(capsys.readouterr().err.split())


@needs_ray
@pytest.mark.slow
def test_ray_run_records_the_pipeline_metrics_and_agrees_in_kind(monkeypatch, isolated_runs):
    from benchmark.engine.ray.driver import EXPERIMENT_PREFIX
    from benchmark.engine.ray.options import RayOptions

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a throw-away local cluster needs no token
    spec = RunSpec(load_workload("arith-tiny", CONFIG), FIFO, {"buffer_size": 256}, seed=0, executor="ray")
    s = run(spec, executor_options=RayOptions(num_cpus=2, pace=PACE))

    # data-parallel trainers end with identical weights
    assert s["trainers_in_sync"] and len(s["trainer_weights_sha256"]) == 2
    # the evaluations sit at the scheduled compute points, with sane accuracies
    assert [p["compute"] for p in s["eval_curve"]] == [0, 100_000, 200_000]
    assert all(0 <= p["accuracy"] <= 1 and 0 <= p["pass_at_4"] <= 1 for p in s["eval_curve"])
    assert [p["trainer_step"] for p in s["eval_curve"]] == sorted(p["trainer_step"] for p in s["eval_curve"])
    assert s["compute_used"] >= 200_000 and s["trainer_steps"] > 10
    # the same dynamics in kind (the same order of magnitude) as the virtual-time pipeline on the same
    # config; unpaced, this CPU's own mu (about 1) would give a replay ratio near 1
    assert SIM_REPLAY_RATIO / 4 < s["replay_ratio"] < SIM_REPLAY_RATIO * 4
    assert SIM_OFFPOLICY_MEAN / 4 < s["offpolicy_mean"] < SIM_OFFPOLICY_MEAN * 4
    m = s["measured"]
    assert m["worker_busy_s"] > 0 and m["trainer_busy_s"] > 0 and 0 <= m["trainer_idle_frac"] <= 1
    assert m["compute_device_s"] == pytest.approx(4 * m["elapsed_s"])

    # one finished MLflow run, outside the experiments the leaderboard scores
    c = client()
    recorded = c.get_run(s["mlflow_run_id"])
    assert c.get_experiment(recorded.info.experiment_id).name == f"{EXPERIMENT_PREFIX}arith-tiny"
    assert recorded.data.tags["replaybench.status"] == "finished"
    assert recorded.data.tags["replaybench.executor"] == "ray"
    metrics = set(recorded.data.metrics)
    pipeline_metrics = {"eval/accuracy", "eval/pass_at_4", "eval/compute", "train/loss", "train/clip_fraction",
                        "train/entropy", "train/grad_norm", "train/replay_ratio", "train/offpolicy_mean",
                        "train/steps_since_last_use", "train/trainer_idle_fraction", "train/worker_idle_fraction",
                        "train/compute", "train/rollouts_generated", "train/samples_trained",
                        "wall/generation_seconds", "wall/training_seconds"}
    measured = {"measured/worker_busy_s", "measured/worker_idle_s", "measured/trainer_busy_s",
                "measured/trainer_idle_s", "measured/trainer_idle_frac", "measured/worker_idle_frac",
                "measured/compute_device_s", "measured/mu"}
    assert pipeline_metrics | measured <= metrics, sorted((pipeline_metrics | measured) - metrics)
    accuracy = c.get_metric_history(s["mlflow_run_id"], "eval/accuracy")
    assert len(accuracy) == 3


# ---- placement: a pure decision, tested without Ray or GPUs ---------------------------------
def _gpus_requested(p, workers, trainers):
    return p.worker0.num_gpus + (workers - 1) * p.worker.num_gpus + trainers * p.trainer.num_gpus \
        + p.strategy.num_gpus + p.evaluator.num_gpus


def test_without_gpus_every_actor_gets_an_equal_share_of_the_cpus_as_before():
    from benchmark.engine.ray.placement import plan_placement

    p = plan_placement({"CPU": 2.0}, workers=2, trainers=2)
    assert (p.device, p.backend) == ("cpu", "gloo")
    roles = [p.worker, p.worker0, p.trainer, p.strategy, p.evaluator]
    assert all(r.num_gpus == 0 and r.num_cpus == round(2 / 6, 4) for r in roles)
    assert plan_placement({"CPU": 64.0}, 6, 2).trainer.num_cpus == 1.0  # at most one CPU each
    # asking for no GPUs on a GPU cluster gives the same CPU placement
    assert plan_placement({"CPU": 2.0, "GPU": 8.0}, 2, 2, gpus_per_actor=0) == p


def test_with_gpus_workers_and_trainers_hold_one_each_and_the_evaluator_shares_worker_0():
    from benchmark.engine.ray.placement import plan_placement

    p = plan_placement({"CPU": 64.0, "GPU": 8.0}, workers=6, trainers=2)
    assert (p.device, p.backend) == ("cuda", "nccl")
    assert p.worker.num_gpus == p.trainer.num_gpus == 1 and p.strategy.num_gpus == 0
    assert p.worker0.num_gpus == p.evaluator.num_gpus == 0.5  # no free GPU: half of worker 0's each
    assert _gpus_requested(p, 6, 2) == 8
    # a free GPU: the evaluator takes it and worker 0 keeps its own
    spare = plan_placement({"CPU": 64.0, "GPU": 8.0}, workers=4, trainers=3)
    assert spare.worker0.num_gpus == spare.evaluator.num_gpus == 1


def test_fractional_gpus_keep_the_trainers_on_gloo_and_fit_the_cluster():
    from benchmark.engine.ray.placement import engine_gpu_fraction, plan_placement

    p = plan_placement({"CPU": 16.0, "GPU": 4.0}, workers=5, trainers=3, gpus_per_actor=0.5)
    # two trainers may share a GPU, which NCCL refuses
    assert (p.device, p.backend) == ("cuda", "gloo")
    assert p.worker.num_gpus == 0.5 and p.evaluator.num_gpus == 0.25
    assert _gpus_requested(p, 5, 3) == 4
    assert engine_gpu_fraction(p.evaluator.num_gpus) == 0.25  # what a vLLM engine may fill of its GPU
    assert engine_gpu_fraction(1.0) is None and engine_gpu_fraction(0.0) is None
    for gpus, workers, trainers, g in [(8, 6, 2, None), (8, 4, 4, None), (8, 7, 1, 1.0), (2, 2, 2, 0.5),
                                       (3, 2, 2, 0.5), (1, 1, 1, 0.5), (4, 3, 3, 0.5)]:
        p = plan_placement({"CPU": 8.0, "GPU": float(gpus)}, workers, trainers, g)
        assert _gpus_requested(p, workers, trainers) <= gpus


@pytest.mark.parametrize("resources, workers, trainers, g, message", [
    ({"CPU": 16.0, "GPU": 4.0}, 5, 3, None, "fewer workers/trainers"),
    ({"CPU": 16.0, "GPU": 4.0}, 5, 3, None, "--ray-gpus-per-actor 0.5"),
    ({"CPU": 16.0, "GPU": 3.0}, 5, 3, 0.5, "--ray-gpus-per-actor 0.25"),
    ({"CPU": 16.0}, 2, 2, 1.0, "the Ray cluster has none"),
    ({"CPU": 16.0, "GPU": 8.0}, 2, 2, 2.0, "between 0 and 1"),
])
def test_a_placement_the_cluster_cannot_hold_names_the_fix(resources, workers, trainers, g, message):
    from benchmark.engine.ray.placement import PlacementError, plan_placement

    with pytest.raises(PlacementError, match=re.escape(message)):
        plan_placement(resources, workers, trainers, g)


def test_engine_names_and_their_shorthands():
    from benchmark.engine.ray.options import RayOptions, resolve_engine
    from benchmark.runner import RunError

    assert resolve_engine("hf") == "hf"
    assert resolve_engine("vllm") == "benchmark.rl.vllm_engine:vllm_engine"
    assert RayOptions(engine="vllm").engine == "benchmark.rl.vllm_engine:vllm_engine"
    assert resolve_engine("my.module:factory") == "my.module:factory"
    for bad in ("vlm", "module:", ":factory", "a:b:c"):
        with pytest.raises(RunError, match="use hf, vllm or module:factory"):
            resolve_engine(bad)


def test_a_mistyped_engine_stops_the_cli_with_one_line(isolated_runs, capsys):
    code = cli.main(["run", "--executor", "ray", "--ray-engine", "vlm", "--strategy", str(FIFO)])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "unknown --ray-engine 'vlm'" in err and "Traceback" not in err


def test_published_weights_are_cpu_tensors_and_cpu_ones_are_not_copied(tiny_checkpoint):
    from transformers import AutoModelForCausalLM

    from benchmark.engine.ray.actors import cpu_state_dict

    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    weights = cpu_state_dict(model)
    assert weights.keys() == model.state_dict().keys()
    assert all(t.device.type == "cpu" and not t.requires_grad for t in weights.values())
    assert all(weights[k].data_ptr() == v.data_ptr() for k, v in model.state_dict().items())


# ---- the driver's wiring on a GPU cluster, with a stand-in for Ray -------------------------------
class FakeRay:
    """Records what each actor asks for; actors answer at once (`ready` with the same start hash)."""

    exceptions = SimpleNamespace(RayTaskError=RuntimeError)

    def __init__(self, resources: dict):
        self.resources, self.created = resources, []

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return dict(self.resources)

    def remote(self, **options):
        return lambda cls: SimpleNamespace(remote=lambda *args: self._start(cls.__name__, options, args))

    def _start(self, name, options, args):
        answers = {"ready": {"weights_sha256": "start-hash"}, "rendezvous_address": "tcp://127.0.0.1:1"}
        self.created.append((name, options, args))
        return SimpleNamespace(**{m: SimpleNamespace(remote=lambda *a, m=m: answers.get(m))
                                  for m in ("open", "ready", "rendezvous_address", "join", "close")})

    def get(self, refs, timeout=None):
        return refs

    def kill(self, actor):
        pass


def _fake_gpu_pipeline(monkeypatch, resources, workers=6, trainers=2, **options):
    import benchmark.engine.ray.driver as rx
    from benchmark.engine.ray.options import RayOptions

    fake = FakeRay(resources)
    monkeypatch.setitem(sys.modules, "ray", fake)
    w = load_workload("arith-tiny", {"pipeline.devices": workers + trainers, "pipeline.workers": workers,
                                     "pipeline.trainers": trainers})
    pipeline = rx.RayPipeline(w, w.load_task(), 0, options=RayOptions(**options))
    return pipeline, fake


def test_on_a_gpu_cluster_the_actors_ask_for_their_gpus(monkeypatch):
    import benchmark.engine.ray.driver as rx

    monkeypatch.setattr(rx, "_check_cuda_build", lambda: None)  # this machine's torch is a CPU build
    pipeline, fake = _fake_gpu_pipeline(monkeypatch, {"CPU": 64.0, "GPU": 8.0}, engine="vllm")
    by_role = {}
    for name, options, args in fake.created:
        by_role.setdefault(name, []).append((options["num_gpus"], args))
    assert [g for g, _ in by_role["StrategyHost"]] == [0.0]
    # worker 0 shares its GPU with the evaluator (started last), and tells its vLLM engine so
    assert [(g, args[-2:]) for g, args in by_role["InferenceWorker"]] == \
        [(0.5, ("cuda", 0.5))] + [(1.0, ("cuda", None))] * 5
    assert [(g, args[-2:]) for g, args in by_role["Trainer"]] == [(1.0, ("cuda", "nccl"))] * 2
    assert fake.created[-1][0] == "Evaluator" and by_role["Evaluator"][0][0] == 0.5
    assert by_role["InferenceWorker"][0][1][1] == "benchmark.rl.vllm_engine:vllm_engine"
    assert sum(g for roles in by_role.values() for g, _ in roles) == 8
    assert pipeline.placement.describe()["backend"] == "nccl"


def test_a_gpu_cluster_with_a_cpu_build_of_torch_or_too_few_gpus_says_what_to_do(monkeypatch):
    import torch

    from benchmark.runner import RunError

    if torch.version.cuda is None:
        with pytest.raises(RunError, match="CPU build.*--ray-gpus-per-actor 0"):
            _fake_gpu_pipeline(monkeypatch, {"CPU": 64.0, "GPU": 8.0})
    with pytest.raises(RunError, match="has 4 GPUs but 6 workers \\+ 2 trainers"):
        _fake_gpu_pipeline(monkeypatch, {"CPU": 64.0, "GPU": 4.0})
    # explicitly on CPUs, the same cluster runs as the CPU tier does
    pipeline, fake = _fake_gpu_pipeline(monkeypatch, {"CPU": 64.0, "GPU": 4.0}, gpus_per_actor=0)
    assert {options["num_gpus"] for _, options, _ in fake.created} == {0.0}
    assert [args[-2:] for name, _, args in fake.created if name == "Trainer"] == [("cpu", "gloo")] * 2


def test_an_engine_factory_that_takes_gpu_fraction_is_told_its_share(monkeypatch):
    import types

    from benchmark.engine.ray.options import make_engine
    from benchmark.rl import vllm_engine

    calls = []
    engines = types.ModuleType("fake_engines")
    engines.sharing = lambda model, tokenizer, gpu_fraction=None: calls.append(("sharing", gpu_fraction))
    engines.plain = lambda model, tokenizer: calls.append(("plain",))
    monkeypatch.setitem(sys.modules, "fake_engines", engines)
    make_engine("fake_engines:sharing", None, None, "cuda", 0.5)
    make_engine("fake_engines:sharing", None, None, "cuda", None)
    make_engine("fake_engines:plain", None, None, "cuda", 0.5)
    assert calls == [("sharing", 0.5), ("sharing", None), ("plain",)]
    # the vLLM factory turns the share into vLLM's per-instance memory budget
    monkeypatch.setattr(vllm_engine.VLLMEngine, "from_model", classmethod(lambda cls, m, t, **options: options))
    assert vllm_engine.vllm_engine(None, None, gpu_fraction=0.5) == {"gpu_memory_utilization": 0.45}
    assert vllm_engine.vllm_engine(None, None) == {}

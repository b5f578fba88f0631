"""The Ray executor (`--executor ray`): the pipeline on real Ray actors, on a local 2-CPU Ray cluster.

Real asynchrony is not deterministic: which rollouts a step sees depends on the order in which
generations and steps really finish, so two runs with the same seed differ. The checks compare the
Ray run with the virtual-time pipeline in kind (the same order of magnitude), never bit for bit.
"""

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark.cli import app as cli
from benchmark.runner import RunSpec, run
from benchmark.strategy import PoolRequest
from benchmark.tracking import client
from benchmark.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
FIFO = REPO / "baselines" / "fifo_uniform.py"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason='ray is not installed: pip install -e ".[distributed]"')

# arith-tiny (its real start checkpoint), W = 2, T = 2, FIFO of 256, budget 120k, evaluations every 40k.
CONFIG = {"pipeline.devices": 4, "pipeline.workers": 2, "pipeline.trainers": 2, "budget": 120_000,
          "eval.every": 40_000, "eval.num_problems": 200, "eval.pass_k_problems": 20}
# The virtual-time pipeline on CONFIG, seed 0 (deterministic; rerun it to refresh): replay ratio
# close to mu*T/W = 5.28, mean off-policiness in trainer steps (66 steps).
SIM_REPLAY_RATIO, SIM_OFFPOLICY_MEAN = 4.89, 10.7
WORKLOAD_MU = load_workload("arith-tiny").pipeline.mu
# Wall seconds per normalised unit: the roles run at the workload's relative speeds (mu = 5.28)
# although this CPU's own mu is near 1; the real work fits inside the paced durations.
PACE = 5e-4


def test_without_ray_the_executor_names_the_extra(monkeypatch, isolated_runs, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = cli.main(["run", "--executor", "ray", "--strategy", str(FIFO)])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert 'pip install -e ".[distributed]"' in err and "Traceback" not in err


def test_resume_without_a_checkpoint_stops_before_ray_starts(isolated_runs, capsys):
    code = cli.main(["run", "--executor", "ray", "--resume", "--strategy", str(FIFO)])
    assert code == 2 and "nothing to resume" in " ".join(capsys.readouterr().err.split())


def _kill_after_saves(proc, checkpoints: Path, saves: int, timeout: float = 300) -> None:
    """SIGKILL the process group (the driver and the Ray cluster it started) once its state was saved `saves`
    times."""
    seen, last, deadline = 0, None, time.time() + timeout
    while seen < saves and time.time() < deadline and proc.poll() is None:
        states = list(checkpoints.glob("*/state.pt")) if checkpoints.exists() else []
        try:
            mtime = states[0].stat().st_mtime_ns if states else None
        except FileNotFoundError:
            mtime = None
        if mtime is not None and mtime != last:
            seen, last = seen + 1, mtime
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed: raise its budget"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@needs_ray
@pytest.mark.slow
@pytest.mark.e2e
def test_ray_run_killed_after_two_checkpoints_resumes_and_records_the_pipeline_metrics(monkeypatch, isolated_runs):
    """A Ray run with FSDP trainers killed with SIGKILL after its second checkpoint, then resumed: every trainer step
    counted once, the curve whole; and the run records what the pipeline records, agreeing with it in kind. Under
    FSDP every publication, evaluation, checkpoint and final hash is a collective of all the ranks."""
    from benchmark.engine.ray.driver import EXPERIMENT_PREFIX
    from benchmark.engine.ray.options import RayOptions

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a throw-away local cluster needs no token
    config = {**CONFIG, "grpo.data_parallel": "fsdp"}
    sets = [f"--set={k}={v}" for k, v in config.items()] + ["--set=buffer_size=256"]
    proc = subprocess.Popen([sys.executable, "-m", "benchmark.cli", "run", "--executor", "ray", "--strategy", str(FIFO),
                             "--seed", "0", "--ray-pace", str(PACE), *sets], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_after_saves(proc, isolated_runs / "checkpoints", saves=2)
    spec = RunSpec(load_workload("arith-tiny", config), FIFO, {"buffer_size": 256}, seed=0, executor="ray")
    s = run(spec, resume=True, executor_options=RayOptions(num_cpus=2, pace=PACE))
    assert s["ray"]["data_parallel"] == "torch fsdp, gloo"

    # continuity: every step counted once, each evaluation once, counters that never go back
    c = client()
    steps = [m.step for m in c.get_metric_history(s["mlflow_run_id"], "train/loss")]
    assert sorted(steps) == list(range(1, s["trainer_steps"] + 1))
    assert [p["compute"] for p in s["eval_curve"]] == [0, 40_000, 80_000, 120_000]
    for key in ("trainer_step", "rollouts_generated", "measured_device_s"):
        assert [p[key] for p in s["eval_curve"]] == sorted(p[key] for p in s["eval_curve"]), key
    assert s["eval_curve"][1]["trainer_step"] > 0  # the kill came after real training
    # the strategy's state came back: every sample trained, before the kill and after, is one use in the use
    # statistics (lost state would leave out the uses before the resumed checkpoint)
    assert sum(s["since_last_use_distribution"].values()) == s["samples_trained"]
    used = round((1 - s["rollouts_never_used_fraction"]) * s["rollouts_generated"])
    assert s["since_last_use_distribution"]["new"] == used and s["max_uses_of_a_rollout"] > 1
    # data-parallel trainers end with identical weights
    assert s["trainers_in_sync"] and len(s["trainer_weights_sha256"]) == 2
    # the evaluations sit at the scheduled compute points, taken as soon as the compute reached them (a
    # rollout has at most 16 tokens: one step of 64 adds at most 4 * 64 * 16 / 2 = 2048 units), with sane accuracies
    assert all(p["compute"] <= p["compute_at_eval"] < p["compute"] + 3_000 for p in s["eval_curve"])
    assert all(0 <= p["accuracy"] <= 1 and 0 <= p["pass_at_4"] <= 1 for p in s["eval_curve"])
    assert [p["trainer_step"] for p in s["eval_curve"]] == sorted(p["trainer_step"] for p in s["eval_curve"])
    assert s["eval_curve"][0]["trainer_step"] == 0 and s["eval_curve"][-1]["trainer_step"] <= s["trainer_steps"]
    # the budget stops the run: only the work in flight when it was spent is past it (2 generations of
    # 8 x 16 tokens: 4 * 5.28 * 256 / 2 = 2703 units at most)
    assert 120_000 <= s["compute_used"] < 124_000 and s["trainer_steps"] > 10
    # the clock is the busier role's normalised time: that role is never idle
    assert min(s["trainer_idle_fraction"], s["worker_idle_fraction"]) == pytest.approx(0, abs=1e-9)
    assert s["samples_trained"] == 64 * s["trainer_steps"] and s["rollouts_generated"] % 8 == 0
    # the same dynamics in kind (the same order of magnitude) as the virtual-time pipeline on the same
    # config at the roles' relative speeds as they ran: the workload's mu where the pace held; on a loaded
    # machine the real work overruns the paced durations and the speeds drift to this CPU's own (mu about 1),
    # which the replay ratio and the off-policiness follow (both scale with mu)
    m = s["measured"]
    assert m["mu_as_run"] >= m["mu"] / 4 and m["mu_as_run"] < WORKLOAD_MU * 2
    drift = m["mu_as_run"] / WORKLOAD_MU
    assert SIM_REPLAY_RATIO * drift / 4 < s["replay_ratio"] < SIM_REPLAY_RATIO * drift * 4
    assert SIM_OFFPOLICY_MEAN * drift / 4 < s["offpolicy_mean"] < SIM_OFFPOLICY_MEAN * drift * 4
    assert m["worker_busy_s"] > 0 and m["trainer_busy_s"] > 0 and 0 <= m["trainer_idle_frac"] <= 1
    assert m["compute_device_s"] == pytest.approx(4 * m["elapsed_s"])
    assert m["worker_busy_s"] <= 2 * m["elapsed_s"] and m["trainer_busy_s"] <= 2 * m["elapsed_s"]
    assert [p["measured_device_s"] for p in s["eval_curve"]] == sorted(p["measured_device_s"] for p in s["eval_curve"])

    # one finished MLflow run, outside the experiments the leaderboard scores
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
                "measured/compute_device_s", "measured/mu", "measured/mu_as_run"}
    assert pipeline_metrics | measured <= metrics, sorted((pipeline_metrics | measured) - metrics)
    accuracy = c.get_metric_history(s["mlflow_run_id"], "eval/accuracy")
    assert len(accuracy) == 4


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
    import benchmark.engine.ray.cluster as cluster

    monkeypatch.setattr(cluster, "check_cuda_build", lambda: None)  # this machine's torch is a CPU build
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


# ---- the driver's normalised clock and budget stop, with a scripted stand-in for Ray -------------
class Ref:
    def __init__(self, value):
        self.value = value


class ScriptedRay(FakeRay):
    """Actors that answer at once with scripted token counts; calls complete in the order they were made.
    Records the driver's compute_used when each generation and trainer step starts."""

    def __init__(self, gen_tokens=100, batch_tokens=400, pool=None, pool_tokens=50, adds_per_batch=1):
        super().__init__({"CPU": 8.0})
        self.gen_tokens, self.batch_tokens, self.pool, self.pool_tokens = gen_tokens, batch_tokens, pool, pool_tokens
        self.adds_per_batch = adds_per_batch
        self.pipeline = None
        self.generations, self.pool_generations, self.steps, self.adds = [], 0, [], 0
        self.parts_trained = 0

    def _start(self, name, options, args):
        self.created.append((name, options, args))
        methods = {"open": lambda spec: None, "ready": lambda: {"weights_sha256": "start-hash"}, "close": lambda: None,
                   "rendezvous_address": lambda: "tcp://127.0.0.1:1", "join": lambda address: None}
        if name == "InferenceWorker":
            methods["generate"] = self._generate
        elif name == "StrategyHost":
            methods.update(pool_request=lambda: self.pool and PoolRequest(*self.pool),
                           add_pool=lambda groups, clock: None, add=self._add,
                           sample=self._sample, finish_step=lambda: {"reused_fraction": 0.0},
                           usage=lambda: {"use_count": {}, "staleness_total": 0, "strategy_seconds": 0.0,
                                          "strategy_calls": 0})
        elif name == "Trainer":
            methods.update(step=self._step, weights=lambda: (len(self.steps), {}), weights_sha256=lambda: "same")
        elif name == "Evaluator":
            methods["evaluate"] = lambda weights, index: {
                "trainer_step": weights[0], "metrics": {"accuracy": 0.0}, "samples": [], "busy_s": 0.0}
        return SimpleNamespace(**{m: self._method(f) for m, f in methods.items()})

    def _method(self, f):
        def call(*args, num_returns=1):
            value = f(*(a.value if isinstance(a, Ref) else a for a in args))  # as Ray resolves refs passed in
            return [Ref(v) for v in value] if num_returns > 1 else Ref(value)
        return SimpleNamespace(remote=call, options=lambda num_returns: SimpleNamespace(
            remote=lambda *args: call(*args, num_returns=num_returns)))

    def _generate(self, doc, n, seed, weights, version, pace=None):
        if self.pipeline is None or self.pipeline.run_started is None or self.pool_generations < (self.pool or (0,))[0]:
            self.pool_generations += 1  # the pool, generated in start() before the workers' first generations
            tokens = self.pool_tokens
        else:
            self.generations.append(self.pipeline.compute_used)
            tokens = self.gen_tokens
        assert len(self.generations) < 10_000, "runaway: the budget never stopped the run"
        return {"tokens": tokens, "rollouts": n, "version": version, "busy_s": 0.001,
                "paced_s": 0.001}, "group"

    def _add(self, group, clock):
        self.adds += 1

    def _sample(self, batch_size):
        if self.adds < self.adds_per_batch * (len(self.steps) + 1):
            return (None,) * (1 + self.pipeline.T)
        self.steps.append(self.pipeline.compute_used)
        return ({"tokens": self.batch_tokens, "samples": batch_size},
                *[([], None, 1 / self.pipeline.T)] * self.pipeline.T)

    def _step(self, part, publish, min_seconds):
        self.parts_trained += 1
        return {"stats": {"loss": 0.0, "grad_norm": 0.0}, "share": part[2], "completion_tokens": 1, "busy_s": 0.001,
                "paced_s": 0.001, "published": None}

    def get(self, refs, timeout=None):
        return [r.value for r in refs] if isinstance(refs, list) else refs.value if isinstance(refs, Ref) else refs

    def wait(self, refs, num_returns=1, timeout=None):
        return refs[:num_returns], refs[num_returns:]  # the oldest call is done first


def _scripted_pipeline(monkeypatch, fake, workers=3, trainers=1, budget=100_000, every=25_000):
    import benchmark.engine.ray.driver as rx
    from benchmark.engine.ledger import StrategySpec

    monkeypatch.setitem(sys.modules, "ray", fake)
    w = load_workload("arith-tiny", {"pipeline.devices": workers + trainers, "pipeline.workers": workers,
                                     "pipeline.trainers": trainers, "budget": budget, "eval.every": every})
    pipeline = rx.RayPipeline(w, w.load_task(), 0)
    pipeline.open_strategy(StrategySpec(FIFO, {}, {}))
    fake.pipeline = pipeline
    pipeline.start()
    pipeline.run()
    return pipeline, w


@pytest.mark.parametrize("gen_tokens, batch_tokens, pool", [
    (100, 400, None),  # mu * 100 / 3 per generation vs 400 / 1 per step: the trainer is the busier role
    (300, 100, None),  # the workers are
    (100, 400, (6, 4)),  # with a pool, charged to all devices before anything else
])
def test_ray_clock_is_the_busier_roles_normalised_time_after_the_pool(monkeypatch, gen_tokens, batch_tokens, pool):
    fake = ScriptedRay(gen_tokens=gen_tokens, batch_tokens=batch_tokens, pool=pool, pool_tokens=50)
    p, w = _scripted_pipeline(monkeypatch, fake)
    mu, W, T = w.pipeline.mu, 3, 1
    generated, trained = len(fake.generations) * gen_tokens, len(fake.steps) * batch_tokens
    pool_time = mu * 50 * pool[0] / 4 if pool else 0.0
    worker_time, trainer_time = mu * generated / W, trained / T
    assert p.trainer_step == len(fake.steps) > 5 and fake.parts_trained == len(fake.steps) * T
    assert p.clock == pytest.approx(pool_time + max(worker_time, trainer_time))
    assert p.compute_used == pytest.approx(4 * p.clock)
    assert p.trainer_idle_fraction() == pytest.approx(1 - trainer_time / p.clock)
    assert p.worker_idle_fraction() == pytest.approx(1 - worker_time / p.clock)
    assert min(p.trainer_idle_fraction(), p.worker_idle_fraction()) == pytest.approx(pool_time / p.clock)
    s = p.summary()
    assert s["virtual_time"] == pytest.approx(p.clock) and s["trainer_steps"] == len(fake.steps)
    pooled = pool[0] * pool[1] if pool else 0
    assert s["rollouts_generated"] == len(fake.generations) * w.grpo.group_size + pooled


@pytest.mark.parametrize("gen_tokens, batch_tokens", [(100, 400), (300, 100)])
def test_ray_budget_stops_new_work_and_counts_the_work_in_flight(monkeypatch, gen_tokens, batch_tokens):
    fake = ScriptedRay(gen_tokens=gen_tokens, batch_tokens=batch_tokens)
    p, w = _scripted_pipeline(monkeypatch, fake, budget=100_000)
    mu = w.pipeline.mu
    # nothing starts once the budget is spent ...
    assert max(fake.generations + fake.steps) < 100_000
    # ... and what was in flight then finishes and is counted: every generation and step started
    assert p.clock == pytest.approx(max(mu * len(fake.generations) * gen_tokens / 3, len(fake.steps) * batch_tokens))
    assert p.rollouts_generated == len(fake.generations) * w.grpo.group_size
    assert p.samples_trained == len(fake.steps) * w.grpo.batch_size
    # past the budget: at most one generation per worker (mu * gen_tokens / W each) and one step
    overshoot = 4 * max(3 * mu * gen_tokens / 3, batch_tokens)
    assert 100_000 <= p.compute_used <= 100_000 + overshoot + 1e-6
    assert fake.adds <= len(fake.generations)  # groups that finish after the stop are not handed over


def test_ray_evaluations_run_when_the_compute_reaches_their_point(monkeypatch):
    fake = ScriptedRay(gen_tokens=100, batch_tokens=400)
    p, _ = _scripted_pipeline(monkeypatch, fake, budget=100_000, every=25_000)
    history = p.eval_history
    assert [e["compute"] for e in history] == [0, 25_000, 50_000, 75_000, 100_000]
    step = 4 * 400  # the most one trainer step adds (the trainers are the busier role)
    for e in history:
        assert e["compute"] <= e["compute_at_eval"] <= e["compute"] + step + 1e-6
    assert [e["trainer_step"] for e in history] == sorted(e["trainer_step"] for e in history)
    assert history[0]["trainer_step"] == 0 and history[-1]["trainer_step"] <= p.trainer_step

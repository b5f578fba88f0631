"""Workloads: everything a run pins (task, model, pipeline, GRPO, budget, evaluation, seeds).

A workload is a YAML file in `workloads/`. `--set section.key=value` overrides one field for a
quick try; strategy hyperparameters are set with `--set name=value` (see `split_overrides`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from benchmark.errors import UserError
from benchmark.paths import WORKLOADS_DIR

LOSSES = ("grpo", "asymre")  # grpo: clipped importance ratio; asymre: asymmetric REINFORCE


class WorkloadError(UserError):
    """A workload that cannot be found or does not validate; the message names the fix."""


@dataclass
class ModelConfig:
    source: str = "tiny"  # "tiny" = the CPU model from tiny_lm; otherwise a hub id or a local path
    dtype: str = "float32"  # weights dtype: float32, bfloat16 or float16
    prompt_format: str = "auto"  # chat template of the tokenizer (chat), raw prompt (plain), or auto; see prompts.py
    chat_template_options: dict = field(default_factory=dict)  # keyword arguments of the chat template
    checkpoint: str = ""  # folder (relative to the repo) of the warm-started start checkpoint
    alphabet: str = ""  # tiny only: the characters of the tokenizer
    hidden_size: int = 192
    num_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 2
    max_positions: int = 64


@dataclass
class WarmStartConfig:
    """Supervised warm start of the tiny model (answer-only loss), stopped inside a target band."""

    seed: int = 0
    lr: float = 1e-3
    batch_size: int = 64
    max_steps: int = 3000
    eval_every: int = 25
    eval_problems: int = 500
    target_accuracy: float = 0.3  # stop at the first evaluation at or above this


@dataclass
class PipelineConfig:
    devices: int = 8  # W + T
    workers: int = 4
    trainers: int = 4
    sync_every: int = 1  # workers receive the trainers' weights every this many steps
    mu: float = 5.28  # cost of generating a token / cost of training on it (Qwen2.5-7B in the paper)
    mu_source: str = ""  # where mu comes from: "paper: ...", "measured: ...", or "unknown: ..." (a placeholder)
    grid: list[list[int]] = field(default_factory=list)  # the (W, T) splits swept for this workload, W + T = devices


@dataclass
class GRPOConfig:
    group_size: int = 8
    batch_size: int = 64  # rollouts per trainer step
    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    eps_low: float = 0.2
    eps_high: float = 0.2
    aggregation: str = "token_mean"
    loss: str = "grpo"  # "grpo" (clipped importance ratio) or "asymre" (asymmetric REINFORCE)
    asymre_delta: float = 0.1  # asymre: baseline V = group mean reward - delta
    temperature: float = 1.0  # sampling temperature of the training rollouts
    # memory only, same update: rollouts per forward/backward, gradients accumulated (0 = the whole batch)
    micro_batch_size: int = 0
    gradient_checkpointing: bool = False  # recompute activations in backward instead of keeping them
    # memory only, same update: how the T trainers hold the model. "ddp": each holds all of it (weights, gradients,
    # optimiser state); "fsdp": PyTorch's fully_shard, each holds 1/T of them, gathered layer by layer when used
    data_parallel: str = "ddp"


DATA_PARALLEL = ("ddp", "fsdp")


@dataclass
class EvalConfig:
    every: float = 10_000.0  # compute units between evaluations
    num_problems: int = 500
    temperature: float = 0.0  # pass@1; 0 = greedy (the paper uses 0.1)
    pass_k: list[int] = field(default_factory=lambda: [1, 4])
    pass_k_samples: int = 8  # n samples per problem at temperature 1.0 for pass@k
    pass_k_problems: int = 100
    num_logged_samples: int = 20  # eval completions kept as an artifact
    # what is evaluated: "task" (its test split) or "task:split"; the first gives eval/accuracy (what is
    # scored), the others eval/<task>[.<split>]/...; empty = the workload's task, test split
    tasks: list[str] = field(default_factory=list)


@dataclass
class LimitsConfig:
    """The rules of a strategy's resources in one run, the same in both modes; past one, the run ends with
    a verdict (timeout, memory, garbage). Far above honest use: the baselines take a few seconds a run."""

    strategy_seconds: float = 900.0  # all of the strategy's calls in one run, wall time
    call_seconds: float = 10.0  # one call, wall time; and in a box, its CPU time
    memory_mb: int = 2048  # the strategy's process (isolated runs)
    reply_mb: float = 64.0  # one checkpoint state of an isolated strategy (a call's reply: 1 MB)
    # Relative to the run: the calls' wall time may not pass floor_seconds + wall_share of the engine's own wall
    # time (so a strategy cannot stretch a run by more than that), nor the box's CPU time, every thread of it,
    # floor_seconds + cpu_share of the engine's CPU time. Honest strategies use well under 1% of either.
    floor_seconds: float = 30.0
    wall_share: float = 0.1
    cpu_share: float = 0.05


@dataclass
class Workload:
    name: str
    task: str
    version: str = "1"
    description: str = ""
    budget: float = 1_000_000.0  # compute units
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3])  # the seeds every entry is scored over
    # the reference's held-out seeds, whose runs set the target and are never scored (empty: the scored seeds)
    target_seeds: list[int] = field(default_factory=list)
    strategy_defaults: dict = field(default_factory=dict)  # per-workload strategy hyperparameters
    data_path: dict = field(default_factory=dict)  # task name -> local data (a path, or {split: path}); see tasks.py
    max_new_tokens: int = 0  # generation limit for training and evaluation; 0 = each task's max_gen_toks
    model: ModelConfig = field(default_factory=ModelConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        p, g = self.pipeline, self.grpo
        problems = []
        if p.workers < 1 or p.trainers < 1:
            problems.append("pipeline.workers and pipeline.trainers must be at least 1")
        if p.workers + p.trainers != p.devices:
            problems.append(f"pipeline.workers + pipeline.trainers must equal pipeline.devices ({p.devices}); "
                            f"got {p.workers} + {p.trainers}")
        if g.batch_size < 1 or g.group_size < 1:
            problems.append("grpo.batch_size and grpo.group_size must be positive")
        if self.eval.every <= 0 or self.budget <= 0:
            problems.append("budget and eval.every must be positive: raise --budget")
        if g.loss not in LOSSES:
            problems.append(f"grpo.loss must be one of {', '.join(LOSSES)}, not {g.loss!r}")
        if g.eps_low < 0 or g.eps_high < 0:
            problems.append("grpo.eps_low and grpo.eps_high must be >= 0")
        if g.data_parallel not in DATA_PARALLEL:
            problems.append(f"grpo.data_parallel must be one of {', '.join(DATA_PARALLEL)}, not {g.data_parallel!r}")
        if not isinstance(g.micro_batch_size, int) or g.micro_batch_size < 0:
            problems.append(f"grpo.micro_batch_size must be an integer >= 0 (0 = the whole batch), "
                            f"not {g.micro_batch_size!r}")
        if set(self.seeds) & set(self.target_seeds):
            problems.append("target_seeds must be apart from seeds: the runs that set the target are never scored")
        lim = self.limits
        if min(lim.strategy_seconds, lim.call_seconds, lim.memory_mb, lim.reply_mb) <= 0:
            problems.append("limits.strategy_seconds, call_seconds, memory_mb and reply_mb must be positive")
        if lim.floor_seconds <= 0 or not (0 < lim.wall_share <= 1 and 0 < lim.cpu_share <= 1):
            problems.append("limits.floor_seconds must be positive, limits.wall_share and cpu_share from 0 to 1")
        problems += self._model_and_task_problems()
        if problems:
            raise WorkloadError(f"workload {self.name}: " + "; ".join(problems))

    def load_task(self, name: str | None = None):
        """A task of this workload (default: the training task), reading data_path[name] if given
        (paths relative to the repository root)."""
        from benchmark.grading.tasks import load_task

        def resolve(path):
            return None if path is None else str(WORKLOADS_DIR.parent / path)  # an absolute path stays as is

        name = name or self.task
        data_path = self.data_path.get(name)
        if isinstance(data_path, dict):
            data_path = {split: resolve(path) for split, path in data_path.items()}
        elif data_path is not None:
            data_path = resolve(data_path)
        return load_task(name, data_path=data_path)

    def eval_targets(self) -> list[tuple[str, str]]:
        """(task, split) pairs evaluated, the scored one first."""
        return [tuple(t.split(":", 1)) if ":" in t else (t, "test") for t in self.eval.tasks] or [(self.task, "test")]

    def _model_and_task_problems(self) -> list[str]:
        from benchmark.grading.prompts import PROMPT_FORMATS
        from benchmark.grading.tasks import TASKS_DIR

        m, problems = self.model, []
        if m.dtype not in ("float32", "bfloat16", "float16"):
            problems.append(f"model.dtype must be float32, bfloat16 or float16, not {m.dtype!r}")
        if m.prompt_format not in PROMPT_FORMATS:
            problems.append(f"model.prompt_format must be one of {', '.join(PROMPT_FORMATS)}, not {m.prompt_format!r}")
        e = self.eval
        if e.pass_k_problems > 0 and e.pass_k and max(e.pass_k) > e.pass_k_samples:
            problems.append(f"eval.pass_k {e.pass_k} needs eval.pass_k_samples >= {max(e.pass_k)} "
                            f"(it is {e.pass_k_samples})")
        if self.max_new_tokens < 0:
            problems.append("max_new_tokens must be >= 0 (0 = the task's own limit)")
        devices = self.pipeline.devices
        for pair in self.pipeline.grid:
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, int) and x >= 1
                                                                               for x in pair) and sum(pair) == devices):
                problems.append(f"pipeline.grid entry {pair!r} must be [W, T] with W, T >= 1 and W + T = {devices}")
        tasks = {self.task} | {name for name, _ in self.eval_targets()}
        missing = sorted(t for t in tasks if not (TASKS_DIR / t / f"{t}.yaml").is_file())
        if missing:
            problems.append(f"no task {', '.join(missing)} (expected tasks/<name>/<name>.yaml)")
        unknown = sorted(set(self.data_path) - tasks)
        if unknown:
            problems.append(f"data_path names task(s) {', '.join(unknown)} that the workload neither trains nor "
                            f"evaluates on ({', '.join(sorted(tasks))})")
        return problems


SECTIONS = {"model": ModelConfig, "warm_start": WarmStartConfig, "pipeline": PipelineConfig,
            "grpo": GRPOConfig, "eval": EvalConfig, "limits": LimitsConfig}


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# What a field's annotation admits, checked before anything is built (a bool is not a number here).
TYPE_CHECKS = {
    "int": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "float": _is_number,
    "bool": lambda x: isinstance(x, bool),
    "str": lambda x: isinstance(x, str),
    "dict": lambda x: isinstance(x, dict),
    "list[int]": lambda x: isinstance(x, list) and all(TYPE_CHECKS["int"](i) for i in x),
    "list[str]": lambda x: isinstance(x, list) and all(isinstance(i, str) for i in x),
    "list[list[int]]": lambda x: isinstance(x, list) and all(TYPE_CHECKS["list[int]"](i) for i in x),
    "tuple[float, float]": lambda x: isinstance(x, (list, tuple)) and len(x) == 2 and all(map(_is_number, x)),
}
TYPE_NAMES = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "a string",
              "dict": "a mapping", "list[int]": "a list of whole numbers", "list[str]": "a list of strings",
              "list[list[int]]": "a list of lists of whole numbers", "tuple[float, float]": "two numbers"}


def _build(cls, data: dict, where: str):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise WorkloadError(f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    wrong = [f"{where}.{k} must be {TYPE_NAMES[fields[k].type]}, not {v!r}" for k, v in data.items()
             if fields[k].type in TYPE_CHECKS and not TYPE_CHECKS[fields[k].type](v)]
    if wrong:
        raise WorkloadError("; ".join(wrong))
    kwargs = dict(data)
    if cls is Workload:
        for key, section in SECTIONS.items():
            if key in kwargs:
                if not isinstance(kwargs[key], dict):
                    raise WorkloadError(f"{where}.{key} must be a mapping")
                kwargs[key] = _build(section, kwargs[key], f"{where}.{key}")
    if "betas" in kwargs:
        kwargs["betas"] = tuple(kwargs["betas"])
    return cls(**kwargs)


def workload_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise WorkloadError(f"workload file not found: {path}")
        return path
    path = WORKLOADS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise WorkloadError(f"unknown workload {name_or_path!r}; known: {', '.join(list_workloads())} "
                            f"(or pass the path of a workload .yaml file)")
    return path


def list_workloads() -> list[str]:
    return sorted(p.stem for p in WORKLOADS_DIR.glob("*.yaml"))


def parse_value(text: str):
    """'64' -> 64, '1e-4' -> 0.0001, 'true' -> True, '[1, 2]' -> [1, 2]; anything else stays a string."""
    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            return float(value)  # YAML reads '1e-4' as a string
        except ValueError:
            return value
    return value


def split_overrides(pairs: list[str]) -> tuple[dict, dict]:
    """`--set` pairs -> (workload overrides by dotted key, strategy hyperparameters)."""
    workload, strategy = {}, {}
    for pair in pairs:
        if "=" not in pair:
            raise WorkloadError(f"--set {pair!r}: use KEY=VALUE, e.g. --set buffer_size=64 or --set grpo.lr=1e-4")
        key, text = pair.split("=", 1)
        (workload if ("." in key or key == "budget") else strategy)[key.strip()] = parse_value(text)
    return workload, strategy


def load_workload(name_or_path: str, overrides: dict | None = None) -> Workload:
    path = workload_path(name_or_path)
    data = yaml.safe_load(path.read_text()) or {}
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    workload = _build(Workload, data, path.stem)
    workload.validate()
    return workload

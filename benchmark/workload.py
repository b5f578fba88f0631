"""Workloads: everything a run pins (task, model, pipeline, GRPO, budget, evaluation, seeds).

A workload is a YAML file in `workloads/`. `--set section.key=value` overrides one field for a
quick try; strategy hyperparameters are set with `--set name=value` (see `split_overrides`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from annotated_types import Gt
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError, WithJsonSchema

from benchmark import schema
from benchmark.errors import UserError
from benchmark.grading.prompts import PROMPT_FORMATS
from benchmark.paths import WORKLOADS_DIR

# grpo: clipped importance ratio; asymre: asymmetric REINFORCE; the off-policy losses of the async trainers:
# truncated importance sampling, CISPO, M2PO, AReaL's decoupled PPO (benchmark/rl/grpo.py says what each does)
LOSSES = ("grpo", "asymre", "tis", "cispo", "m2po", "decoupled_ppo")
DATA_PARALLEL = ("ddp", "fsdp")
DTYPES = ("float32", "bfloat16", "float16")

# A number as the YAML writes it: pydantic's float would turn `budget: 4_800_000` into 4800000.0, and the run
# configs hashed into group keys record it as an int
Number = Annotated[StrictInt | StrictFloat, WithJsonSchema({"type": "number"})]
PositiveNumber = Annotated[Number, Gt(0), WithJsonSchema({"type": "number", "exclusiveMinimum": 0})]


class WorkloadError(UserError):
    """A workload that cannot be found or does not validate; the message names the fix."""


class Section(BaseModel):
    # strict: a YAML "3" is not a number, 4.0 not a whole number, true neither
    model_config = ConfigDict(extra="forbid", strict=True)


class ModelConfig(Section):
    source: str = "tiny"  # "tiny" = the CPU model from tiny_lm; otherwise a hub id or a local path
    dtype: Literal[DTYPES] = "float32"  # weights dtype
    # chat template of the tokenizer (chat), raw prompt (plain), or auto; see prompts.py
    prompt_format: Literal[PROMPT_FORMATS] = "auto"
    chat_template_options: dict = {}  # keyword arguments of the chat template
    checkpoint: str = ""  # folder (relative to the repo) of the warm-started start checkpoint
    alphabet: str = ""  # tiny only: the characters of the tokenizer
    hidden_size: int = 192
    num_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 2
    max_positions: int = 64


class WarmStartConfig(Section):
    """Supervised warm start of the tiny model (answer-only loss), stopped inside a target band."""

    seed: int = 0
    lr: Number = 1e-3
    batch_size: int = 64
    max_steps: int = 3000
    eval_every: int = 25
    eval_problems: int = 500
    target_accuracy: Number = 0.3  # stop at the first evaluation at or above this


class PipelineConfig(Section):
    devices: int = 8  # W + T
    workers: int = 4
    trainers: int = 4
    sync_every: int = 1  # workers receive the trainers' weights every this many steps
    mu: Number = 5.28  # cost of generating a token / cost of training on it (Qwen2.5-7B in the paper)
    mu_source: str = ""  # where mu comes from: "paper: ...", "measured: ...", or "unknown: ..." (a placeholder)
    grid: list[list[int]] = []  # the (W, T) splits swept for this workload, W + T = devices


class GRPOConfig(Section):
    group_size: int = 8
    batch_size: int = 64  # rollouts per trainer step
    lr: Number = 1e-4
    betas: tuple[Number, Number] = Field((0.9, 0.999), strict=False)  # not strict: YAML gives a list
    weight_decay: Number = 0.0
    max_grad_norm: Number = 1.0
    eps_low: Number = 0.2
    eps_high: Number = 0.2
    aggregation: str = "token_mean"
    loss: Literal[LOSSES] = "grpo"
    asymre_delta: Number = 0.1  # asymre: baseline V = group mean reward - delta
    tis_cap: PositiveNumber = 2.0  # tis: the cap C of the per-token importance ratio
    m2po_tau: PositiveNumber = 0.04  # m2po: the bound on the kept tokens' mean (log ratio)^2 (the paper's 0.04)
    decoupled_cap: PositiveNumber = 5.0  # decoupled_ppo: the cap of the behaviour weight pi_prox / b
    temperature: Number = 1.0  # sampling temperature of the training rollouts
    # memory only, same update: rollouts per forward/backward, gradients accumulated (0 = the whole batch)
    micro_batch_size: int = 0
    gradient_checkpointing: bool = False  # recompute activations in backward instead of keeping them
    # memory only, same update: how the T trainers hold the model. "ddp": each holds all of it (weights, gradients,
    # optimiser state); "fsdp": PyTorch's fully_shard, each holds 1/T of them, gathered layer by layer when used
    data_parallel: Literal[DATA_PARALLEL] = "ddp"


class EvalConfig(Section):
    every: Number = 10_000.0  # compute units between evaluations
    num_problems: int = 500
    temperature: Number = 0.0  # pass@1; 0 = greedy (the paper uses 0.1)
    pass_k: list[int] = [1, 4]
    pass_k_samples: int = 8  # n samples per problem at temperature 1.0 for pass@k
    pass_k_problems: int = 100
    num_logged_samples: int = 20  # eval completions kept as an artifact
    # what is evaluated: "task" (its test split) or "task:split"; the first gives eval/accuracy (what is
    # scored), the others eval/<task>[.<split>]/...; empty = the workload's task, test split
    tasks: list[str] = []


class LimitsConfig(Section):
    """The rules of a strategy's resources in one run, the same in both modes; past one, the run ends with
    a verdict (timeout, memory, garbage). Far above honest use: the baselines take a few seconds a run."""

    strategy_seconds: Number = 900.0  # all of the strategy's calls in one run, wall time
    call_seconds: Number = 10.0  # one call, wall time; and in a box, its CPU time
    memory_mb: int = 2048  # the strategy's process (isolated runs)
    reply_mb: Number = 64.0  # one checkpoint state of an isolated strategy (a call's reply: 1 MB)
    # Relative to the run: the calls' wall time may not pass floor_seconds + wall_share of the engine's own wall
    # time (so a strategy cannot stretch a run by more than that), nor the box's CPU time, every thread of it,
    # floor_seconds + cpu_share of the engine's CPU time. Honest strategies use well under 1% of either.
    floor_seconds: Number = 30.0
    wall_share: Number = 0.1
    cpu_share: Number = 0.05


class TuningConfig(Section):
    """The same tuning budget for every entry (leaderboard/README.md, "Tuning"): each entry, the reference
    included, runs at most `trials` points of the search space it declares (its `tuning:` field) on the `seeds`,
    and is scored at the trial the rule picks. trials 0: no tuning; each entry is scored at its own settings (the
    reference's tuned by the workload's authors: "reference-tuned")."""

    trials: int = Field(0, ge=0)
    seeds: list[int] = []


class Workload(Section):
    name: str
    task: str
    version: str = "1"
    description: str = ""
    budget: Number = 1_000_000.0  # compute units
    seeds: list[int] = [0, 1, 2, 3]  # the seeds every entry is scored over
    # the reference's held-out seeds, whose runs set the target and are never scored (empty: the scored seeds)
    target_seeds: list[int] = []
    strategy_defaults: dict = {}  # per-workload strategy hyperparameters
    data_path: dict = {}  # task name -> local data (a path, or {split: path}); see tasks.py
    max_new_tokens: int = 0  # generation limit for training and evaluation; 0 = each task's max_gen_toks
    model: ModelConfig = Field(default_factory=ModelConfig)
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    tuning: TuningConfig = Field(default_factory=TuningConfig)

    def to_dict(self) -> dict:
        return self.model_dump()

    def check_rules(self, split: str = "pipeline.workers + pipeline.trainers") -> None:
        """The rules across fields and the ranges; each field's type is the schema's, checked on loading.
        `split`: what set (W, T), as the message names it (an entry sets them in its own fields)."""
        p, g = self.pipeline, self.grpo
        problems = []
        if p.workers < 1 or p.trainers < 1:
            problems.append("pipeline.workers and pipeline.trainers must be at least 1")
        if p.workers + p.trainers != p.devices:
            problems.append(f"{split} must equal pipeline.devices ({p.devices}); got {p.workers} + {p.trainers}")
        if g.batch_size < 1 or g.group_size < 1:
            problems.append("grpo.batch_size and grpo.group_size must be positive")
        if self.eval.every <= 0 or self.budget <= 0:
            problems.append("budget and eval.every must be positive: raise --budget")
        if g.eps_low < 0 or g.eps_high < 0:
            problems.append("grpo.eps_low and grpo.eps_high must be >= 0")
        if g.micro_batch_size < 0:
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
        from benchmark.grading.tasks import TASKS_DIR

        problems, e = [], self.eval
        if e.pass_k_problems > 0 and e.pass_k and max(e.pass_k) > e.pass_k_samples:
            problems.append(f"eval.pass_k {e.pass_k} needs eval.pass_k_samples >= {max(e.pass_k)} "
                            f"(it is {e.pass_k_samples})")
        if self.max_new_tokens < 0:
            problems.append("max_new_tokens must be >= 0 (0 = the task's own limit)")
        devices = self.pipeline.devices
        for pair in self.pipeline.grid:
            if not (len(pair) == 2 and min(pair) >= 1 and sum(pair) == devices):
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


def load_workload(name_or_path: str, overrides: dict | None = None,
                  split: str = "pipeline.workers + pipeline.trainers") -> Workload:
    """The workload with `overrides` (dotted keys) applied, checked; `split` names what set (W, T) in the
    message that they do not add up to the devices."""
    path = workload_path(name_or_path)
    data = yaml.safe_load(path.read_text()) or {}
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    try:
        workload = Workload.model_validate(data)
    except ValidationError as exc:
        raise WorkloadError("; ".join(schema.problems(exc, Workload, data, path.stem))) from None
    workload.check_rules(split)
    return workload

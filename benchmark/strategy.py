"""The one interface a submission implements: a replay strategy (what is stored, evicted, sampled).

Strategies are plain Python files loaded by path, as AlgoPerf loads submissions. A file defines
one subclass of `ReplayStrategy` (or names it in `STRATEGY = MyClass`).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from benchmark.errors import UserError
from benchmark.rollout import Rollout


class StrategyError(UserError):
    """A strategy file that cannot be loaded or does not honour the API; the message names the fix."""


class StrategyFailure(StrategyError):
    """A strategy that broke the rules during a run; the message is the verdict '<kind>: <detail>'
    (raised, timeout, memory, crashed, forbidden, garbage, fabricated, tampered, stalled)."""


@dataclass(frozen=True)
class StrategyContext:
    """Read-only facts the engine shares with the strategy at each call.

    policy_version: the trainers' weights: the number of parameter updates done so far (a rollout's
        off-policiness is policy_version - rollout.policy_version).
    generations_in_flight, group_size, batch_size: what admission control needs to bound staleness (a generation
        started now is trained no earlier than the data already generated and in flight).
    rng: seeded random generator owned by the engine; the only randomness a strategy may use,
        so runs are reproducible and resumable.
    use_count: rollout_id -> how many times that rollout was trained on so far (read-only view).
    num_trainers: T. The batch is split into T contiguous slices (`trainer_slices`), slice i
        for trainer i; the trainers' gradients are averaged, as in data-parallel training.
    """

    policy_version: int
    rng: np.random.Generator
    use_count: Mapping[int, int]
    num_trainers: int = 1
    generations_in_flight: int = 0  # generations the workers have started and not yet handed over
    group_size: int = 0  # G: rollouts per generation
    batch_size: int = 0  # B: rollouts per trainer step

    def trainer_slices(self, batch_size: int) -> list[slice]:
        """Which positions of a batch each trainer gets: sizes differ by at most one."""
        base, extra = divmod(batch_size, self.num_trainers)
        slices, start = [], 0
        for i in range(self.num_trainers):
            stop = start + base + (1 if i < extra else 0)
            slices.append(slice(start, stop))
            start = stop
        return slices


@dataclass(frozen=True)
class Batch:
    """What `sample` may return instead of a plain list. `weights`: a loss weight per sample (e.g.
    the importance weights of prioritized replay), finite and non-negative."""

    rollouts: list[Rollout]
    weights: list[float] | None = None
    # Sets of batch positions whose group-relative advantages the engine recomputes together, e.g.
    # a prompt's fresh rollouts plus replayed successes (RLEP). Other positions keep their advantage.
    regroup: list[list[int]] | None = None
    # Batch positions whose old log-probs the trainer recomputes with the current policy before the update, as
    # RLEP's code does for replayed samples: their importance ratio is 1, so they are never clipped away.
    recompute_behaviour: list[int] | None = None

    @staticmethod
    def of(sampled) -> Batch:
        """What `sample` returned, as a Batch: a plain list is a batch with no weights and no regrouping."""
        return sampled if isinstance(sampled, Batch) else Batch(sampled)


class PoolRequest(NamedTuple):
    """What `pool_request` may return: a pool of rollouts generated before training starts, charged in full.

    prompts: the first `prompts` prompts of the training stream; samples: completions per prompt.
    trained_for: the share of the budget first spent training the starting policy with the no-buffer reference
        (on_policy, this run's seed and split), whose policy then samples the pool (RLEP's phase 1); training then
        starts again from the starting policy. 0: the starting policy samples the pool.
    """

    prompts: int
    samples: int
    trained_for: float = 0.0


@dataclass(frozen=True)
class UpdateFeedback:
    """What `on_update` receives after each trainer step: the batch just trained, per sample, as plain data.

    loss: each sample's loss (the token mean of its per-token loss, its weight included); clip_fraction: the share
    of its tokens whose ratio the loss clipped, truncated or masked; logprobs: per completion token, the log-probs
    of the policy that took the step, before the update (the step's own forward: free); logprobs_after: the same
    after the update, only for a strategy with `feedback_after_update = True`, which pays for that forward pass.
    """

    step: int  # the trainer step just taken: policy_version is now step + 1
    rollout_ids: list[int]
    loss: list[float]
    clip_fraction: list[float]
    logprobs: list[list[float]]
    logprobs_after: list[list[float]] | None = None


HOOKS = ("admit", "on_update", "next_prompt")  # the optional calls: the engine makes them only when defined


class ReplayStrategy:
    """Base class of every buffer strategy.

    Constructor keyword arguments are the strategy's hyperparameters (for example `buffer_size`);
    the workload or the command line (`--set buffer_size=64`) sets them.

    `add` and `sample` are the whole of most strategies. The optional hooks (HOOKS) are called only when the
    class defines them: `admit` (admission control, every track), `on_update` (training feedback, every track)
    and `next_prompt` (prompt scheduling, the prompt track only).
    """

    # on_update's logprobs_after: one more forward pass over the batch after each step, charged in the cost model
    # as a third of the step's training time (a forward of a forward and backward)
    feedback_after_update: bool = False

    def add(self, rollouts: list[Rollout], ctx: StrategyContext) -> None:
        """Receive a freshly generated group of rollouts (all share one group_id and prompt).

        Called once per finished generation, in virtual-time order. Keep, drop or evict as you like.
        """
        raise NotImplementedError

    def sample(self, batch_size: int, ctx: StrategyContext) -> list[Rollout] | Batch | None:
        """Return exactly `batch_size` rollouts to train on now, or None if there is not enough data.

        Only rollouts previously passed to `add` may be returned (repeats allowed). Returning None
        makes the trainers wait until the next `add`. Idle trainers still cost compute. A `Batch`
        adds a loss weight per sample (each sample's token losses are multiplied by it).
        """
        raise NotImplementedError

    def pool_request(self) -> PoolRequest | tuple[int, int] | None:
        """Optional: a `PoolRequest` (or (prompts, samples_per_prompt)): completions for the first prompts of the
        training stream, generated before training starts by the starting policy, or by a policy first trained
        on-policy for `trained_for` of the budget. All W + T devices generate it and all its compute, training
        included, is charged. The rollouts arrive through `add_pool`. Default: no pool."""
        return None

    def add_pool(self, rollouts: list[Rollout], ctx: StrategyContext) -> None:
        """Receive the pool asked for by `pool_request` (all its rollouts, once)."""
        raise NotImplementedError

    def admit(self, ctx: StrategyContext) -> bool:
        """Optional admission control: may a free worker start a generation now? False holds it back (it idles,
        and idle workers still cost compute) until the engine asks again, after the next generation or trainer
        step ends. Bounds staleness without discarding (AReaL's max_head_offpolicyness, SkyRL's
        max_staleness_steps). A run in which every worker is held while `sample` waits for data ends with a
        verdict."""
        return True

    def on_update(self, feedback: UpdateFeedback, ctx: StrategyContext) -> None:
        """Optional training feedback, after each trainer step, before the next `sample` (priority refresh as
        in prioritized replay, gradient-based gating)."""

    def next_prompt(self, ctx: StrategyContext) -> str | None:
        """Optional, prompt track only: when a worker starts a generation, the prompt_id of a prompt already
        generated in this run to generate again (Prompt Replay), or None for the training stream's next prompt.
        The stream itself never repeats a prompt."""
        return None

    def state_dict(self) -> dict:
        """Everything needed to resume the strategy exactly. Default: a deep copy of its attributes."""
        return copy.deepcopy(vars(self))

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        vars(self).update(copy.deepcopy(state))


def checked_admission(reply) -> bool:
    """What `admit` returned, checked (the same in process and in the box)."""
    if type(reply) is not bool:
        raise StrategyFailure(f"garbage: admit() must return True or False, got {type(reply).__name__}")
    return reply


def checked_prompt_choice(reply) -> str | None:
    """What `next_prompt` returned, checked for its kind (the engine then checks the prompt is its own)."""
    if reply is not None and not isinstance(reply, str):
        raise StrategyFailure(f"garbage: next_prompt() must return a prompt_id (a string) or None, got "
                              f"{type(reply).__name__}")
    return reply


def defined_hooks(strategy: ReplayStrategy | type[ReplayStrategy]) -> tuple[str, ...]:
    """The optional hooks a strategy's class defines (its own or a base class's other than ReplayStrategy)."""
    cls = strategy if inspect.isclass(strategy) else type(strategy)
    return tuple(h for h in HOOKS if getattr(cls, h, None) is not getattr(ReplayStrategy, h))


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_strategy_class(path: str | Path, source: bytes | None = None) -> type[ReplayStrategy]:
    """Import a strategy file and return its ReplayStrategy subclass. `source`: the file's bytes as the engine
    read them (the box gets those, not the file, so that what runs is what was hashed and logged)."""
    path = Path(path)
    if source is None:
        if not path.is_file() or path.suffix != ".py":
            raise StrategyError(f"strategy file {'not found' if not path.is_file() else 'is not Python'}: {path} "
                                "(pass the path of a .py file, e.g. baselines/fifo_uniform.py)")
        source = path.read_bytes()
    module_name = f"replaybench_strategy_{hashlib.sha256(source).hexdigest()[:12]}"
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(module_name, loader=None))
    module.__file__ = str(path)
    sys.modules[module_name] = module  # pickling and dataclasses need the module to be importable by name
    try:
        exec(compile(source, str(path), "exec"), vars(module))
    except Exception as exc:
        raise StrategyError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    cls = getattr(module, "STRATEGY", None)
    if cls is None:
        found = [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, ReplayStrategy) and obj is not ReplayStrategy
            and obj.__module__ == module_name
        ]
        if len(found) != 1:
            names = ", ".join(c.__name__ for c in found) or "none"
            raise StrategyError(
                f"{path} must define exactly one subclass of benchmark.ReplayStrategy "
                f"(found: {names}); set STRATEGY = YourClass to choose one"
            )
        cls = found[0]
    if not (inspect.isclass(cls) and issubclass(cls, ReplayStrategy)):
        raise StrategyError(f"{path}: STRATEGY must be a subclass of benchmark.ReplayStrategy")
    for method in ("add", "sample"):
        if getattr(cls, method) is getattr(ReplayStrategy, method):
            raise StrategyError(f"{path}: {cls.__name__} does not implement {method}(); see benchmark/strategy.py")
    return cls


def strategy_params(cls: type[ReplayStrategy]) -> dict:
    """The hyperparameters a strategy accepts, with their defaults (None where there is none)."""
    params = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        params[name] = None if p.default is inspect.Parameter.empty else p.default
    return params


def _declared_init(path: str | Path) -> ast.FunctionDef | bool | None:
    """The chosen class's `__init__` in the file's source; True when it inherits ReplayStrategy's (no
    parameters); None when the source does not say (no single class, another base, a file that does not parse)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    chosen = [node.value.id for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
              and any(isinstance(t, ast.Name) and t.id == "STRATEGY" for t in node.targets)]
    if not chosen:
        chosen = [name for name, node in classes.items()
                  if any(ast.unparse(base).split(".")[-1] == "ReplayStrategy" for base in node.bases)]
    if len(chosen) != 1 or chosen[0] not in classes:
        return None
    cls = classes[chosen[0]]
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:  # ReplayStrategy's own __init__ takes nothing; another base's is not in this file
        return [ast.unparse(b).split(".")[-1] for b in cls.bases] == ["ReplayStrategy"] or None
    return None if init.args.kwarg is not None else init


def declared_params(path: str | Path) -> list[str] | None:
    """The hyperparameters the strategy file's class declares in `__init__`, read from its source without
    running it (an untrusted file is never imported outside its box); None when the source does not say
    (no single class, an inherited `__init__`, **kwargs, a file that does not parse)."""
    init = _declared_init(path)
    if not isinstance(init, ast.FunctionDef):
        return [] if init is True else None
    args = init.args
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]]


KINDS = {"int": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
         "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
         "bool": ("true or false", lambda v: isinstance(v, bool)),
         "str": ("a string", lambda v: isinstance(v, str))}


def _default_nodes(init: ast.FunctionDef) -> dict[str, ast.expr]:
    """Each parameter's default as the source writes it, by name; parameters without one are left out."""
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return defaults


def declared_defaults(path: str | Path) -> dict:
    """The hyperparameters' defaults that the source writes as literals (`buffer_size: int = 256`), read without
    running the file; others (no default, an expression) are left out."""
    init = _declared_init(path)
    if not isinstance(init, ast.FunctionDef):
        return {}
    literals = {}
    for name, node in _default_nodes(init).items():
        try:
            literals[name] = ast.literal_eval(node)
        except (ValueError, TypeError, RecursionError):  # not a literal: the source does not say a value
            continue
    return literals


def declared_param_kinds(path: str | Path) -> dict[str, str]:
    """Each hyperparameter's kind (int, float, bool, str) as the source states it: its annotation, or else
    the type of its literal default; parameters of no such kind are left out."""
    init = _declared_init(path)
    if not isinstance(init, ast.FunctionDef):
        return {}
    args = init.args
    defaults = _default_nodes(init)
    kinds = {}
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]:
        if arg.annotation is not None:
            kind = ast.unparse(arg.annotation)
        elif isinstance(defaults.get(arg.arg), ast.Constant) and defaults[arg.arg].value is not None:
            kind = type(defaults[arg.arg].value).__name__
        else:
            continue
        if kind in KINDS:
            kinds[arg.arg] = kind
    return kinds


def check_params(path: str | Path, params: dict, accepted: list[str] | None, place=None) -> None:
    """A hyperparameter the strategy does not take, or of another kind than its source states, is the
    user's error: one message naming what it takes. `place(name)`: where that parameter is set, named beside
    it (a submission sets buffer_size and the others in different fields)."""
    unknown = sorted(set(params) - set(accepted)) if accepted is not None else []
    if unknown:
        named = [f"{name} ({place(name)})" if place else name for name in accepted]
        raise StrategyError(f"{Path(path).name} does not take {', '.join(unknown)}; its parameters are: "
                            f"{', '.join(named) or 'none'}")
    kinds = declared_param_kinds(path)
    wrong = [f"{name} must be {KINDS[kinds[name]][0]}, not {value!r}" for name, value in params.items()
             if name in kinds and not KINDS[kinds[name]][1](value)]
    if wrong:
        raise StrategyError(f"{Path(path).name}: " + "; ".join(wrong))


def build_strategy(path: str | Path, params: dict, defaults: dict | None = None,
                   source: bytes | None = None) -> ReplayStrategy:
    """The strategy with `params`; `defaults` (the workload's) fill in only what it accepts."""
    cls = load_strategy_class(path, source)
    accepted = strategy_params(cls)
    params = {**{k: v for k, v in (defaults or {}).items() if k in accepted}, **params}
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise StrategyError(
            f"{cls.__name__} does not take {', '.join(unknown)}; its parameters are: {', '.join(accepted) or 'none'}"
        )
    try:
        return cls(**params)
    except Exception as exc:
        raise StrategyError(f"{cls.__name__}({params}) failed: {type(exc).__name__}: {exc}") from exc

"""Entries: a submission (`submissions/<entry>/submission.yaml` + `strategy.py`) and each reference baseline
(an item of `baselines/baselines.yaml`) are described by the same fields, checked by the same validator
(`parse_entry`), and run under the rules.

Tracks:
  buffer  the entry chooses only its strategy, its (W, T) and its buffer size; the loss is GRPO, and its batches
          keep the engine's advantages and behaviour log-probs (the ledger's `check_batch`).
  open    it may also choose a registered loss (benchmark.workload.LOSSES) and, under `grpo:`, the clip range,
          the losses' own settings and the learning rate (OPEN_TRACK_GRPO), and regroup advantages or recompute
          behaviour log-probs in its batches.
  prompt  as the buffer track, and its strategy may also choose which prompt a worker generates next
          (`next_prompt`: a prompt already generated in the run, again), which changes the training stream.
Admission control (`admit`) and training feedback (`on_update`) are open to every track: the first only delays
generation (idle workers cost compute), the second only informs. A run without a track tag is on the buffer track.
Everything else (model, task, learning rate, G, B, evaluation, budget, seeds) is the workload's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from benchmark import schema
from benchmark.errors import UserError
from benchmark.paths import BASELINES_DIR, REPO_ROOT
from benchmark.strategy import check_params, declared_defaults, declared_params
from benchmark.workload import LOSSES, PositiveNumber, Workload, load_workload

TRACKS = ("buffer", "open", "prompt")
DEFAULT_TRACK = "buffer"
# the GRPO settings an open-track entry may choose (RLEP's clip-higher eps_high 0.28; the paper's theory sets the
# learning rate jointly with N, the replay count and B)
OPEN_TRACK_GRPO = ("asymre_delta", "decoupled_cap", "eps_low", "eps_high", "lr", "m2po_tau", "tis_cap")
BASELINES_FILE = BASELINES_DIR / "baselines.yaml"


class SubmissionError(UserError):
    """A submission that does not validate; the message names every problem and its fix."""




class EntryFields(BaseModel):
    """The fields of a submission.yaml, and of each entry of baselines/baselines.yaml."""

    model_config = ConfigDict(extra="forbid", strict=True)  # strict: YAML's "5" is no number of workers

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # it names runs and files
    authors: list[str] | str
    contact: str
    description: str
    # relative to the entry's folder; the class: the file's one subclass, or STRATEGY = X
    strategy: str = Field(pattern=r"\.py$")
    track: Literal[TRACKS]
    workers: PositiveInt
    trainers: PositiveInt
    # left out: the workload's strategy_defaults buffer_size, where the constructor takes one, else the
    # constructor's default (`Submission.buffer_size_in_words`); a `null` is refused: no size is not a size
    buffer_size: PositiveInt = None
    hyperparameters: dict = {}
    loss: Literal[LOSSES] = "grpo"
    sync_every: PositiveInt = None  # trainer steps between the workers' weight updates (default: the workload's)
    grpo: dict[Literal[OPEN_TRACK_GRPO], PositiveNumber] = {}
    # the search space of a workload with tuning (TuningConfig): `split` ("W,T" strings), `buffer_size`, a
    # hyperparameter's name, or (open track) `grpo.<setting>`, each with the list of its values
    tuning: dict[str, list] = {}

    @field_validator("hyperparameters")
    @classmethod
    def _buffer_size_at_the_top(cls, hyperparameters: dict) -> dict:
        if "buffer_size" in hyperparameters:
            raise ValueError("set buffer_size at the top level, not under hyperparameters")
        return hyperparameters

    # track comes before them, so that info.data holds it (when it is valid)
    @field_validator("loss")
    @classmethod
    def _loss_on_the_open_track(cls, loss: str, info: ValidationInfo) -> str:
        if loss != "grpo" and info.data.get("track") == "buffer":
            raise ValueError("the buffer track fixes the loss to grpo: remove `loss` or use track: open")
        return loss

    @field_validator("grpo")
    @classmethod
    def _grpo_on_the_open_track(cls, grpo: dict, info: ValidationInfo) -> dict:
        if grpo and info.data.get("track") == "buffer":
            raise ValueError("the buffer track fixes the GRPO settings: remove `grpo` or use track: open")
        return grpo

    @field_validator("tuning")
    @classmethod
    def _tuning_space(cls, tuning: dict, info: ValidationInfo) -> dict:
        for key, values in tuning.items():
            if not values:
                raise ValueError(f"tuning.{key} must list at least one value")
            if key.startswith("grpo."):
                if key[5:] not in OPEN_TRACK_GRPO or info.data.get("track") != "open":
                    raise ValueError(f"tuning.{key}: only an open-track entry tunes GRPO settings, and only "
                                     f"{', '.join(OPEN_TRACK_GRPO)}")
            elif key == "split" and not all(isinstance(v, str) and _split(v) for v in values):
                raise ValueError('tuning.split must list "W,T" strings of whole numbers >= 1, e.g. ["6,2", "5,3"]')
        return tuning


def _split(text: str) -> tuple[int, int] | None:
    parts = text.split(",")
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 and all(
        p.strip().isdigit() and int(p) >= 1 for p in parts) else None


# what a field must be, where its schema's pattern cannot say it
PHRASES = {"name": "1-64 letters, digits, '.', '_' or '-' (it names runs and files)", "strategy": "a .py file",
           "hyperparameters": "a mapping (name: value)"}


@dataclass
class Submission:
    folder: Path
    name: str
    authors: list[str]
    contact: str
    description: str
    strategy: Path
    track: str
    workers: int
    trainers: int
    buffer_size: int | None = None
    hyperparameters: dict = field(default_factory=dict)
    loss: str = "grpo"
    sync_every: int | None = None  # trainer steps between the workers' weight updates (default: the workload's)
    grpo: dict = field(default_factory=dict)  # open track: OPEN_TRACK_GRPO settings
    tuning: dict = field(default_factory=dict)  # the search space it declares (EntryFields.tuning)

    def tuning_trials(self, trials: int) -> list[Submission]:
        """The entry at each point of its search space it runs under a tuning budget of `trials`: the grid's
        points in order, or, when there are more, `trials` of them drawn by a generator seeded with the entry's
        name (in grid order). No search space: the entry's own settings, one trial."""
        keys = list(self.tuning)
        points = list(itertools.product(*(self.tuning[k] for k in keys))) or [()]
        if len(points) > trials > 0:
            seed = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:4], "big")
            points = [points[i] for i in sorted(random.Random(seed).sample(range(len(points)), trials))]
        return [self._at(dict(zip(keys, point))) for point in points]

    def _at(self, point: dict) -> Submission:
        """The entry with a point of its search space in place of its own settings."""
        changes, hyper, grpo = {}, dict(self.hyperparameters), dict(self.grpo)
        for key, value in point.items():
            if key == "split":
                changes["workers"], changes["trainers"] = _split(value)
            elif key == "buffer_size":
                changes["buffer_size"] = value
            elif key.startswith("grpo."):
                grpo[key[5:]] = value
            else:
                hyper[key] = value
        return dataclasses.replace(self, **changes, hyperparameters=hyper, grpo=grpo)

    def content_sha256(self) -> str:
        """Hash of every file of the entry (names and bytes): what was run is what is on record."""
        digest = hashlib.sha256()
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(self.folder)).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()

    def strategy_params(self) -> dict:
        """The strategy's keyword arguments: buffer_size first, then the other hyperparameters (the order the
        reference baselines' run configs record)."""
        size = {} if self.buffer_size is None else {"buffer_size": self.buffer_size}
        return {**size, **self.hyperparameters}

    def workload_for(self, workload_name: str, budget: float | None = None, overrides: dict | None = None) -> Workload:
        """The workload with the entry's (W, T) and loss; `overrides` (e.g. --set) may change anything else,
        and the loss. An entry that cannot run on it (its (W, T), its buffer size) is refused before any run."""
        overrides = {"grpo.loss": self.loss, **{f"grpo.{k}": v for k, v in self.grpo.items()}, **(overrides or {}),
                     "pipeline.workers": self.workers, "pipeline.trainers": self.trainers}
        if self.sync_every is not None:
            overrides["pipeline.sync_every"] = self.sync_every
        if budget is not None:
            overrides["budget"] = budget
        workload = load_workload(workload_name, overrides, split="workers + trainers (the entry's own fields)")
        self._check_buffer_holds_a_batch(workload)
        return workload

    def _check_buffer_holds_a_batch(self, workload: Workload) -> None:
        """A buffer smaller than one batch never hands one over: the run would spend its whole budget waiting
        and fail at the end (runner._finish), so say it now."""
        batch, group = workload.grpo.batch_size, workload.grpo.group_size
        if self.buffer_size is None or self.buffer_size >= batch:
            return
        prompts = f": {batch // group} prompts x group_size {group}" if batch % group == 0 else ""
        default = workload.strategy_defaults.get("buffer_size")
        raise SubmissionError(
            f"entry {self.name}: buffer_size {self.buffer_size} is smaller than one batch of {workload.name}, "
            f"{batch} rollouts a trainer step (grpo.batch_size{prompts}), so the buffer never holds a batch: set "
            f"buffer_size to at least {batch}" + (f" (the workload's default is {default})" if default else ""))

    @staticmethod
    def param_place(name: str) -> str:
        """Where an entry sets a strategy hyperparameter."""
        return "the top-level field buffer_size" if name == "buffer_size" else "under hyperparameters"

    def check_strategy_params(self) -> None:
        """The hyperparameters' names and kinds against the constructor, read from the file (not run); the
        hint says where the entry sets each one."""
        check_params(self.strategy, self.strategy_params(), declared_params(self.strategy), self.param_place)

    def buffer_size_in_words(self, workload: Workload) -> str:
        """The buffer size the entry's runs on `workload` use, and where it comes from when the entry leaves it
        out: the workload's strategy_defaults fill in what the constructor takes (ledger.open_strategy)."""
        if self.buffer_size is not None:
            return f"buffer_size {self.buffer_size}"
        accepted = declared_params(self.strategy)
        if accepted is not None and "buffer_size" not in accepted:
            return "buffer_size: not set, and the strategy takes none"
        constructor = declared_defaults(self.strategy).get("buffer_size")
        theirs = "" if constructor is None else f" {constructor}"
        if "buffer_size" not in workload.strategy_defaults:
            return f"buffer_size: not set, the constructor's default{theirs} applies"
        default = workload.strategy_defaults["buffer_size"]
        if accepted is None:  # **kwargs or an inherited __init__: only the class, once run, says what it takes
            return (f"buffer_size: not set, {workload.name}'s default {default} (its strategy_defaults) applies if "
                    "the constructor names buffer_size")
        instead = f", not the constructor's{theirs}" if constructor != default else ""
        return f"buffer_size: not set, {workload.name}'s default {default} (its strategy_defaults) applies{instead}"


def submission_folder(name: str | Path) -> Path | None:
    """The submission folder a name gives: from the working directory, else from the repository's root (how a
    campaign file names its entries, e.g. submissions/example_entry); None when neither holds a submission.yaml."""
    for folder in (Path(name), REPO_ROOT / name):
        if (folder / "submission.yaml").is_file():
            return folder
    return None


def load_submission(folder: str | Path) -> Submission:
    """submissions/<entry>/: its submission.yaml, validated, with the strategy file beside it."""
    folder = Path(folder)
    path = folder / "submission.yaml"
    if not path.is_file():
        raise SubmissionError(f"{path} not found: a submission is a folder with submission.yaml and strategy.py "
                              "(copy submissions/example_entry)")
    check_folder(folder)
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise SubmissionError(f"{path} must be a mapping of fields")
    return parse_entry(data, folder, str(path))


MAX_ENTRY_MB = 16  # an entry is code and a little data; its content hash reads every byte


def check_folder(folder: Path) -> None:
    """What is hashed and run is the folder's own files: no links out of it, and a size that hashes quickly."""
    links = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_symlink())
    if links:
        raise SubmissionError(f"{folder}: an entry holds no symbolic links ({', '.join(links[:3])}): copy the files "
                              "into the folder")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    if size > MAX_ENTRY_MB * 2**20:
        raise SubmissionError(f"{folder} holds {size / 2**20:.0f} MB; an entry may hold at most {MAX_ENTRY_MB} MB: "
                              "remove data and caches from it")


@dataclass
class Baselines:
    entries: dict[str, Submission]  # by name, in the file's order
    default: list[str]  # what `replaybench baselines` runs without --strategies


def load_baselines(path: Path = BASELINES_FILE) -> Baselines:
    """baselines/baselines.yaml: `entries`, each one entry as a submission.yaml holds it (strategy files beside
    the YAML), and `default`, the names run by default."""
    data = _read_yaml(path)
    layout = "a mapping of `default` (a list of entry names) and `entries` (a list of entries, each with the " \
             "fields of a submission.yaml)"
    if not isinstance(data, dict) or set(data) != {"default", "entries"} or not isinstance(data["entries"], list):
        found = f"top-level keys {', '.join(map(str, data))}" if isinstance(data, dict) else type(data).__name__
        raise SubmissionError(f"{path} must be {layout}; found {found}")
    entries = {}
    for index, item in enumerate(data["entries"]):
        name = item.get("name", f"#{index + 1}") if isinstance(item, dict) else f"#{index + 1}"
        where = f"{path}, entry {name}"
        if not isinstance(item, dict):
            raise SubmissionError(f"{where} must be a mapping of fields")
        if name in entries:
            raise SubmissionError(f"{where}: the name is taken by an earlier entry")
        entries[name] = parse_entry(item, path.parent, where)
    default = data["default"] if isinstance(data["default"], list) else [data["default"]]
    unknown = [str(n) for n in default if n not in entries]
    if unknown:
        raise SubmissionError(f"{path}: `default` names no entry {', '.join(unknown)} (entries: {', '.join(entries)})")
    return Baselines(entries, default)


def _read_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise SubmissionError(f"{path} is not valid YAML: {exc}") from exc


def parse_entry(data: dict, folder: Path, where: str) -> Submission:
    """One entry's fields, validated: every problem in one SubmissionError headed by `where`. The strategy file
    is relative to `folder`."""
    try:
        entry, problems = EntryFields.model_validate(data), []
    except ValidationError as exc:
        entry, problems = None, schema.problems(exc, EntryFields, data, phrases=PHRASES)
    strategy = folder / str(data.get("strategy", ""))
    if isinstance(data.get("strategy"), str):
        if not strategy.resolve().is_relative_to(folder.resolve()):
            # the entry's content hash covers its folder only: the code run must be in it
            problems.append(f"strategy {data['strategy']!r} is outside the entry's folder {folder}: put the file in it")
        elif not strategy.is_file():
            problems.append(f"strategy file {strategy} not found")
    if problems:
        raise SubmissionError(f"{where}:\n  - " + "\n  - ".join(problems))
    fields = entry.model_dump()
    authors = fields.pop("authors")
    return Submission(**fields | {"folder": folder, "strategy": strategy,
                                  "authors": authors if isinstance(authors, list) else [authors]})

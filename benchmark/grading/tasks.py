"""Tasks, defined as lm-evaluation-harness YAML files in `tasks/<name>/<name>.yaml`.

One definition serves RL training (training split, prompt, reward) and evaluation (test split,
the same prompt and scoring): the reward of a completion is the task's `process_results` metric.
`!function utils.f` tags resolve to functions in the `utils.py` beside the YAML, as in lm-eval.

Where a split's documents come from, first match wins:
1. `metadata.data_path` (a path, or {split: path}; `load_task(..., data_path=...)` replaces it): a local
   .jsonl/.parquet file, or a folder read by `datasets.load_dataset(folder, name=dataset_name)` (e.g. a
   snapshot of a hub data set). Relative paths are relative to the task folder.
2. `dataset_path: json`: the file `dataset_kwargs.data_files[split]`, relative to the task folder.
3. any other `dataset_path` is a hub id: `datasets.load_dataset(dataset_path, name=dataset_name, split=split)`.
   An unreachable hub fails at once with a TaskError that names the fix (a local data_path).

Two optional metadata entries shape the training data (our loader's; lm-eval ignores metadata):
- `heldout: {size, seed}` adds the split "heldout": `size` rows of the training split (at most a fifth
  of it), drawn with `seed`; the training split then excludes them.
- `pass_rate: {column, min, max}` keeps the training rows whose pass rate lies strictly between min and
  max, as open-r1's data recipe filters (pass rate: the column's value, or the mean of its list of
  per-generation rewards or correctness flags, missing entries ignored). The held-out rows are drawn
  before this filter.

One optional metadata entry scores a batch: `score_pairs: !function utils.f`, with f([(doc, completion), ...])
returning the rewards in order. A task whose verifier is slow (Lean) checks the batch concurrently this
way; without it each completion is scored in turn by process_results (Task.score).
"""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import urlparse

import yaml

from benchmark.grading import TaskError
from benchmark.paths import TASKS_DIR

HELDOUT = "heldout"
HELDOUT_MAX_FRACTION = 0.2  # a held-out set never takes more than this share of the training data
HUB_PROBE_TIMEOUT = 3.0  # seconds to wait for a connection to the Hugging Face Hub before giving up


@dataclass
class Task:
    name: str
    version: str
    folder: Path
    config: dict
    doc_to_text: Callable[[dict], str]
    process_results: Callable[[dict, list[str]], dict]
    metric: str  # the process_results key used as reward and accuracy
    _splits: dict = field(default_factory=dict)
    _raw: dict = field(default_factory=dict)

    @property
    def max_new_tokens(self) -> int:
        return int(self.config.get("generation_kwargs", {}).get("max_gen_toks", 256))

    def docs(self, split: str) -> list[dict]:
        """'train' (training_split), 'test' (test_split) or any other data file's documents, loaded once."""
        key = {"train": self.config["training_split"], "test": self.config["test_split"]}.get(split, split)
        if key not in self._splits:
            self._splits[key] = self._select(key)
        return self._splits[key]

    def _select(self, split: str) -> list[dict]:
        """The split's documents after the metadata's held-out set and pass-rate filter."""
        meta = self.config.get("metadata") or {}
        train = self.config["training_split"]
        if split not in (HELDOUT, train):
            return self._rows(split)
        if split == HELDOUT and not meta.get("heldout"):
            raise TaskError(f"task {self.name}: no held-out split; set metadata.heldout: {{size: N, seed: 0}}")
        rows = self._rows(train)
        held = set(self._heldout_indices(len(rows), meta.get("heldout")))
        if split == HELDOUT:
            return [rows[i] for i in sorted(held)]
        rows = [r for i, r in enumerate(rows) if i not in held]
        return filter_by_pass_rate(self.name, rows, meta["pass_rate"]) if meta.get("pass_rate") else rows

    @staticmethod
    def _heldout_indices(n: int, spec: dict | None) -> list[int]:
        if not spec:
            return []
        import numpy as np

        size = min(int(spec["size"]), int(n * HELDOUT_MAX_FRACTION))
        return np.random.default_rng(int(spec.get("seed", 0))).permutation(n)[:size].tolist()

    def _rows(self, split: str) -> list[dict]:
        """A split's documents as stored, loaded once."""
        if split not in self._raw:
            docs = self._load_split(split)
            if self.config.get("process_docs"):  # lm-eval's hook, e.g. to normalise field names
                docs = list(self.config["process_docs"](docs))
            self._raw[split] = docs
        return self._raw[split]

    def require_verifier(self) -> None:
        """Raise a TaskError naming what to install if this task's verifier cannot run here (Lean for miniF2F)."""
        if (self.config.get("metadata") or {}).get("verifier") == "lean":
            from benchmark.grading.lean import lean_setup, lean_workers

            lean_setup()
            lean_workers()

    def score(self, doc: dict, completion: str) -> float:
        return float(self.process_results(doc, [completion])[self.metric])

    def score_many(self, doc: dict, completions: Sequence[str]) -> list[float]:
        """The rewards of several completions of one document (a group), in order."""
        return self.score_pairs([(doc, completion) for completion in completions])

    def score_pairs(self, pairs: Sequence[tuple[dict, str]]) -> list[float]:
        """The rewards of (doc, completion) pairs, in order: the task's metadata.score_pairs if it has one
        (Lean checks the pairs concurrently), else score() on each in turn."""
        batch = (self.config.get("metadata") or {}).get("score_pairs")
        if batch is None:
            return [self.score(doc, completion) for doc, completion in pairs]
        return [float(reward) for reward in batch(list(pairs))]

    def _local_file(self, split: str) -> str | None:
        """The split's local data file or folder (relative to the task's folder); None: the hub data set."""
        data_path = (self.config.get("metadata") or {}).get("data_path")
        local = data_path.get(split) if isinstance(data_path, dict) else data_path
        if not local and self.config.get("dataset_path", "json") == "json":
            files = self.config.get("dataset_kwargs", {}).get("data_files", {})
            if split not in files:
                raise TaskError(f"task {self.name}: no data file for split {split!r} in dataset_kwargs.data_files")
            local = files[split]
        return local or None

    def bundled_sample(self, split: str) -> Path | None:
        """The bundled sample file a split's documents come from (data/*_sample.jsonl: a smoke-test fixture, not
        the data set), or None."""
        key = {"train": self.config["training_split"], "test": self.config["test_split"]}.get(split, split)
        local = self._local_file(self.config["training_split"] if key == HELDOUT else key)
        path = self.folder / local if local else None
        return path if path is not None and "_sample" in path.name else None

    def _load_split(self, split: str) -> list[dict]:
        local = self._local_file(split)
        if not local:
            return _load_hub(self.name, self.config["dataset_path"], self.config.get("dataset_name"), split)
        path = self.folder / local
        if not path.exists():
            raise TaskError(f"task {self.name}: data file {path} is missing (re-clone, or regenerate it)")
        if path.is_dir():
            return _load_with_datasets(self.name, str(path), self.config.get("dataset_name"), split)
        if path.suffix == ".parquet":
            import pyarrow.parquet

            return pyarrow.parquet.read_table(path).to_pylist()
        with path.open() as f:
            return [json.loads(line) for line in f if line.strip()]


def hub_reachable(endpoint: str, timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """Can we open a connection to the hub within `timeout` (name lookup included)?"""
    url = urlparse(endpoint)
    reached = []

    def probe():
        try:
            socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                     timeout=timeout).close()
            reached.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(reached)


def _load_hub(task: str, hub_id: str, config: str | None, split: str) -> list[dict]:
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE and not hub_reachable(constants.ENDPOINT):
        # datasets would retry for ~25 s before failing
        raise TaskError(
            f"task {task}: cannot reach the Hugging Face Hub ({constants.ENDPOINT}) to load {hub_id} "
            f"(config {config}, split {split}). Fix: use a local copy, a .jsonl/.parquet file or a folder, as "
            f"metadata.data_path in tasks/{task}/{task}.yaml or load_task({task!r}, data_path=...); "
            "or set HF_HUB_OFFLINE=1 to use a copy in the Hugging Face cache")
    return _load_with_datasets(task, hub_id, config, split)


def _load_with_datasets(task: str, path: str, config: str | None, split: str) -> list[dict]:
    import datasets

    try:
        return datasets.load_dataset(path, name=config, split=split).to_list()
    except Exception as exc:
        raise TaskError(f"task {task}: cannot load split {split!r} of {path} (config {config}): {exc}. "
                        f"Fix: give this split a local .jsonl/.parquet file or folder as metadata.data_path "
                        f"in tasks/{task}/{task}.yaml or load_task({task!r}, data_path=...)") from exc


def pass_rate(value) -> float | None:
    """A row's pass rate: a number as is, or the mean of a list of rewards / correctness flags (None skipped)."""
    if isinstance(value, (list, tuple)):
        known = [float(v) for v in value if v is not None]
        return sum(known) / len(known) if known else None
    return None if value is None else float(value)


def filter_by_pass_rate(task: str, rows: list[dict], spec: dict) -> list[dict]:
    """Rows whose pass rate is strictly between spec's min and max; rows without a pass rate are dropped."""
    column, low, high = spec.get("column"), float(spec.get("min", 0.0)), float(spec.get("max", 1.0))
    if rows and not any(column in r for r in rows):
        raise TaskError(f"task {task}: metadata.pass_rate filters on column {column!r}, which the data lacks; "
                        f"columns: {', '.join(sorted(rows[0]))}. Fix: name a column with per-row pass rates "
                        "(or lists of per-generation rewards), or remove metadata.pass_rate")
    kept = []
    for row in rows:
        rate = pass_rate(row.get(column))
        if rate is not None and low < rate < high:
            kept.append(row)
    return kept


def _task_yaml_loader(folder: Path):
    """A YAML loader that turns `!function utils.name` into the function from folder/utils.py."""
    modules: dict[str, Any] = {}

    def function_tag(loader, node):
        module_name, func_name = loader.construct_scalar(node).rsplit(".", 1)
        if module_name not in modules:
            path = folder / f"{module_name}.py"
            spec = importlib.util.spec_from_file_location(f"replaybench_task_{folder.name}_{module_name}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[module_name] = module
        return getattr(modules[module_name], func_name)

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", function_tag)
    return Loader


def _absolute(path):
    return str(Path(path).resolve()) if path else None


def load_task(name: str, tasks_dir: Path = TASKS_DIR, data_path: str | dict | None = None,
              metadata: dict | None = None) -> Task:
    """The task `name`. `data_path` overrides the YAML's metadata.data_path: a path for every split, or
    {split: path, or None for the YAML's dataset_path}; relative to the working directory. `metadata`
    overrides other metadata entries, e.g. {"pass_rate": {"column": ..., "min": 0.1, "max": 0.9}}."""
    folder = tasks_dir / name
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.name for p in tasks_dir.iterdir() if (p / f"{p.name}.yaml").is_file())
        raise TaskError(f"unknown task {name!r}: no {path}; known tasks: {', '.join(known)}")
    config = yaml.load(path.read_text(), Loader=_task_yaml_loader(folder))
    metric = config["metric_list"][0]["metric"]
    overrides, metadata = metadata or {}, config.setdefault("metadata", {})
    metadata.update(overrides)
    if isinstance(data_path, dict):  # per split, over the YAML's
        base = metadata.get("data_path")
        metadata["data_path"] = {**(base if isinstance(base, dict) else {}),
                                 **{split: _absolute(p) for split, p in data_path.items()}}
    elif data_path is not None:
        metadata["data_path"] = _absolute(data_path)
    return Task(
        name=config["task"],
        version=str(config.get("metadata", {}).get("version", "0")),
        folder=folder,
        config=config,
        doc_to_text=config["doc_to_text"],
        process_results=config["process_results"],
        metric=metric,
    )

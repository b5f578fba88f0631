"""Tasks, defined as lm-evaluation-harness YAML files in `tasks/<name>/<name>.yaml`.

One definition serves RL training (training split, prompt, reward) and evaluation (test split,
the same prompt and scoring): the reward of a completion is the task's `process_results` metric.
`!function utils.f` tags resolve to functions in the `utils.py` beside the YAML, as in lm-eval.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

TASKS_DIR = Path(__file__).resolve().parent.parent / "tasks"


class TaskError(Exception):
    """A task that cannot be found or loaded; the message names the fix."""


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

    @property
    def max_new_tokens(self) -> int:
        return int(self.config.get("generation_kwargs", {}).get("max_gen_toks", 256))

    def docs(self, split: str) -> list[dict]:
        """'train' (training_split), 'test' (test_split) or any other data file's documents, loaded once."""
        key = {"train": self.config["training_split"], "test": self.config["test_split"]}.get(split, split)
        if key not in self._splits:
            self._splits[key] = self._load_split(key)
        return self._splits[key]

    def score(self, doc: dict, completion: str) -> float:
        return float(self.process_results(doc, [completion])[self.metric])

    def _load_split(self, split: str) -> list[dict]:
        files = self.config.get("dataset_kwargs", {}).get("data_files", {})
        if split not in files:
            raise TaskError(f"task {self.name}: no data file for split {split!r} in dataset_kwargs.data_files")
        path = self.folder / files[split]
        if not path.is_file():
            raise TaskError(f"task {self.name}: data file {path} is missing (re-clone, or regenerate it)")
        with path.open() as f:
            return [json.loads(line) for line in f if line.strip()]


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


def load_task(name: str, tasks_dir: Path = TASKS_DIR) -> Task:
    folder = tasks_dir / name
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.name for p in tasks_dir.iterdir() if (p / f"{p.name}.yaml").is_file())
        raise TaskError(f"unknown task {name!r}: no {path}; known tasks: {', '.join(known)}")
    config = yaml.load(path.read_text(), Loader=_task_yaml_loader(folder))
    metric = config["metric_list"][0]["metric"]
    return Task(
        name=config["task"],
        version=str(config.get("metadata", {}).get("version", "0")),
        folder=folder,
        config=config,
        doc_to_text=config["doc_to_text"],
        process_results=config["process_results"],
        metric=metric,
    )

"""What a run evaluates at each compute checkpoint: the workload's evaluation sets, scored with
`benchmark.grading.evaluation` (the code of `replaybench eval`), the same in every executor."""

from __future__ import annotations

from benchmark.engine.stream import derive_seed
from benchmark.grading.evaluation import evaluate
from benchmark.grading.prompts import identity


def eval_sets(workload, task) -> list[tuple[str, object, list[dict]]]:
    """(label, task, docs) per evaluated (task, split) of the workload, the scored one first with label ""
    (its metrics are eval/accuracy, ...); the others are labelled task or task.split (eval/<label>/accuracy)."""
    sets = []
    for i, (name, split) in enumerate(workload.eval_targets()):
        t = task if name == task.name else workload.load_task(name)
        label = "" if i == 0 else name if split == "test" else f"{name}.{split}"
        sets.append((label, t, t.docs(split)[: workload.eval.num_problems]))
    return sets


def evaluate_sets(engine, sets, workload, seed: int, index: int, prompt=identity) -> tuple[dict, list]:
    """The evaluation at checkpoint `index` on every eval set (from `eval_sets`): the metrics (the scored
    set's as they are, the others as <label>/<metric>) and the scored set's logged samples."""
    cfg, metrics, logged = workload.eval, {}, []
    for label, task, docs in sets:
        result = evaluate(engine, task, docs, temperature=cfg.temperature, pass_k=cfg.pass_k,
                          pass_k_samples=cfg.pass_k_samples, pass_k_problems=cfg.pass_k_problems,
                          seed=derive_seed(seed, "eval", index), keep_samples=cfg.num_logged_samples, prompt=prompt,
                          max_new_tokens=workload.max_new_tokens or None)
        samples = result.pop("samples", [])
        if not label:  # the scored evaluation
            logged = samples
        metrics.update({f"{label}/{k}" if label else k: v for k, v in result.items()})
    return metrics, logged

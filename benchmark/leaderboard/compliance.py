"""Which runs count: a run is scored when it finished with its summary.json, on the workload version and
settings its target was frozen for; of several runs of one seed, the first counts."""

from __future__ import annotations

import functools
import json

from benchmark.leaderboard.store import RunRecord
from benchmark.submission import OPEN_TRACK_GRPO
from benchmark.tracking import flatten, summary_digest

# workload fields an entry chooses itself: its split and how often its workers take new weights (syncing less often
# saves nothing in the cost model; it lets an entry study staleness without a buffer, as the paper does)
ENTRY_FIELDS = ("pipeline.workers", "pipeline.trainers", "pipeline.sync_every")
# How the trainer fits its batch in memory: the same update up to float rounding, so a run may set them
# for its hardware and stay compliant.
MEMORY_FIELDS = ("grpo.micro_batch_size", "grpo.gradient_checkpointing", "grpo.data_parallel")
# What an open-track entry may choose besides its strategy: the loss and its `grpo:` settings.
OPEN_TRACK_FIELDS = ("grpo.loss", *(f"grpo.{k}" for k in OPEN_TRACK_GRPO))


def canonical_workload(config: dict) -> dict:
    """A run's workload config without the fields an entry chooses (W, T), flattened."""
    flat = {k: v for k, v in flatten(config).items() if k not in ENTRY_FIELDS}
    return json.loads(json.dumps(flat, sort_keys=True, default=str))  # as stored in JSON: tuples -> lists


def differing_settings(run: dict, official: dict, exempt: tuple[str, ...] = ()) -> list[str]:
    """Keys whose values differ. A key the run lacks is a field added to the workload after the run,
    whose default keeps the old behaviour (the rule for adding fields), so it does not count; a key the
    official config lacks (a field added after the target was frozen) counts unless the run holds its default.
    MEMORY_FIELDS never count, nor the `exempt` ones."""
    defaults = _default_settings()
    return sorted(k for k in run if k not in MEMORY_FIELDS + exempt and run[k] != official.get(k, defaults.get(k)))


@functools.cache
def _default_settings() -> dict:
    from benchmark.workload import Workload

    return canonical_workload(Workload(name="", task="").to_dict())


def open_track_choices(run_workload: dict, official: dict) -> dict:
    """The open-track fields a run sets other than the official settings: part of what makes its entry."""
    canonical = canonical_workload(run_workload)
    return {k: canonical[k] for k in differing_settings(canonical, official) if k in OPEN_TRACK_FIELDS}




def exclusion_reason(rec: RunRecord) -> str | None:
    """Why a run cannot be scored at all (a preview, failed, unfinished, no summary.json); None when it can."""
    if rec.preview:
        return "preview (`submit --preview`): a short run to look at, never ranked"
    if rec.status == "finished":
        if rec.summary is None:
            return "incomplete: " + (rec.problem or "summary.json missing")
        if rec.summary_sha256 is not None and summary_digest(rec.summary) != rec.summary_sha256:
            return ("refused: summary.json is not the one the run ended with (its digest differs from the tag "
                    "replaybench.summary_sha256): it was changed after the run")
        return None
    if rec.status.startswith("failed"):
        return rec.status
    if rec.status == "interrupted":
        return "incomplete: interrupted"
    if rec.status == "running":
        return f"incomplete: still running or interrupted (MLflow status {rec.mlflow_status})"
    return f"incomplete: status {rec.status or '(no replaybench.status tag)'}"


# The board groups the runs it leaves out by why, in these words: the first prefix of the reason that matches.
EXCLUSION_GROUPS = (("held out", "held out: sets the target"), ("not a scored seed", "not a scored seed"),
                    ("non-compliant: workload version", "older workload version"),
                    ("non-compliant", "other settings"), ("incomplete: interrupted", "interrupted"),
                    ("incomplete: still running", "interrupted"), ("failed", "failed"),
                    ("duplicate", "duplicate seed"), ("refused", "refused"), ("preview", "preview"))


def exclusion_group(reason: str) -> str:
    return next((group for prefix, group in EXCLUSION_GROUPS if reason.startswith(prefix)), "incomplete")


RESUMABLE_STATUSES = ("interrupted", "running")  # a run of one's own in these states continues with --resume


def compliance_problem(rec: RunRecord, target: dict) -> str | None:
    """Why a finished run does not count against the target (another workload version or other settings);
    None when it complies."""
    s = rec.summary
    if s.get("mlflow_run_id") not in (None, rec.run_id):
        return f"non-compliant: summary.json names run {s.get('mlflow_run_id')}"
    if (rec.code_version or "").endswith("+dirty"):  # no commit holds the code that made it
        return (f"refused: made by an engine with uncommitted changes (code_version {rec.code_version}): run it "
                "again from a committed engine")
    if str(rec.workload_version) != str(target["workload_version"]):
        return (f"non-compliant: workload version {rec.workload_version}, the target is for version "
                f"{target['workload_version']}")
    try:
        canonical = canonical_workload(s["config"]["workload"])
        s["eval_curve"]
    except (KeyError, TypeError) as exc:
        return f"non-compliant: summary.json lacks {exc}"
    keys = differing_settings(canonical, target["workload_config"], OPEN_TRACK_FIELDS if rec.track == "open" else ())
    if keys:
        shown = ", ".join(f"{k}={canonical.get(k)!r} (official {target['workload_config'].get(k)!r})"
                          for k in keys[:3])
        return f"non-compliant: workload settings differ from the official ones: {shown}" + (
            f" and {len(keys) - 3} more" if len(keys) > 3 else "")
    return None


def dedupe_seeds(runs: list[RunRecord]) -> tuple[list[RunRecord], list[tuple[RunRecord, str]]]:
    """The first finished run of each seed counts; later reruns are reported, never silently used."""
    keep: dict[int, RunRecord] = {}
    dropped = []
    for r in sorted(runs, key=lambda r: (r.start_time, r.run_id)):
        if r.seed in keep:
            dropped.append((r, f"duplicate of seed {r.seed}: the first finished run ({keep[r.seed].run_id}) counts"))
        else:
            keep[r.seed] = r
    return list(keep.values()), dropped

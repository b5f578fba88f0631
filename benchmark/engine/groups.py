"""The workers' generations: groups of G completions of the training stream's prompts, scored, with the engine's
current weights, in as few engine calls as the row cap allows; and the real work a run did (never used for a
decision)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields

from benchmark.engine.ledger import PendingGroup
from benchmark.engine.stream import derive_seed, doc_id, stream_doc

MAX_ROWS_PER_CALL = 512  # rows of one engine call: past a few hundred, a bigger call is no faster per row
ACTIVITIES = ("generation", "training", "evaluation", "total")


@dataclass
class WorkDone:
    """What this machine did, in wall-clock seconds and tokens: mu as a run's counters measure it, and how well
    generation is batched (rows per engine call)."""

    engine_calls: int = 0
    engine_rows: int = 0
    tokens_generated: int = 0
    tokens_trained: int = 0
    wall_seconds: dict = field(default_factory=lambda: dict.fromkeys(ACTIVITIES, 0.0))

    def add(self, other: WorkDone) -> None:
        """Count another pipeline's work as this run's (RLEP's phase 1, run inside it)."""
        for f in fields(self):
            if f.name == "wall_seconds":
                for k, v in other.wall_seconds.items():
                    self.wall_seconds[k] += v
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def measured(self) -> dict:
        """mu as the paper estimates it from a run's counters (appendix D.4): seconds per generated token over
        seconds per trained token."""
        gen, train = self.wall_seconds["generation"], self.wall_seconds["training"]
        out = {"generation_s": gen, "training_s": train, "tokens_generated": self.tokens_generated,
               "tokens_trained": self.tokens_trained,
               "rows_per_generate_call": self.engine_rows / max(self.engine_calls, 1)}
        if self.tokens_generated and self.tokens_trained and gen > 0 and train > 0:
            out["mu"] = (gen / self.tokens_generated) / (train / self.tokens_trained)
        return out


class GroupGenerator:
    """Groups from the training stream: the group of stream position i is the same whichever call makes it, for
    it depends on its own seed and the weights only."""

    def __init__(self, engine, task, prompt, workload, seed: int, work: WorkDone):
        self.engine, self.task, self.prompt, self.seed, self.work = engine, task, prompt, seed, work
        self.train_docs = task.docs("train")
        self.temperature = workload.grpo.temperature
        self.group_size = workload.grpo.group_size
        self.max_new_tokens = workload.max_new_tokens or task.max_new_tokens
        self._docs_by_id: dict[str, dict] | None = None  # built when a prompt is first replayed

    def stream_groups(self, positions) -> list[PendingGroup]:
        """The groups of these stream positions (generation starts)."""
        return self.generate([stream_doc(self.train_docs, self.seed, i) for i in positions], self.group_size,
                             [derive_seed(self.seed, "generation", i) for i in positions])

    def replay_group(self, prompt_id: str, replay_index: int) -> PendingGroup:
        """A group of a training prompt generated before in this run, again (the prompt track's replay), with the
        seed of the run's `replay_index`-th replay."""
        if self._docs_by_id is None:
            self._docs_by_id = {doc_id(d): d for d in self.train_docs}
        return self.generate([self._docs_by_id[prompt_id]], self.group_size,
                             [derive_seed(self.seed, "replay", replay_index)])[0]

    def pool_groups(self, prompts: int, samples: int) -> list[PendingGroup]:
        """A strategy's pool: `samples` completions of each of the stream's first `prompts` prompts."""
        return self.generate([stream_doc(self.train_docs, self.seed, i) for i in range(prompts)], samples,
                             [derive_seed(self.seed, "pool", i) for i in range(prompts)])

    def generate(self, docs: list[dict], n: int, seeds: list[int]) -> list[PendingGroup]:
        """One group of n per doc, each with its seed."""
        groups = []
        per_call = max(1, MAX_ROWS_PER_CALL // n)
        for start in range(0, len(docs), per_call):
            chunk = docs[start:start + per_call]
            t = time.perf_counter()
            completions = self.engine.generate([self.prompt(self.task.doc_to_text(d)) for d in chunk], n=n,
                                               temperature=self.temperature, max_new_tokens=self.max_new_tokens,
                                               seed=seeds[start:start + per_call])
            self.work.wall_seconds["generation"] += time.perf_counter() - t
            self.work.engine_calls += 1
            self.work.engine_rows += len(chunk) * n
            groups += [PendingGroup(doc_id(doc), group, self.task.score_many(doc, [c.text for c in group]),
                                    self.engine.version) for doc, group in zip(chunk, completions)]
            self.work.tokens_generated += sum(g.tokens for g in groups[-len(chunk):])
        return groups

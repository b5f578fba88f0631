"""Fresh-anchored, advantage-prioritized rollout replay (2606.04560): a store of single rollouts in which every
fresh rollout is kept and trained on, and older ones are replayed by priority until they age out.

A rollout stays while its age in trainer steps (policy_version - rollout.policy_version) is at most `tau_max`, and
at most `buffer_size` are kept (the oldest go first). A batch takes the rollouts never trained on first, oldest
first, so that none ages out unused while it can be helped; the rest of the batch is replayed from the store with
probability proportional to |advantage| + eps (a rollout whose group agreed, advantage 0, is drawn rarely).
Trainers wait until the store holds a batch.
"""

import numpy as np

from benchmark import ReplayStrategy


class FreshAnchored(ReplayStrategy):
    def __init__(self, buffer_size: int = 256, tau_max: int = 8, eps: float = 0.01):
        self.buffer_size, self.tau_max, self.eps = buffer_size, tau_max, eps
        self.store = []  # oldest first

    def evict(self, version: int) -> None:
        self.store = [r for r in self.store if version - r.policy_version <= self.tau_max]
        del self.store[: max(0, len(self.store) - self.buffer_size)]

    def add(self, rollouts, ctx):
        self.store.extend(rollouts)
        self.evict(ctx.policy_version)

    def sample(self, batch_size, ctx):
        self.evict(ctx.policy_version)  # the batch is trained at this version: nothing older than tau_max
        if len(self.store) < batch_size:
            return None
        fresh = [r for r in self.store if ctx.use_count.get(r.rollout_id, 0) == 0][:batch_size]
        chosen = {r.rollout_id for r in fresh}
        rest = [r for r in self.store if r.rollout_id not in chosen]
        need = batch_size - len(fresh)
        if need == 0:
            return fresh
        priority = np.abs([r.advantage for r in rest]) + self.eps
        picks = ctx.rng.choice(len(rest), size=need, replace=False, p=priority / priority.sum())
        return fresh + [rest[i] for i in picks]

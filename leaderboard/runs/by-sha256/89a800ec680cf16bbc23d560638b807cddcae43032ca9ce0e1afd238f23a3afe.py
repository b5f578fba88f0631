"""RLEP (Kwai Klear 2025): replay verified successes of an RL-trained policy next to fresh rollouts.

Phase 1 (`pool_request`): the engine trains the starting policy with the no-buffer reference for
`trained_for` of the budget, then that policy samples `pool_samples` completions for each of the
first `pool_prompts` prompts of the training stream; the correct ones form a per-prompt pool. All of
it is charged. Phase 2, from the starting policy again: batches are built on-policy (freshest groups
first, each rollout used once) and each fresh group is joined by up to `replay_k` successes drawn
from its prompt's pool; the engine recomputes the group advantage over the mixed group (`regroup`,
16 + 2 in the paper) and, as RLEP's code does, the replayed samples' old log-probs with the current
policy (`recompute_behaviour`), so their importance ratio starts at 1 and the clip never drops them.
RLEP's pool is never refreshed; `refresh=True` also adds new successes, the improvement its critics
suggest. `trained_for=0` samples the pool with the starting policy instead.
"""

from benchmark import Batch, PoolRequest, ReplayStrategy


class RLEP(ReplayStrategy):
    def __init__(self, pool_prompts: int = 4096, pool_samples: int = 64, trained_for: float = 0.2, replay_k: int = 2,
                 recompute: bool = True, refresh: bool = False, pool_per_prompt: int = 16, buffer_size: int = 256):
        self.pool_prompts, self.pool_samples, self.trained_for = pool_prompts, pool_samples, trained_for
        self.replay_k, self.recompute, self.refresh = replay_k, recompute, refresh
        self.pool_per_prompt, self.buffer_size = pool_per_prompt, buffer_size
        self.pool = {}  # prompt_id -> successes, oldest first
        self.groups = []  # fresh groups (lists of rollouts), oldest first

    def pool_request(self):
        return PoolRequest(self.pool_prompts, self.pool_samples, self.trained_for)

    def _remember(self, rollouts):
        for r in rollouts:
            if r.correct:
                kept = self.pool.setdefault(r.prompt_id, [])
                kept.append(r)
                del kept[: max(0, len(kept) - self.pool_per_prompt)]

    def add_pool(self, rollouts, ctx):
        self._remember(rollouts)

    def add(self, rollouts, ctx):
        self.groups.append(list(rollouts))
        while sum(map(len, self.groups)) > self.buffer_size:  # stale groups are dropped unused
            self.groups.pop(0)
        if self.refresh:
            self._remember(rollouts)

    def sample(self, batch_size, ctx):
        groups, rollouts, regroup, slots = list(self.groups), [], [], []
        while len(rollouts) < batch_size:
            if not groups:
                return None  # not enough fresh data yet: nothing is consumed
            group = groups.pop()  # freshest first
            room = batch_size - len(rollouts)
            if len(group) > room:  # the batch is full: the rest of this group waits for the next one
                groups.append(group[room:])
                rollouts += group[:room]
                break
            pool = self.pool.get(group[0].prompt_id, [])
            k = min(self.replay_k, len(pool), room - len(group))
            rollouts += group
            slots.append((len(rollouts), pool, k))
            rollouts += [None] * k  # replay slots, drawn once the batch is complete
            regroup.append(list(range(len(rollouts) - len(group) - k, len(rollouts))))
        for first, pool, k in slots:
            if k:
                rollouts[first:first + k] = [pool[i] for i in ctx.rng.choice(len(pool), size=k, replace=False)]
        self.groups = groups
        replayed = [first + i for first, _, k in slots for i in range(k)]
        return Batch(rollouts, regroup=regroup, recompute_behaviour=replayed if self.recompute else None)

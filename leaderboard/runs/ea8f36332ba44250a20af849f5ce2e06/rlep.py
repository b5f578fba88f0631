"""RLEP (Kwai Klear 2025): replay the starting policy's verified successes next to fresh rollouts.

Phase 1 (`pool_request`): the starting policy samples `pool_samples` completions for each of the
first `pool_prompts` prompts of the training stream (its compute is charged); the correct ones
form a per-prompt pool. Phase 2: batches are built on-policy (freshest groups first, each rollout
used once) and each fresh group is joined by up to `replay_k` successes drawn from its prompt's
pool; the engine recomputes the group advantage over the mixed group (`Batch.regroup`), as RLEP
does (16 + 2 in the paper). RLEP's pool is never refreshed; `refresh=True` also adds new
successes, the improvement its critics suggest.
"""

from benchmark import Batch, ReplayStrategy


class RLEP(ReplayStrategy):
    def __init__(self, pool_prompts: int = 512, pool_samples: int = 8, replay_k: int = 2, refresh: bool = False,
                 pool_per_prompt: int = 8, buffer_size: int = 256):
        self.pool_prompts, self.pool_samples, self.replay_k = pool_prompts, pool_samples, replay_k
        self.refresh, self.pool_per_prompt, self.buffer_size = refresh, pool_per_prompt, buffer_size
        self.pool = {}  # prompt_id -> successes, oldest first
        self.groups = []  # fresh groups (lists of rollouts), oldest first

    def pool_request(self):
        return (self.pool_prompts, self.pool_samples)

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
        groups, rollouts, regroup, replays = list(self.groups), [], [], []
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
            replays.append((len(rollouts), pool, k))
            rollouts += group + [None] * k  # replay slots, drawn once the batch is complete
            regroup.append(list(range(len(rollouts) - len(group) - k, len(rollouts))))
        for start, pool, k in replays:
            end = next(g[-1] for g in regroup if g[0] == start) + 1
            rollouts[end - k:end] = [pool[i] for i in ctx.rng.choice(len(pool), size=k, replace=False)] if k else []
        self.groups = groups
        return Batch(rollouts, regroup=regroup)

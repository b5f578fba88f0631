"""A staleness-bounded on-policy pipeline through admission control (AReaL's max_head_offpolicyness, SkyRL's
max_staleness_steps): every rollout is trained on exactly once, none is discarded, and none is older than
`max_staleness` trainer steps when it is.

`admit` lets a worker start a generation only while the rollouts admitted so far, this one included, fit in the
batches the trainers take up to version policy_version + max_staleness: admitted <= (version + max_staleness + 1) * B.
Batches are taken in the order of the weights that generated them (oldest version first), and a batch waits for a
generation of an older version still in flight, so every rollout trained before one of version v is of version
<= v: at most (v + max_staleness + 1) * B of them, and the rollout is trained by step v + max_staleness. Idle
workers and waiting trainers are the price of the bound; they cost compute as any idle device does.
With sync_every > 1 the workers' weights lag the trainers', and the bound holds in the trainers' versions at
admission, which the rollouts of a group then carry.
"""

from collections import Counter

from benchmark import ReplayStrategy


class StalenessBounded(ReplayStrategy):
    def __init__(self, max_staleness: int = 4):
        self.max_staleness = max_staleness
        self.admitted = 0  # rollouts of every generation admitted so far
        self.in_flight = Counter()  # admitted rollouts not yet handed over, by the version they were admitted at
        self.queue = []  # handed over, not yet trained

    def admit(self, ctx):
        if self.admitted + ctx.group_size > (ctx.policy_version + self.max_staleness + 1) * ctx.batch_size:
            return False
        self.admitted += ctx.group_size
        self.in_flight[ctx.policy_version] += ctx.group_size
        return True

    def add(self, rollouts, ctx):
        version = rollouts[0].policy_version
        if self.in_flight[version] == 0:  # sync_every > 1: the group carries an older version than its admission
            version = min(v for v, n in self.in_flight.items() if n > 0)
        self.in_flight[version] -= len(rollouts)
        self.queue.extend(rollouts)

    def sample(self, batch_size, ctx):
        if len(self.queue) < batch_size:
            return None
        self.queue.sort(key=lambda r: r.policy_version)  # stable: arrival order within a version
        newest = self.queue[batch_size - 1].policy_version
        if any(n > 0 and v < newest for v, n in self.in_flight.items()):
            return None  # an older generation is still coming: it goes first
        batch, self.queue = self.queue[:batch_size], self.queue[batch_size:]
        return batch

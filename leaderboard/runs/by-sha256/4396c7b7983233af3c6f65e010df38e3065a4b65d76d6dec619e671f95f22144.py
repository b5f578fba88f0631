"""Prompt Replay (2603.21177), on the prompt track: training stays on-policy (the reference's pipe: freshest
first, each rollout once, the stalest dropped past `buffer_size`), and some generations go to prompts of medium
difficulty seen before instead of the stream's next.

A prompt is a candidate when its latest group's pass rate lies in [low, high], it has been generated at most
`max_reuse` times again, and at least `cooldown` trainer steps have passed since its last generation started. At
most `replay_share` of all generations are replays; among the candidates the one whose pass rate is closest to 0.5
goes first (then the least recently generated, then the first seen).
"""

from benchmark import ReplayStrategy


class PromptReplay(ReplayStrategy):
    def __init__(self, buffer_size: int = 256, low: float = 0.25, high: float = 0.75, cooldown: int = 4,
                 max_reuse: int = 2, replay_share: float = 0.25):
        self.buffer_size, self.low, self.high = buffer_size, low, high
        self.cooldown, self.max_reuse, self.replay_share = cooldown, max_reuse, replay_share
        self.pipe = []  # oldest first
        self.pass_rate = {}  # prompt_id -> its latest group's share of correct rollouts, in first-seen order
        self.last_started = {}  # prompt_id -> the version its latest generation started with
        self.reuses = {}  # prompt_id -> times generated again
        self.generations = self.replays = 0

    def add(self, rollouts, ctx):
        prompt = rollouts[0].prompt_id
        self.pass_rate[prompt] = sum(r.correct for r in rollouts) / len(rollouts)
        self.last_started[prompt] = max(self.last_started.get(prompt, -1), rollouts[0].policy_version)
        self.pipe.extend(rollouts)
        del self.pipe[: max(0, len(self.pipe) - self.buffer_size)]

    def candidates(self, version):
        return [p for p, rate in self.pass_rate.items()
                if self.low <= rate <= self.high and self.reuses.get(p, 0) < self.max_reuse
                and version - self.last_started[p] >= self.cooldown]

    def next_prompt(self, ctx):
        self.generations += 1
        if self.replays + 1 > self.replay_share * self.generations:
            return None
        ready = self.candidates(ctx.policy_version)
        if not ready:
            return None
        order = {p: i for i, p in enumerate(self.pass_rate)}
        chosen = min(ready, key=lambda p: (abs(self.pass_rate[p] - 0.5), self.last_started[p], order[p]))
        self.replays += 1
        self.reuses[chosen] = self.reuses.get(chosen, 0) + 1
        self.last_started[chosen] = ctx.policy_version
        return chosen

    def sample(self, batch_size, ctx):
        if len(self.pipe) < batch_size:
            return None
        batch = self.pipe[-batch_size:]
        del self.pipe[-batch_size:]
        return batch

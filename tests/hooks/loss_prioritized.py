"""Training feedback for the tests: a FIFO whose rollouts are replayed by the loss they last had (priority refresh
as in prioritized replay), with the post-update log-probs asked for when `after` is set (and charged)."""

import numpy as np

from benchmark import ReplayStrategy


class LossPrioritized(ReplayStrategy):
    def __init__(self, buffer_size: int = 32, after: bool = True):
        self.buffer_size = buffer_size
        self.feedback_after_update = after
        self.buffer = []
        self.priority = {}  # rollout_id -> |loss| at its last update
        self.moved = []  # per step: the mean change of the batch's log-probs through the update

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        del self.buffer[: max(0, len(self.buffer) - self.buffer_size)]

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        p = np.array([self.priority.get(r.rollout_id, 1.0) + 0.01 for r in self.buffer])
        picks = ctx.rng.choice(len(self.buffer), size=batch_size, p=p / p.sum())
        return [self.buffer[i] for i in picks]

    def on_update(self, feedback, ctx):
        assert len(feedback.loss) == len(feedback.rollout_ids) == len(feedback.logprobs)
        for rid, loss in zip(feedback.rollout_ids, feedback.loss):
            self.priority[rid] = abs(loss)
        if feedback.logprobs_after is not None:
            self.moved.append(float(np.mean([b - a for before, after in zip(feedback.logprobs, feedback.logprobs_after)
                                             for a, b in zip(before, after)])))

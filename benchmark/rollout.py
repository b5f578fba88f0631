"""The rollout record: one completion of one prompt, as the engine hands it to a strategy."""

from __future__ import annotations

from dataclasses import dataclass

CORRECT_REWARD = 1.0  # verifiers score 1 for a correct answer; partial credit (format, length) stays below it


def is_correct(reward: float) -> bool:
    """The one definition of a correct completion, in training, evaluation and the pool."""
    return reward >= CORRECT_REWARD


@dataclass(frozen=True, slots=True)
class Rollout:
    """Immutable: strategies read these, they never change them.

    Token ids and log-probs are tuples so that a rollout can be hashed, pickled and passed by value.
    """

    rollout_id: int  # unique within a run, increasing in creation order
    group_id: int  # the G rollouts of one prompt share a group id
    prompt_id: str  # the task's id of the problem
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    behaviour_logprobs: tuple[float, ...]  # per completion token, from the policy that sampled it
    reward: float
    correct: bool  # is_correct(reward)
    advantage: float  # group-relative, computed when the group was generated
    policy_version: int  # trainer step whose weights generated it
    created_step: int  # trainer step when the generation finished
    created_time: float  # virtual time when the generation finished
    group_reward_mean: float = 0.0  # mean reward of its group (the behaviour policy's value estimate)
    # set by the engine on a batch's copy when the strategy asks (Batch.recompute_behaviour): the trainer takes the
    # behaviour log-probs from the current policy, as RLEP's code does for replayed samples (ratio 1, no correction)
    current_policy_behaviour: bool = False

    @property
    def length(self) -> int:
        """Tokens counted by the cost model: prompt + completion."""
        return len(self.prompt_ids) + len(self.completion_ids)

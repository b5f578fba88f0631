"""The optional hooks answered wrongly, one way per `how`, for the tests of their verdicts."""

from benchmark import ReplayStrategy


class MisbehavesInHooks(ReplayStrategy):
    def __init__(self, how: str = ""):
        self.how = how
        self.buffer = []
        self.seen = False

    def add(self, rollouts, ctx):
        self.buffer.extend(rollouts)
        self.seen = self.seen or rollouts[0].prompt_id

    def sample(self, batch_size, ctx):
        if len(self.buffer) < batch_size:
            return None
        batch = self.buffer[-batch_size:]
        del self.buffer[-batch_size:]
        return batch

    def admit(self, ctx):
        if self.how == "admit_says_yes":
            return "yes"
        if self.how == "admits_nothing_once_it_has_data":
            return not self.seen
        return True

    def next_prompt(self, ctx):
        if self.how == "names_an_unknown_prompt":
            return "no-such-prompt"
        if self.how == "names_a_number":
            return 5
        if self.how == "replays_off_its_track" and self.seen:
            return self.seen  # a prompt the run did generate
        return None

    def on_update(self, feedback, ctx):
        if self.how == "update_raises":
            raise ValueError("boom")

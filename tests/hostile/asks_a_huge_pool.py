from benchmark import ReplayStrategy


class AsksAHugePool(ReplayStrategy):
    """A pool request the engine must refuse before any work: `request` as pool_request() returns it."""

    def __init__(self, request=(200_000, 8)):
        self.request = request

    def pool_request(self):
        return self.request

    def add(self, rollouts, ctx):
        pass

    def add_pool(self, rollouts, ctx):
        pass

    def sample(self, batch_size, ctx):
        return None

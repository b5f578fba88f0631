"""The errors a user can cause and fix."""


class UserError(Exception):
    """A mistake in what the user gave (a workload, an entry, a command's options, the machine's set-up): the
    command line prints the message, which names the fix, and exits 2, with no traceback. Each module's own kind
    (WorkloadError, StrategyError, ...) derives from it."""

"""The engine: the executors (virtual-time pipeline, Ray), the strategy ledger and cost model they share,
the sandbox."""

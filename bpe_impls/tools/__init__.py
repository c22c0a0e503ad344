"""The tools on top: the `bpe` command line, `bpe compare`, the peer adapters, measurement helpers
and the fixture locator used by tests and benchmarks."""

"""Seeded synthetic corpora for benchmarks and tests: TinyStories-style prose (tinystories), web-like
and multilingual text (web), and what both share (common: the exact-size document stream, the atomic
streamed write, seeded sampling, size parsing)."""

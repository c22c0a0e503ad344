"""The harness: what measures and checks implementations, ours and anyone's.

`compare` (the side-by-side table), `scaling` and `plots` (how cost grows), `report` (one HTML
page), `peers` (adapters over other libraries), `measure` and `machine` (timing, peak memory, the
machine's description), `fixtures` (finds the shared real-text fixtures) and `generators` (the
seeded synthetic corpora). The library below it never imports it.
"""

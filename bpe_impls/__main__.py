"""`python -m bpe_impls ...` is the `bpe` command (so `memray run -m bpe_impls train ...` works)."""

from .cli import main

raise SystemExit(main())

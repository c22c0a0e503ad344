"""`python -m bpe_impls ...` is the `bpe` command (so `memray run -m bpe_impls train ...` works).

`main` is also the `bpe` script's entry point: it imports the command line inside its handling
of Ctrl-C, so an interrupt while the modules load ends as any other does ("bpe: interrupted",
exit status 130), with no traceback.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        print("bpe: interrupted", file=sys.stderr)
        return 130
    return run()


if __name__ == "__main__":
    raise SystemExit(main())

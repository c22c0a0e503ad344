# The compiled trainer (csrc/trainer*.c, glue csrc/py/trainer_module.c): what trainers/native.py calls.
from collections.abc import Callable, Mapping

def train(
    word_counts: Mapping[bytes, int] | bytes | list[bytes],
    num_merges: int,
    on_merges: Callable[[int], object] | None = None,
    stats: dict[str, int] | None = None,
    *,
    heap_limit: int = 65536,
) -> list[tuple[bytes, bytes]]: ...

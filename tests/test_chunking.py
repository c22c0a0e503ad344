"""Training gives identical results under any chunking: 1, 2, 3 and 8 workers, awkward boundaries.

Each corpus is built so that the evenly planned boundaries land where a naive split would be
wrong (inside a 4-byte character, inside a special token, in a line with no newline at all), and
each test checks three things: the run really was chunked (or, where no safe cut exists, that
it was not); every unit boundary is a safe position; and `train_bpe` gives the 1-worker result
for every worker count.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import regex

from bpe_impls import train_bpe
from bpe_impls.base.patterns import GPT2
from bpe_impls.corpus import planning
from bpe_impls.corpus.cuts import CutFinder
from bpe_impls.corpus.planning import plan_units
from bpe_impls.corpus.tally import count_text, tally_unit
from bpe_impls.harness.generators.tinystories import generate

EOT = "<|endoftext|>"
WORKERS = (1, 2, 3, 8)
IMPL = "bucket"  # a fast trainer; every trainer gives the same result (test_equivalence.py)


def story_text(size: int, seed: int) -> str:
    return "".join(generate(size, seed))


def assert_boundaries_safe(data: bytes, bounds: list[int], specials: tuple[str, ...]) -> None:
    """Each inner boundary: at a character start, not inside any special-token occurrence, and a
    cut the finder itself accepts."""
    encoded = [t.encode() for t in specials]
    occurrences = [
        m.span() for token in encoded for m in regex.finditer(regex.escape(token), data, overlapped=True)
    ]
    finder = CutFinder(encoded, encoded, prose=GPT2.prose_cuts)
    file = io.BytesIO(data)
    for b in bounds[1:-1]:
        assert not 0x80 <= data[b] <= 0xBF, f"boundary {b} splits a UTF-8 character"
        assert not any(s < b < e for s, e in occurrences), f"boundary {b} is inside a special token"
        # A cut after a special token is found from the token's start, a prose cut from itself.
        margin = max([0, *map(len, encoded)])
        assert any(finder.next_cut(file, p, len(data)) == b for p in range(max(0, b - margin), b + 1)), b


def check_chunking(
    path: Path,
    specials: tuple[str, ...],
    vocab_size: int,
    *,
    chunked: bool = True,
    train_with: tuple[int, ...] = WORKERS,
) -> list[int]:
    """The common assertions; returns the unit count planned for each worker count.

    `train_with` limits the (slow: a pool per run) training comparison to some worker counts.
    """
    data = path.read_bytes()
    whole = count_text(data.decode("utf-8"), specials)
    unit_counts = []
    for n in WORKERS:
        units = plan_units(path, specials, n)
        bounds = [units[0].start, *(u.end for u in units)]
        assert bounds[0] == 0 and bounds[-1] == len(data)
        assert all(a.end == b.start for a, b in zip(units, units[1:]))
        assert_boundaries_safe(data, bounds, specials)
        # The plan's counts, in-process: the same units the n-worker run hands its workers.
        assert sum((tally_unit(u, specials).counts for u in units), Counter()) == whole, n
        unit_counts.append(len(units))
    if chunked:
        assert unit_counts[-1] > 1, "the 8-worker plan was not chunked at all"
    else:
        assert unit_counts == [1] * len(WORKERS)
    reference = train_bpe(path, vocab_size, specials, impl=IMPL, num_workers=1)
    assert len(reference[1]) > 0
    for n in train_with:
        if n > 1:
            assert train_bpe(path, vocab_size, specials, impl=IMPL, num_workers=n) == reference, n
    return unit_counts


def planned_guesses(size: int, n: int) -> list[int]:
    """Where plan_units first aims its boundaries (before moving each to the next safe cut)."""
    wanted = max(-(-size // planning.UNIT_BYTES), n * planning.UNITS_PER_WORKER if n > 1 else 1)
    return [size * i // wanted for i in range(1, wanted)]


# --- corpora --------------------------------------------------------------------------------------


def test_corpus_without_any_special_token(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text(story_text(300_000, seed=1).replace(EOT, ""), encoding="utf-8")
    assert EOT.encode() not in path.read_bytes()
    assert check_chunking(path, (), 400)[-1] == 8 * planning.UNITS_PER_WORKER  # prose cuts everywhere


def test_only_special_token_is_at_the_very_end(tmp_path):
    path = tmp_path / "end.txt"
    path.write_text(story_text(300_000, seed=2).replace(EOT, "") + EOT, encoding="utf-8")
    data = path.read_bytes()
    assert data.count(EOT.encode()) == 1 and data.endswith(EOT.encode())
    check_chunking(path, (EOT,), 400)


def test_crlf_line_endings(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(story_text(300_000, seed=3).replace("\n", "\r\n").encode())
    assert b"\r\n" in path.read_bytes() and b"\n" not in path.read_bytes().replace(b"\r\n", b"")
    check_chunking(path, (EOT,), 400)


def test_single_long_line_is_chunked(tmp_path):
    # The case is a 100 MB line; training on it in CI would take minutes, and nothing
    # about the cuts depends on the length, so training runs on a 1 MB line here, and the
    # 100 MB line is checked for its plan below (units bounded by UNIT_BYTES).
    path = tmp_path / "line.txt"
    text = story_text(1_000_000, seed=4).replace(EOT, " ").replace("\n", " ")
    path.write_text(text, encoding="utf-8")
    assert b"\n" not in path.read_bytes()
    counts = check_chunking(path, (EOT,), 400)
    assert counts == [1, 8, 12, 32]  # every planned boundary found a prose cut


def test_a_100mb_line_is_planned_in_units_of_at_most_unit_bytes(tmp_path):
    path = tmp_path / "line100.txt"
    line = story_text(1_000_000, seed=5).replace(EOT, " ").replace("\n", " ").encode()
    with open(path, "wb") as file:
        for _ in range(100):
            file.write(line)
    try:
        units = plan_units(path, (EOT,), 1)
        assert len(units) == -(-path.stat().st_size // planning.UNIT_BYTES)
        assert max(u.size for u in units) <= planning.UNIT_BYTES  # a worker's memory is bounded
        assert units[-1].end == path.stat().st_size
    finally:
        path.unlink()


def test_boundaries_planned_inside_4_byte_characters(tmp_path):
    # Mostly 4-byte emoji, with a safe cut (letter | punctuation) once every ~4 KB: the even
    # boundaries land inside emoji and must move forward to the next " ab|." cut.
    block = "🙂" * 1000 + " ab."
    path = tmp_path / "emoji.txt"
    path.write_text(block * 100, encoding="utf-8")
    data = path.read_bytes()
    guesses = planned_guesses(len(data), 8)
    assert sum(0x80 <= data[g] <= 0xBF for g in guesses) > len(guesses) // 2  # really inside characters
    check_chunking(path, (EOT,), 300)
    for unit in plan_units(path, (EOT,), 8)[1:]:
        assert data[unit.start - 1 : unit.start + 1] == b"b."


def test_boundaries_planned_inside_runs_of_special_tokens(tmp_path):
    # Long runs of the special token and text without punctuation: the only safe cuts are right
    # after a special token, and most even boundaries land inside one.
    path = tmp_path / "specials.txt"
    path.write_text(("once upon a time there was a cat " * 3 + EOT * 300) * 60, encoding="utf-8")
    data = path.read_bytes()
    token = EOT.encode()
    spans = [m.span() for m in regex.finditer(regex.escape(token), data)]
    guesses = planned_guesses(len(data), 8)
    assert sum(any(s < g < e for s, e in spans) for g in guesses) > len(guesses) // 2
    check_chunking(path, (EOT,), 300)
    for unit in plan_units(path, (EOT,), 8)[1:]:
        assert data[unit.start - len(token) : unit.start] == token


def test_no_safe_cut_means_one_unit(tmp_path):
    # With EOT and EOT+EOT both special, every EOT in a run is overlapped by a double, so no cut
    # after one is safe, and the words between have no punctuation: one unit, same result.
    path = tmp_path / "uncuttable.txt"
    path.write_text(("once upon a time " * 20 + EOT * 40) * 200, encoding="utf-8")
    check_chunking(path, (EOT, EOT + EOT), 300, chunked=False)


def test_pure_emoji_text_has_no_safe_cut(tmp_path):
    path = tmp_path / "emoji_only.txt"
    path.write_text("🙂🎉 " * 20_000, encoding="utf-8")
    check_chunking(path, (EOT,), 300, chunked=False)


def test_fewer_units_where_safe_cuts_run_out(tmp_path):
    # Prose (cuts everywhere) then as much text with none: the boundaries planned in the second
    # half find no cut, so there are fewer units than planned, but more than one.
    path = tmp_path / "half.txt"
    prose = story_text(200_000, seed=6).replace(EOT, "")
    path.write_text(prose + "word " * 40_000, encoding="utf-8")
    counts = check_chunking(path, (EOT,), 300, train_with=(8,))
    assert 1 < counts[-1] < 8 * planning.UNITS_PER_WORKER


def test_small_unit_size_gives_many_units_and_the_same_result(tmp_path, monkeypatch):
    # Units are capped at UNIT_BYTES even with one planned per worker: lowering the cap makes a
    # small file many units for every worker count.
    monkeypatch.setattr(planning, "UNIT_BYTES", 16 << 10)
    path = tmp_path / "stories.txt"
    path.write_text(story_text(500_000, seed=7), encoding="utf-8")
    counts = check_chunking(path, (EOT,), 400, train_with=(2,))
    assert min(counts) >= 500_000 // (16 << 10)


def test_next_cut_is_the_first_safe_cut_however_far():
    """next_cut searches windows that double in width from a small first one; the cut it finds is
    the one a single search over the whole rest of the file finds, whether the next cut is a few
    bytes away (prose) or past several windows (a long stretch of text with no cut but a special
    token), and None when there is none."""
    specials = [EOT.encode()]
    finder = CutFinder(specials, specials, prose=GPT2.prose_cuts)
    stretch = "日本語のテキスト" * 300  # 7200 bytes: no prose cut (not ASCII), so only after EOT
    data = (f"Hello, world. {stretch}{EOT}{stretch}{stretch}{EOT}{EOT}tail.{stretch}").encode()
    file = io.BytesIO(data)
    for position in [*range(0, 40), *range(40, len(data), 97), len(data) - 1]:
        whole = finder.first_cut_in(data, position, len(data) - position)
        assert finder.next_cut(file, position, len(data)) == whole, position
    assert finder.next_cut(file, len(data) - len(stretch.encode()) + 5, len(data)) is None

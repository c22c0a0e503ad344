"""The shared pre-tokenizer: special-token splitting, the GPT-2 pattern, chunk boundaries, counting.

Then chunking (the second part): training gives identical results under any chunking: 1, 2, 3 and 8 workers, awkward boundaries.

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

import pytest
import regex
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import count_pretokens, train_bpe
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import GPT2, GPT2_PATTERN, iter_pretokens, split_on_special_tokens, validate_special_tokens
from bpe_impls.corpus import planning
from bpe_impls.corpus.cuts import CutFinder, find_chunk_boundaries, safe_cuts
from bpe_impls.corpus.planning import plan_units
from bpe_impls.corpus.tally import count_text, tally_unit
from bpe_impls.corpus.units import TextRange
from bpe_impls.harness.generators.tinystories import generate

EOT = "<|endoftext|>"


def test_gpt2_pattern_splits_like_the_published_pattern():
    # Expected tokens worked out from the pattern's alternatives by hand.
    text = "Hello, world! It's 2024...  ok\n\n"
    assert list(iter_pretokens(text)) == ["Hello", ",", " world", "!", " It", "'s", " 2024", "...", " ", " ok", "\n\n"]


def test_special_tokens_split_longest_first():
    specials = (EOT, EOT + EOT)
    assert split_on_special_tokens("a" + EOT + EOT + "b" + EOT + "c", specials) == ["a", "b", "c"]
    # the shorter one alone still splits
    assert split_on_special_tokens("x<|endoftext|>y", specials) == ["x", "y"]


def test_no_pre_token_crosses_a_special_token():
    counts = count_text("hello<|endoftext|>world", (EOT,))
    assert counts == Counter({b"hello": 1, b"world": 1})


def test_count_text_keys_are_utf8_bytes():
    counts = count_text("héllo héllo 🙂", ())
    assert counts == Counter({b"h\xc3\xa9llo": 1, " héllo".encode(): 1, " 🙂".encode(): 1})


@pytest.mark.parametrize(
    "specials, problem",
    [([""], "empty"), (["<a>", "<a>"], "twice"), ([b"<a>"], "not str"), ("<a>", "single")],
)
def test_bad_special_tokens_are_rejected(specials, problem):
    with pytest.raises(ConfigError, match=problem):
        validate_special_tokens(specials)


# --- find_chunk_boundaries --------------------------------------------------------------------


def test_find_chunk_boundaries_worked_example():
    assert find_chunk_boundaries(io.BytesIO(b"hello\nworld\nfoo\nbar\n"), 2, b"\n") == [0, 12, 20]


def test_find_chunk_boundaries_accepts_a_path(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"hello\nworld\nfoo\nbar\n")
    assert find_chunk_boundaries(path, 2, b"\n") == [0, 12, 20]


def test_boundaries_are_just_after_split_tokens_sorted_and_deduplicated():
    data = b"".join(f"doc {i} ".encode() * (i % 7 + 1) + b"<|endoftext|>" for i in range(200))
    bounds = find_chunk_boundaries(io.BytesIO(data), 16, b"<|endoftext|>")
    assert bounds[0] == 0 and bounds[-1] == len(data)
    assert bounds == sorted(set(bounds)) and len(bounds) <= 17
    assert len(bounds) > 8  # documents are short, so most planned boundaries survive
    for b in bounds[1:-1]:
        assert data[b - len(b"<|endoftext|>") : b] == b"<|endoftext|>"


def test_too_few_split_tokens_means_fewer_chunks():
    data = b"aaaa\nbbbb"
    assert find_chunk_boundaries(io.BytesIO(data), 8, b"\n") == [0, 5, len(data)]
    assert find_chunk_boundaries(io.BytesIO(b"no split token here"), 4, b"\n") == [0, 19]


def test_a_boundary_never_splits_a_longer_overlapping_special_token():
    single, double = b"<|endoftext|>", b"<|endoftext|><|endoftext|>"
    data = (b"some text " * 50 + double + b"more text " * 50 + single) * 40
    bounds = find_chunk_boundaries(io.BytesIO(data), 20, single, [double])
    assert len(bounds) > 2
    for b in bounds[1:-1]:
        assert data[b - len(single) : b] == single
        # never between the halves of a double, nor right after one
        assert data[b - len(double) : b] != double and data[b : b + len(single)] != single
    # with only doubles in the text there is no safe cut: one chunk rather than a wrong split
    only_doubles = (b"some text " * 50 + double) * 40
    assert find_chunk_boundaries(io.BytesIO(only_doubles), 20, single, [double]) == [0, len(only_doubles)]


class CountingReader(io.BytesIO):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.bytes_read = 0

    def read(self, n: int = -1) -> bytes:
        chunk = super().read(n)
        self.bytes_read += len(chunk)
        return chunk


def test_boundary_search_reads_small_blocks_not_the_file():
    data = (b"x" * 1000 + b"<|endoftext|>") * 10_000  # 10 MB
    reader = CountingReader(data)
    bounds = find_chunk_boundaries(reader, 4, b"<|endoftext|>")
    assert len(bounds) == 5
    assert reader.bytes_read < len(data) // 20


# --- safe cuts: cutting anywhere the finder allows gives identical counts ---------------------

SPECIAL_SETS = [(), (EOT,), (EOT, EOT + EOT), ("<|a|>", "a|>x", "|>")]
pieces = st.sampled_from(
    [
        "a",
        "b",
        "Z",
        "é",
        "🙂",
        "1",
        "23",
        ".",
        ",",
        "'s",
        "'",
        "!",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        "\u00a0",
        "\u3000",
        "<|",
        "|>",
        "<|a|>",
        "a|>x",
        EOT,
        "x",
        "y",
        "-",
        '"',
        "\u0301",
    ]
)
texts = st.lists(pieces, max_size=60).map("".join)


def _all_safe_cuts(data: bytes, specials: tuple[str, ...]) -> list[int]:
    encoded = [t.encode() for t in specials]
    finder = CutFinder(encoded, encoded, prose=GPT2.prose_cuts)
    file = io.BytesIO(data)
    return [p for p in range(1, len(data)) if finder.next_cut(file, p, len(data)) == p]


@settings(max_examples=examples(300))
@given(text=texts, specials=st.sampled_from(SPECIAL_SETS))
def test_every_safe_cut_preserves_counts(text, specials):
    data = text.encode()
    whole = count_text(text, specials)
    for p in _all_safe_cuts(data, specials):
        left, right = data[:p].decode(), data[p:].decode()  # a cut never splits a character
        assert count_text(left, specials) + count_text(right, specials) == whole, (text, p)


@settings(max_examples=examples(200))
@given(text=texts, specials=st.sampled_from(SPECIAL_SETS), chunks=st.integers(1, 40))
def test_counting_over_any_number_of_chunks_is_identical(text, specials, chunks):
    data = text.encode()
    bounds = safe_cuts(io.BytesIO(data), chunks, specials)
    total = Counter()
    for a, b in zip(bounds, bounds[1:]):
        total += count_text(data[a:b].decode(), specials)
    assert total == count_text(text, specials)


def test_prose_without_special_tokens_still_splits():
    data = ("The cat sat. The dog ran, and it was fun!\n" * 2000).encode()
    bounds = safe_cuts(io.BytesIO(data), 8, ())
    assert len(bounds) == 9


def test_text_with_no_safe_cut_stays_one_chunk():
    data = ("word " * 1000).encode()  # letters and spaces only: no cut is provably safe
    assert safe_cuts(io.BytesIO(data), 8, ()) == [0, len(data)]


# --- count_pretokens ----------------------------------------------------------------------------


def test_count_pretokens_matches_counting_the_whole_text(tinystories_sample):
    text = tinystories_sample.read_text(encoding="utf-8")
    expected = Counter(
        token.encode() for piece in regex.split(regex.escape(EOT), text) for token in regex.findall(GPT2_PATTERN, piece)
    )
    assert count_pretokens(tinystories_sample, [EOT], num_workers=1) == expected


@pytest.mark.parametrize("fixture", ["tinystories_sample", "corpus_en"])
def test_count_pretokens_identical_for_1_2_3_workers(fixture, request):
    path = request.getfixturevalue(fixture)
    results = [count_pretokens(path, [EOT], num_workers=n) for n in (1, 2, 3)]
    assert len(plan_units(path, (EOT,), 3)) > 1  # the multi-worker runs really were chunked
    assert results[0] == results[1] == results[2]


def test_units_cover_the_file_exactly(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text(("A story. " * 100 + EOT) * 50)
    units = plan_units(path, (EOT,), 4)
    assert units[0].start == 0 and units[-1].end == path.stat().st_size
    assert all(a.end == b.start for a, b in zip(units, units[1:]))
    assert (
        sum((tally_unit(u, (EOT,)).counts for u in units), Counter())
        == tally_unit(TextRange(str(path), 0, path.stat().st_size), (EOT,)).counts
    )


def test_empty_corpus_counts_nothing(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert count_pretokens(path, [EOT], num_workers=2) == Counter()


# ---- chunking ----
WORKERS = (1, 2, 3, 8)


IMPL = "bucket"  # a fast trainer; every trainer gives the same result (test_equivalence.py)


def story_text(size: int, seed: int) -> str:
    return "".join(generate(size, seed))


def assert_boundaries_safe(data: bytes, bounds: list[int], specials: tuple[str, ...]) -> None:
    """Each inner boundary: at a character start, not inside any special-token occurrence, and a
    cut the finder itself accepts."""
    encoded = [t.encode() for t in specials]
    occurrences = [m.span() for token in encoded for m in regex.finditer(regex.escape(token), data, overlapped=True)]
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

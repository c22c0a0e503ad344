"""The shared pre-tokenizer: special-token splitting, the GPT-2 pattern, chunk boundaries, counting."""

from __future__ import annotations

import io
from collections import Counter

import pytest
import regex
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import count_pretokens
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import GPT2, GPT2_PATTERN, iter_pretokens, split_on_special_tokens, validate_special_tokens
from bpe_impls.corpus.cuts import CutFinder, find_chunk_boundaries, safe_cuts
from bpe_impls.corpus.planning import plan_units
from bpe_impls.corpus.tally import count_text, tally_unit
from bpe_impls.corpus.units import TextRange

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
        assert data[b - len(b"<|endoftext|>"):b] == b"<|endoftext|>"


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
        assert data[b - len(single):b] == single
        # never between the halves of a double, nor right after one
        assert data[b - len(double):b] != double and data[b:b + len(single)] != single
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
    ["a", "b", "Z", "é", "🙂", "1", "23", ".", ",", "'s", "'", "!", " ", "  ", "\n", "\n\n", "\r\n", "\t",
     "\u00a0", "\u3000", "<|", "|>", "<|a|>", "a|>x", EOT, "x", "y", "-", '"', "\u0301"]
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
    assert sum((tally_unit(u, (EOT,)).counts for u in units), Counter()) == tally_unit(
        TextRange(str(path), 0, path.stat().st_size), (EOT,)
    ).counts


def test_empty_corpus_counts_nothing(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert count_pretokens(path, [EOT], num_workers=2) == Counter()

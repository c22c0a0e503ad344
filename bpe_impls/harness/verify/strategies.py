"""Hypothesis strategies that reach every clause of the contract (README, "The contract every
trainer obeys"), each small enough that a failing case shrinks to a few bytes.

Texts are joined from pieces chosen to meet at the split pattern's and the contract's edges:
letters of a two- or three-letter alphabet (so pair counts tie, and ties between pairs whose
bytes order differently from their ids), runs of one letter, whitespace runs, tabs and newlines
before words, contractions, digits, multi-byte UTF-8 of several scripts, and special tokens that
overlap or prefix one another, sit side by side and start or end the text; and the boundary
cases' own pieces (boundary.PIECES: each contraction after each kind of whitespace, ...), so the
random search lands on them too.

For `encode_iterable` and for trainers that cut their corpus, the realistic inputs come first:
`iterable_chunkings(text)` cuts a text as real code feeds it (a file's own lines, fixed-size reads
of 4,096, 8,192 and 65,536 characters), each cut labelled; `long_texts(specials)` are texts long
enough to cross those sizes; `large_corpora(specials)` are corpora with a document longer than
64 KB and a file of a few MB. `chunkings(text)` draws a realistic cut first, then arbitrary ones
(labelled "arbitrary cuts").
"""

from __future__ import annotations

import bisect
import io
import random
from functools import cache

from hypothesis import strategies as st

from ...corpus import count_texts
from ...trainers import DEFAULT_IMPL, get_trainer
from .boundary import PIECES

# Special tokens that overlap, prefix each other and contain text the corpus also holds.
SPECIAL_POOL = ["<|endoftext|>", "<|end", "<|", "|>", "<s>", "<s><s>", "ab", "é"]
LETTERS = st.sampled_from(["ab", "ba", "abc", "zé", "ab "])
WORD_PIECES = ["a", "b", "c", "ab", "ba", "aaa", "bbbb", "é", "ü", "中", "文", "🙂", "ÿ", "Ω"]
SPACING = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\r\n", "\u3000"]
PRETOKEN_EDGES = ["'s", "'ll", "'ve", "'re", "'d", "'t", "'x", "12", "3", "2024", ".", ",", "!?", "-", "$"]


@st.composite
def special_tokens(draw: st.DrawFn, max_size: int = 3) -> list[str]:
    return draw(st.lists(st.sampled_from(SPECIAL_POOL), max_size=max_size, unique=True))


def pieces(specials: list[str]) -> st.SearchStrategy[str]:
    options = [st.sampled_from(WORD_PIECES), st.sampled_from(SPACING), st.sampled_from(PRETOKEN_EDGES + PIECES)]
    if specials:
        options.append(st.sampled_from(specials))
    return st.one_of(*options)


@st.composite
def mixed_text(draw: st.DrawFn, specials: list[str], max_pieces: int = 24) -> str:
    return "".join(draw(st.lists(pieces(specials), max_size=max_pieces)))


@st.composite
def tie_corpus(draw: st.DrawFn) -> str:
    """Words over a tiny alphabet, each repeated the same number of times: counts tie constantly."""
    alphabet = draw(LETTERS).replace(" ", "")
    words = draw(st.lists(st.text(alphabet, min_size=2, max_size=5), min_size=1, max_size=6))
    repeat = draw(st.integers(1, 3))
    return " ".join(word for word in words for _ in range(repeat))


@st.composite
def run_corpus(draw: st.DrawFn) -> str:
    """Runs of one byte (`aaaaa`): merging within a word is greedy left to right."""
    letter = draw(st.sampled_from(["a", "b", "é"]))
    lengths = draw(st.lists(st.integers(2, 9), min_size=1, max_size=5))
    return " ".join(letter * n for n in lengths)


@st.composite
def specials_corpus(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Special tokens overlapping, prefixing each other, adjacent, at the start and the end."""
    specials = draw(special_tokens(max_size=4).filter(bool))
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(specials), st.sampled_from(WORD_PIECES + [" ", "ab", "<", "|"])),
            min_size=1,
            max_size=16,
        )
    )
    return "".join(parts), specials


@st.composite
def vocab_size(draw: st.DrawFn, specials: list[str], most_merges: int = 40) -> int:
    """Just above 256 + the special tokens (shrinks there), up to a few dozen merges past it."""
    return 256 + len(specials) + draw(st.integers(1, most_merges))


# ---- realistic inputs: how real code feeds encode_iterable, and texts and corpora long enough ------

CHUNK_SIZES = (4096, 8192, 65536)  # what real code reads at a time: 4 KiB pages, io's 8 KiB buffer, 64 KiB
FILE_LINES = "file lines"
ARBITRARY = "arbitrary cuts"


def chunk_label(size: int) -> str:
    return f"chunks of {size}"


REALISTIC_CHUNKINGS = (FILE_LINES, *(chunk_label(size) for size in CHUNK_SIZES))


def file_lines(text: str) -> list[str]:
    """The text's lines as iterating a file that holds it gives them, each with its line end
    (`open(path, newline="")`: a line ends after "\n", "\r\n" or a lone "\r"; for a text whose
    lines end in "\n" alone, exactly what `open(path)` gives)."""
    return list(io.StringIO(text, newline=""))


def fixed_chunks(text: str, size: int) -> list[str]:
    """The text read `size` characters at a time (`iter(lambda: file.read(size), "")`)."""
    return [text[start : start + size] for start in range(0, len(text), size)]


def iterable_chunkings(text: str) -> list[tuple[str, list[str]]]:
    """The realistic ways to feed `text` to encode_iterable, each as (how it was cut, the chunks):
    "file lines" when the text has more than one line, and "chunks of N" for each N of CHUNK_SIZES
    shorter than the text (a chunking into one piece is left out: it is `encode` itself). Every
    chunking joins back to `text`."""
    out: list[tuple[str, list[str]]] = []
    lines = file_lines(text)
    if len(lines) > 1:
        out.append((FILE_LINES, lines))
    out.extend((chunk_label(size), fixed_chunks(text, size)) for size in CHUNK_SIZES if len(text) > size)
    return out


@st.composite
def arbitrary_chunks(draw: st.DrawFn, text: str, most_cuts: int = 4) -> list[str]:
    """The text cut at up to `most_cuts` arbitrary places (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=most_cuts)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def chunkings(text: str) -> st.SearchStrategy[tuple[str, list[str]]]:
    """A labelled chunking of `text`: the realistic ones first (Hypothesis shrinks towards them),
    then arbitrary cuts, labelled "arbitrary cuts" (a divergence only they show says so)."""
    arbitrary = arbitrary_chunks(text).map(lambda chunks: (ARBITRARY, chunks))
    realistic = iterable_chunkings(text)
    return st.one_of(st.sampled_from(realistic), arbitrary) if realistic else arbitrary


# Words for generated text: plain English, contractions, numbers, some multi-byte names.
_WORDS = (
    "the a of and to in is was he she it they we you said had not but for on with his her at as "
    "all one day little big cat dog mom tim lily happy saw went play ball tree sun run jump friend "
    "house wanted very time came found made looked don't it's we're I'm they'll you've she'd "
    "1 2 3 10 42 2024 3.14 José Zoë Łódź naïve café 東京 Ωmega"
).split()


def _sentences(rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):
        words = rng.choices(_WORDS, k=rng.randint(3, 14))
        out.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?", ",", ":"]))
    return out


def _straddle(text: str, boundaries: list[int], inserts: list[str]) -> str:
    """`text` with each insert placed across the boundary at the same index (a fixed-size read cuts
    it in two), boundaries in increasing order; the positions are those of the result."""
    for boundary, insert in zip(boundaries, inserts):
        at = boundary - len(insert) // 2
        if at < len(text):
            text = text[:at] + insert + text[at:]
    return text


def _markdown(rng: random.Random, size: int) -> str:
    """Notes in Markdown: headings, paragraphs whose lines end in two spaces (a hard line break),
    lists, indented code, blank lines."""
    parts: list[str] = []
    total = 0
    while total < size:
        block = rng.random()
        if block < 0.15:
            lines = [f"## {' '.join(rng.choices(_WORDS, k=3)).title()}\n"]
        elif block < 0.3:
            lines = [f"- {sentence}\n" for sentence in _sentences(rng, rng.randint(2, 5))]
        elif block < 0.4:
            lines = [f"    x = {rng.randint(0, 999)}  # {rng.choice(_WORDS)}\n" for _ in range(rng.randint(2, 4))]
        else:
            lines = [f"{sentence}  \n" for sentence in _sentences(rng, rng.randint(2, 6))]
        lines.append("\n")
        parts.extend(lines)
        total += sum(len(line) for line in lines)
    return "".join(parts)


def _windows(rng: random.Random, size: int) -> str:
    """A text with Windows line ends (CR LF), tab-indented lines and blank lines."""
    parts: list[str] = []
    total = 0
    while total < size:
        sentence = _sentences(rng, 1)[0]
        line = rng.choice(["", "", "\t", "\t\t", "  "]) + sentence + rng.choice(["\r\n", "\r\n", "\r\n\r\n"])
        parts.append(line)
        total += len(line)
    return "".join(parts)


def _prose(rng: random.Random, size: int, separator: str) -> str:
    """Documents of prose, paragraphs of lines, some with trailing spaces, separated by `separator`."""
    documents: list[str] = []
    total = 0
    while total < size:
        paragraphs = []
        for _ in range(rng.randint(1, 6)):
            lines = [s + rng.choice(["", "", "", " ", "  "]) for s in _sentences(rng, rng.randint(1, 5))]
            paragraphs.append("\n".join(lines))
        document = "\n\n".join(paragraphs)
        documents.append(document)
        total += len(document) + len(separator)
    return separator.join(documents)


@cache
def _long_texts(specials: tuple[str, ...]) -> tuple[str, ...]:
    special = specials[0] if specials else ""
    separator = f"\n{special}\n" if special else "\n\n\n"
    markdown = _straddle(_markdown(random.Random(1), 20_000), [4096, 8192], [special or "   ", special or "\n\n "])
    windows = _straddle(_windows(random.Random(2), 90_000), [8192, 65536], ["\r\n", special or "\r\n"])
    prose = _straddle(_prose(random.Random(3), 280_000, separator), [65536], [special or "x  y"])
    return markdown, windows, prose


def long_texts(specials: list[str]) -> list[str]:
    """Three texts long enough to cross every size in CHUNK_SIZES, deterministic: Markdown notes
    (20 KB, lines ending in two spaces), a text with CR LF line ends and tabs (90 KB) and documents
    of prose separated by the first special token (280 KB). Where there are special tokens, one sits
    across the 4,096 and 8,192 boundaries of the first, the 65,536 one of the others; a CR LF
    across the second's 8,192."""
    return list(_long_texts(tuple(specials)))


# Few distinct words (each also after a space, a newline, ...): every pre-token of these corpora
# is merged whole well before vocab_size 500, so training stops when no pair is left, and a split
# of any pre-token (a chunk boundary inside a word) changes the merges, not only some counts.
_CORPUS_WORDS = "the remarkable elephant wandered through extraordinary landscapes yesterday, it's 2024 café".split()
LARGE_VOCAB_SIZE = 500  # the vocab_size to train large_corpora at (they run out of pairs below it)


def _corpus_lines(rng: random.Random, count: int) -> list[str]:
    lines = []
    for _ in range(count):
        words = rng.choices(_CORPUS_WORDS, k=rng.randint(3, 12))
        lines.append(" ".join(words) + rng.choice([".\n", ".\n", ". ", ",\n", ".\n\n", ".  \n"]))
    return lines


def _document(rng: random.Random, pool: list[str], size: int) -> list[int]:
    """A document of about `size` characters, as indices of lines of the pool (much faster to draw
    than every word: the pool's lines are some 64 characters long)."""
    return rng.choices(range(len(pool)), k=max(1, size // 64))


def _merged_tokens(pool: list[str]) -> set[bytes]:
    """Every token of the vocab the lines of `pool` train when no pair is left: the single bytes
    and each merge's."""
    words = count_texts(pool)
    possible = sum(len(word) - 1 for word in words)
    merges = get_trainer(DEFAULT_IMPL)(words, 256 + possible, [])[1]
    return {bytes([b]) for b in range(256)} | {left + right for left, right in merges}


def _cuts_a_word(line: bytes, offset: int, tokens: set[bytes]) -> bool:
    """Whether a cut before byte `offset` of `line` falls inside a word and leaves a piece of it
    that the vocab trained to the end has no token for: a trainer that cut there has to merge
    differently."""
    if not (0 < offset < len(line) and line[offset - 1 : offset + 1].isalpha()):
        return False
    start, end = offset, offset
    while start > 0 and line[start - 1 : start].isalpha():
        start -= 1
    start -= start > 0 and line[start - 1] == ord(" ")  # a word's pre-token holds the space before it
    while end < len(line) and line[end : end + 1].isalpha():
        end += 1
    return line[start:offset] not in tokens or line[offset:end] not in tokens


def _assemble(documents: list[list[int]], pool: list[str], separator: str) -> str:
    """The documents joined by `separator`, after making sure that each place where a file is
    commonly cut (i/n of its size for n up to 16 workers, every multiple of 64 KiB and of 1 MiB)
    cuts a word (`_cuts_a_word`): the two lines there are swapped for two lines of the pool that
    have as many bytes together and a word at that place. Nothing else moves, so the places stay
    where they were."""
    encoded = [line.encode("utf-8") for line in pool]
    tokens = _merged_tokens(pool)
    same_size: dict[int, list[int]] = {}
    for index, line in enumerate(encoded):
        same_size.setdefault(len(line), []).append(index)
    starts: list[int] = []  # byte offset of each line
    where: list[tuple[int, int]] = []  # (document, line in it)
    offset = 0
    for d, document in enumerate(documents):
        offset += len(separator.encode("utf-8")) if d else 0
        for k, index in enumerate(document):
            starts.append(offset)
            where.append((d, k))
            offset += len(encoded[index])
    places = {offset * i // n for n in range(2, 17) for i in range(1, n)}
    places |= set(range(65536, offset, 65536)) | set(range(1 << 20, offset, 1 << 20))
    for place in sorted(places):
        line_at = bisect.bisect_right(starts, place) - 1
        d, k = where[line_at]
        within = place - starts[line_at]
        if within >= len(encoded[documents[d][k]]) or _cuts_a_word(encoded[documents[d][k]], within, tokens):
            continue  # in a separator, or it cuts a word already
        first = k if k + 1 < len(documents[d]) else max(k - 1, 0)
        pair = documents[d][first : first + 2]
        within += sum(len(encoded[index]) for index in documents[d][first:k])
        total = sum(len(encoded[index]) for index in pair)
        swap: list[int] | None
        if len(pair) == 1:  # a document of one line
            swap = next(([i] for i in same_size[total] if _cuts_a_word(encoded[i], within, tokens)), None)
        else:
            swap = next(
                (
                    [i, same_size[total - len(line)][0]]
                    for i, line in enumerate(encoded)
                    if total - len(line) in same_size and _cuts_a_word(line, within, tokens)
                ),
                None,
            )
        if swap is not None:
            documents[d][first : first + len(pair)] = swap
    return separator.join("".join(pool[index] for index in document) for document in documents)


@cache
def _large_corpora(specials: tuple[str, ...]) -> tuple[str, ...]:
    separator = specials[0] if specials else "\n\n"
    rng = random.Random(4)
    pool = _corpus_lines(rng, 4000)
    # A document longer than 64 KB, then two short ones.
    long_document = [_document(rng, pool, size) for size in (150_000, 20_000, 30_000)]
    # A file of 4 MB: documents of 1 to 16 KB, and one of 200 KB across the middle of the file.
    documents: list[list[int]] = []
    total, placed = 0, False
    while total < 4_000_000:
        long = not placed and total > 1_900_000
        placed = placed or long
        documents.append(_document(rng, pool, 200_000 if long else rng.randint(1000, 16_000)))
        total += 64 * len(documents[-1]) + len(separator)
    return _assemble(long_document, pool, separator), _assemble(documents, pool, separator)


def large_corpora(specials: list[str]) -> list[str]:
    """Corpora for trainers that cut their input into chunks, deterministic: 200 KB whose first
    document is 150 KB long, and a 4 MB file of documents (1 to 16 KB, one of 200 KB across the
    middle), separated by the first special token (else by blank lines). Train them at
    LARGE_VOCAB_SIZE: they run out of pairs first, so any pre-token split at a chunk boundary shows."""
    return list(_large_corpora(tuple(specials)))

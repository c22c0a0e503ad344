"""Hypothesis strategies that reach every clause of the contract (README, "The contract every
trainer obeys"), each small enough that a failing case shrinks to a few bytes.

Texts are joined from pieces chosen to meet at the split pattern's and the contract's edges:
letters of a two- or three-letter alphabet (so pair counts tie, and ties between pairs whose
bytes order differently from their ids), runs of one letter, whitespace runs, tabs and newlines
before words, contractions, digits, multi-byte UTF-8 of several scripts, and special tokens that
overlap or prefix one another, sit side by side and start or end the text.
"""

from __future__ import annotations

from hypothesis import strategies as st

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
    options = [st.sampled_from(WORD_PIECES), st.sampled_from(SPACING), st.sampled_from(PRETOKEN_EDGES)]
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

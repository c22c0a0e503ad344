"""Arguments that look right and are not: each is a one-line ConfigError, never a silently wrong run.

A single string where an iterable of documents belongs, and a split pattern that matches the empty
string only in some context, once passed every check (0 merges; empty pre-tokens). The counting
options are declared by count_pretokens, and every entry point that takes them has them in its
signature with the same defaults and passes them on.
"""

from __future__ import annotations

import inspect
import json
import re

import pytest

from bpe_impls import ConfigError, Tokenizer, count_pretokens, train_bpe, train_bpe_from_iterator
from bpe_impls.base.patterns import iter_pretokens, resolve_pattern
from bpe_impls.corpus import count_texts
from bpe_impls.corpus.tally import count_text
from bpe_impls.trainers import naive

EOT = "<|endoftext|>"
TEXT = "the cat sat on the mat, the cat ate the rat. " * 20


# --- a single string where the documents belong ------------------------------------------------


@pytest.mark.parametrize("texts", [TEXT, TEXT.encode(), bytearray(TEXT.encode())], ids=["str", "bytes", "bytearray"])
def test_a_single_string_for_the_documents_is_a_config_error(texts):
    # Iterating a str gives its characters: each would be a document of one pre-token of one
    # character, so training used to end with no pair to merge and no error.
    with pytest.raises(ConfigError, match=f"not a single {type(texts).__name__}"):
        train_bpe_from_iterator(texts, 300)
    with pytest.raises(ConfigError, match="iterable of documents"):
        count_texts(texts)


def test_the_same_string_in_a_list_trains():
    _, merges = train_bpe_from_iterator([TEXT], 300)
    assert merges == naive.train(count_text(TEXT), 300)[1]
    assert merges  # the words have pairs to merge


# --- split patterns that match the empty string in some context ---------------------------------

# \b matches no character, between a word and a non-word character only: "" alone does not show it.
CONTEXT_EMPTY = r"\b|\w+|\W"
# Empty only right after an "@", which the probe text of resolve_pattern does not hold: found on
# real text by iter_pretokens.
AFTER_AT_EMPTY = r"(?<=@)|[^@]+|@"


def test_a_pattern_empty_only_in_context_is_rejected_up_front():
    assert resolve_pattern(CONTEXT_EMPTY.replace(r"\b|", "")).name == "custom"  # the rest is fine
    with pytest.raises(ConfigError, match=r"matches the empty string") as info:
        resolve_pattern(CONTEXT_EMPTY)
    assert repr(CONTEXT_EMPTY) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"matches the empty string"):
        train_bpe_from_iterator([TEXT], 300, pattern=CONTEXT_EMPTY)


def test_an_empty_match_the_probe_misses_is_caught_on_the_text(tmp_path):
    pattern = resolve_pattern(AFTER_AT_EMPTY)  # no "@" in the probe: accepted here
    assert list(iter_pretokens("ab cd", pattern)) == ["ab cd"]
    with pytest.raises(ConfigError, match=r"matches the empty string at 'b'"):
        list(iter_pretokens("a@b", pattern))
    with pytest.raises(ConfigError, match=r"matches the empty string"):
        count_text("mail me@home", (), pattern=pattern)
    path = tmp_path / "c.txt"
    path.write_text(f"mail me@home{EOT}ok", encoding="utf-8")
    for workers in (1, 2):
        with pytest.raises(ConfigError, match=r"matches the empty string"):
            count_pretokens(path, [EOT], workers, pattern=AFTER_AT_EMPTY)
    with pytest.raises(ConfigError, match=r"matches the empty string"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=AFTER_AT_EMPTY).encode("a@b")


def test_no_custom_pretoken_is_empty():
    pattern = resolve_pattern(r"[a-z]+|\s+|[^a-z\s]")
    assert all(iter_pretokens("héllo, wörld! 12 @x", pattern))


# --- a special token UTF-8 cannot encode ------------------------------------------------------


@pytest.mark.parametrize("token, index", [("\udcff", 0), ("a\ud800b", 1)])
def test_a_special_token_holding_a_lone_surrogate_is_a_config_error_naming_it(tmp_path, token, index):
    # What Python's argv holds for a byte that is not UTF-8 ($'\xff' arrives as '\udcff'); it used
    # to reach the corpus reader and end there as a UnicodeEncodeError traceback.
    specials = [EOT, token][-index - 1 :]
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    position = next(i for i, c in enumerate(token) if 0xD800 <= ord(c) < 0xE000)
    expected = re.escape(
        f"special token #{index} {token!r} is not valid Unicode text "
        f"(lone surrogate U+{ord(token[position]):04X} at position {position})"
    )
    for call in (
        lambda: train_bpe(path, 300, specials),
        lambda: count_pretokens(path, specials),
        lambda: train_bpe_from_iterator([TEXT], 300, specials),
        lambda: Tokenizer({i: bytes([i]) for i in range(256)}, [], specials),
    ):
        with pytest.raises(ConfigError, match=expected) as raised:
            call()
        assert "\n" not in str(raised.value)


# --- the counting options, declared once ------------------------------------------------------


# The counting options, as count_pretokens declares them (name -> default).
OPTIONS = {
    name: p.default
    for name, p in inspect.signature(count_pretokens).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "packed"
} | {"num_workers": None}


@pytest.mark.parametrize("func", [train_bpe, train_bpe_from_iterator, count_texts])
def test_every_counting_option_has_count_pretokens_default_and_is_documented(func):
    parameters = inspect.signature(func).parameters
    taken = [name for name in OPTIONS if name in parameters]
    assert taken
    for name in taken:
        assert parameters[name].default == OPTIONS[name], name
        assert name in func.__doc__
    assert "**" not in str(inspect.signature(func))


def test_the_iterator_trainer_lists_only_the_options_it_uses():
    parameters = inspect.signature(train_bpe_from_iterator).parameters
    assert {"pattern", "min_pretoken_count", "progress"} <= parameters.keys()
    assert not {"num_workers", "backend", "scheduler", "text_field", "skip_bad_records"} & parameters.keys()
    with pytest.raises(TypeError, match=r"train_bpe_from_iterator.. got an unexpected keyword argument 'num_workers'"):
        train_bpe_from_iterator([TEXT], 300, num_workers=2)


def test_an_unknown_option_is_a_type_error_naming_the_function(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text(TEXT, encoding="utf-8")
    with pytest.raises(TypeError, match=r"train_bpe\(\) got an unexpected keyword argument 'min_count'"):
        train_bpe(path, 300, min_count=2)
    with pytest.raises(TypeError, match=r"count_pretokens\(\) got an unexpected keyword argument 'workers'"):
        count_pretokens(path, workers=2)


def test_train_bpe_passes_every_option_on(tmp_path):
    # A JSON Lines file whose text is under "body", one bad record, rare words: every option changes
    # the counts, so train_bpe equals naive on count_pretokens' counts only if it passed each one on.
    path = tmp_path / "c.jsonl"
    lines = [json.dumps({"body": TEXT + f" word{i}"}) for i in range(6)] + ["{not json"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    chosen = dict(
        num_workers=2,
        text_field="body",
        skip_bad_records=True,
        min_pretoken_count=2,
        pattern=r"[a-z]+|[0-9]+|\s+|\S",
        backend="local",
        progress=False,
        scheduler=None,
    )
    assert set(chosen) == set(OPTIONS)
    with pytest.warns(UserWarning, match="skipped"):
        counts = count_pretokens(path, [], **chosen)
    assert counts and all(n >= 2 for n in counts.values())
    with pytest.warns(UserWarning, match="skipped"):
        assert train_bpe(path, 300, [], impl="route_b", **chosen) == naive.train(counts, 300)

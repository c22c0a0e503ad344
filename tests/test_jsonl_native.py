"""The compiled core's JSON Lines reader (csrc/jsonl.c, `jsonl_documents`) against its pure-Python
twin, corpus/units.py's `_document` (json.loads and the checks after it), and the packed encoder
(`Tokenizer.encode_packed_to_numpy`) against `encode_batch_to_numpy` for every encoder.

The reader's promise is one-sided: a record it reads gives exactly `_document`'s document, and a
record `_document` refuses, or might read otherwise, is left to Python (`stop` at its line). So a
line is checked both ways: read natively => `_document` gives the same str; `_document` refuses =>
not read natively. Then whole units: `packed()` gives `texts()`'s documents and faults (the same
CorpusError, the same SkipReport), with and without the compiled core.
"""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest
from conftest import examples, require_compiled_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer
from bpe_impls.base import compiled
from bpe_impls.base.errors import ConfigError, CorpusError, EncodeError
from bpe_impls.corpus import planning, units
from bpe_impls.encoding.encoders import ENCODERS

require_compiled_core()


def native_document(line: bytes, field: str = "text", bom: bool = False) -> str | None:
    """The native reader's document of one line; None if it leaves the line to Python."""
    data, offsets, stop, stop_end, lines = compiled.core().jsonl_documents(line, field.encode(), 0, len(line), bom)
    ends = np.frombuffer(offsets, dtype=np.int64)
    if stop < len(line):
        assert (stop, stop_end, lines, len(ends)) == (0, len(line), 0, 1), "one line: left whole, nothing before"
        return None
    assert lines == 1
    if len(ends) == 1:
        assert not line.strip(), "only a blank line gives no document"
        return None
    assert len(ends) == 2 and ends[1] == len(data)
    return data.decode("utf-8")


def python_document(line: bytes, field: str = "text") -> str | None:
    """_document's document; None where it refuses the record."""
    try:
        return units._document(line, field)
    except ValueError:
        return None


def agree(line: bytes, field: str = "text") -> None:
    native = native_document(line, field)
    if native is not None:
        assert python_document(line, field) == native, line
    if python_document(line, field) is None:
        assert native is None, line  # (a line left to Python is its to name; a blank one is skipped)


# Records Python's json reads in ways a reader might not expect, and bad ones.
EDGE_LINES = [
    b'{"text": "plain"}',
    b'{"text":"a\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/\\b\\f\\r"}',
    b'  {"text" : "spaced" }  \r',
    b'{"text": "first", "text": "last"}',
    b'{"text": "first", "text": 3}',
    b'{"text": 3, "text": "last"}',
    b'{"t\\u0065xt": "escaped key"}',
    b'{"text": "a", "t\\u0065xt": "escaped key wins"}',
    b'{"text": "\\ud800"}',
    b'{"text": "\\udc00x"}',
    b'{"text": "\\ud83dx"}',
    b'{"text": "\\ud83d\\u0041"}',
    b'{"text": "ok", "other": "\\ud800"}',
    b'{"text": "\\u0000nul"}',
    b'{"text": "raw\x01control"}',
    b'{"text": "tab\tinside"}',
    b'{"text": "x", "n": NaN}',
    b'{"text": "x", "n": Infinity}',
    b'{"text": "x", "n": -Infinity}',
    b'{"text": "x", "n": -0}',
    b'{"text": "x", "n": 01}',
    b'{"text": "x", "n": 1.}',
    b'{"text": "x", "n": .5}',
    b'{"text": "x", "n": 1e5, "m": -2.5E-3, "k": 0.0}',
    b'{"text": "x", "n": ' + b"9" * 5000 + b"}",
    b'{"text": "x", "n": 1' + b"0" * 200 + b"}",
    b'{"text": "x", "a": [1, 2, ]}',
    b'{"text": "x",}',
    b'{"text": "x"} extra',
    b'{"text": "x"}{"text": "y"}',
    b'["text", "x"]',
    b'"just a string"',
    b"{}",
    b'{"text": null}',
    b'{"text": ["a"]}',
    b'{"text": {"a": "b"}}',
    b'{"text": true, "x": false, "y": null}',
    b'{"text": "x", "deep": ' + b"[" * 100 + b"]" * 100 + b"}",
    b'{"text": "x", "deep": ' + b"[" * 30 + b"]" * 30 + b"}",
    b'{"text": "x", "nested": {"text": "inner"}}',
    b'{"text": "caf\xc3\xa9"}',
    b'{"text": "bad \xff byte"}',
    b'{"text": "ok", "other": "bad \xc3"}',
    b'{"text": "overlong \xc0\xaf"}',
    b'{"text": "surrogate \xed\xa0\x80"}',
    b'{"text": "max \xf4\x8f\xbf\xbf"}',
    b'{"text": "beyond \xf4\x90\x80\x80"}',
    b"\xef\xbb\xbf" + b'{"text": "after a BOM"}',
    b"\x0b",
    b" \t\r\x0c",
    b'\x0b{"text": "vertical tab before"}',
    b'{"text": "x"\x0c}',
    b'{"text": "unterminated}',
    b'{"text": "x", "k"}',
    b'{"text" "x"}',
    b'{"TEXT": "case"}',
]


@pytest.mark.parametrize("line", EDGE_LINES, ids=range(len(EDGE_LINES)))
def test_each_edge_record_reads_as_python_reads_it_or_is_left_to_python(line: bytes) -> None:
    agree(line)


def test_the_common_records_are_read_natively() -> None:
    """Not only safe but useful: plain records, escapes, pairs, numbers and duplicates are taken."""
    for line in (*EDGE_LINES[:4], EDGE_LINES[6], EDGE_LINES[7], EDGE_LINES[23], EDGE_LINES[40]):
        assert native_document(line) is not None, line
    assert native_document(EDGE_LINES[7]) == "escaped key wins"
    for line in (b'{"text": "x", "n": NaN}', b'{"text": "\\ud800"}', b'{"text": "ok", "other": "\\ud800"}'):
        assert native_document(line) is None, line  # Python's to read


json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
)
keys = st.sampled_from(["text", "id", "meta", "t", "tex", "TEXT"]) | st.text(max_size=4)
records = st.dictionaries(keys, json_values, max_size=5)


@st.composite
def jsonl_lines(draw: st.DrawFn) -> bytes:
    """A record as JSON writers write it (compact or spaced, escaped or raw), sometimes mangled."""
    record = draw(records)
    if draw(st.integers(0, 3)):  # mostly a record with its text, as in a real data set
        record["text"] = draw(st.text())
    elif draw(st.booleans()):
        record["text"] = draw(json_values)
    text = json.dumps(
        record,
        ensure_ascii=draw(st.booleans()),
        separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")])),
    )
    line = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 3)) == 0 and line:  # mangle one byte
        at = draw(st.integers(0, len(line) - 1))
        line = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1 :]
    return line.replace(b"\n", b" ")


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(jsonl_lines())
def test_generated_records_read_as_python_reads_them(line: bytes) -> None:
    agree(line)


# ---- whole units: packed() is texts() ------------------------------------------------------------


def unit_documents(unit: units.PackedUnit, packed: bool) -> tuple[list[str], units.SkipReport | None]:
    generator = unit.packed() if packed else unit.texts()
    documents: list[str] = []
    while True:
        try:
            item = next(generator)
        except StopIteration as done:
            return documents, done.value
        if packed:
            data, offsets = item
            ends = np.frombuffer(offsets, dtype=np.int64)
            documents += [data[ends[k] : ends[k + 1]].decode("utf-8") for k in range(len(ends) - 1)]
        else:
            documents.append(item)


def file_units(path, skip: bool, workers: int) -> list[units.PackedUnit]:
    found = planning.plan_inputs([str(path)], (), workers, text_field="text", skip_bad_records=skip)
    assert found and all(isinstance(unit, units.PackedUnit) for unit in found)
    return found


def outcome(unit_list: list[units.PackedUnit], packed: bool) -> object:
    try:
        return [unit_documents(unit, packed) for unit in unit_list]
    except CorpusError as exc:
        return ("error", str(exc))


MIXED = (
    [b"\xef\xbb\xbf" + json.dumps({"text": "first, after a BOM"}).encode()]
    + [json.dumps({"text": f"doc {k} caf\u00e9 \U0001f600" * (k % 7), "id": k}).encode() for k in range(3000)]
    + [b"", b"  ", b'{"text": "x", "n": NaN}', b"not json", b'{"text": 5}', b'{"text": "\\ud800"}']
    + [json.dumps({"text": "after " * k}, ensure_ascii=False).encode() for k in range(2000)]
    + [b'{"text": "bad \xff"}', b'{"text": "no newline at the end"}']
)


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("workers", [1, 3])
def test_a_files_packed_documents_and_faults_are_its_texts(tmp_path, skip, compressed, workers, monkeypatch) -> None:
    monkeypatch.setattr(units, "PIECE_BYTES", 1 << 12)  # many blocks: lines cut across them
    body = b"\n".join(MIXED)
    path = tmp_path / ("mixed.jsonl.gz" if compressed else "mixed.jsonl")
    path.write_bytes(gzip.compress(body) if compressed else body)
    found = file_units(path, skip, workers)
    expected = outcome(found, packed=False)
    assert outcome(found, packed=True) == expected
    if skip:
        documents = [doc for docs, _ in expected for doc in docs]  # type: ignore[union-attr]
        assert documents[0] == "first, after a BOM" and documents[-1] == "no newline at the end"
        assert "x" in documents  # NaN: Python's json reads it, so the record is kept
        assert sum(report.count for _, report in expected) == 4  # type: ignore[union-attr]
    else:
        assert expected[0] == "error" and "line 3005: not valid JSON" in expected[1]  # type: ignore[index]
    monkeypatch.setattr(compiled, "AVAILABLE", False)  # the pure-Python twin of the packed path
    assert outcome(found, packed=True) == expected


@pytest.mark.parametrize("skip", [True, False])
def test_a_parquet_row_groups_packed_documents_and_faults_are_its_texts(tmp_path, skip, monkeypatch) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.setattr(units, "PARQUET_BATCH_ROWS", 100)  # batches cut inside row groups
    texts = [f"row {k} caf\u00e9 \U0001f600 " * (k % 5) for k in range(1000)]
    with_null = [*texts[:500], None, *texts[500:]]
    tables = {
        "plain.parquet": pa.table({"text": texts, "id": list(range(1000))}),
        "large.parquet": pa.table({"text": pa.array(texts, type=pa.large_string())}),
        "null.parquet": pa.table({"text": with_null}),
        "ints.parquet": pa.table({"text": list(range(300))}),
        "other.parquet": pa.table({"body": texts[:10]}),
    }
    for name, table in tables.items():
        path = tmp_path / name
        pq.write_table(table, path, row_group_size=250)
        found = file_units(path, skip, 2)
        expected = outcome(found, packed=False)
        assert outcome(found, packed=True) == expected, name
        if name in ("plain.parquet", "large.parquet"):
            assert [doc for docs, _ in expected for doc in docs] == texts  # type: ignore[union-attr]


@pytest.mark.parametrize("cut", [10, 5000, 29_990])
def test_a_json_lines_file_that_shrinks_under_the_reader_is_an_error_not_a_loop(tmp_path, monkeypatch, cut):
    monkeypatch.setattr(units, "PIECE_BYTES", 1 << 10)
    path = tmp_path / "shrinks.jsonl"
    body = b"".join(json.dumps({"text": "x" * 2000}).encode() + b"\n" for _ in range(15))  # lines > a read
    path.write_bytes(body)
    unit = units.JsonlRange(str(path), 0, len(body))  # (no stamp: the short read itself must tell)
    with path.open("r+b") as file:
        file.truncate(cut)
    with pytest.raises(CorpusError, match="changed"):
        unit_documents(unit, packed=True)


# ---- the packed encoder ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_tokenizers() -> dict[str, Tokenizer]:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"ll", 258: b"hell", 259: b" w", 260: b"\xc3\xa9"}
    merges = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w"), (b"\xc3", b"\xa9")]
    return {name: Tokenizer(vocab, merges, ["<|endoftext|>"], encoder=name) for name in ENCODERS}


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="helo wé<|endoftext|>\n", max_size=40), max_size=30), st.sampled_from([1, 2]))
def test_packed_texts_encode_as_the_batch_of_them(small_tokenizers, texts, threads) -> None:
    datas = [text.encode() for text in texts]
    data = b"".join(datas)
    offsets = np.cumsum([0, *map(len, datas)])
    for name, tok in small_tokenizers.items():
        for allowed in ("all", set()):
            got = tok.encode_packed_to_numpy(data, offsets, num_threads=threads, allowed_special=allowed)
            want = tok.encode_batch_to_numpy(datas, num_threads=1, allowed_special=allowed)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist(), name


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.text(alphabet="helo wé<|endoftext|>\n", max_size=40), max_size=30),
    st.sampled_from([1, 2]),
    st.sampled_from([0, 259, 261]),
    st.sampled_from([None, np.uint16, np.uint32]),
)
def test_a_separator_follows_each_text_within_its_offsets(small_tokenizers, texts, threads, separator, dtype) -> None:
    datas = [text.encode() for text in texts]
    data = b"".join(datas)
    offsets = np.cumsum([0, *map(len, datas)])
    for name, tok in small_tokenizers.items():
        ids, ends = tok.encode_packed_to_numpy(
            data, offsets, num_threads=threads, dtype=dtype, allowed_special=set(), separator=separator
        )
        want = [[*tok.encode(text, allowed_special=set()), separator] for text in texts]
        assert ends.tolist() == np.cumsum([0, *map(len, want)]).tolist(), name
        assert ids.tolist() == [i for one in want for i in one], name


def test_a_separator_must_be_an_id(small_tokenizers) -> None:
    for tok in small_tokenizers.values():
        for bad in (-1, 262, 2**40):
            with pytest.raises(ConfigError, match=f"separator {bad}|separator must be"):
                tok.encode_packed_to_numpy(b"ab", [0, 2], separator=bad)
        # The encoders themselves refuse an id past 32 bits (the Tokenizer checks first).
        with pytest.raises(ValueError, match="separator 4294967296 is not an id"):
            tok._encoder.encode_packed_buffer(b"ab", np.array([0, 2], np.int64).tobytes(), [], [], separator=2**32)


def test_packed_texts_of_a_long_batch_on_two_threads(small_tokenizers) -> None:
    datas = [("hello world é " * (k % 50)).encode() for k in range(20000)]
    data = b"".join(datas)
    offsets = np.cumsum([0, *map(len, datas)])
    tok = small_tokenizers[next(iter(ENCODERS))]
    got = tok.encode_packed_to_numpy(data, offsets, num_threads=2)
    want = tok.encode_batch_to_numpy(datas, num_threads=1)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_packed_faults_are_named(small_tokenizers) -> None:
    for name, tok in small_tokenizers.items():
        with pytest.raises(EncodeError, match="batch index 1: not valid UTF-8"):
            tok.encode_packed_to_numpy(b"ab\xff", [0, 2, 3])
        with pytest.raises(ValueError, match=r"offsets\[1\] = 3"):
            tok.encode_packed_to_numpy(b"ab", [0, 3])
        with pytest.raises(ValueError, match=r"offsets\[0\] = 2, offsets\[1\] = 1"):
            tok.encode_packed_to_numpy(b"abc", [2, 1, 3])
        with pytest.raises(TypeError, match="data must be bytes"):
            tok.encode_packed_to_numpy(bytearray(b"ab"), [0, 2])  # type: ignore[arg-type]
        with pytest.raises(EncodeError, match=re.escape("<|endoftext|>")):
            tok.encode_packed_to_numpy(b"a<|endoftext|>", [0, 14], disallowed_special="all", allowed_special=set())
        ids, offsets = tok.encode_packed_to_numpy(b"", [0])
        assert ids.tolist() == [] and offsets.tolist() == [0], name

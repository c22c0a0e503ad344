"""Corpus inputs (bpe_impls.corpus): paths, globs and directories; text, JSON Lines and Parquet shards.

The oracle for every format is `count_text` of the same documents joined by the special token:
a document boundary (a JSON record, a Parquet row, a file boundary) must count exactly like one.
These tests use the local backend; tests/test_dask.py runs the same units on a Dask cluster.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import warnings
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import cli
from bpe_impls.base.errors import ConfigError, CorpusError
from bpe_impls.corpus import tally
from bpe_impls.corpus import units as unit_module
from bpe_impls.corpus.inputs import InputFormat, input_format, resolve_inputs
from bpe_impls.corpus.local import LocalBackend
from bpe_impls.corpus.planning import plan_inputs, plan_units
from bpe_impls.corpus.tally import SkippedRecordsWarning, Tally, count_text, drop_rare, tally_unit
from bpe_impls.corpus.units import CompressedJsonl, CompressedText, JsonlRange, ParquetRowGroup, SkipReport, TextRange
from bpe_impls.harness.generators.tinystories import generate

EOT = "<|endoftext|>"
SPECIALS = (EOT,)
FORMATS = ["txt", "txt.gz", "txt.zst", "jsonl", "jsonl.gz", "jsonl.zst", "parquet"]


# --- writing shards (also used by tests/test_dask.py) ---------------------------------------------


def story_docs(size: int, seed: int) -> list[str]:
    """TinyStories-style documents: the generated text split at its separators."""
    return "".join(generate(size, seed)).split(EOT)


def oracle(docs: list[str], specials: tuple[str, ...] = SPECIALS) -> Counter[bytes]:
    """What counting the documents must give: each is counted on its own (a hard boundary)."""
    total: Counter[bytes] = Counter()
    for doc in docs:
        total.update(count_text(doc, specials))
    return total


def write_docs(path: Path, docs: list[str], *, field: str = "text", row_group_rows: int | None = None) -> Path:
    """Write documents in the format the suffix names: text joined by EOT, one JSON object per line,
    or one Parquet row each (several row groups)."""
    fmt = input_format(path)
    if fmt.kind == "parquet":
        rows = row_group_rows or max(1, len(docs) // 3)
        pq.write_table(pa.table({"id": list(range(len(docs))), field: docs}), path, row_group_size=rows)
        return path
    if fmt.kind == "text":
        data = EOT.join(docs).encode("utf-8")
    else:
        # Half the records with \u escapes, half with raw UTF-8.
        records = (json.dumps({"id": i, field: d}, ensure_ascii=i % 2 == 0) for i, d in enumerate(docs))
        data = "".join(record + "\n" for record in records).encode()
    if fmt.codec == "gzip":
        data = gzip.compress(data)
    elif fmt.codec == "zstd":
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def count_local(units, specials: tuple[str, ...] = SPECIALS) -> Counter[bytes]:
    return LocalBackend(1).count(units, specials)


def tally_all(units, specials: tuple[str, ...] = SPECIALS) -> Tally:
    total = Tally()
    for unit in units:
        total.add(tally_unit(unit, specials))
    return total


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return story_docs(200_000, seed=3)


# --- formats --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_counts_its_documents_exactly(fmt, docs, tmp_path, monkeypatch):
    # Small pieces, so a compressed text file is really handed on in many cut pieces.
    monkeypatch.setattr(unit_module, "PIECE_BYTES", 4096)
    path = write_docs(tmp_path / f"shard.{fmt}", docs)
    units = plan_inputs(path, SPECIALS, 3)
    splittable = fmt in ("txt", "jsonl", "parquet")
    assert (len(units) > 1) == splittable, units
    if fmt == "txt.gz":
        assert len(list(units[0].texts())) > 10  # streamed in pieces, not as one string
    assert count_local(units) == oracle(docs)
    assert tally_all(units).counts == oracle(docs)


def test_a_lone_text_file_is_planned_as_before(tmp_path, docs):
    path = write_docs(tmp_path / "corpus.txt", docs)
    for workers in (1, 2, 3):
        assert plan_inputs(path, SPECIALS, workers) == plan_units(path.resolve(), SPECIALS, workers)


def test_mixed_directory_through_the_process_pool(tmp_path, docs):
    """Every unit type pickles to the local pool's workers and counts there."""
    root = tmp_path / "data"
    (root / "nested" / "deeper").mkdir(parents=True)
    parts = [docs[i :: len(FORMATS)] for i in range(len(FORMATS))]
    for i, (fmt, part) in enumerate(zip(FORMATS, parts)):
        folder = root if i % 2 else root / "nested" / ("deeper" if i % 3 else "")
        write_docs(folder / f"part{i}.{fmt}", part)
    (root / ".DS_Store").write_bytes(b"\0\1junk")  # hidden files are not corpus files
    (root / "_SUCCESS").write_bytes(b"")
    units = plan_inputs(root, SPECIALS, 2)
    assert {type(u) for u in units} == {TextRange, CompressedText, JsonlRange, CompressedJsonl, ParquetRowGroup}
    assert LocalBackend(2).count(units, SPECIALS) == oracle(docs)


@pytest.mark.parametrize("fmt", ["jsonl", "jsonl.zst", "parquet"])
def test_documents_are_hard_boundaries_like_a_special_token(fmt, tmp_path):
    docs = ["hello ", "world", "ab", "cd  ", "", "  x"]
    path = write_docs(tmp_path / f"d.{fmt}", docs)
    counts = count_local(plan_inputs(path, SPECIALS, 1))
    assert counts == count_text(EOT.join(docs), SPECIALS)
    # Without special tokens too, and the boundary is real: joined, the text counts differently.
    assert count_local(plan_inputs(path, (), 1), ()) == oracle(docs, ())
    assert counts != count_text("".join(docs))
    assert counts[b" world"] == 0 and counts[b"world"] == 1


def test_special_tokens_inside_documents_still_split(tmp_path):
    docs = [f"a{EOT}b", "c<|pad|>d"]
    path = write_docs(tmp_path / "d.jsonl", docs)
    specials = (EOT, "<|pad|>")
    assert count_local(plan_inputs(path, specials, 1), specials) == Counter({b"a": 1, b"b": 1, b"c": 1, b"d": 1})


_PIECES = st.sampled_from(
    [
        "a",
        "b",
        "Z",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        ".",
        ",",
        "!",
        "'s",
        "'",
        "9",
        "é",
        "\u00a0",
        "🙂",
        "日本",
        EOT,
        "<|",
        "|>",
        "<|endof",
        "text|>",
        "<",
        "|",
    ]
)
_DOCS = st.lists(st.lists(_PIECES, max_size=12).map("".join), min_size=1, max_size=12)


@settings(max_examples=examples(30), deadline=None)
@given(docs=_DOCS, data=st.data())
def test_any_sharding_of_the_documents_counts_the_same(tmp_path_factory, docs, data):
    """Documents split into any number of files of any formats: the same counts as one file."""
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(docs) - 1)), max_size=4, unique=True)))
    groups = [docs[a:b] for a, b in zip([0, *cuts], [*cuts, len(docs)]) if docs[a:b]]
    folder = tmp_path_factory.mktemp("shards")
    for i, group in enumerate(groups):
        fmt = data.draw(st.sampled_from(FORMATS), label=f"format of shard {i}")
        write_docs(folder / f"s{i:02}.{fmt}", group, row_group_rows=data.draw(st.integers(1, 3)))
    whole = oracle(docs)
    assert count_local(plan_inputs(folder, SPECIALS, 3)) == whole
    assert count_local(plan_inputs(folder, SPECIALS, 1)) == whole
    assert whole == count_text(EOT.join(docs), SPECIALS)


# --- cutting a decompressed stream ----------------------------------------------------------------

# Overlapping specials, and specials that extend others ("ab" / "abc", EOT / EOT EOT), where a cut
# after the shorter one is only safe if the bytes after it are seen.
_SPECIAL_SETS = [(), (EOT,), (EOT, EOT + EOT), ("ab", "b.", "<|"), ("ab", "abc", "c.")]


def _fragments(specials: tuple[str, ...]) -> list[str]:
    """The specials, their prefixes and suffixes: the text where a wrong cut would show."""
    out = set()
    for token in specials:
        for i in range(1, len(token) + 1):
            out.update({token[:i], token[-i:]})
    return sorted(out)


@pytest.mark.parametrize("specials", _SPECIAL_SETS, ids=lambda s: "+".join(s) or "none")
@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_stream_pieces_are_cut_only_where_counts_cannot_change(specials, data):
    pieces_of_text = st.sampled_from(_fragments(specials)) | _PIECES if specials else _PIECES
    text = data.draw(st.lists(pieces_of_text, max_size=60).map("".join), label="text")
    target = data.draw(st.integers(1, 24), label="target")
    block = data.draw(st.integers(1, 6) | st.integers(1, 64), label="block")  # the buffer ends everywhere
    raw = text.encode("utf-8")
    blocks = [raw[i : i + block] for i in range(0, len(raw), block)]
    pieces = list(unit_module._cut_pieces(blocks, specials, target))
    assert b"".join(p for _, p in pieces) == raw
    assert [o for o, _ in pieces] == [sum(len(p) for _, p in pieces[:i]) for i in range(len(pieces))]
    total: Counter[bytes] = Counter()
    for _, piece in pieces:
        total.update(count_text(piece.decode("utf-8"), specials))  # every cut is at a character boundary
    assert total == count_text(text, specials)


def test_stream_pieces_are_bounded_and_really_cut():
    text = "".join(generate(3_000_000, seed=5))
    blocks = [text.encode()[i : i + 100_000] for i in range(0, 3_000_000, 100_000)]
    pieces = [p for _, p in unit_module._cut_pieces(blocks, SPECIALS, 50_000)]
    assert len(pieces) > 40
    assert max(map(len, pieces[:-1])) < 50_000 + 2_000  # a safe cut comes within a few bytes in prose


def test_zstd_frames_are_all_read_and_truncation_is_an_error(tmp_path, docs):
    text = EOT.join(docs).encode()
    half = len(text) // 2
    cut = text.index(EOT.encode(), half)
    compressor = zstandard.ZstdCompressor()
    data = compressor.compress(text[:cut]) + compressor.compress(text[cut:])  # two frames, as pzstd writes
    path = tmp_path / "two.txt.zst"
    path.write_bytes(data)
    assert count_local(plan_inputs(path, SPECIALS, 1)) == oracle(docs)
    cut_jsonl = compressor.compress(b'{"text": "a"}\n' * 999)[:-9]
    cut_gzip = gzip.compress(text)[:-20]
    for name, body in [("cut.txt.zst", data[:-7]), ("cut.jsonl.zst", cut_jsonl), ("cut.txt.gz", cut_gzip)]:
        bad = tmp_path / name
        bad.write_bytes(body)
        with pytest.raises(CorpusError, match=r"corrupt or truncated") as info:
            count_local(plan_inputs(bad, SPECIALS, 1))
        assert str(bad) in str(info.value) and "\n" not in str(info.value)


def test_invalid_utf8_in_compressed_text_names_the_offset(tmp_path):
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(b"hello world " * 10 + b"\xff tail"))
    with pytest.raises(CorpusError, match=r"bad\.txt\.gz: not valid UTF-8 at decompressed byte offset 120"):
        count_local(plan_inputs(path, SPECIALS, 1))


# --- bad records ----------------------------------------------------------------------------------

BAD_LINES = [
    (b"this is not json", "not valid JSON"),
    (b'{"txt": "a"}', "no field 'text' in the record"),
    (b'{"text": 5}', "field 'text' is a number, not a string"),
    (b'{"text": null}', "field 'text' is null, not a string"),
    (b'["text"]', "the record is an array, not a JSON object"),
    (b'{"text": "caf\xe9"}', "not valid UTF-8"),
    (b'{"text": "x\\ud800y"}', "lone surrogate U+D800"),
]


def _jsonl_with(bad: bytes, good: list[str], at: int) -> bytes:
    lines = [json.dumps({"text": d}).encode() for d in good]
    lines.insert(at, bad)
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("bad,reason", BAD_LINES, ids=[r.split()[0] + str(i) for i, (_, r) in enumerate(BAD_LINES)])
@pytest.mark.parametrize("suffix", ["jsonl", "jsonl.gz"])
def test_a_bad_record_names_file_and_line(bad, reason, suffix, tmp_path):
    data = _jsonl_with(bad, ["one", "two", "three"], at=2)
    path = tmp_path / f"shard.{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    with pytest.raises(CorpusError) as info:
        count_local(plan_inputs(path, SPECIALS, 1))
    message = str(info.value)
    assert message.startswith(f"{path}: line 3: ") and reason in message and "\n" not in message


def test_line_numbers_are_right_in_a_late_range(tmp_path, docs):
    good = docs * 4
    path = tmp_path / "big.jsonl"
    path.write_bytes(_jsonl_with(b"{oops", good, at=len(good) - 5))
    units = plan_inputs(path, SPECIALS, 4)
    assert len(units) >= 8
    with pytest.raises(CorpusError, match=rf"big\.jsonl: line {len(good) - 4}: not valid JSON"):
        count_local(units)


def test_blank_lines_and_a_bom_are_not_records(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "a b"}\n\n   \r\n{"text": "c"}\r\n')
    assert count_local(plan_inputs(path, SPECIALS, 1)) == Counter({b"a": 1, b" b": 1, b"c": 1})


def test_skip_bad_records_counts_the_rest_and_reports_them(tmp_path, docs):
    lines = [json.dumps({"text": d}).encode() for d in docs]
    bad_at = [3, 10, 11, 40, 41, 42, 77]
    for i in bad_at:
        lines[i] = b'{"text": 1}' if i % 2 else b"not json"
    good = [d for i, d in enumerate(docs) if i not in bad_at]
    for suffix in ("jsonl", "jsonl.zst"):
        path = tmp_path / f"skip.{suffix}"
        data = b"\n".join(lines) + b"\n"
        path.write_bytes(zstandard.ZstdCompressor().compress(data) if suffix.endswith("zst") else data)
        units = plan_inputs(path, SPECIALS, 3, skip_bad_records=True)
        tally = tally_all(units)
        assert tally.counts == oracle(good)
        assert tally.skipped.count == len(bad_at)
        first = [message for _, _, message in tally.skipped.examples]
        assert first[0] == f"{path}: line 4: field 'text' is a number, not a string"
        assert [m.split(": ")[1] for m in first] == [f"line {i + 1}" for i in bad_at[: unit_module.MAX_EXAMPLES]]
        summary = tally.skipped.summary()
        assert summary.startswith(f"skipped {len(bad_at)} bad records: {path}: line 4:")
        assert summary.endswith("; and 2 more")
        # Without the option the first bad record stops the count.
        with pytest.raises(CorpusError, match="line 4"):
            count_local(plan_inputs(path, SPECIALS, 3))


def test_skip_reports_add_up_in_any_order():
    reports = [
        SkipReport(1, (("b", 5, "b5"),)),
        SkipReport(2, (("a", 9, "a9"), ("a", 10, "a10"))),
        SkipReport(),
        SkipReport(4, tuple(("c", i, f"c{i}") for i in range(4))),
    ]
    total = sum(reports, SkipReport())
    assert total == sum(reversed(reports), SkipReport())
    assert total.count == 7 and [m for *_, m in total.examples] == ["a9", "a10", "b5", "c0", "c1"]
    with pytest.warns(SkippedRecordsWarning, match=r"^skipped 7 bad records: a9; a10; b5; c0; c1; and 2 more$"):
        tally.warn_skipped(total)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tally.warn_skipped(SkipReport())  # nothing skipped: silence


def _parquet(path: Path, table: pa.Table, rows_per_group: int = 4) -> Path:
    pq.write_table(table, path, row_group_size=rows_per_group)
    return path


def test_parquet_bad_rows_name_file_and_row(tmp_path):
    texts = ["a", "b", "c", "d", "e", None, "g", "h", "i"]
    path = _parquet(tmp_path / "nulls.parquet", pa.table({"text": texts}))
    with pytest.raises(CorpusError, match=rf"^{path}: row 5 \(row group 1\): column 'text' is null, not a string$"):
        count_local(plan_inputs(path, SPECIALS, 1))
    tally = tally_all(plan_inputs(path, SPECIALS, 1, skip_bad_records=True))
    assert tally.counts == oracle([t for t in texts if t is not None]) and tally.skipped.count == 1

    ints = _parquet(tmp_path / "ints.parquet", pa.table({"text": [1, 2, 3]}))
    with pytest.raises(CorpusError, match=r"ints\.parquet: row 0 \(row group 0\): column 'text' has type int64, not"):
        count_local(plan_inputs(ints, SPECIALS, 1))

    other = _parquet(tmp_path / "other.parquet", pa.table({"body": ["x"] * 10}))
    with pytest.raises(CorpusError, match=r"other\.parquet: row 0 \(row group 0\): no column 'text' \(columns: body\)"):
        count_local(plan_inputs(other, SPECIALS, 1))
    tally = tally_all(plan_inputs(other, SPECIALS, 1, skip_bad_records=True))
    assert tally.skipped.count == 10 and not tally.counts  # every row counted as skipped, none dropped silently
    assert count_local(plan_inputs(other, SPECIALS, 1, text_field="body")) == Counter({b"x": 10})


def test_parquet_reads_row_groups_in_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(unit_module, "PARQUET_BATCH_ROWS", 7)
    docs = [f"doc {i} ends." for i in range(100)]
    path = _parquet(tmp_path / "groups.parquet", pa.table({"text": docs}), rows_per_group=30)
    units = plan_inputs(path, SPECIALS, 1)
    assert [(u.first_row, u.num_rows) for u in units] == [(0, 30), (30, 30), (60, 30), (90, 10)]
    assert units[1].describe() == f"{path} row group 1 (rows 30-59)"
    assert count_local(units) == oracle(docs)


def test_not_a_parquet_file(tmp_path):
    path = tmp_path / "fake.parquet"
    path.write_text("hello")
    with pytest.raises(CorpusError, match=r"fake\.parquet: not a readable Parquet file"):
        plan_inputs(path, SPECIALS, 1)


# --- which files ----------------------------------------------------------------------------------


def test_paths_globs_and_directories(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / ".hidden").mkdir()
    for name in ["d/b.txt", "d/a.jsonl.zst", "d/sub/c.parquet", "d/.hidden/x.txt", "d/_SUCCESS", "corpus.en", "z.txt"]:
        (tmp_path / name).write_bytes(b"")
    d = tmp_path / "d"
    assert resolve_inputs(d) == [d / "a.jsonl.zst", d / "b.txt", d / "sub" / "c.parquet"]
    assert resolve_inputs(str(tmp_path / "d" / "**" / "*.txt")) == [d / "b.txt"]
    assert resolve_inputs([tmp_path / "z.txt", str(d), d / "b.txt", tmp_path / "corpus.en"]) == sorted(
        [tmp_path / "z.txt", d / "a.jsonl.zst", d / "b.txt", d / "sub" / "c.parquet", tmp_path / "corpus.en"]
    )  # sorted, and b.txt (named twice) once
    assert input_format(tmp_path / "corpus.en") == InputFormat("text", None)  # named explicitly: text


@pytest.mark.parametrize(
    "make,arg,message",
    [
        (None, "missing.txt", r"missing\.txt: no such file or directory"),
        (None, "nothing-*.jsonl", r"nothing-\*\.jsonl: no file matches this pattern"),
        ("dir/notes.md", "dir", r"notes\.md: unsupported file type; expected \.txt, \.jsonl"),
        ("dir/", "dir", r"dir: is a directory with no corpus files in it"),
        ("x.json", "x.json", r"x\.json: a \.json file is not read; JSON Lines .* must end in \.jsonl"),
        ("x.txt.bz2", "x.txt.bz2", r"x\.txt\.bz2: unsupported file type"),
        ("x.parquet.gz", "x.parquet.gz", r"Parquet compresses internally"),
        ("g/readme", "g/*", r"readme: unsupported file type"),
    ],
)
def test_bad_inputs_are_one_line_errors(tmp_path, monkeypatch, make, arg, message):
    monkeypatch.chdir(tmp_path)
    if make and make.endswith("/"):
        (tmp_path / make).mkdir()
    elif make:
        target = tmp_path / make
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x")
    with pytest.raises(CorpusError, match=message) as info:
        plan_inputs(arg, SPECIALS, 1)
    assert "\n" not in str(info.value)


def test_bad_options(tmp_path):
    path = write_docs(tmp_path / "a.jsonl", ["x"])
    with pytest.raises(ConfigError, match="text_field must be a non-empty string"):
        plan_inputs(path, SPECIALS, 1, text_field="")
    with pytest.raises(ConfigError, match="no input files given"):
        plan_inputs([], SPECIALS, 1)
    assert count_local(plan_inputs(path, SPECIALS, 1, text_field="text")) == Counter({b"x": 1})


# --- min_pretoken_count ---------------------------------------------------------------------------


def test_drop_rare_filters_the_global_count_in_place():
    counts = Counter({b"a": 1, b"b": 2, b"c": 3, b"d": 2**40})
    assert drop_rare(counts, 2) is counts
    assert counts == Counter({b"b": 2, b"c": 3, b"d": 2**40})
    assert drop_rare(Counter({b"a": 1}), 1) == Counter({b"a": 1})  # the default: exact
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="min_pretoken_count must be a positive integer"):
            drop_rare(Counter(), bad)


# --- the command (once it reads these inputs) -----------------------------------------------------


def _cli_reads_shards() -> bool:
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.build_parser().parse_args(
                ["train", "a", "b", "--vocab-size", "300", "--out", "o", "--skip-bad-records"]
            )
        except SystemExit:
            return False
    return True


@pytest.mark.skipif(not _cli_reads_shards(), reason="bpe train takes one text file only (not wired yet)")
def test_cli_bad_records_fail_in_one_line_or_are_skipped_with_a_warning(tmp_path, capsys):
    shard = tmp_path / "a.jsonl"
    shard.write_text('{"text": "one"}\n{"body": "two"}\n{"text": "three"}\n')
    other = write_docs(tmp_path / "b.txt.gz", ["four", "five"])
    common = [
        "train",
        str(shard),
        str(other),
        "--vocab-size",
        "260",
        "--special-token",
        EOT,
        "--quiet",
        "--workers",
        "1",
    ]
    assert cli.main([*common, "--out", str(tmp_path / "t1")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bpe: error: {shard}: line 2: no field 'text' in the record"]
    assert not (tmp_path / "t1").exists()
    assert cli.main([*common, "--out", str(tmp_path / "t2"), "--skip-bad-records"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bpe: warning: skipped 1 bad record: {shard}: line 2: no field 'text' in the record"]
    assert (tmp_path / "t2" / "merges.txt").exists()

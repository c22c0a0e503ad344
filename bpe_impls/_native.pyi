"""Types of the compiled core, bpe_impls._native (csrc/native_module.c, counter.c, encoder_type.c,
rank_file.c, vocab_files.c): what the package calls. base/compiled.py's `NativeCore` is the part
the package relies on, and mypy checks this module against it."""

from collections.abc import Sequence
from typing import Literal, overload

from _typeshed import ReadableBuffer

# (blob, offsets, ranks, merges, byte_ids, special_ranks): encoding.tables.RankTables' fields.
RankTablesResult = tuple[bytes, bytes, bytes, bytes, tuple[int, ...], tuple[int, ...]]
# RankTables' fields, then (encoder_merges, keys, key_ids): gpt2_tables' and hf_tables' result.
VocabTablesResult = tuple[bytes, bytes, bytes, bytes, tuple[int, ...], tuple[int, ...], bytes, int, tuple[int, ...]]

def set_char_classes(table: ReadableBuffer, /) -> None: ...
@overload
def pretokenize(text: str, pattern: str = "gpt2") -> list[str]: ...
@overload
def pretokenize(text: ReadableBuffer, pattern: str = "gpt2") -> list[bytes]: ...

# (items: a list whose items should all be `kind`, str or bytes: another item is a TypeError naming it)
def batch_runs(
    items: list[str | bytes] | list[str] | list[bytes], kind: type, max_parts: int, min_parts: int, min_size: int, /
) -> list[int]: ...
def rank_file_tables(data: bytes, specials: Sequence[bytes], /) -> RankTablesResult | None: ...
def gpt2_tables(vocab_json: bytes, merges_txt: bytes, specials: Sequence[bytes], /) -> VocabTablesResult | None: ...
def hf_tables(
    vocab: bytes, merges: bytes, specials: Sequence[bytes], special_ids: Sequence[int], /
) -> VocabTablesResult | None: ...
def hf_model_spans(document: bytes, /) -> tuple[int, int, int, int] | None: ...

class PretokenCounter:
    def __init__(self, pattern: str = "gpt2") -> None: ...
    @property
    def pattern(self) -> str: ...
    def add(self, text: str, /) -> None: ...
    def add_utf8(self, data: bytes, special_tokens: Sequence[bytes], /) -> bool: ...
    def merge(self, other: PretokenCounter, /, threads: int = 1) -> None: ...
    def to_packed(self, min_count: int = 1, threads: int = 1) -> bytes: ...
    def add_packed(self, data: bytes, /) -> None: ...
    def to_dict(self) -> dict[bytes, int]: ...
    def __len__(self) -> int: ...

class Encoder:
    def __init__(
        self,
        byte_ids: Sequence[int],
        merges: Sequence[tuple[int, int, int]] | bytes,
        cache_size: int = 65536,
        pattern: str = "gpt2",
    ) -> None: ...
    @overload
    def encode_utf8(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[False] = False,
        /,
    ) -> list[int]: ...
    @overload
    def encode_utf8(
        self, data: bytes | str, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: Literal[True], /
    ) -> tuple[list[int], int]: ...
    @overload
    def encode_utf8_buffer(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[False] = False,
        itemsize: int = 4,
    ) -> bytearray: ...
    @overload
    def encode_utf8_buffer(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[True],
        itemsize: int = 4,
    ) -> tuple[bytearray, int]: ...
    def encode_many_buffer(
        self,
        datas: Sequence[bytes | str],
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        itemsize: int = 4,
        start: int = 0,
        stop: int = ...,
    ) -> tuple[bytearray, bytearray]: ...
    def encode_many_lists(
        self,
        datas: Sequence[bytes | str],
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        start: int = 0,
        stop: int = ...,
    ) -> list[list[int]]: ...
    def encode_packed_buffer(
        self,
        data: bytes,
        offsets: bytes | bytearray | memoryview,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        itemsize: int = 4,
        start: int = 0,
        stop: int = ...,
        separator: int = -1,
    ) -> tuple[bytearray, bytearray]: ...
    def bpe(self, token_bytes: bytes, /) -> list[int]: ...
    def split_utf8(self, data: bytes, /) -> list[int]: ...
    def scans_merged_ids(self) -> bool: ...
    def cache_len(self) -> int: ...
    def cache_memory(self) -> int: ...

def jsonl_documents(
    block: bytes, field: bytes, start: int, end: int, bom: bool, /
) -> tuple[bytes, bytes, int, int, int]: ...

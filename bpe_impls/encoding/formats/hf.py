"""HuggingFace `tokenizers`' file format: one tokenizer.json, written and read without the library.

What is written (the shape `tokenizers.Tokenizer.to_str()` gives a BPE model, version 0.2x):
- model: BPE with the vocab (token string -> id, tokens in GPT-2's printable byte form, see
  gpt2.token_to_str) and the merges as pairs of token strings, in rank order; no unk token, no
  dropout, no byte fallback, no prefix/suffix, ignore_merges false (BPE by the merges only);
- pre_tokenizer: Sequence[Split(the pattern, Isolated), ByteLevel(use_regex=false)]: the split
  pattern cuts pre-tokens, ByteLevel only maps their bytes to the printable form;
- decoder: ByteLevel; normalizer: none; post_processor: none (nothing is added to the ids);
- added_tokens: the special tokens (special, not normalized, no strip), each with its id, in the
  order given. Each is also in the model vocab under its own text with that id: HF gives an added
  token the model's id for its text, and a new id (after the model vocab) only if it has none.

HF's regex engine is Oniguruma, which reads a few constructs differently from the `regex` module:
`X{1,3}+` is a repeated interval there, not a possessive one. cl100k's pattern is written with
`(?>\\p{N}{1,3})` (the same thing, in both) and read back as cl100k; a custom pattern with a
possessive interval is refused. A pattern must also match every character (as the presets do):
text it skips is dropped by bpe_impls and tiktoken but kept as a piece by HF's Split.

Loading accepts what this module writes, and GPT-2's own tokenizer.json shape (a lone ByteLevel
pre-tokenizer with its GPT-2 regex: the gpt2 preset); anything it cannot reproduce exactly (another
model, a normalizer, other pre-tokenizers, byte fallback, added tokens that are not special, ...)
is one TokenizerFileError naming the file and the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import regex

from ...base.errors import ConfigError, TokenizerFileError
from ...base.patterns import CL100K_PATTERN, GPT2, PRESETS, SplitPattern, resolve_pattern
from .common import TokenizerData, output_file, read_json, write_files
from .gpt2 import str_to_token, token_to_str

TOKENIZER_FILE = "tokenizer.json"

# Presets whose regex means something else to Oniguruma, written in a form that means the same to both.
_ONIGURUMA_FORMS = {"cl100k": CL100K_PATTERN.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})")}
assert all(form != PRESETS[name].regex for name, form in _ONIGURUMA_FORMS.items())
# `{n}+`, `{n,}+`, `{n,m}+` (not after a backslash): possessive in `regex`, a repeated interval in Oniguruma.
_POSSESSIVE_INTERVAL = regex.compile(r"(?<!\\)\{\d*(?:,\d*)?\}\+")

_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
_MODEL_OPTIONS = {
    "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
    "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
}


def hf_regex(pattern: SplitPattern, where: str = "cannot save tokenizer.json") -> str:
    """The pattern as HF's Split gets it (Oniguruma's reading of it is the `regex` module's)."""
    if pattern.name in _ONIGURUMA_FORMS:
        return _ONIGURUMA_FORMS[pattern.name]
    found = _POSSESSIVE_INTERVAL.search(pattern.regex)
    if found:
        raise TokenizerFileError(
            f"{where}: the pattern's possessive interval {found.group()!r} is a repeated interval to HF's "
            "regex engine (Oniguruma); write it as an atomic group, e.g. (?>\\p{N}{1,3})"
        )
    return pattern.regex


# --- writing ----------------------------------------------------------------------------------


def _document(data: TokenizerData) -> dict:
    where = "cannot save tokenizer.json"
    special_ids = {token_id: special for special, token_id in data.special_token_ids.items()}
    vocab: dict[str, int] = {}
    for token_id in sorted(data.vocab):
        # A special token is in the model vocab under its own text (HF then gives it this id), the
        # others under their printable byte form; two ids with one key cannot both be kept.
        key = special_ids[token_id] if token_id in special_ids else token_to_str(data.vocab[token_id])
        if key in vocab:
            raise TokenizerFileError(
                f"{where}: token {key!r} would have two ids in the model vocab ({vocab[key]} and {token_id})"
            )
        vocab[key] = token_id
    added = [
        {"id": data.special_token_ids[special], "content": special, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}
        for special in data.special_tokens
    ]
    split = {"type": "Split", "pattern": {"Regex": hf_regex(data.pattern)}, "behavior": "Isolated", "invert": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, dict(_BYTE_LEVEL)]},
        "post_processor": None,
        "decoder": dict(_DECODER),
        "model": {
            "type": "BPE", **_MODEL_OPTIONS, "vocab": vocab,
            "merges": [[token_to_str(left), token_to_str(right)] for left, right in data.merges],
        },
    }


def save(path: str | os.PathLike, data: TokenizerData) -> tuple[Path, ...]:
    """Write tokenizer.json at `path` (a file ending in .json, or a directory to hold tokenizer.json)."""
    text = json.dumps(_document(data), ensure_ascii=False, indent=2) + "\n"
    return write_files([(output_file(path, ".json", TOKENIZER_FILE), text)])


# --- reading ----------------------------------------------------------------------------------


def _require(condition: bool, path: Path, message: str) -> None:
    if not condition:
        raise TokenizerFileError(f"{path}: {message}")


def _pattern(pre_tokenizer: object, path: Path) -> SplitPattern:
    """The split pattern of a Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)], or of
    GPT-2's lone ByteLevel(use_regex=true)."""
    _require(isinstance(pre_tokenizer, dict), path, f"pre_tokenizer is {pre_tokenizer!r}; expected Split + ByteLevel")
    kind = pre_tokenizer.get("type")
    if kind == "ByteLevel" and pre_tokenizer.get("use_regex", True):
        # GPT-2's own tokenizer.json: ByteLevel splits with GPT-2's regex, the gpt2 preset.
        _require(not pre_tokenizer.get("add_prefix_space", False), path,
                 "pre_tokenizer ByteLevel has add_prefix_space true, which bpe_impls does not do")
        return GPT2
    parts = pre_tokenizer.get("pretokenizers") if kind == "Sequence" else None
    _require(
        isinstance(parts, list) and len(parts) == 2 and all(isinstance(part, dict) for part in parts), path,
        f"pre_tokenizer {kind!r} is not supported; expected Sequence[Split, ByteLevel(use_regex=false)]",
    )
    split, byte_level = parts
    _require(split.get("type") == "Split", path, f"pre_tokenizer part 1 is {split.get('type')!r}, expected Split")
    _require(split.get("behavior") == "Isolated" and split.get("invert") is False, path,
             f"pre_tokenizer Split has behavior {split.get('behavior')!r}, invert {split.get('invert')!r}; "
             "expected Isolated, false")
    regex_text = split.get("pattern", {}).get("Regex") if isinstance(split.get("pattern"), dict) else None
    _require(isinstance(regex_text, str), path, f"pre_tokenizer Split pattern {split.get('pattern')!r} is not a Regex")
    _require(
        byte_level.get("type") == "ByteLevel" and byte_level.get("use_regex") is False
        and not byte_level.get("add_prefix_space", False),
        path, f"pre_tokenizer part 2 is {byte_level!r}; expected ByteLevel with use_regex and add_prefix_space false",
    )
    for name, form in _ONIGURUMA_FORMS.items():
        if regex_text == form:
            return PRESETS[name]
    found = _POSSESSIVE_INTERVAL.search(regex_text)
    _require(not found, path, f"Split regex has {found.group() if found else ''!r}, a repeated interval to HF's "
             "Oniguruma but a possessive one to bpe_impls")
    try:
        return resolve_pattern(regex_text)
    except ConfigError as exc:
        raise TokenizerFileError(f"{path}: Split {exc}") from None


def _check_model(model: object, path: Path) -> tuple[dict, list]:
    _require(isinstance(model, dict), path, "model is not an object")
    _require(model.get("type") == "BPE", path, f"model type is {model.get('type')!r}; only BPE can be loaded")
    for key, expected in _MODEL_OPTIONS.items():
        value = model.get(key, expected)
        if key in ("continuing_subword_prefix", "end_of_word_suffix") and value == "":
            value = None
        if key == "fuse_unk":  # without an unk token there is nothing to fuse
            continue
        _require(value == expected and type(value) is type(expected), path,
                 f"model {key} is {value!r}; bpe_impls can load only {json.dumps(expected)}")
    vocab, merges = model.get("vocab"), model.get("merges")
    _require(isinstance(vocab, dict), path, "model vocab is not an object of token -> id")
    _require(isinstance(merges, list), path, "model merges is not a list")
    return vocab, merges


def _merge(entry: object, index: int, path: Path) -> tuple[bytes, bytes]:
    if isinstance(entry, str):  # the older form: "left right"
        parts = entry.split(" ")
    else:
        parts = entry if isinstance(entry, list) else []
    _require(len(parts) == 2 and all(isinstance(part, str) and part for part in parts), path,
             f"merge #{index} is {entry!r}, not a pair of tokens")
    where = f"{path} merge #{index}"
    return str_to_token(parts[0], where), str_to_token(parts[1], where)


def load(path: str | os.PathLike) -> TokenizerData:
    """Read a tokenizer.json (the file, or a directory holding one) that bpe_impls can reproduce exactly."""
    path = Path(path)
    if path.is_dir():
        path = path / TOKENIZER_FILE
    document = read_json(path)
    _require(isinstance(document, dict), path, "not a JSON object")
    _require(document.get("normalizer") is None, path,
             f"normalizer {json.dumps(document.get('normalizer'))[:60]} is set; bpe_impls has none")
    post = document.get("post_processor")
    _require(post is None or (isinstance(post, dict) and post.get("type") == "ByteLevel"), path,
             f"post_processor {(post or {}).get('type')!r} may add tokens; only none or ByteLevel can be loaded")
    decoder = document.get("decoder")
    _require(isinstance(decoder, dict) and decoder.get("type") == "ByteLevel", path,
             f"decoder is {json.dumps(decoder)[:60]}; only ByteLevel can be loaded")
    pattern = _pattern(document.get("pre_tokenizer"), path)
    raw_vocab, raw_merges = _check_model(document.get("model"), path)

    added = document.get("added_tokens", [])
    _require(isinstance(added, list), path, "added_tokens is not a list")
    special_token_ids: dict[str, int] = {}
    next_new_id = len(raw_vocab)  # where HF puts an added token the model vocab does not have
    for entry in added:
        _require(isinstance(entry, dict) and isinstance(entry.get("content"), str) and entry.get("content"), path,
                 f"added token {entry!r} has no content")
        content, token_id = entry["content"], entry.get("id")
        _require(entry.get("special") is True, path,
                 f"added token {content!r} is not special; only special added tokens can be loaded")
        for flag in ("single_word", "lstrip", "rstrip"):
            _require(not entry.get(flag, False), path, f"added token {content!r} has {flag} true; bpe_impls has no such option")
        _require(isinstance(token_id, int) and not isinstance(token_id, bool) and token_id >= 0, path,
                 f"added token {content!r} has id {token_id!r}, not a non-negative integer")
        _require(content not in special_token_ids, path, f"added token {content!r} is listed twice")
        model_id = raw_vocab.get(content)
        if model_id is None:
            _require(token_id == next_new_id, path,
                     f"added token {content!r} has id {token_id}, but HF gives it {next_new_id} (it is not in the model vocab)")
            next_new_id += 1
        else:
            _require(model_id == token_id, path,
                     f"added token {content!r} has id {token_id}, but the model vocab gives it {model_id}")
        special_token_ids[content] = token_id

    specials_by_id = {token_id: content for content, token_id in special_token_ids.items()}
    vocab: dict[int, bytes] = {}
    for key, token_id in raw_vocab.items():
        _require(isinstance(token_id, int) and not isinstance(token_id, bool) and token_id >= 0, path,
                 f"model vocab token {key!r} has id {token_id!r}, not a non-negative integer")
        _require(token_id not in vocab, path, f"model vocab gives id {token_id} to two tokens")
        if specials_by_id.get(token_id) == key:
            vocab[token_id] = key.encode("utf-8")
        else:
            _require(bool(key), path, f"model vocab has an empty token (id {token_id})")
            vocab[token_id] = str_to_token(key, f"{path} (model vocab id {token_id})")
    for content, token_id in special_token_ids.items():
        if token_id not in vocab:
            vocab[token_id] = content.encode("utf-8")
    merges = [_merge(entry, index, path) for index, entry in enumerate(raw_merges)]
    return TokenizerData(dict(sorted(vocab.items())), merges, tuple(special_token_ids), pattern, special_token_ids)


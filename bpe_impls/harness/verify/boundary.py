"""The boundary cases every run of `bpe verify` tries first, for each clause, before the random
search: explicit, small, deterministic inputs at the edges of the contract and of GPT-2's split
pattern, so that a bug at one of them is found whatever the seed.

They cover each GPT-2 contraction ('s 't 're 've 'm 'll 'd) after each kind of whitespace (space,
tab, newline, CR LF, two spaces, ideographic and no-break space, vertical tab, form feed, ...) and
at the start of the text, upper-case contractions ('S), digits next to letters and to each other,
whitespace runs before and after words and at the end of the text (the `\\s+(?!\\S)` alternative),
punctuation runs, multi-byte characters of several scripts, special tokens side by side,
overlapping, prefixing one another and at both ends, pair counts that tie where the pairs' byte
order differs from their ids' order, runs of one letter of odd and even length, and corpora on
which training stops because no pair is left.

`train_cases(clause)` gives a trainer clause's cases as (corpus, special_tokens, vocab_size);
`encode_cases(clause)` gives a tokenizer clause's as (text, special_tokens), to be encoded with a
vocab trained on `encode_vocab_corpus(special_tokens)`, in which the boundary texts' pre-tokens
have merges (GPT-2's own vocab has them too). An unknown clause has no cases.

Every case is accepted by this project's reference: each train case trains with the `naive`
trainer (and each but the cases of `stops-when-no-pair-is-left` that have no pair at all makes
at least one merge), each encode case encodes (tests/test_verify_search.py).
"""

from __future__ import annotations

from functools import cache

from ...corpus import count_texts
from ...trainers import get_trainer

Case = tuple[str, list[str], int]

# The kinds of whitespace a contraction or a word can follow. GPT-2's pattern gives a space to the
# word after it (` ?\p{L}+`) but no other whitespace, and `\s+(?!\S)` leaves the run's last
# character to the next pre-token; tab, vertical tab and form feed are where encoders that handle
# "the space before a word" specially go wrong (tokie: "\t's" is [197, 6, 82], not [197, 338]).
WHITESPACE: tuple[str, ...] = (
    " ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "  ",
    "\t\t",
    " \n",
    "\x0b",
    "\x0c",
    "\u3000",
    "\xa0",
    "\u2003",
    "\x85",
    "\u2028",
)
CONTRACTIONS: tuple[str, ...] = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
EOT = "<|endoftext|>"

# Sets of special tokens. Listed shortest first on purpose: an implementation that builds its
# alternation in the order given (no sorting by length) matches "<|" inside "<|endoftext|>".
OVERLAPPING = ["<|", "<|end", EOT]
NESTED = ["<s>", "<s><s>", "ab", "é"]  # a prefix of another, plain text of the corpus, multi-byte
METACHARACTERS = ["a.b", "||", "(x)", "[x]*"]  # unescaped, each is a regex that matches other text
# (No special token is a single byte: it would be in the vocab twice, as itself and as the byte, and
# which of the two ids encodes it is not the contract's to say.)
SPECIAL_SETS: tuple[list[str], ...] = ([], [EOT], OVERLAPPING, NESTED, METACHARACTERS)


def _after_each(whitespace: str, upper: bool = False) -> str:
    """Each contraction after `whitespace`: "\\t's\\t't\\t're...", and once after a word."""
    contractions = [c.upper() for c in CONTRACTIONS] if upper else list(CONTRACTIONS)
    return "".join(whitespace + c for c in contractions) + f"{whitespace}it{contractions[0]}"


# ---- the texts at the split pattern's edges (shared by training and encoding) ---------------------

CONTRACTION_TEXTS: list[str] = [_after_each(w) for w in WHITESPACE] + [
    "'s",  # at the start of the text
    "'ll x",
    "'re'",
    "'S\t'LL\n'RE",  # upper case: not contractions in GPT-2's pattern
    _after_each("\t", upper=True),
    "it's don't we're you've I'm we'll he'd Tim's",
    "''s 's's 'sa 'llama x'x ' '",
    "1990's !'s ?'ll",
]
DIGIT_TEXTS: list[str] = [
    "a1 1a 12ab34 2024 x2024x",
    "3.14 1,000 -5 $12 #1 0x2a",
    "½ ² ٣4 ⅷ 1٣",  # digits of other scripts and number forms are \p{N}
]
WHITESPACE_RUN_TEXTS: list[str] = [
    "a  b   c\t\td \t e\t f",
    "a \n b\n\n c \n\nd",
    "ab  ",  # runs at the end of the text: `\s+(?!\S)` takes them whole
    "ab \n",
    "ab\n\n\n",
    "ab\t \t",
    "  ab",  # at the start
    "\n\n ab",
    "a\r\nb\r\n\r\nc\r\n",
    "a\rb\r c\r",
    "a\x1c\x1d\x1e\x1fb",  # str.isspace() but not \s in the `regex` module
    "a\u200bb \u200b c",  # zero-width space: not whitespace at all
]
PUNCTUATION_TEXTS: list[str] = [
    "a!!! b?! ...c ,,, (x) --- x.y",
    "«a» — 。x … ¿y?",
    "@a #b %c ^d &e *f",
]
MULTIBYTE_TEXTS: list[str] = [
    "é ü Ω ÿ naïve café",
    "中文 日本語 한국어",
    "русский العربية हिन्दी",
    "🙂 👩\u200d💻 𝔘𝔫",  # four-byte characters, a ZWJ sequence
    "e\u0301 n\u0303 ǅ",  # combining marks are \p{M}, not letters; a title-case letter
]
SPLIT_TEXTS: list[str] = CONTRACTION_TEXTS + DIGIT_TEXTS + WHITESPACE_RUN_TEXTS + PUNCTUATION_TEXTS + MULTIBYTE_TEXTS

# The same edges as short pieces, for the random search to join (strategies.mixed_text): each
# contraction after each kind of whitespace, upper-case ones, and the other pre-tokens' edges.
PIECES: list[str] = [
    *(w + c for w in WHITESPACE for c in CONTRACTIONS),
    *(c.upper() for c in CONTRACTIONS),
    *("it" + c for c in CONTRACTIONS),
    *("x" + w for w in WHITESPACE),
    "a1",
    "1a",
    "12",
    "½",
    "  x",
    "x  ",
    " \n\n",
    "\r\n",
    "!!!",
    " ?!",
    "e\u0301",
    "👩\u200d💻",
    "𝔘",
    "\x1c",
    "\u200b",
]


# ---- trainer cases ---------------------------------------------------------------------------------

# Corpora whose pair counts tie, including ties where the byte order of the pairs differs from the
# order of their ids (a merged token has an id above 255 but may sort below a single byte), from
# the order of signed chars (bytes >= 0x80) and from a case-insensitive order.
TIE_CORPORA: list[str] = [
    "ab ba",
    "abc\nbca\ncab",
    "aaaac bc",  # after (a, a): (aa, c) ties (b, c); b"b" > b"aa" though id(aa) > id(b)
    "aaaab\nbbbb a\nab",
    "ab é",  # (0xc3, 0xa9) ties (a, b): unsigned, 0xc3 is the greater
    "ÿa aÿ za",
    "AB ab Ab",  # upper-case bytes sort below lower-case
    "12 ab !? ",
    "low low low low low lower lower widest widest widest newest newest newest newest newest newest",
    "abb abb ab ab bb",  # (a, bb) against (a, b): a prefix sorts lower
    "中文 文中",
    "the cat the hat a cat a hat",
]
RUN_CORPORA: list[str] = [
    "aaa xy",  # (a, a) counts 2 in "aaa", overlapping: it beats (x, y)
    "aa",
    "aaa",
    "aaaa",
    "aaaaa",  # greedy left to right: aa aa a, not a aa aa
    "aaaaaa",
    "aaaaaaa",
    "aa aaa aaaa aaaaa aaaaaa aaaaaaa aaaaaaaa aaaaaaaaa",
    "ababa abab",
    "ééé éé",
    "aaab baaa",
    "xaaaaay",
    "a       ",  # a run of spaces at the end of the text
]
SPECIAL_CORPORA: list[tuple[str, list[str]]] = [
    ("ab<|endoftext|>ab", [EOT]),  # no pair crosses a special token
    (f"{EOT}{EOT}xy{EOT}xy{EOT}", [EOT]),  # side by side, at both ends
    (f"x {EOT}\n y{EOT} x", [EOT]),  # whitespace next to them
    (f"{EOT}ab <|end ab<|endoftext| ab", OVERLAPPING),  # longest first; a truncated one is text
    (f"<|<|endoftext|>|><|endab{EOT}<|", OVERLAPPING),
    ("<s><s><s>ab<s>abc <s>xy", NESTED),
    ("abab cab ba ab", NESTED),  # a special token that is also plain text
    ("ééaébé xy", NESTED),
    ("a.b axb a||b (x) x [x]* xx ||| |", METACHARACTERS),  # escaped, these match only themselves
    (f"x{EOT}y xy x{EOT}", []),  # without special tokens, <|endoftext|> is text like any other
    (f"xy{EOT}xy", [EOT, "<pad>"]),  # one that never occurs
    ("a\n\nb\n\n\nc\n\n xy", ["\n\n"]),  # a whitespace special token; a run of three holds one
]
ENDS_CORPORA: list[tuple[str, list[str], int]] = [
    # (corpus, special tokens, merges asked for beyond every pair's: how far past no pair left)
    ("a\nb\nc", [], 44),  # not a single pair: no merge
    (f"a{EOT}b{EOT}", [EOT], 44),  # nothing but single bytes between the special tokens
    ("ab", [], 1),
    ("ab", [], 100),
    ("aaaa", [], 5),
    ("中", [], 10),
    ("a\r\n", [], 10),  # (\r, \n): a file opened in text mode has no such pair
    ("ab ab\nab", [], 0),  # vocab_size reached when the last pair is merged
    ("low lower lowest", [EOT], 1000),
]


def _word_counts(corpus: str, specials: list[str]) -> dict[bytes, int]:
    return dict(count_texts([corpus], specials))


@cache
def merges_to_exhaust(corpus: str, specials: tuple[str, ...]) -> int:
    """How many merges the reference makes on `corpus` before no pair is left."""
    words = _word_counts(corpus, list(specials))
    possible = sum(len(word) - 1 for word in words)
    return len(get_trainer("naive")(words, 256 + len(specials) + possible, list(specials))[1])


def _exhausted(corpus: str, specials: list[str], beyond: int = 0) -> Case:
    """The case that asks for every merge the corpus has (plus `beyond`): its whole merge order is checked."""
    return corpus, list(specials), 256 + len(specials) + merges_to_exhaust(corpus, tuple(specials)) + beyond


def _trainer_cases(clause: str) -> list[Case]:
    if clause == "tie-break":
        return [_exhausted(corpus, []) for corpus in TIE_CORPORA]
    if clause == "greedy-left-to-right":
        return [_exhausted(corpus, []) for corpus in RUN_CORPORA]
    if clause == "special-tokens":
        return [_exhausted(corpus, specials) for corpus, specials in SPECIAL_CORPORA]
    if clause == "pre-tokenization":
        cases = [_exhausted(text, []) for text in SPLIT_TEXTS]
        cases.append(_exhausted(EOT.join(CONTRACTIONS), [EOT]))  # each piece starts with a contraction
        return cases
    if clause == "stops-when-no-pair-is-left":
        cases = [_exhausted(corpus, specials, beyond) for corpus, specials, beyond in ENDS_CORPORA]
        cases.append(("ab ab", [], 256))  # no merge asked for
        cases.append(("ab ab", [EOT, "<pad>"], 258))
        return cases
    if clause == "deterministic":  # ties are where an order by identity or by hash shows; each case runs twice
        return [_exhausted(corpus, []) for corpus in TIE_CORPORA[:6] + RUN_CORPORA[:2]]
    return []


@cache
def _train_cases(clause: str) -> tuple[tuple[str, tuple[str, ...], int], ...]:
    return tuple((corpus, tuple(specials), size) for corpus, specials, size in _trainer_cases(clause))


def train_cases(clause: str) -> list[tuple[str, list[str], int]]:
    """The boundary cases of a trainer clause, in the order to try them: (corpus, special_tokens,
    vocab_size). Most ask for every merge the corpus holds (their whole merge order is checked, and
    the vocab is full exactly when the last pair is merged); those of `stops-when-no-pair-is-left`
    ask for more, or for none. An unknown clause has none."""
    return [(corpus, list(specials), size) for corpus, specials, size in _train_cases(clause)]


# ---- tokenizer cases -------------------------------------------------------------------------------

# Runs and words whose merges apply in rank order, leftmost first on a tie; the vocab corpus holds
# their pieces ("aaa", "ab", "ba", "low") but not them whole.
MERGE_ORDER_TEXTS: list[str] = [
    "aaaaaaa aaaaaa",
    "abababa baab",
    "lowest newer widest",
    "ééééé 中文中文",
    "",  # nothing to encode
]
SPECIAL_TEXTS: list[tuple[str, list[str]]] = [
    (f"a{EOT}b", [EOT]),
    (EOT, [EOT]),
    (f"{EOT}{EOT}", [EOT]),
    (f"{EOT} x{EOT}\n", [EOT]),
    ("<|endoftext|", [EOT]),
    (f"x{EOT}y", []),  # without special tokens, <|endoftext|> is text like any other
    (EOT, OVERLAPPING),
    ("<|end", OVERLAPPING),
    (f"<|endoftext|<|end{EOT}<|", OVERLAPPING),
    (f"<|<|endoftext|>|>{EOT}<|endoftext", OVERLAPPING),
    (f"{EOT}<|end<|{EOT}", OVERLAPPING),
    ("<s><s><s>", NESTED),
    ("a<s>b<s><s>c", NESTED),
    ("abab aab ba", NESTED),
    ("ééaébé xy", NESTED),
    ("a.b axb a||b (x) x [x]* xx ||| |", METACHARACTERS),
    ("||a.b||", METACHARACTERS),
]
# Texts that decode only if the bytes of the ids are joined before UTF-8 is decoded: characters the
# vocab has no merges for are one id a byte.
DECODE_TEXTS: list[str] = [
    "ü 🙂 𝔘",
    "中文 日本語 ẞ",
    "e\u0301 👩\u200d💻",
    "naïve café",
    "a\r\nb \t c  ",
]
# Short texts whose lines do not end where a pre-token ends: a file's lines, fed one by one, must
# give encode's ids.
LINE_TEXTS: list[str] = [
    "a \nb",
    "a\r\nb\r\n",
    "x\n\n y",
    "a  \n  b\n",
    "one\ntwo  \n\nthree\n",
    "it\n's\n",
    "12\n34",
]


def _encoder_cases(clause: str) -> list[tuple[str, list[str]]]:
    if clause == "encode":
        return [(text, []) for text in SPLIT_TEXTS + MERGE_ORDER_TEXTS] + SPECIAL_TEXTS[:6]
    if clause == "special-tokens-longest-first":
        return list(SPECIAL_TEXTS)
    if clause == "decode":
        return [(text, []) for text in DECODE_TEXTS] + [(f"ü{EOT}é", [EOT]), ("é<s><s>ü", NESTED)]
    if clause == "encode_iterable":
        return [(text, []) for text in LINE_TEXTS] + [(f"a{EOT}\n{EOT}b \n", [EOT]), ("<s>\n<s><s>\nab\n", NESTED)]
    if clause == "deterministic":  # merges that tie within a word; each case runs twice
        return [(text, []) for text in MERGE_ORDER_TEXTS] + SPECIAL_TEXTS[:2]
    return []


def encode_cases(clause: str) -> list[tuple[str, list[str]]]:
    """The boundary cases of a tokenizer clause, in the order to try them: (text, special_tokens),
    to encode with a vocab trained on `encode_vocab_corpus(special_tokens)` (or with any vocab that
    has the special tokens). An unknown clause has none."""
    return [(text, list(specials)) for text, specials in _encoder_cases(clause)]


# The vocab the encode cases are checked with: trained to the end on this corpus, it has merges
# for their pre-tokens (each contraction, whitespace runs, "\r\n", digits, multi-byte letters) but
# not for every character (decode must join bytes) nor for every word whole (merges apply in rank
# order within a word).
VOCAB_PIECES: list[str] = [
    *(w + c for w in WHITESPACE for c in CONTRACTIONS),
    *(f"x{w}" for w in WHITESPACE),
    "aaa aa ab ba abab low lower newest widest it don't we're",
    "12 2024 34 1a a1 3.14",
    "!!! ?! ... ,,, --- «a»",
    "é éé ñ 中文 日本 語 한국 русский",
    "a  b   c\t\td \t e",
    "a \n b\n\n c \n\nd \n\n  e",
    "a\r\nb\r\n\r\nc\r\n\r\n  d",
    "x  \n",
    "x \n",
    "x\n\n",
]


@cache
def _encode_vocab_corpus(specials: tuple[str, ...]) -> str:
    text = "\n".join(VOCAB_PIECES)
    corpus = "\n".join([text] * 3)  # three times: their pairs outcount the pairs at their edges
    return "".join(f"{corpus}{special}" for special in specials) + corpus


def encode_vocab_corpus(special_tokens: list[str]) -> str:
    """A corpus to train the vocab the encode cases are checked with: train on it with
    `special_tokens` and a vocab_size of at least 256 + len(special_tokens) + ENCODE_VOCAB_MERGES,
    so that training stops only when no pair is left."""
    return _encode_vocab_corpus(tuple(special_tokens))


ENCODE_VOCAB_MERGES = 1000  # more merges than encode_vocab_corpus has pairs to merge

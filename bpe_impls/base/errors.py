"""Errors the package raises on bad input.

Each carries one line that names the problem (file, offset, value), so the CLI can print it as is
and exit non-zero. They take a single message argument so they pickle across worker processes.
"""


class BpeError(Exception):
    """Base class: a user-facing problem, reported as one line without a traceback."""


class ConfigError(BpeError, ValueError):
    """An argument is out of range or inconsistent (vocab size, special tokens, worker count)."""


class CorpusError(BpeError):
    """The training corpus is missing, unreadable, or not valid UTF-8."""


class TokenizerFileError(BpeError):
    """A vocab.json / merges.txt pair is malformed or does not match itself."""


class EncodeError(BpeError, ValueError):
    """Text or ids that cannot be encoded or decoded (unknown id, lone surrogate)."""


class WorkerError(BpeError):
    """A counting worker died or failed; the message names the unit of work."""


def unreadable(where: object, exc: OSError) -> CorpusError:
    """The one error for a corpus file (or a unit of one) that cannot be read: `WHERE: cannot read: WHY`."""
    return CorpusError(f"{where}: cannot read: {exc.strerror or exc}")

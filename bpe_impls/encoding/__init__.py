"""Encoding: text <-> token ids. The encoder contract and its implementations (encoders, with the
merge loops in bpe), the checked tables they run on (tables), the Tokenizer, and file formats."""

from .encoders import DEFAULT_ENCODER, ENCODERS, Encoder
from .tokenizer import Tokenizer

__all__ = ["DEFAULT_ENCODER", "ENCODERS", "Encoder", "Tokenizer"]

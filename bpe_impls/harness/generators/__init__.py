"""Seeded synthetic corpora: TinyStories-style prose, web-like and multilingual text."""

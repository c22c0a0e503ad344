"""The bottom layer: split patterns and special tokens, errors, argument checks, atomic files, progress
bars and the loader of the optional compiled core. Imports nothing else from the package."""

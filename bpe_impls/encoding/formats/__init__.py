"""File formats: tokenizers on disk (gpt2: vocab.json + merges.txt) and token ids (npy)."""

class Tokenizer:  # placeholder until tokenizer.py lands
    pass

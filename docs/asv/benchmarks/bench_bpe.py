"""Your BPE over your commits, measured by bpe_impls's suites (bpe_impls/harness/asv_suites.py).

Name your implementations below (the references `bpe verify` takes: module:function,
path/file.py:function); delete a class you have no implementation for.
"""

from bpe_impls.harness.asv_suites import TokenizerSuite, TrainerSuite


class Train(TrainerSuite):
    # run_train_bpe(input_path, vocab_size, special_tokens) -> (vocab, merges), as CS336's adapter
    reference = "tests/adapters.py:run_train_bpe"
    # corpus = "corpus.en"; vocab_size = 500; special_tokens = ["<|endoftext|>"]   (the defaults)


class Encode(TokenizerSuite):
    # get_tokenizer(vocab, merges, special_tokens) -> an object with encode (and encode_iterable)
    reference = "tests/adapters.py:get_tokenizer"

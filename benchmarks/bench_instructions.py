"""asv: instructions executed by each hot path, counted by valgrind (cachegrind). Every class is
named *Instructions*, so `asv continuous -b Instructions BASE HEAD` runs this set alone.

    CountInstructions.track_count_instructions          count_pretokens on corpus.en, one worker
    MergeInstructions.track_merge_instructions          each trainer's merge phase from corpus.en's
                                                        counts at vocab 2000 (naive: its first 16 KB
                                                        at vocab 300)
    EncodeInstructions.track_encode_instructions        Tokenizer.encode of corpus.en with GPT-2's
                                                        vocab, each encoder: cold (a fresh
                                                        tokenizer) and warm (the same text again)
    EncodeBatchInstructions.track_encode_batch_instructions
                                                        encode_batch of corpus.en's lines, one
                                                        thread, each encoder (fresh tokenizer)
    LoadInstructions.track_load_instructions            Tokenizer.load of GPT-2's encoder.json and
                                                        vocab.bpe: parsed, and from the load cache
    EncodeFileInstructions.track_encode_file_instructions
                                                        `bpe encode corpus.en ids.npy --threads 1`'s
                                                        work (bpe_impls.encoding.encode_file)

Each figure is the work's own: a fresh interpreter under cachegrind prepares the inputs and forks,
the child does the work, and the child's total minus the parent's is counted
(benchmarks/_isolated.py, with the settings that make the count repeat; the work itself is in
benchmarks/_workloads.py).

Why a count beside the times: on a shared host the same merge takes 1.0x to 2.3x its best CPU time
from one stretch of 5-50 s to the next (another tenant on the core's sibling; docs/performance.md),
so the time suites need 8 rounds to tell a change from the host. The count of instructions does
not depend on the host's load: asv compares a track_ value by --factor alone, so a change of 10% or
more in the work (an extra pass, a lost shortcut) is flagged on the first run. It counts work, not
time: busy work that made the compiled merge 1.2x slower added 6% here (cheap instructions), a
change that only adds cache misses does not show, and under valgrind the CPU has no SHA extensions
(the cached load's count is mostly sha256 at about 28 instructions a byte, though natively it is
the faster load); the time suites see all of that.

Measured on the 2-core host with other jobs running, the set (21 combinations) run twice at one
commit with `asv run --python=same --set-commit-hash` (two hashes of one tree) and compared with
`asv compare --factor 1.1`: nothing changed. Every count repeated to within 0.005% (11 of 21 to
the instruction; the largest difference 613 instructions of 14.34M, EncodeFileInstructions, whose
work runs on a pool thread), a hundred times inside 0.5%. The set took 430 s and 399 s of wall time
at load average 4-5 (205-209 s of CPU time: one benchmark at a time, on one core, so about the wall
time on an idle host); with the heap set, 422 s at load 3-4.7 and 241 s at load 2-3. The counts,
for scale:

    count 47.07M; merge naive 1077.9M, route_a 781.2M, route_b 581.2M, bucket 593.7M, native 30.46M;
    encode cold / warm: scan 949.0M / 169.1M, heap 1058.5M / 169.3M, hybrid 951.9M / 169.1M,
    native 13.65M / 3.86M; encode_batch scan 959.7M, heap 1069.1M, hybrid 962.6M, native 22.58M;
    load parsed 109.9M, cached 182.9M; encode_file 14.34M.

A planted change in route_a's merge (each rewritten word's pairs listed again, and a slice of it
kept) recorded the same way was flagged by `asv compare --factor 1.1`: MergeInstructions route_a
1.17x (781,174,301 to 915,447,046), and bench_heap's MergeHeapMemory route_a 1.24x.

Skipped, with the reason, where valgrind is not installed.
"""

from __future__ import annotations

from typing import Any

from ._isolated import (
    CountSuite,
    Deterministic,
    EncodeInputs,
    EncodeSuite,
    MergeInputs,
    MergeSuite,
    valgrind_or_skip,
    work_instructions,
)


class _Instructions(Deterministic):
    unit = "instructions"
    timeout = 600
    args: Any
    cache: str | None

    def ready(self, compiled: bool) -> None:
        valgrind_or_skip()

    def count(self, workload: str) -> int:
        return work_instructions(workload, self.args, cache=self.cache)


class CountInstructions(_Instructions, CountSuite):
    def track_count_instructions(self) -> int:
        return self.count("count")


class MergeInstructions(_Instructions, MergeSuite):
    def track_merge_instructions(self, inputs: MergeInputs | None, impl: str) -> int:
        return self.count("merge")


class EncodeInstructions(_Instructions, EncodeSuite):
    params = (EncodeSuite.params[0], ["cold", "warm"])
    param_names = ["encoder", "cache"]

    def track_encode_instructions(self, inputs: EncodeInputs | None, encoder: str, cache: str) -> int:
        return self.count(f"encode_{cache}")


class EncodeBatchInstructions(_Instructions, EncodeSuite):
    def track_encode_batch_instructions(self, inputs: EncodeInputs | None, encoder: str) -> int:
        return self.count("encode_batch")


class LoadInstructions(_Instructions, EncodeSuite):
    params = (["parsed", "cached"],)
    param_names = ["source"]

    def setup(self, inputs: EncodeInputs | None, source: str) -> None:
        super().setup(inputs, None)  # the default encoder's tokenizer
        self.args = self.args[:3]  # GPT-2's files, the special tokens, the encoder: no text
        if source == "parsed":
            self.cache = None  # the cache off: the files parsed and checked

    def track_load_instructions(self, inputs: EncodeInputs | None, source: str) -> int:
        return self.count("load")


class EncodeFileInstructions(_Instructions, EncodeSuite):
    params = ()
    param_names = []

    def setup(self, inputs: EncodeInputs | None) -> None:
        super().setup(inputs, None)  # the default encoder, as `bpe encode` uses

    def track_encode_file_instructions(self, inputs: EncodeInputs | None) -> int:
        return self.count("encode_file")

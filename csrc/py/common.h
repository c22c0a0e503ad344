/* What the glue of bpe_impls._native shares: CPython's side of the core's
 * scanner inputs (str objects as Text views, buffers held still as UTF-8,
 * special tokens from a sequence of bytes), the exceptions for the core's
 * failures, and the module's types and functions. Only files in py/ include
 * it; Python.h comes first, as CPython asks. */
#ifndef BPE_PY_COMMON_H
#define BPE_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "scan_blocks.h"
#include "scanner.h"

/* 1 if the class table is set, else 0 with RuntimeError set. */
BPE_INTERNAL int bpe_classes_ready(void);

/* The PAT_* of a pattern name, or -1 with ValueError set. */
BPE_INTERNAL int bpe_pattern_from_name(const char *name);

/* A view of a str's code points (see Text), read without the GIL (a str is
 * immutable; the caller holds a reference): 0, or -1 with TypeError set if
 * obj is not a str. bpe_text_close(t) must follow a success. */
BPE_INTERNAL int bpe_text_open(Text *t, PyObject *obj);

/* Set ValueError for the lone surrogate that made bpe_text_utf8 fail; returns
 * NULL. */
BPE_INTERNAL PyObject *bpe_surrogate_error(const Text *t);

/* Copy seq (a sequence of non-empty bytes) into sp: 0, or -1 with an
 * exception set. A token that is not valid UTF-8 is not an error here but
 * recorded in sp->bad: the caller refuses it, with bpe_specials_refuse, after
 * the checks that come first for it. bpe_specials_close(sp) must follow
 * either way. */
BPE_INTERNAL int bpe_specials_open(Specials *sp, PyObject *seq);
/* Set the ValueError naming the token at sp->bad (>= 0); returns NULL. */
BPE_INTERNAL PyObject *bpe_specials_refuse(const Specials *sp);

/* UTF-8 input held still for a call: a bytes object as it stands (immutable,
 * and referenced), anything else with the buffer protocol copied while the GIL
 * is held. A bytearray or a writable memoryview could otherwise change (even
 * when its export keeps it from resizing) between the UTF-8 check and the
 * scan, which relies on that check, while the GIL is released or while Python
 * code runs (an id's __index__). */
typedef struct {
    const unsigned char *buf;
    size_t len;
    PyObject *obj;      /* the bytes (or str) object, or NULL */
    unsigned char *own; /* the copy, or NULL */
} Utf8Data;

/* 0, or -1 with an exception set (TypeError if obj has no buffer);
 * bpe_data_close(d) must follow either way. */
BPE_INTERNAL int bpe_data_open(Utf8Data *d, PyObject *obj);
BPE_INTERNAL void bpe_data_close(Utf8Data *d);

/* The module's types (py/counter_type.c, py/encoder_type.c). */
extern BPE_INTERNAL PyTypeObject bpe_CounterType;
extern BPE_INTERNAL PyTypeObject bpe_EncoderType;

/* rank_file_tables, gpt2_tables, hf_tables, hf_model_spans: the readers of
 * tokenizer files (py/tables_module.c; documented in py/native_module.c). */
BPE_INTERNAL PyObject *bpe_rank_file_tables(PyObject *module, PyObject *args);
BPE_INTERNAL PyObject *bpe_gpt2_tables(PyObject *module, PyObject *args);
BPE_INTERNAL PyObject *bpe_hf_tables(PyObject *module, PyObject *args);
BPE_INTERNAL PyObject *bpe_hf_model_spans(PyObject *module, PyObject *arg);
/* jsonl_documents (py/jsonl_module.c). */
BPE_INTERNAL PyObject *bpe_jsonl_documents_py(PyObject *module, PyObject *args);

#endif /* BPE_PY_COMMON_H */

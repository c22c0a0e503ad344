/* The BPE Encoder type (encoder.c). */
#ifndef BPE_ENCODER_H
#define BPE_ENCODER_H

#include <Python.h>

#include "bpe_util.h"

extern BPE_INTERNAL PyTypeObject bpe_EncoderType;

/* rank_file_tables(data, specials): a tiktoken rank file's tables
 * (rank_file.c). */
BPE_INTERNAL PyObject *bpe_rank_file_tables(PyObject *module, PyObject *args);

/* gpt2_tables, hf_tables, hf_model_spans: GPT-2's and HF's vocab files'
 * tables (vocab_files.c). */
BPE_INTERNAL PyObject *bpe_gpt2_tables(PyObject *module, PyObject *args);
BPE_INTERNAL PyObject *bpe_hf_tables(PyObject *module, PyObject *args);
BPE_INTERNAL PyObject *bpe_hf_model_spans(PyObject *module, PyObject *arg);

#endif /* BPE_ENCODER_H */

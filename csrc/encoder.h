/* The BPE Encoder type (encoder.c). */
#ifndef BPE_ENCODER_H
#define BPE_ENCODER_H

#include <Python.h>

#include "bpe_util.h"

extern BPE_INTERNAL PyTypeObject bpe_EncoderType;

/* rank_file_tables(data, specials): a tiktoken rank file's tables
 * (rank_file.c). */
BPE_INTERNAL PyObject *bpe_rank_file_tables(PyObject *module, PyObject *args);

#endif /* BPE_ENCODER_H */

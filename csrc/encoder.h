/* The BPE Encoder type (encoder.c). */
#ifndef BPE_ENCODER_H
#define BPE_ENCODER_H

#include <Python.h>

#include "bpe_util.h"

extern BPE_INTERNAL PyTypeObject bpe_EncoderType;

#endif /* BPE_ENCODER_H */

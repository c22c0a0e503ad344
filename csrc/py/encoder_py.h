/* What the Encoder type's glue files share (py/encoder_type.c,
 * py/encoder_many.c): the tables an __init__ builds, reference counted, with
 * their caches and int objects; what one encode call holds. The encoding
 * itself is the core's (encoder_internal.h). */
#ifndef BPE_ENCODER_PY_H
#define BPE_ENCODER_PY_H

#include "common.h"

#include "encoder_internal.h"

/* Inputs shorter than this are encoded without releasing the GIL: handing it
 * over costs more than such a call. */
#define NOGIL_MIN_BYTES 4096
/* Ids below this get a shared int object each (Tables.id_objects); larger
 * ones (rare: special tokens of huge vocabularies) a new int per use. */
#define MAX_ID_OBJECTS (1u << 20)
/* A spare output buffer larger than this many ids is not kept for the next
 * call. */
#define MAX_SPARE_IDS ((size_t)1 << 24)

/* What an __init__ builds, reference counted (with the GIL held): each call
 * takes a reference before it releases the GIL, so a concurrent __init__ that
 * swaps in new tables only drops its own, and the old tables go when the last
 * call using them ends. */
typedef struct {
    Py_ssize_t refs;
    BpeTables bpe; /* what BPE reads: never changed once built */
    size_t cache_size;
    /* The caches not in use: a call takes one (the last returned: the
     * warmest) and gives it back at its end, both with the GIL held, so no
     * lock is needed and each thread encoding at a time has a cache of its
     * own: no atomics on the hit path, and it scales with the threads. Each
     * holds at most cache_size pre-tokens. (A cache shared by the threads
     * was measured and dropped: docs/design-notes.md.) */
    Cache **pool;
    size_t pool_len, pool_cap;
    /* The int object of each id below id_objects_len, made on first use (with
     * the GIL), so filling a list is a store and an INCREF per id. Once
     * id_objects_full, every one is made and none changes again: a batch's
     * lists are then filled from it without the GIL. */
    PyObject **id_objects;
    size_t id_objects_len;
    int id_objects_full;
    /* The output buffer of the last call, kept for the next (with the GIL,
     * as the caches): a warm call then writes to memory already mapped. */
    IdBuf spare;
} Tables;

typedef struct {
    PyObject_HEAD
    /* NULL until an __init__ succeeds, and after one fails */
    Tables *tables;
} EncoderObject;

/* What one encode call holds: its copies of the special tokens and their
 * ids, a reference to the tables and a cache of its own. */
typedef struct {
    Specials sp;
    PyObject *ids_seq;
    uint32_t *special_ids;
    Tables *tables;
    Cache *cache;
    IdBuf out; /* the ids */
} Call;

/* The int object of an id (a new reference), with the GIL. */
static inline PyObject *
tables_id_object(Tables *t, uint32_t id)
{
    if (id < t->id_objects_len) {
        PyObject *v = t->id_objects[id];
        if (v == NULL) {
            v = PyLong_FromUnsignedLong(id);
            if (v == NULL) {
                return NULL;
            }
            t->id_objects[id] = v;
        }
        return Py_NewRef(v);
    }
    return PyLong_FromUnsignedLong(id);
}

/* A list of the ids, with the GIL. */
BPE_INTERNAL PyObject *ids_to_list(Tables *t, const uint32_t *ids, size_t n);

/* The ids as native-endian unsigned integers of `itemsize` bytes (2 or 4), in
 * a new bytearray; ValueError naming the first id that 2 bytes cannot hold. */
BPE_INTERNAL PyObject *ids_to_bytearray(const uint32_t *ids, size_t n,
                                        int itemsize);

/* 0 if itemsize is 2 or 4, else -1 with ValueError set. */
BPE_INTERNAL int check_itemsize(int itemsize);

/* The tables of an initialised encoder, or NULL with RuntimeError set. */
BPE_INTERNAL Tables *encoder_tables(EncoderObject *self);

/* A call's special tokens and ids (call_open_specials), then, once the data
 * is read, the ids checked and the tables and a cache taken (call_start);
 * call_close ends it either way. See py/encoder_type.c. */
BPE_INTERNAL int call_open_specials(Call *call, PyObject *specials_arg,
                                    PyObject *ids_arg);
BPE_INTERNAL int call_start(Call *call, EncoderObject *self);
BPE_INTERNAL void call_close(Call *call);

/* encode_many_buffer, encode_many_lists and encode_packed_buffer
 * (py/encoder_many.c). */
BPE_INTERNAL PyObject *Encoder_encode_many_buffer(EncoderObject *self,
                                                  PyObject *args,
                                                  PyObject *kwds);
BPE_INTERNAL PyObject *Encoder_encode_many_lists(EncoderObject *self,
                                                 PyObject *args,
                                                 PyObject *kwds);
BPE_INTERNAL PyObject *Encoder_encode_packed_buffer(EncoderObject *self,
                                                    PyObject *args,
                                                    PyObject *kwds);

#endif /* BPE_ENCODER_PY_H */

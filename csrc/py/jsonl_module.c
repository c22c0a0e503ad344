/* jsonl_documents: the documents of JSON Lines read without the GIL
 * (jsonl.c), as one bytes object of UTF-8 and their offsets, so that a
 * data set's records reach the encoder with no Python object per record. */
#include "common.h"

#include "json_scan.h"

/* Ranges shorter than this are read with the GIL held. */
#define JSONL_NOGIL_MIN_BYTES 4096

/* jsonl_documents(block, field, start, end, bom) -> (data, offsets, stop,
 * stop_end, lines): the documents of the lines of block[start:end] (bytes; a
 * last line without \n is a line), as bpe_jsonl_documents reads them: data
 * their UTF-8 back to back, offsets native int64 (one more than the
 * documents, the first 0). stop == end when every line was read, else the
 * start of the line left to Python and stop_end its end (the documents
 * before it are in data); lines: the lines from start to stop. */
BPE_INTERNAL PyObject *
bpe_jsonl_documents_py(PyObject *module, PyObject *args)
{
    PyObject *block, *field;
    Py_ssize_t start, n;
    int bom;
    if (!PyArg_ParseTuple(args, "SSnnp:jsonl_documents", &block, &field, &start, &n, &bom)) {
        return NULL;
    }
    if (start < 0 || start > n || n > PyBytes_GET_SIZE(block)) {
        PyErr_Format(PyExc_ValueError, "start %zd and end %zd are not a range of the block's %zd bytes",
                     start, n, PyBytes_GET_SIZE(block));
        return NULL;
    }
    /* (room for every byte of the lines: decoding never lengthens them; at
     * least one byte, so that the object is ours alone to fill) */
    PyObject *data = PyBytes_FromStringAndSize(NULL, n - start + 1);
    if (data == NULL) {
        return NULL;
    }
    JsonlDocs docs = {.data = (unsigned char *)PyBytes_AS_STRING(data)};
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(block);
    const unsigned char *name = (const unsigned char *)PyBytes_AS_STRING(field);
    size_t name_len = (size_t)PyBytes_GET_SIZE(field);
    size_t line_end = 0, lines = 0;
    ptrdiff_t stop;
    /* (block and field are immutable and held by args; data and docs are
     * this call's own) */
    if (n - start >= JSONL_NOGIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        stop = bpe_jsonl_documents(s, (size_t)n, (size_t)start, name, name_len, bom, &docs,
                                   &line_end, &lines);
        Py_END_ALLOW_THREADS
    }
    else {
        stop = bpe_jsonl_documents(s, (size_t)n, (size_t)start, name, name_len, bom, &docs,
                                   &line_end, &lines);
    }
    PyObject *offsets = NULL, *result = NULL;
    if (stop < 0) {
        PyErr_NoMemory();
        goto done;
    }
    offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((docs.count + 1) * sizeof(int64_t)));
    if (offsets == NULL) {
        goto done;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(offsets);
    out[0] = 0;
    if (docs.count) {
        memcpy(out + 1, docs.ends, docs.count * sizeof(int64_t));
    }
    if (_PyBytes_Resize(&data, (Py_ssize_t)docs.len) < 0) {
        goto done; /* (data is NULL now) */
    }
    result = Py_BuildValue("(OOnnn)", data, offsets, (Py_ssize_t)stop, (Py_ssize_t)line_end,
                           (Py_ssize_t)lines);
done:
    free(docs.ends);
    Py_XDECREF(data);
    Py_XDECREF(offsets);
    return result;
}

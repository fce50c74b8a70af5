/* The argument checks of the segment kernels (_csegment.c): every buffer's item size and number
 * format, and a private, checked copy of the offsets, before a kernel reads anything; so no input
 * reads or writes out of bounds. Included once, after _csimd.h (holds_numbers).
 */
#ifndef LODTENSOR_CARGS_H
#define LODTENSOR_CARGS_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

static const Py_ssize_t ITEMSIZE[4] = {4, 8, 4, 8};

/* A private copy of offsets[lo..hi] once checked (int64, lo:hi in range, in order, within `rows`
 * rows): the kernels run on it, so neither an output sharing the offsets' memory nor another thread
 * (the GIL is released) can change them under a kernel. NULL with an exception set otherwise. */
static int64_t *checked_offsets(const char *fn, const Py_buffer *offsets, long long lo, long long hi, int64_t rows)
{
    int64_t n_off = offsets->len / 8;
    if (offsets->itemsize != 8 || !holds_numbers(offsets, 'i')) {
        PyErr_Format(PyExc_ValueError, "%s: offsets must be native int64, got %zd-byte items of format '%s'", fn,
                     offsets->itemsize, offsets->format ? offsets->format : "B");
        return NULL;
    }
    if (lo < 0 || hi < lo || hi >= n_off) {
        PyErr_Format(PyExc_ValueError, "%s: sequences %lld:%lld out of range for %lld offsets", fn, lo, hi,
                     (long long)n_off);
        return NULL;
    }
    int64_t *off = PyMem_Malloc((size_t)(hi + 1) * sizeof(int64_t));
    if (off == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(off, offsets->buf, (size_t)(hi + 1) * sizeof(int64_t));
    if (off[lo] < 0 || off[hi] > rows) {
        PyErr_Format(PyExc_ValueError, "%s: offsets span rows %lld:%lld, data has %lld rows", fn,
                     (long long)off[lo], (long long)off[hi], (long long)rows);
        PyMem_Free(off);
        return NULL;
    }
    for (int64_t j = lo; j < hi; j++) {
        if (off[j + 1] < off[j]) {
            PyErr_Format(PyExc_ValueError, "%s: offsets must not decrease, got %lld then %lld at %lld", fn,
                         (long long)off[j], (long long)off[j + 1], (long long)j);
            PyMem_Free(off);
            return NULL;
        }
    }
    return off;
}

/* The buffers of `count` objects (C-contiguous, with their formats; the last `writable` of them
 * writable), or -1 with an exception set and none held. */
static int get_buffers(PyObject *const *objs, Py_buffer *views, int count, int writable)
{
    for (int i = 0; i < count; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (i >= count - writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[i], &views[i], flags) < 0) {
            while (i-- > 0) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

/* Whether the `count` buffers `views` hold native numbers of `kind` (0 float32, 1 float64, 2 int32,
 * 3 int64) by item size and format; else 0 with a ValueError naming `names` (one per buffer). */
static int check_items(const char *fn, int kind, int count, Py_buffer *const *views, const char *const *names)
{
    static const char *const KIND_NAMES[4] = {"float32", "float64", "int32", "int64"};
    for (int i = 0; i < count; i++) {
        const Py_buffer *v = views[i];
        if (v->itemsize != ITEMSIZE[kind] || !holds_numbers(v, kind < 2 ? 'f' : 'i')) {
            PyErr_Format(PyExc_ValueError, "%s: %s must be native %s, got %zd-byte items of format '%s'", fn,
                         names[i], KIND_NAMES[kind], v->itemsize, v->format ? v->format : "B");
            return 0;
        }
    }
    return 1;
}

static void release_buffers(Py_buffer *views, int count)
{
    for (int i = 0; i < count; i++) PyBuffer_Release(&views[i]);
}

#endif

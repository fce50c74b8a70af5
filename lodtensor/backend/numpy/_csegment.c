/* Segment reductions over rows, in one read: the compiled kernel of the NumPy backend (and the
 * backward passes of segment softmax, max and min, softmax_grad and extreme_grad, below).
 *
 * segment_reduce(op, kind, data, offsets, out, width, lo, hi)
 *   op      0 sum, 1 max, 2 min (max and min propagate NaN and take the later of two equal
 *           values, as np.maximum / np.minimum do)
 *   kind    0 float32, 1 float64, 2 int32, 3 int64 (sums of ints wrap around, as NumPy's)
 *   data    C-contiguous rows of `width` values
 *   offsets C-contiguous int64, sequence j is rows offsets[j]:offsets[j + 1]
 *   out     writable C-contiguous rows of `width` values; row j gets sequence j's result for
 *           every non-empty sequence j in lo:hi (empty sequences' rows are left as they are)
 *
 * Every sequence is reduced where it lies: its rows are read once, in address order, a tile of
 * columns at a time held in registers (fixed-width tiles that the compiler turns into SIMD code),
 * over blocks of rows that stay in cache; rows wider than a tile stream into a result row held in
 * L1. Each column is reduced in row order, as NumPy's reduction over axis 0. Rows narrower than a
 * vector whose width divides its lanes are read as one run per sequence, lanes folded per column
 * at the end (a sum then adds in another order). The GIL is released while the loop runs, so threads may reduce disjoint runs of
 * sequences at once. The arguments are checked first (buffer sizes, item sizes, offsets in order
 * and in range, on a private copy the kernel then reads): no input reads or writes out of bounds.
 * The kernels are built on 32-byte vectors for AVX2 and 16-byte vectors for the baseline (SSE2,
 * NEON); the module runs the widest the CPU supports (_csimd.h: simd(), select_simd()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_cparallel.h"
#include "_csimd.h"

/* Rows of a block of at most this many bytes are reduced tile by tile before the next block. */
#define BLOCK_BYTES 32768

/* Vectors of W bytes (GCC / Clang vector extensions), one set per instruction set (_csimd.h): 32
 * bytes for AVX2, 16 for the baseline (SSE2, NEON); and the integer vectors of their masks. */
typedef float f32;
typedef double f64;
typedef int32_t i32;
typedef int64_t i64;
typedef uint32_t u32; /* sums of ints in unsigned arithmetic: wrap around, no undefined overflow */
typedef uint64_t u64;
#define DEFINE_VECTORS(W)                                          \
    typedef f32 v##W##_f32 __attribute__((vector_size(W)));        \
    typedef f64 v##W##_f64 __attribute__((vector_size(W)));        \
    typedef i32 v##W##_i32 __attribute__((vector_size(W)));        \
    typedef i64 v##W##_i64 __attribute__((vector_size(W)));        \
    typedef u32 v##W##_u32 __attribute__((vector_size(W)));        \
    typedef u64 v##W##_u64 __attribute__((vector_size(W)));

/* The combine of each op, on values (S_) and on vectors (V_, with M the mask type): max and min
 * keep a NaN once met (a NaN first operand stays, a NaN second operand is taken) and take the
 * second of two equal values (+0.0 and -0.0), as np.maximum / np.minimum do. */
#define S_ADD(a, b) ((a) + (b))
#define S_MAXF(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define S_MINF(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))
#define S_MAXI(a, b) ((a) >= (b) ? (a) : (b))
#define S_MINI(a, b) ((a) <= (b) ? (a) : (b))
#define SELECT(V, M, m, a, b) ((V)(((M)(a) & (m)) | ((M)(b) & ~(m))))
#define V_ADD(V, M, a, b) ((a) + (b))
#define V_MAXF(V, M, a, b) SELECT(V, M, (M)(((a) > (b)) | ((a) != (a))), a, b)
#define V_MINF(V, M, a, b) SELECT(V, M, (M)(((a) < (b)) | ((a) != (a))), a, b)
#define V_MAXI(V, M, a, b) SELECT(V, M, (M)((a) >= (b)), a, b)
#define V_MINI(V, M, a, b) SELECT(V, M, (M)((a) <= (b)), a, b)

/* One tile of NV vectors of columns over `rows` rows (row stride `w` values); `init`: start from
 * the first row, else from what `o` holds. Loads and stores go through memcpy: rows need not be
 * aligned. */
#define DEFINE_TILE(W, ATTR, T, M, OP, NV)                                                                  \
    ATTR static inline void tile##W##_##T##_##OP##_##NV(const T *x, int64_t rows, int64_t w, T *o, int init) \
    {                                                                                              \
        v##W##_##T acc[NV], v;                                                                          \
        const int lanes = (int)(sizeof(v##W##_##T) / sizeof(T));                                        \
        int64_t r = 0;                                                                             \
        const T *first = init ? x : o;                                                             \
        for (int i = 0; i < NV; i++) __builtin_memcpy(&acc[i], first + i * lanes, sizeof(v));      \
        if (init) r = 1;                                                                           \
        for (; r < rows; r++) {                                                                    \
            const T *p = x + r * w;                                                                \
            for (int i = 0; i < NV; i++) {                                                         \
                __builtin_memcpy(&v, p + i * lanes, sizeof(v));                                    \
                acc[i] = V_##OP(v##W##_##T, v##W##_##M, acc[i], v);                                              \
            }                                                                                      \
        }                                                                                          \
        for (int i = 0; i < NV; i++) __builtin_memcpy(o + i * lanes, &acc[i], sizeof(v));          \
    }

/* The last columns, fewer than a vector's lanes, one by one. */
#define DEFINE_TAIL(W, ATTR, T, OP)                                                                                 \
    ATTR static inline void tail##W##_##T##_##OP(const T *x, int64_t rows, int64_t w, int64_t cols, T *o, int init) \
    {                                                                                                      \
        for (int64_t c = 0; c < cols; c++) {                                                               \
            T acc = init ? x[c] : o[c];                                                                    \
            for (int64_t r = init ? 1 : 0; r < rows; r++) acc = S_##OP(acc, x[r * w + c]);                \
            o[c] = acc;                                                                                    \
        }                                                                                                  \
    }

/* o = OP(o, x) over one row of w values. */
#define DEFINE_ROW(W, ATTR, T, M, OP)                                                                       \
    ATTR static inline void row##W##_##T##_##OP(const T *x, int64_t w, T *o)                                \
    {                                                                                              \
        const int64_t lanes = (int64_t)(sizeof(v##W##_##T) / sizeof(T));                                \
        v##W##_##T a, b;                                                                                \
        int64_t c = 0;                                                                             \
        for (; c + lanes <= w; c += lanes) {                                                       \
            __builtin_memcpy(&a, o + c, sizeof(a));                                                \
            __builtin_memcpy(&b, x + c, sizeof(b));                                                \
            a = V_##OP(v##W##_##T, v##W##_##M, a, b);                                                            \
            __builtin_memcpy(o + c, &a, sizeof(a));                                                \
        }                                                                                          \
        for (; c < w; c++) o[c] = S_##OP(o[c], x[c]);                                              \
    }

/* A sequence of narrow rows (w values, w dividing a vector's lanes) as one contiguous run of
 * `count` values: four vector accumulators over it, lane j always meeting column j % w, then the
 * lanes folded per column. Runs shorter than four vectors return 0 (the caller reduces them by
 * column). So do float max and min whose result is +-0.0 or NaN: the accumulators meet the rows
 * out of order, and of two equal values (+0.0, -0.0) or two NaNs the row order picks which one
 * comes out; for any other value equal values have equal bits. */
#define TIES_ADD 0
#define TIES_MAXI 0
#define TIES_MINI 0
#define TIES_MAXF 1
#define TIES_MINF 1
#define DEFINE_NARROW(W, ATTR, T, M, OP)                                                                    \
    ATTR static inline int narrow##W##_##T##_##OP(const T *x, int64_t count, int64_t w, T *o)              \
    {                                                                                              \
        enum { L = (int)(sizeof(v##W##_##T) / sizeof(T)) };                                             \
        v##W##_##T a0, a1, a2, a3, v;                                                                   \
        T lanes[L];                                                                                \
        if (count < 4 * L) return 0;                                                               \
        __builtin_memcpy(&a0, x, sizeof(v));                                                       \
        __builtin_memcpy(&a1, x + L, sizeof(v));                                                   \
        __builtin_memcpy(&a2, x + 2 * L, sizeof(v));                                               \
        __builtin_memcpy(&a3, x + 3 * L, sizeof(v));                                               \
        int64_t i = 4 * L;                                                                         \
        for (; i + 4 * L <= count; i += 4 * L) {                                                   \
            __builtin_memcpy(&v, x + i, sizeof(v));                                                \
            a0 = V_##OP(v##W##_##T, v##W##_##M, a0, v);                                                          \
            __builtin_memcpy(&v, x + i + L, sizeof(v));                                            \
            a1 = V_##OP(v##W##_##T, v##W##_##M, a1, v);                                                          \
            __builtin_memcpy(&v, x + i + 2 * L, sizeof(v));                                        \
            a2 = V_##OP(v##W##_##T, v##W##_##M, a2, v);                                                          \
            __builtin_memcpy(&v, x + i + 3 * L, sizeof(v));                                        \
            a3 = V_##OP(v##W##_##T, v##W##_##M, a3, v);                                                          \
        }                                                                                          \
        a0 = V_##OP(v##W##_##T, v##W##_##M, V_##OP(v##W##_##T, v##W##_##M, a0, a1), V_##OP(v##W##_##T, v##W##_##M, a2, a3));                 \
        __builtin_memcpy(lanes, &a0, sizeof(v));                                                   \
        for (int64_t r = 0; i + r < count; r++) lanes[r % L] = S_##OP(lanes[r % L], x[i + r]);    \
        for (int64_t c = 0; c < w; c++) {                                                          \
            T acc = lanes[c];                                                                      \
            for (int64_t j = c + w; j < L; j += w) acc = S_##OP(acc, lanes[j]);                    \
            o[c] = acc;                                                                            \
            if (TIES_##OP && (acc == 0 || acc != acc)) return 0; /* +-0.0 or NaN: the row order */ \
        }                                                                                          \
        return 1;                                                                                  \
    }

/* The kernel of one type and op: tiles of 8 vectors (256 bytes) of columns, then narrower ones,
 * over blocks of rows of at most BLOCK_BYTES (a block stays in L1 while its tiles pass over it). */
#define DEFINE_KERNEL(W, ATTR, T, M, OP)                                                                    \
    DEFINE_TILE(W, ATTR, T, M, OP, 8)                                                                       \
    DEFINE_TILE(W, ATTR, T, M, OP, 4)                                                                       \
    DEFINE_TILE(W, ATTR, T, M, OP, 2)                                                                       \
    DEFINE_TILE(W, ATTR, T, M, OP, 1)                                                                       \
    DEFINE_TAIL(W, ATTR, T, OP)                                                                             \
    DEFINE_ROW(W, ATTR, T, M, OP)                                                                           \
    DEFINE_NARROW(W, ATTR, T, M, OP)                                                                        \
    ATTR static void reduce##W##_##T##_##OP(const T *data, const int64_t *off, T *out,         \
                                                int64_t lo, int64_t hi, int64_t w)                 \
    {                                                                                              \
        const int64_t lanes = (int64_t)(sizeof(v##W##_##T) / sizeof(T));                                \
        int64_t block = BLOCK_BYTES / (w * (int64_t)sizeof(T));                                    \
        if (block < 1) block = 1;                                                                  \
        const int narrow = w < lanes && lanes % w == 0;                                            \
        for (int64_t j = lo; j < hi; j++) {                                                        \
            int64_t s = off[j], e = off[j + 1];                                                    \
            T *o = out + j * w;                                                                    \
            if (narrow && narrow##W##_##T##_##OP(data + s * w, (e - s) * w, w, o)) continue;          \
            if (w > 8 * lanes && e > s) { /* wide rows: stream them, the result row in L1 */     \
                __builtin_memcpy(o, data + s * w, (size_t)w * sizeof(T));                          \
                for (int64_t r = s + 1; r < e; r++) row##W##_##T##_##OP(data + r * w, w, o);           \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t r0 = s; r0 < e; r0 += block) {                                            \
                int64_t rows = e - r0 < block ? e - r0 : block;                                    \
                const T *x = data + r0 * w;                                                        \
                int init = r0 == s;                                                                \
                int64_t c = 0;                                                                     \
                for (; c + 8 * lanes <= w; c += 8 * lanes) tile##W##_##T##_##OP##_8(x + c, rows, w, o + c, init); \
                if (c + 4 * lanes <= w) { tile##W##_##T##_##OP##_4(x + c, rows, w, o + c, init); c += 4 * lanes; } \
                if (c + 2 * lanes <= w) { tile##W##_##T##_##OP##_2(x + c, rows, w, o + c, init); c += 2 * lanes; } \
                if (c + lanes <= w) { tile##W##_##T##_##OP##_1(x + c, rows, w, o + c, init); c += lanes; } \
                if (c < w) tail##W##_##T##_##OP(x + c, rows, w, w - c, o + c, init);                   \
            }                                                                                      \
        }                                                                                          \
    }

/* The three kernels of a type: its sum (ints in their unsigned type) and its max and min. */
#define DEFINE_TYPE(W, ATTR, T, M, SUM_T, SUM_M, MAX, MIN) \
    DEFINE_KERNEL(W, ATTR, SUM_T, SUM_M, ADD)              \
    DEFINE_KERNEL(W, ATTR, T, M, MAX)                      \
    DEFINE_KERNEL(W, ATTR, T, M, MIN)

typedef void (*kernel_fn)(const void *, const int64_t *, void *, int64_t, int64_t, int64_t);

#include "_cbackward.h" /* the backward kernels: DEFINE_SOFTMAX_GRAD, DEFINE_EXTREME_GRAD */

/* Every kernel on W-byte vectors, and their tables: [kind][op] of the reductions, [kind] of the
 * softmax backward (float32, float64). */
#define DEFINE_WIDTH(W, ATTR)                                            \
    DEFINE_VECTORS(W)                                                    \
    DEFINE_SOFTMAX_GRAD(W, ATTR, f32)                                    \
    DEFINE_SOFTMAX_GRAD(W, ATTR, f64)                                    \
    static const grad_fn GRADS##W[2] = {(grad_fn)softmax_grad##W##_f32, (grad_fn)softmax_grad##W##_f64}; \
    DEFINE_EXTREME_GRAD(W, ATTR, f32, i32)                               \
    DEFINE_EXTREME_GRAD(W, ATTR, f64, i64)                               \
    static const extreme_grad_fn EXTREME_GRADS##W[2] = {(extreme_grad_fn)extreme_grad##W##_f32,           \
                                                        (extreme_grad_fn)extreme_grad##W##_f64};          \
    DEFINE_TYPE(W, ATTR, f32, i32, f32, i32, MAXF, MINF)                 \
    DEFINE_TYPE(W, ATTR, f64, i64, f64, i64, MAXF, MINF)                 \
    DEFINE_TYPE(W, ATTR, i32, i32, u32, u32, MAXI, MINI)                 \
    DEFINE_TYPE(W, ATTR, i64, i64, u64, u64, MAXI, MINI)                 \
    static const kernel_fn KERNELS##W[4][3] = {                          \
        {K(W, f32, ADD), K(W, f32, MAXF), K(W, f32, MINF)},              \
        {K(W, f64, ADD), K(W, f64, MAXF), K(W, f64, MINF)},              \
        {K(W, u32, ADD), K(W, i32, MAXI), K(W, i32, MINI)},              \
        {K(W, u64, ADD), K(W, i64, MAXI), K(W, i64, MINI)},              \
    };
#define K(W, T, OP) ((kernel_fn)reduce##W##_##T##_##OP)

DEFINE_WIDTH(16, )
#if X86_SIMD
DEFINE_WIDTH(32, TARGET_AVX2)
static const char *const NAMES[] = {"avx2", "baseline"};
static const kernel_fn (*const TABLES[])[3] = {KERNELS32, KERNELS16};
static const grad_fn *const GRAD_TABLES[] = {GRADS32, GRADS16};
static const extreme_grad_fn *const EXTREME_GRAD_TABLES[] = {EXTREME_GRADS32, EXTREME_GRADS16};
#else
static const char *const NAMES[] = {"baseline"};
static const kernel_fn (*const TABLES[])[3] = {KERNELS16};
static const grad_fn *const GRAD_TABLES[] = {GRADS16};
static const extreme_grad_fn *const EXTREME_GRAD_TABLES[] = {EXTREME_GRADS16};
#endif
#define N_VARIANTS ((int)(sizeof(NAMES) / sizeof(NAMES[0])))

static int active = 0; /* the widest this CPU runs, set at import */
#include "_cargs.h" /* the argument checks: checked_offsets, get_buffers, check_items, release_buffers */

/* One call of a segment kernel cut into runs of sequences with about equal row counts, one run a
 * part, run on the kernels' own thread pool (_cparallel.h). Each part writes only its sequences'
 * output rows, and has scratch of its own. */
#define PART_BYTES (64 * 1024)
#define PARTS_PER_THREAD 4
#define MAX_CUTS (PARTS_PER_THREAD * (PARALLEL_MAX_WORKERS + 1))

typedef struct {
    int which; /* 0 segment_reduce, 1 softmax_grad, 2 extreme_grad */
    kernel_fn reduce;
    grad_fn softmax;
    extreme_grad_fn extreme;
    const void *a, *b, *c; /* data / g, y / x, m, g */
    void *out;
    char *scratch; /* scratch_bytes per part */
    size_t scratch_bytes;
    const int64_t *off;
    int64_t width;
    int64_t cuts[MAX_CUTS + 1];
} segment_call;

static void segment_part(void *arg, int part, int nparts)
{
    segment_call *c = arg;
    int64_t lo = c->cuts[part], hi = c->cuts[part + 1];
    (void)nparts;
    if (lo >= hi) return;
    void *scratch = c->scratch + (size_t)part * c->scratch_bytes;
    if (c->which == 0)
        c->reduce(c->a, c->off, c->out, lo, hi, c->width);
    else if (c->which == 1)
        c->softmax(c->a, c->b, c->off, c->out, scratch, lo, hi, c->width);
    else
        c->extreme(c->a, c->b, c->c, c->off, c->out, scratch, lo, hi, c->width);
}

/* How many parts the rows of sequences lo:hi (of `row_bytes` each) make on `threads` threads, and their
 * cuts: sequence bounds with about equal rows between (a binary search over the checked offsets). */
static int segment_cuts(segment_call *c, int64_t lo, int64_t hi, Py_ssize_t row_bytes, int threads)
{
    const int64_t *off = c->off;
    int64_t rows = off[hi] - off[lo];
    int64_t parts = threads > 1 ? rows * (int64_t)row_bytes / PART_BYTES + 1 : 1;
    if (parts > (int64_t)threads * PARTS_PER_THREAD) parts = (int64_t)threads * PARTS_PER_THREAD;
    if (parts > hi - lo) parts = hi - lo;
    if (parts < 1) parts = 1;
    c->cuts[0] = lo;
    for (int64_t k = 1; k < parts; k++) {
        int64_t target = off[lo] + rows / parts * k + rows % parts * k / parts, a = c->cuts[k - 1], b = hi;
        while (a < b) { /* the first sequence j >= cuts[k - 1] with off[j] >= target */
            int64_t mid = a + (b - a) / 2;
            if (off[mid] < target) a = mid + 1;
            else b = mid;
        }
        c->cuts[k] = a;
    }
    c->cuts[parts] = hi;
    return (int)parts;
}

static int check_threads(const char *fn, int threads)
{
    if (threads >= 1 && threads <= PARALLEL_MAX_WORKERS + 1) return 1;
    PyErr_Format(PyExc_ValueError, "%s: threads must be 1 to %d, got %d", fn, PARALLEL_MAX_WORKERS + 1, threads);
    return 0;
}

static PyObject *segment_reduce(PyObject *self, PyObject *args)
{
    int op, kind;
    PyObject *objs[3]; /* data, offsets, out */
    long long width, lo, hi;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "iiOOOLLL|i:segment_reduce", &op, &kind, &objs[0], &objs[1], &objs[2], &width, &lo,
                          &hi, &threads))
        return NULL;
    if (!check_threads("segment_reduce", threads)) return NULL;
    if (op < 0 || op > 2) return PyErr_Format(PyExc_ValueError, "segment_reduce: op must be 0, 1 or 2, got %d", op);
    if (kind < 0 || kind > 3)
        return PyErr_Format(PyExc_ValueError, "segment_reduce: kind must be 0-3, got %d", kind);
    if (width < 1 || width > PY_SSIZE_T_MAX / 8)
        return PyErr_Format(PyExc_ValueError, "segment_reduce: width must be in 1..%lld, got %lld",
                            (long long)(PY_SSIZE_T_MAX / 8), width);
    Py_buffer views[3];
    if (get_buffers(objs, views, 3, 1) < 0) return NULL;
    Py_buffer *data = &views[0], *offsets = &views[1], *out = &views[2];
    PyObject *result = NULL;
    int64_t *off = NULL;
    Py_ssize_t size = ITEMSIZE[kind];
    if (!check_items("segment_reduce", kind, 2, (Py_buffer *[]){data, out}, (const char *[]){"data", "out"}))
        goto done;
    off = checked_offsets("segment_reduce", offsets, lo, hi, (int64_t)(data->len / size / width));
    if (off == NULL) goto done;
    if ((long long)(out->len / size / width) < hi) {
        PyErr_Format(PyExc_ValueError, "segment_reduce: out holds %lld rows of %lld values, needs %lld",
                     (long long)(out->len / size / width), width, hi);
        goto done;
    }
    segment_call call = {.which = 0, .reduce = TABLES[active][kind][op], .a = data->buf, .out = out->buf,
                         .off = off, .width = width};
    int parts = segment_cuts(&call, lo, hi, size * (Py_ssize_t)width, threads);
    Py_BEGIN_ALLOW_THREADS
    parallel_run(segment_part, &call, parts, threads);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(off);
    release_buffers(views, 3);
    return result;
}

static PyObject *softmax_grad(PyObject *self, PyObject *args)
{
    int kind;
    PyObject *objs[4]; /* g, y, offsets, out */
    long long width, lo, hi;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "iOOOOLLL|i:softmax_grad", &kind, &objs[0], &objs[1], &objs[2], &objs[3], &width, &lo,
                          &hi, &threads))
        return NULL;
    if (!check_threads("softmax_grad", threads)) return NULL;
    if (kind < 0 || kind > 1) return PyErr_Format(PyExc_ValueError, "softmax_grad: kind must be 0 or 1, got %d", kind);
    if (width < 1 || width > PY_SSIZE_T_MAX / 8)
        return PyErr_Format(PyExc_ValueError, "softmax_grad: width must be in 1..%lld, got %lld",
                            (long long)(PY_SSIZE_T_MAX / 8), width);
    Py_buffer views[4];
    if (get_buffers(objs, views, 4, 1) < 0) return NULL;
    Py_buffer *g = &views[0], *y = &views[1], *offsets = &views[2], *out = &views[3];
    PyObject *result = NULL;
    int64_t *off = NULL;
    void *dot = NULL;
    Py_ssize_t size = ITEMSIZE[kind];
    if (!check_items("softmax_grad", kind, 3, (Py_buffer *[]){g, y, out}, (const char *[]){"g", "y", "out"}))
        goto done;
    if (g->len != y->len || out->len != y->len) {
        PyErr_Format(PyExc_ValueError, "softmax_grad: g, y and out must be alike, got %zd, %zd and %zd bytes",
                     g->len, y->len, out->len);
        goto done;
    }
    off = checked_offsets("softmax_grad", offsets, lo, hi, (int64_t)(y->len / size / width));
    if (off == NULL) goto done;
    if (off[hi] == off[lo]) goto nothing; /* no row: no scratch row (of `width` values, however wide) */
    segment_call call = {.which = 1, .softmax = GRAD_TABLES[active][kind], .a = g->buf, .b = y->buf, .out = out->buf,
                         .off = off, .width = width, .scratch_bytes = (size_t)width * (size_t)size};
    int parts = segment_cuts(&call, lo, hi, size * (Py_ssize_t)width, threads);
    dot = PyMem_Malloc(call.scratch_bytes * (size_t)parts); /* a row of dot products a part */
    if (dot == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    call.scratch = dot;
    Py_BEGIN_ALLOW_THREADS
    parallel_run(segment_part, &call, parts, threads);
    Py_END_ALLOW_THREADS
nothing:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(dot);
    PyMem_Free(off);
    release_buffers(views, 4);
    return result;
}

static PyObject *extreme_grad(PyObject *self, PyObject *args)
{
    int kind;
    PyObject *objs[5]; /* x, m, g, offsets, out */
    long long width, lo, hi;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "iOOOOOLLL|i:extreme_grad", &kind, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &width, &lo, &hi, &threads))
        return NULL;
    if (!check_threads("extreme_grad", threads)) return NULL;
    if (kind < 0 || kind > 1) return PyErr_Format(PyExc_ValueError, "extreme_grad: kind must be 0 or 1, got %d", kind);
    if (width < 1 || width > PY_SSIZE_T_MAX / 8)
        return PyErr_Format(PyExc_ValueError, "extreme_grad: width must be in 1..%lld, got %lld",
                            (long long)(PY_SSIZE_T_MAX / 8), width);
    Py_buffer views[5];
    if (get_buffers(objs, views, 5, 1) < 0) return NULL;
    Py_buffer *x = &views[0], *m = &views[1], *g = &views[2], *offsets = &views[3], *out = &views[4];
    PyObject *result = NULL;
    int64_t *off = NULL;
    void *share = NULL;
    Py_ssize_t size = ITEMSIZE[kind];
    if (!check_items("extreme_grad", kind, 4, (Py_buffer *[]){x, m, g, out}, (const char *[]){"x", "m", "g", "out"}))
        goto done;
    if (out->len != x->len || g->len != m->len) {
        PyErr_Format(PyExc_ValueError,
                     "extreme_grad: x and out (rows), m and g (sequences) must be alike, got %zd, %zd, %zd and %zd "
                     "bytes", x->len, out->len, m->len, g->len);
        goto done;
    }
    off = checked_offsets("extreme_grad", offsets, lo, hi, (int64_t)(x->len / size / width));
    if (off == NULL) goto done;
    if (off[hi] == off[lo]) goto nothing; /* no row: no scratch row (of `width` values, however wide) */
    if ((long long)(m->len / size / width) < hi) {
        PyErr_Format(PyExc_ValueError, "extreme_grad: m holds %lld rows of %lld values, needs %lld",
                     (long long)(m->len / size / width), width, hi);
        goto done;
    }
    segment_call call = {.which = 2, .extreme = EXTREME_GRAD_TABLES[active][kind], .a = x->buf, .b = m->buf,
                         .c = g->buf, .out = out->buf, .off = off, .width = width,
                         .scratch_bytes = (size_t)width * (size_t)size};
    int parts = segment_cuts(&call, lo, hi, size * (Py_ssize_t)width, threads);
    share = PyMem_Malloc(call.scratch_bytes * (size_t)parts); /* a row of shares a part */
    if (share == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    call.scratch = share;
    Py_BEGIN_ALLOW_THREADS
    parallel_run(segment_part, &call, parts, threads);
    Py_END_ALLOW_THREADS
nothing:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(share);
    PyMem_Free(off);
    release_buffers(views, 5);
    return result;
}

DEFINE_SIMD_FUNCTIONS(NAMES, N_VARIANTS, active)

static PyMethodDef METHODS[] = {
    {"segment_reduce", segment_reduce, METH_VARARGS,
     "segment_reduce(op, kind, data, offsets, out, width, lo, hi, threads=1): reduce each sequence's rows in place."},
    {"softmax_grad", softmax_grad, METH_VARARGS,
     "softmax_grad(kind, g, y, offsets, out, width, lo, hi, threads=1): out = y * (g - segment_sum(g * y)) over lo:hi."},
    {"extreme_grad", extreme_grad, METH_VARARGS,
     "extreme_grad(kind, x, m, g, offsets, out, width, lo, hi, threads=1): segment max/min's gradient over lo:hi."},
    SIMD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_csegment", "Compiled segment reductions.", -1, METHODS};

PyMODINIT_FUNC PyInit__csegment(void)
{
    active = simd_widest(NAMES, N_VARIANTS);
    if (pool_init() != 0) return PyErr_Format(PyExc_RuntimeError, "_csegment: pthread_atfork failed");
    return PyModule_Create(&MODULE);
}

/* The compiled pointwise kernels of the NumPy backend: GELU of float32 values, and relu
 * (max(x, 0)) of float32 and float64 values, each in one pass.
 *
 * gelu_f32(x, out, stream): out[i] = gelu(x[i]) for C-contiguous float32 buffers of one length
 * (out may be x itself). The formula is the NumPy kernel's (lodtensor/backend/_special.py), so
 * both give the same values to float32 rounding:
 *
 *   gelu(x) = max(x, 0) - |x| erfc(|x| / sqrt 2) / 2,
 *   erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2),  t = 1 / (1 + p z),  z >= 0
 *
 * (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7; the halving and 1 / sqrt 2 folded into
 * the constants), with exp(-z^2) by a range reduction to [-ln 2 / 2, ln 2 / 2], a degree-5
 * polynomial and the power of two built in the exponent bits (on AVX-512: vrndscaleps and
 * vscalefps instead). The result is within 3.4e-7 of the exact GELU (torch's CPU kernel: 9.5e-7),
 * keeps -0.0 and huge values (the (x + |x|) form overflowed at 3e38); NaN and -inf give NaN and
 * +inf gives +inf, as torch 2.13 (and the NumPy kernel). 26 vector operations a vector
 * (29 with Cephes' degree-7 exp): 478K values 88 us on one AVX-512 thread, torch.nn.functional.gelu
 * 93-98 us (thread CPU time, best of 20, interleaved).
 *
 * relu(x, out, stream): out[i] = np.maximum(x[i], 0) for C-contiguous native float32 or float64
 * buffers: x where x > 0 or NaN (NaN kept with its sign bit), +0.0 elsewhere (-0.0 included),
 * bit for bit as NumPy. relu_torch(x, out, stream): torch.relu's bits, which differ only in
 * keeping -0.0 (+0.0 where x < 0). Both decide from the bits, so a thread's flush-denormals
 * setting does not change the result (positive denormals kept, negative ones cleared); the
 * buffers may have any alignment.
 *
 * Written with GCC / Clang vector extensions, once per vector width, each instance compiled for
 * the instruction set whose registers have that width: 64 bytes for AVX-512, 32 for AVX2, 16 for
 * the baseline (SSE2 on x86-64, NEON on arm64). Wider vectors than the registers are lowered to
 * scalar code for compares and selects (relu 8x, segment max 10x slower, measured), so each CPU
 * runs the widest instance it supports, chosen once at import (`simd()` names it, `select_simd`
 * switches it for tests). The GIL is released while they run. With stream true (the caller sets it for outputs far larger than the caches)
 * whole vectors are written with non-temporal stores on x86-64: the output's cache lines are not
 * read first (a plain store reads each line before writing it), which saves a third of the memory
 * traffic of a pass (measured on 75 MB of float32 on the 2-core VM: relu 2.9 ms on 2 threads
 * against 5.5 ms with plain stores; GELU, paced by its arithmetic, was slower streamed, so its
 * caller does not ask for it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "_cparallel.h"
#include "_csimd.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi" /* vectors passed between static inline functions only */
#endif

/* Part of a vector to an address 16-byte aligned, bypassing the caches (x86-64: SSE2's streaming
 * store, in the baseline ISA; elsewhere a plain store). */
static inline __attribute__((always_inline)) void store_streaming(void *to, const void *vector, size_t bytes)
{
#if X86_SIMD
    for (size_t k = 0; k < bytes / 16; k++) {
        __m128i piece;
        __builtin_memcpy(&piece, (const char *)vector + 16 * k, 16);
        _mm_stream_si128((__m128i *)to + k, piece);
    }
#else
    __builtin_memcpy(to, vector, bytes);
#endif
}

static inline void streaming_done(void)
{
#if X86_SIMD
    _mm_sfence(); /* streaming stores are weakly ordered: make them visible before the call returns */
#endif
}

/* out[i] = FN(x[i]) for i < n. The first values up to a 64-byte boundary of out (when streaming)
 * and the last part-vector go through the same vector code, padded with zeros. */
#define POINTWISE_LOOP(ATTR, NAME, T, V, FN)                                                         \
    ATTR static void NAME(const T *x, T *out, Py_ssize_t n, int stream)                              \
    {                                                                                                \
        const Py_ssize_t lanes = (Py_ssize_t)(sizeof(V) / sizeof(T));                               \
        Py_ssize_t i = 0;                                                                            \
        V v;                                                                                         \
        if (stream && (uintptr_t)out % sizeof(T) == 0) {                                             \
            Py_ssize_t head = (Py_ssize_t)(((64 - (uintptr_t)out % 64) % 64) / sizeof(T));          \
            if (head > n) head = n;                                                                  \
            for (; i < head; i += lanes) {                                                           \
                Py_ssize_t m = head - i < lanes ? head - i : lanes;                                  \
                __builtin_memset(&v, 0, sizeof(v));                                                  \
                __builtin_memcpy(&v, x + i, (size_t)m * sizeof(T));                                  \
                v = FN(v);                                                                           \
                __builtin_memcpy(out + i, &v, (size_t)m * sizeof(T));                                \
            }                                                                                        \
            for (i = head; i + lanes <= n; i += lanes) {                                             \
                __builtin_memcpy(&v, x + i, sizeof(v));                                              \
                v = FN(v);                                                                           \
                store_streaming(out + i, &v, sizeof(v));                                             \
            }                                                                                        \
            streaming_done();                                                                        \
        }                                                                                            \
        for (; i + 2 * lanes <= n; i += 2 * lanes) {                                                 \
            V w;                                                                                     \
            __builtin_memcpy(&v, x + i, sizeof(v));                                                  \
            __builtin_memcpy(&w, x + i + lanes, sizeof(w));                                          \
            v = FN(v);                                                                               \
            w = FN(w);                                                                               \
            __builtin_memcpy(out + i, &v, sizeof(v));                                                \
            __builtin_memcpy(out + i + lanes, &w, sizeof(w));                                        \
        }                                                                                            \
        for (; i + lanes <= n; i += lanes) {                                                         \
            __builtin_memcpy(&v, x + i, sizeof(v));                                                  \
            v = FN(v);                                                                               \
            __builtin_memcpy(out + i, &v, sizeof(v));                                                \
        }                                                                                            \
        if (i < n) {                                                                                 \
            __builtin_memset(&v, 0, sizeof(v));                                                      \
            __builtin_memcpy(&v, x + i, (size_t)(n - i) * sizeof(T));                                \
            v = FN(v);                                                                               \
            __builtin_memcpy(out + i, &v, (size_t)(n - i) * sizeof(T));                              \
        }                                                                                            \
    }

#define F32_NEG_INF ((int32_t)0xff800000)
#define F64_NEG_INF ((int64_t)0xfff0000000000000ULL)

/* exp(y) for y <= 0 (below -87: exp(-87), under 1.7e-38, as good as zero where it is used): the
 * power of two built in the exponent bits. */
#define DEFINE_EXP_BITS(W, ATTR)                                                                     \
    ATTR static inline __attribute__((always_inline)) vf##W exp_nonpositive##W(vf##W y)              \
    {                                                                                                \
        const vf##W zero = {0}, floor = zero - (float)87.0f;                                         \
        vi##W above = (vi##W)(y > floor);                                                            \
        y = (vf##W)(((vi##W)y & above) | ((vi##W)floor & ~above));                                   \
        vf##W scaled = y * (float)1.44269504088896341f - (float)0.5f; /* y <= 0: truncation rounds */ \
        vi##W n = __builtin_convertvector(scaled, vi##W);                                            \
        vf##W nf = __builtin_convertvector(n, vf##W);                                                \
        vf##W p = exp_poly##W(y - nf * (float)0.693359375f + nf * (float)2.12194440e-4f);            \
        vi##W bits = (n + 127) << 23;                                                                \
        return p * (vf##W)bits;                                                                      \
    }

/* The same on AVX-512 in fewer instructions (13% less time for GELU, measured): max for the clamp,
 * vrndscaleps for the rounding, vscalefps for the power of two (each one instruction). */
#define DEFINE_EXP_SCALEF(W, ATTR)                                                                   \
    ATTR static inline __attribute__((always_inline)) vf##W exp_nonpositive##W(vf##W y)              \
    {                                                                                                \
        const vf##W zero = {0};                                                                      \
        y = (vf##W)_mm512_max_ps((__m512)y, (__m512)(zero - (float)87.0f)); /* NaN -> -87, as above */ \
        vf##W nf = (vf##W)_mm512_roundscale_ps((__m512)(y * (float)1.44269504088896341f),             \
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);       \
        vf##W p = exp_poly##W(y - nf * (float)0.693359375f + nf * (float)2.12194440e-4f);            \
        return (vf##W)_mm512_scalef_ps((__m512)p, (__m512)nf);                                       \
    }

/* The kernels on W-byte vectors, compiled for ATTR's instruction set, with DEFINE_EXP's exp. Constants
 * are splatted by adding them to a zero vector; each is cast to float, so that where float arithmetic
 * runs in long double (x87, FLT_EVAL_METHOD 2) it still converts to the vector's type. */
#define DEFINE_POINTWISE(W, ATTR, DEFINE_EXP)                                                        \
    typedef float vf##W __attribute__((vector_size(W)));                                             \
    typedef int32_t vi##W __attribute__((vector_size(W)));                                           \
    typedef uint32_t vu##W __attribute__((vector_size(W)));                                          \
    typedef double vd##W __attribute__((vector_size(W)));                                            \
    typedef int64_t vl##W __attribute__((vector_size(W)));                                           \
    typedef uint64_t vul##W __attribute__((vector_size(W)));                                         \
                                                                                                     \
    /* exp(r) for |r| <= ln 2 / 2: a degree-5 polynomial fitted for relative error (7.5e-8, about    \
     * 2e-7 with float32 rounding: GELU multiplies it by at most 0.17, so it adds under 4e-8) */     \
    ATTR static inline __attribute__((always_inline)) vf##W exp_poly##W(vf##W r)                     \
    {                                                                                                \
        const vf##W zero = {0};                                                                      \
        vf##W p = zero + (float)8.2976538688e-3f;                                                    \
        p = p * r + (float)4.1915383190e-2f;                                                         \
        p = p * r + (float)1.6667574644e-1f;                                                         \
        p = p * r + (float)4.9998894334e-1f;                                                         \
        p = p * r + (float)9.9999970198e-1f;                                                         \
        return p * r + (float)1.0000001192f;                                                         \
    }                                                                                                \
    DEFINE_EXP(W, ATTR)                                                                              \
                                                                                                     \
    /* gelu = max(x, 0) - |x| erfc(|x| / sqrt 2) / 2, the halving folded into the coefficients */    \
    ATTR static inline __attribute__((always_inline)) vf##W gelu##W(vf##W x)                         \
    {                                                                                                \
        const vf##W zero = {0};                                                                      \
        vf##W ax = (vf##W)((vi##W)x & ~(vi##W)(-zero)); /* |x|: the sign bit (-0.0's) cleared */     \
        vf##W t = (zero + (float)1.0f) / ((float)1.0f + (float)0.23164188f * ax); /* p / sqrt 2 */   \
        vf##W poly = zero + (float)0.5307027145f;                                                    \
        poly = poly * t - (float)0.7265760135f;                                                      \
        poly = poly * t + (float)0.7107068705f;                                                      \
        poly = poly * t - (float)0.142248368f;                                                       \
        poly = poly * t + (float)0.127414796f;                                                       \
        vf##W half_erfc = poly * t * exp_nonpositive##W((ax * ax) * (float)-0.5f);                   \
        vf##W relu = (vf##W)((vi##W)x & ~(vi##W)(x < zero)); /* +0.0 where x < 0 (NaN kept) */       \
        vf##W tail = ax * half_erfc; /* inf * 0 is NaN: cleared at +inf (gelu(inf) = inf, as torch) */ \
        tail = (vf##W)((vi##W)tail & ~(vi##W)(x == zero + (float)INFINITY));                         \
        return relu - tail;                                                                          \
    }                                                                                                \
                                                                                                     \
    /* np.maximum(x, 0): cleared where the bits, read as a signed integer, are at most -inf's */     \
    ATTR static inline __attribute__((always_inline)) vf##W relu_f32_##W(vf##W x)                    \
    {                                                                                                \
        const vi##W zero = {0};                                                                      \
        vi##W bits = (vi##W)x;                                                                       \
        return (vf##W)(bits & ~(bits <= zero + F32_NEG_INF));                                        \
    }                                                                                                \
                                                                                                     \
    ATTR static inline __attribute__((always_inline)) vd##W relu_f64_##W(vd##W x)                    \
    {                                                                                                \
        const vl##W zero = {0};                                                                      \
        vl##W bits = (vl##W)x;                                                                       \
        return (vd##W)(bits & ~(bits <= zero + F64_NEG_INF));                                        \
    }                                                                                                \
                                                                                                     \
    /* torch.relu: cleared where the unsigned bits run from -0.0's plus one to -inf's */             \
    ATTR static inline __attribute__((always_inline)) vf##W relu_torch_f32_##W(vf##W x)              \
    {                                                                                                \
        const vu##W zero = {0};                                                                      \
        vu##W above = (vu##W)x - (zero + 0x80000001u); /* -0.0 wraps to the top */                   \
        return (vf##W)((vi##W)x & ~(vi##W)(above < zero + 0x7f800000u));                             \
    }                                                                                                \
                                                                                                     \
    ATTR static inline __attribute__((always_inline)) vd##W relu_torch_f64_##W(vd##W x)              \
    {                                                                                                \
        const vul##W zero = {0};                                                                     \
        vul##W above = (vul##W)x - (zero + 0x8000000000000001ULL);                                   \
        return (vd##W)((vl##W)x & ~(vl##W)(above < zero + 0x7ff0000000000000ULL));                   \
    }                                                                                                \
                                                                                                     \
    POINTWISE_LOOP(ATTR, gelu_loop_f32_##W, float, vf##W, gelu##W)                                   \
    POINTWISE_LOOP(ATTR, relu_loop_f32_##W, float, vf##W, relu_f32_##W)                              \
    POINTWISE_LOOP(ATTR, relu_loop_f64_##W, double, vd##W, relu_f64_##W)                             \
    POINTWISE_LOOP(ATTR, relu_torch_loop_f32_##W, float, vf##W, relu_torch_f32_##W)                  \
    POINTWISE_LOOP(ATTR, relu_torch_loop_f64_##W, double, vd##W, relu_torch_f64_##W)

typedef void (*loop_f32)(const float *, float *, Py_ssize_t, int);
typedef void (*loop_f64)(const double *, double *, Py_ssize_t, int);
typedef struct {
    loop_f32 gelu, relu32, relu_torch32;
    loop_f64 relu64, relu_torch64;
} variant;

#define VARIANT(W) {gelu_loop_f32_##W, relu_loop_f32_##W, relu_torch_loop_f32_##W, relu_loop_f64_##W, \
                    relu_torch_loop_f64_##W}

DEFINE_POINTWISE(16, , DEFINE_EXP_BITS)
#if X86_SIMD
DEFINE_POINTWISE(32, TARGET_AVX2, DEFINE_EXP_BITS)
DEFINE_POINTWISE(64, TARGET_AVX512, DEFINE_EXP_SCALEF)
static const char *const NAMES[] = {"avx512f", "avx2", "baseline"};
static const variant VARIANTS[] = {VARIANT(64), VARIANT(32), VARIANT(16)};
#else
static const char *const NAMES[] = {"baseline"};
static const variant VARIANTS[] = {VARIANT(16)};
#endif
#define N_VARIANTS ((int)(sizeof(VARIANTS) / sizeof(VARIANTS[0])))

static int active = 0; /* the widest this CPU runs, set at import */

#define PART_BYTES (64 * 1024)
#define PARTS_PER_THREAD 4

/* One part of a pointwise call split over threads: its share of the values, cut at 64-byte multiples
 * (whole vectors: the same values as one call, bit for bit). */
typedef struct {
    loop_f32 f32;
    loop_f64 f64;
    const void *x;
    void *out;
    Py_ssize_t n;
    int stream;
} pointwise_call;

static void pointwise_part(void *arg, int part, int nparts)
{
    const pointwise_call *c = arg;
    const Py_ssize_t size = c->f32 ? 4 : 8, grain = 64 / size;
    Py_ssize_t lo = c->n / grain * part / nparts * grain, hi = c->n / grain * (part + 1) / nparts * grain;
    if (part == nparts - 1) hi = c->n;
    if (hi <= lo) return;
    if (c->f32)
        c->f32((const float *)c->x + lo, (float *)c->out + lo, hi - lo, c->stream);
    else
        c->f64((const double *)c->x + lo, (double *)c->out + lo, hi - lo, c->stream);
}

/* Parses (x, out, stream, threads), checks both are C-contiguous native float buffers of one type
 * (float32 for f32, float64 for f64; any alignment: the loops copy through memcpy) and one length,
 * and runs the loop of that type without the GIL. */
static PyObject *run_pointwise(const char *name, PyObject *args, loop_f32 f32, loop_f64 f64)
{
    PyObject *x_obj, *out_obj;
    int stream = 0, threads = 1;
    if (!PyArg_ParseTuple(args, "OO|pi", &x_obj, &out_obj, &stream, &threads)) return NULL;
    if (threads < 1 || threads > PARALLEL_MAX_WORKERS + 1) {
        PyErr_Format(PyExc_ValueError, "%s: threads must be 1 to %d, got %d", name, PARALLEL_MAX_WORKERS + 1,
                     threads);
        return NULL;
    }
    Py_buffer x, out;
    if (PyObject_GetBuffer(x_obj, &x, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    PyObject *result = NULL;
    const char *fx = x.format ? x.format : "B", *fo = out.format ? out.format : "B";
    const char *tx = native_type(fx), *to = native_type(fo);
    int is_f32 = f32 && tx && to && strcmp(tx, "f") == 0 && strcmp(to, "f") == 0;
    int is_f64 = f64 && tx && to && strcmp(tx, "d") == 0 && strcmp(to, "d") == 0;
    if (!is_f32 && !is_f64) {
        PyErr_Format(PyExc_ValueError, "%s: x and out must both be native %s, got formats '%s' and '%s'", name,
                     f64 ? "float32 ('f') or float64 ('d')" : "float32 ('f')", fx, fo);
    } else if (x.len != out.len) {
        PyErr_Format(PyExc_ValueError, "%s: x has %zd bytes and out %zd; they must match", name, x.len, out.len);
    } else {
        pointwise_call call = {is_f32 ? f32 : NULL, is_f32 ? NULL : f64, x.buf, out.buf, x.len / (is_f32 ? 4 : 8),
                               stream};
        /* parts of at least PART_BYTES, about PARTS_PER_THREAD a thread: a late thread leaves few behind */
        Py_ssize_t parts = x.len / PART_BYTES + 1, most = (Py_ssize_t)threads * PARTS_PER_THREAD;
        Py_BEGIN_ALLOW_THREADS
        parallel_run(pointwise_part, &call, (int)(parts < most ? parts : most), threads);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *gelu_f32(PyObject *self, PyObject *args)
{
    return run_pointwise("gelu_f32", args, VARIANTS[active].gelu, NULL);
}

static PyObject *relu(PyObject *self, PyObject *args)
{
    return run_pointwise("relu", args, VARIANTS[active].relu32, VARIANTS[active].relu64);
}

static PyObject *relu_torch(PyObject *self, PyObject *args)
{
    return run_pointwise("relu_torch", args, VARIANTS[active].relu_torch32, VARIANTS[active].relu_torch64);
}

DEFINE_SIMD_FUNCTIONS(NAMES, N_VARIANTS, active)

static PyMethodDef METHODS[] = {
    {"gelu_f32", gelu_f32, METH_VARARGS,
     "gelu_f32(x, out, stream=False, threads=1): out = gelu(x) for float32 buffers of one length."},
    {"relu", relu, METH_VARARGS,
     "relu(x, out, stream=False, threads=1): out = maximum(x, 0) for float32 or float64 buffers of one type and length."},
    {"relu_torch", relu_torch, METH_VARARGS,
     "relu_torch(x, out, stream=False, threads=1): out = torch.relu(x) (-0.0 kept) for float32 or float64 buffers."},
    SIMD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_cpointwise", "Compiled pointwise kernels.", -1,
                                    METHODS};

PyMODINIT_FUNC PyInit__cpointwise(void)
{
    active = simd_widest(NAMES, N_VARIANTS);
    if (pool_init() != 0) return PyErr_Format(PyExc_RuntimeError, "_cpointwise: pthread_atfork failed");
    return PyModule_Create(&MODULE);
}

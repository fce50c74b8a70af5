/* GELU of float32 values in one pass: the compiled pointwise kernel of the NumPy backend.
 *
 * gelu_f32(x, out): out[i] = gelu(x[i]) for C-contiguous float32 buffers of the same length
 * (out may be x itself). The formula is the NumPy kernel's (lodtensor/backend/_special.py), so
 * both give the same values to float32 rounding:
 *
 *   gelu(x) = (x + |x| - |x| erfc(|x| / sqrt 2)) / 2,
 *   erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2),  t = 1 / (1 + p z),  z >= 0
 *
 * (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7), with exp(-z^2) by a range reduction
 * to [-ln 2 / 2, ln 2 / 2], a degree-7 polynomial (Cephes' expf coefficients, about 1 ulp) and
 * the power of two built in the exponent bits. Written on 64-byte vectors (GCC / Clang vector
 * extensions: AVX-512 and AVX2 clones on x86-64 Linux, chosen at load time), so the compiler
 * emits SIMD code for all of it; the GIL is released while it runs. NaN and infinities give NaN, as the NumPy kernel (torch
 * gives NaN for both infinities too).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
#define MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MULTIVERSION
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi" /* vectors passed between static inline functions only */
#endif

typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
#define LANES 16

#define SPLAT(c) ((vf){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c})

/* exp(y) for y <= 0 (y below -87 gives exp(-87), under 1.7e-38: the products it feeds are as
 * good as zero there). */
static inline __attribute__((always_inline)) vf exp_nonpositive(vf y)
{
    y = (vf)(((vi)y & (vi)(y > SPLAT(-87.0f))) | ((vi)SPLAT(-87.0f) & ~(vi)(y > SPLAT(-87.0f))));
    vf scaled = y * SPLAT(1.44269504088896341f) - SPLAT(0.5f); /* y <= 0: truncation rounds */
    vi n = __builtin_convertvector(scaled, vi);
    vf nf = __builtin_convertvector(n, vf);
    vf r = y - nf * SPLAT(0.693359375f) - nf * SPLAT(-2.12194440e-4f);
    vf p = SPLAT(1.9875691500e-4f);
    p = p * r + SPLAT(1.3981999507e-3f);
    p = p * r + SPLAT(8.3334519073e-3f);
    p = p * r + SPLAT(4.1665795894e-2f);
    p = p * r + SPLAT(1.6666665459e-1f);
    p = p * r + SPLAT(5.0000001201e-1f);
    p = p * r * r + r + SPLAT(1.0f);
    vi bits = (n + 127) << 23;
    return p * (vf)bits;
}

static inline __attribute__((always_inline)) vf gelu_vector(vf x)
{
    vf ax = (vf)(((vi)x & (vi)SPLAT(-0.0f)) ^ (vi)x); /* |x|: the sign bit cleared */
    vf z = ax * SPLAT(0.7071067811865476f);
    vf t = SPLAT(1.0f) / (SPLAT(1.0f) + SPLAT(0.3275911f) * z);
    vf poly = SPLAT(1.061405429f);
    poly = poly * t + SPLAT(-1.453152027f);
    poly = poly * t + SPLAT(1.421413741f);
    poly = poly * t + SPLAT(-0.284496736f);
    poly = poly * t + SPLAT(0.254829592f);
    vf erfc = poly * t * exp_nonpositive(-(z * z));
    return SPLAT(0.5f) * ((x + ax) - ax * erfc);
}

MULTIVERSION static void gelu_loop(const float *x, float *out, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    vf v;
    for (; i + LANES <= n; i += LANES) {
        __builtin_memcpy(&v, x + i, sizeof(v));
        v = gelu_vector(v);
        __builtin_memcpy(out + i, &v, sizeof(v));
    }
    if (i < n) { /* the last values through the same vector code, padded with zeros */
        v = SPLAT(0.0f);
        __builtin_memcpy(&v, x + i, (size_t)(n - i) * sizeof(float));
        v = gelu_vector(v);
        __builtin_memcpy(out + i, &v, (size_t)(n - i) * sizeof(float));
    }
}

static PyObject *gelu_f32(PyObject *self, PyObject *args)
{
    PyObject *x_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OO:gelu_f32", &x_obj, &out_obj)) return NULL;
    Py_buffer x, out;
    if (PyObject_GetBuffer(x_obj, &x, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    PyObject *result = NULL;
    if (x.itemsize != 4 || out.itemsize != 4) {
        PyErr_Format(PyExc_ValueError, "gelu_f32: x and out must have 4-byte (float32) items, got %zd and %zd",
                     x.itemsize, out.itemsize);
    } else if (x.len != out.len) {
        PyErr_Format(PyExc_ValueError, "gelu_f32: x has %zd bytes and out %zd; they must match", x.len, out.len);
    } else {
        Py_BEGIN_ALLOW_THREADS
        gelu_loop((const float *)x.buf, (float *)out.buf, x.len / 4);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef METHODS[] = {
    {"gelu_f32", gelu_f32, METH_VARARGS, "gelu_f32(x, out): out = gelu(x) for float32 buffers of one length."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_cgelu", "Compiled GELU.", -1, METHODS};

PyMODINIT_FUNC PyInit__cgelu(void) { return PyModule_Create(&MODULE); }

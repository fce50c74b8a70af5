/* The instruction sets the compiled kernels are built for, shared by _csegment.c and _cpointwise.c.
 *
 * Each kernel is compiled once per vector width, for the instruction set whose registers have that
 * width: vectors wider than the registers are lowered to scalar code for compares and selects
 * (measured: relu 8x, segment max 10x slower). The module picks the widest set the CPU supports at
 * import; `simd()` names it and the sets available, `select_simd(name)` switches (for tests).
 * Also the check of a buffer's number format (`native_type`, `holds_numbers`), for both modules.
 */
#ifndef LODTENSOR_CSIMD_H
#define LODTENSOR_CSIMD_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define X86_SIMD 1
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define X86_SIMD 0
#endif

/* Whether this CPU runs the instruction set `name` ("avx512f", "avx2", "baseline"). */
static int simd_supported(const char *name)
{
#if X86_SIMD
    __builtin_cpu_init();
    if (strcmp(name, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
    if (strcmp(name, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return strcmp(name, "baseline") == 0;
}

/* (the set in use, the sets of `names` this CPU runs) */
static PyObject *simd_report(const char *in_use, const char *const *names, int n)
{
    PyObject *runnable = PyList_New(0);
    if (runnable == NULL) return NULL;
    for (int k = 0; k < n; k++) {
        if (!simd_supported(names[k])) continue;
        PyObject *name = PyUnicode_FromString(names[k]);
        if (name == NULL || PyList_Append(runnable, name) < 0) {
            Py_XDECREF(name);
            Py_DECREF(runnable);
            return NULL;
        }
        Py_DECREF(name);
    }
    PyObject *tuple = PyList_AsTuple(runnable);
    Py_DECREF(runnable);
    return tuple == NULL ? NULL : Py_BuildValue("(sN)", in_use, tuple);
}

/* The index among `names` of `name` where this CPU runs it, else -1 with a ValueError set. */
static int simd_index(const char *name, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (strcmp(names[k], name) == 0 && simd_supported(name)) return k;
    PyErr_Format(PyExc_ValueError, "select_simd: '%s' is not an instruction set this build and CPU run", name);
    return -1;
}

/* simd() and select_simd(name) of a module whose instruction sets are NAMES[0:N] (widest first)
 * and whose kernels run those of NAMES[ACTIVE]; SIMD_METHODS lists them in its method table. */
#define DEFINE_SIMD_FUNCTIONS(NAMES, N, ACTIVE)                                                    \
    static PyObject *simd(PyObject *self, PyObject *args) { return simd_report(NAMES[ACTIVE], NAMES, N); } \
    static PyObject *select_simd(PyObject *self, PyObject *args)                                  \
    {                                                                                              \
        const char *name;                                                                          \
        if (!PyArg_ParseTuple(args, "s:select_simd", &name)) return NULL;                          \
        int k = simd_index(name, NAMES, N), previous = ACTIVE;                                     \
        if (k < 0) return NULL;                                                                    \
        ACTIVE = k;                                                                                \
        return PyUnicode_FromString(NAMES[previous]);                                              \
    }
#define SIMD_METHODS                                                                               \
    {"simd", simd, METH_NOARGS, "simd() -> (the instruction set in use, those this build and CPU can run)."}, \
    {"select_simd", select_simd, METH_VARARGS,                                                     \
     "select_simd(name) -> the previous one: run the kernels of another instruction set (for tests)."}

/* The type code of a struct-module format in native byte order ("f", "=f" (NumPy's spelling for an
 * unaligned array), "@f", or "<f" on a little-endian machine), or NULL for another byte order. */
static inline const char *native_type(const char *format)
{
    const uint16_t probe = 1;
    const char own = *(const char *)&probe ? '<' : '>';
    if (format[0] == '@' || format[0] == '=' || format[0] == own) return format + 1;
    if (format[0] == '<' || format[0] == '>' || format[0] == '!') return NULL;
    return format;
}

/* Whether buffer `v` (got with PyBUF_FORMAT) holds native single numbers of class `cls`: 'f' a float,
 * 'i' an integer (signed or not: a wrapping sum has the same bits; the callers check the item size). */
static inline int holds_numbers(const Py_buffer *v, char cls)
{
    const char *t = native_type(v->format ? v->format : "B");
    if (t == NULL || t[0] == 0 || t[1] != 0) return 0;
    return strchr(cls == 'f' ? "efd" : "bBhHiIlLqQnN", t[0]) != NULL;
}

/* The first (widest) of `names` this CPU runs; the last is always "baseline". */
static int simd_widest(const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (simd_supported(names[k])) return k;
    return n - 1;
}
#endif

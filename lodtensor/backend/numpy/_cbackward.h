/* The backward kernels of _csegment.c (included there, after its vector types and SELECT): segment
 * softmax's and segment max's / min's gradients for the torch backend's CPU autograd, each over a run
 * of sequences lo:hi, two passes over each sequence's rows in address order (the second from cache
 * where the sequence fits), a row of w scratch values in L1. Loads and stores go through memcpy: rows
 * need not be aligned. */
#pragma once

/* Segment softmax's backward, out = y * (g - dot), dot the sum over the sequence's rows of g * y per
 * column: two passes over each sequence's rows in address order, the first adding g * y into `dot`
 * (one row of w values, in L1), the second writing out (the sequence's rows read again from cache
 * where they fit). Each column adds in row order. */
#define DEFINE_SOFTMAX_GRAD(W, ATTR, T)                                                                    \
    ATTR static void softmax_grad##W##_##T(const T *g, const T *y, const int64_t *off, T *out, T *dot,    \
                                           int64_t lo, int64_t hi, int64_t w)                             \
    {                                                                                                    \
        const int64_t lanes = (int64_t)(sizeof(v##W##_##T) / sizeof(T));                                \
        v##W##_##T a, b, d;                                                                              \
        for (int64_t j = lo; j < hi; j++) {                                                              \
            const int64_t s = off[j], e = off[j + 1];                                                    \
            if (e == s) continue;                                                                        \
            memset(dot, 0, (size_t)w * sizeof(T));                                                       \
            for (int64_t r = s; r < e; r++) {                                                            \
                const T *gr = g + r * w, *yr = y + r * w;                                                \
                int64_t c = 0;                                                                           \
                for (; c + lanes <= w; c += lanes) {                                                     \
                    __builtin_memcpy(&a, gr + c, sizeof(a));                                             \
                    __builtin_memcpy(&b, yr + c, sizeof(b));                                             \
                    __builtin_memcpy(&d, dot + c, sizeof(d));                                            \
                    d += a * b;                                                                          \
                    __builtin_memcpy(dot + c, &d, sizeof(d));                                            \
                }                                                                                        \
                for (; c < w; c++) dot[c] += gr[c] * yr[c];                                              \
            }                                                                                            \
            for (int64_t r = s; r < e; r++) {                                                            \
                const T *gr = g + r * w, *yr = y + r * w;                                                \
                T *o = out + r * w;                                                                      \
                int64_t c = 0;                                                                           \
                for (; c + lanes <= w; c += lanes) {                                                     \
                    __builtin_memcpy(&a, gr + c, sizeof(a));                                             \
                    __builtin_memcpy(&b, yr + c, sizeof(b));                                             \
                    __builtin_memcpy(&d, dot + c, sizeof(d));                                            \
                    a = b * (a - d);                                                                     \
                    __builtin_memcpy(o + c, &a, sizeof(a));                                              \
                }                                                                                        \
                for (; c < w; c++) o[c] = yr[c] * (gr[c] - dot[c]);                                      \
            }                                                                                            \
        }                                                                                                \
    }

typedef void (*grad_fn)(const void *, const void *, const int64_t *, void *, void *, int64_t, int64_t, int64_t);

/* Segment max's and min's backward, as scatter_reduce's: each sequence's gradient g[j] shared evenly,
 * per column, among the rows equal to its result m[j] (a NaN result matches no row: zeros). Two passes
 * over the sequence's rows: count the rows equal to m[j] into `share` (one row, in L1), turn it into
 * g[j] / count, then write share or 0 by row. */
#define DEFINE_EXTREME_GRAD(W, ATTR, T, M)                                                                 \
    ATTR static void extreme_grad##W##_##T(const T *x, const T *m, const T *g, const int64_t *off, T *out,   \
                                           T *share, int64_t lo, int64_t hi, int64_t w)                   \
    {                                                                                                    \
        const int64_t lanes = (int64_t)(sizeof(v##W##_##T) / sizeof(T));                                \
        v##W##_##T a, b, c, one, zero;                                                                   \
        for (int64_t i = 0; i < lanes; i++) { one[i] = 1; zero[i] = 0; }                                 \
        for (int64_t j = lo; j < hi; j++) {                                                              \
            const int64_t s = off[j], e = off[j + 1];                                                    \
            const T *mj = m + j * w, *gj = g + j * w;                                                    \
            if (e == s) continue;                                                                        \
            memset(share, 0, (size_t)w * sizeof(T));                                                     \
            for (int64_t r = s; r < e; r++) {                                                            \
                const T *xr = x + r * w;                                                                 \
                int64_t k = 0;                                                                           \
                for (; k + lanes <= w; k += lanes) {                                                     \
                    __builtin_memcpy(&a, xr + k, sizeof(a));                                             \
                    __builtin_memcpy(&b, mj + k, sizeof(b));                                             \
                    __builtin_memcpy(&c, share + k, sizeof(c));                                          \
                    c += SELECT(v##W##_##T, v##W##_##M, (v##W##_##M)(a == b), one, zero);                \
                    __builtin_memcpy(share + k, &c, sizeof(c));                                          \
                }                                                                                        \
                for (; k < w; k++) share[k] += xr[k] == mj[k] ? (T)1 : (T)0;                             \
            }                                                                                            \
            for (int64_t k = 0; k < w; k++) share[k] = gj[k] / (share[k] > 1 ? share[k] : (T)1);         \
            for (int64_t r = s; r < e; r++) {                                                            \
                const T *xr = x + r * w;                                                                 \
                T *o = out + r * w;                                                                      \
                int64_t k = 0;                                                                           \
                for (; k + lanes <= w; k += lanes) {                                                     \
                    __builtin_memcpy(&a, xr + k, sizeof(a));                                             \
                    __builtin_memcpy(&b, mj + k, sizeof(b));                                             \
                    __builtin_memcpy(&c, share + k, sizeof(c));                                          \
                    c *= SELECT(v##W##_##T, v##W##_##M, (v##W##_##M)(a == b), one, zero);                \
                    __builtin_memcpy(o + k, &c, sizeof(c));                                              \
                }                                                                                        \
                for (; k < w; k++) o[k] = (xr[k] == mj[k] ? (T)1 : (T)0) * share[k];                    \
            }                                                                                            \
        }                                                                                                \
    }

typedef void (*extreme_grad_fn)(const void *, const void *, const void *, const int64_t *, void *, void *, int64_t,
                                int64_t, int64_t);

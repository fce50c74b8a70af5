// Pad (flat rows -> [n, maxlen, D]) and unpad (the inverse), as plain copies of
// W-byte words (W = the dtype's itemsize: 1, 2, 4 or 8), so one instantiation per
// word size serves every dtype. Threads cover `cw` columns and LT_BLOCK / cw rows of
// a block; a thread walks its row's columns in steps of cw, so reads and writes are
// coalesced along D for any D (D = 1 puts 256 consecutive rows in a block).
#include "common.cuh"

// out[b, t, :] = t < len_b ? x[off[b] + t, :] : pad  for every b < n, t < maxlen.
template <typename W>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_pad(const W* __restrict__ x, const i64* __restrict__ off, W* __restrict__ out,
       i64 n, i64 maxlen, i64 D, int log2cw, W pad) {
    const int cw = 1 << log2cw;
    const int per_block = LT_BLOCK >> log2cw;
    const i64 rows = n * maxlen;
    const int c0 = threadIdx.x & (cw - 1);
    for (i64 R = (i64)blockIdx.x * per_block + (threadIdx.x >> log2cw); R < rows; R += (i64)gridDim.x * per_block) {
        const i64 b = R / maxlen;
        const i64 t = R - b * maxlen;
        const i64 start = off[b];
        W* dst = out + R * D;
        if (t < off[b + 1] - start) {
            const W* src = x + (start + t) * D;
            for (i64 c = c0; c < D; c += cw) dst[c] = src[c];
        } else {
            for (i64 c = c0; c < D; c += cw) dst[c] = pad;
        }
    }
}

// out[r, :] = padded[b, r - off[b], :] for the sequence b holding flat row r.
template <typename W>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_unpad(const W* __restrict__ padded, const i64* __restrict__ off, W* __restrict__ out,
         i64 n, i64 maxlen, i64 D, int log2cw) {
    const int cw = 1 << log2cw;
    const int per_block = LT_BLOCK >> log2cw;
    const i64 rows = off[n];
    const int c0 = threadIdx.x & (cw - 1);
    for (i64 r = (i64)blockIdx.x * per_block + (threadIdx.x >> log2cw); r < rows; r += (i64)gridDim.x * per_block) {
        const i64 b = lt_find_segment(off, n, r);
        const W* src = padded + (b * maxlen + (r - off[b])) * D;
        W* dst = out + r * D;
        for (i64 c = c0; c < D; c += cw) dst[c] = src[c];
    }
}

// Pad (flat rows -> [n, maxlen, D]) and unpad (the inverse), as plain copies of
// W-byte words (W = the dtype's itemsize: 1, 2, 4 or 8), so one instantiation per
// word size serves every dtype. Reads and writes are coalesced along D for any D.
#include "common.cuh"

// Threads cover `cw` columns and LT_BLOCK / cw output rows of a block; a thread walks
// its row's columns in steps of cw (D = 1 puts 256 consecutive rows in a block).
// out[b, t, :] = t < len_b ? x[off[b] + t, :] : pad[:]  for every b < n, t < maxlen
// (pad: one row of D words on the device, so a pad value given as a device array costs no sync).
template <typename W>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_pad(const W* __restrict__ x, const i64* __restrict__ off, W* __restrict__ out,
       i64 n, i64 maxlen, i64 D, int log2cw, const W* __restrict__ pad) {
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
            for (i64 c = c0; c < D; c += cw) dst[c] = pad[c];
        }
    }
}

// out[r, :] = padded[b, r - off[b], :] for the sequence b holding flat row r. Rows are
// cut into the pieces of segment.cu (`plan`, from lt_piece_counts + a scan): one warp per
// piece finds its sequence once (a ballot search) and copies up to `chunk` rows, lanes
// over cw columns and 32 / cw rows, so no per-row search and coalesced for any D.
template <typename W>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_unpad(const W* __restrict__ padded, const i64* __restrict__ off, const i64* __restrict__ plan,
         W* __restrict__ out, i64 n, i64 maxlen, i64 D, int log2cw, i64 chunk, int tiles_first) {
    const lt_lanes lanes(log2cw);
    lt_each_piece(off, plan, n, D, lanes, chunk, 0, tiles_first, [&](const lt_piece& q, i64 col) {
        if (col >= D) return;  // after the search: every lane took part in its ballots
        const W* src = padded + (q.s * maxlen - q.start) * D + col;
#pragma unroll 4
        for (i64 r = q.a + lanes.row; r < q.b; r += lanes.rows) out[r * D + col] = src[r * D];
    });
}

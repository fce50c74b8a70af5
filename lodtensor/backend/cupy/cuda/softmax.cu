// Segment softmax over the rows of each sequence, per column, and its backward, on the pieces and
// the plan of segment.cu (lt_piece_counts; the three prefix sums), for skewed LoDs: no device-to-host
// synchronisation; an empty sequence writes nothing.
#include "common.cuh"

// One read for the running (max, sum of exp) per column, one read + write to apply.
// Two ways. Three passes (stats, combine, apply), each warp a piece, for any LoD. And, where the
// sequences are long enough to keep a block busy (the host decides: _launch.segment_softmax),
// lt_softmax_block for every one-piece sequence, its second read served by L2, while the
// three-pass kernels take only the multi-piece sequences (multi_only: pieces numbered by the
// plan's partial slots, which count only theirs).
// double exp needs many registers: unrolling it would spill under the 64-register cap
#define LT_EXP_UNROLL(A) (sizeof(A) == 4 ? 4 : 1)

template <typename A> struct lt_online {
    A m, z;  // running max and sum of exp(x - m); z == 0 means nothing seen yet
    __device__ __forceinline__ void start() { m = lt_limits<A>::lowest(); z = A(0); }
    __device__ __forceinline__ void add(A v) {
        // a +inf v makes z NaN (v - v): NumPy's and torch's sum of exp(x - inf) holds exp(inf - inf) = NaN,
        // so the whole column is NaN; z = 1 there gave 0 for its finite rows where one lane saw all of it
        if (v > m) { z = v == lt_limits<A>::highest() ? v - v : z * lt_exp(m - v) + A(1); m = v; }
        // a -inf v adds exp(-inf - m) = 0, also while m is still -inf (exp(-inf + inf) would be NaN: a
        // masked row read first by a lane spoilt its column); a column of -inf only keeps z == 0, so
        // its rows become exp(NaN) / 0 = NaN at the apply, as in NumPy. A NaN v makes z NaN.
        else if (v != lt_limits<A>::lowest()) z += lt_exp(v - m);
    }
    __device__ __forceinline__ void merge(A m2, A z2) {
        if (z2 == A(0)) return;
        if (z == A(0)) { m = m2; z = z2; return; }
        const A mm = m2 > m ? m2 : m;
        z = z * lt_exp(m - mm) + z2 * lt_exp(m2 - mm);
        m = mm;
    }
};

// The running pairs of the lanes of a warp that share a column merged (as lt_warp_fold).
template <typename A, int V>
__device__ __forceinline__ void lt_online_warp_fold(lt_online<A> (&st)[V], const lt_lanes& lanes) {
    for (int o = lanes.cw; o < 32; o <<= 1) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const A m2 = __shfl_xor_sync(LT_FULL, st[j].m, o);
            const A z2 = __shfl_xor_sync(LT_FULL, st[j].z, o);
            st[j].merge(m2, z2);
        }
    }
}

// out[r] = exp(x[r] - m) * inv for one lane's column over rows r, r + step, ... < end.
template <typename T, typename A, int V>
__device__ __forceinline__ void lt_write_softmax(const lt_pack<T, V>* __restrict__ x, const A (&m)[V],
                                                 const A (&inv)[V], i64 r, i64 end, i64 step, i64 Dv, i64 col,
                                                 lt_pack<A, V>* __restrict__ out) {
#pragma unroll LT_EXP_UNROLL(A)
    for (; r < end; r += step) {
        const lt_pack<T, V> v = x[r * Dv + col];
        lt_pack<A, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = lt_exp(A(v.v[j]) - m[j]) * inv[j];
        out[r * Dv + col] = o;
    }
}

// The running (max, sum of exp) of one lane's column over rows r, r + step, ... < end.
template <typename T, typename A, int V>
__device__ __forceinline__ void lt_online_rows(const lt_pack<T, V>* __restrict__ x, i64 r, i64 end, i64 step, i64 Dv,
                                               i64 col, lt_online<A> (&st)[V]) {
#pragma unroll LT_EXP_UNROLL(A)
    for (; r < end; r += step) {
        const lt_pack<T, V> v = x[r * Dv + col];
#pragma unroll
        for (int j = 0; j < V; ++j) st[j].add(A(v.v[j]));
    }
}

template <typename T, typename A, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_stats(const T* __restrict__ x_, const i64* __restrict__ off, const i64* __restrict__ plan,
                 A* __restrict__ M, A* __restrict__ Z, A* __restrict__ pm, A* __restrict__ pz,
                 i64 n, i64 D, int log2cw, i64 chunk, int multi_only, int tiles_first) {
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    // multi_only: see lt_softmax_block
    lt_each_piece(off, plan, n, Dv, lanes, chunk, multi_only, tiles_first, [&](const lt_piece& q, i64 col) {
        const i64 pieces = plan[q.s + 1] - plan[q.s];
        lt_online<A> st[V];
#pragma unroll
        for (int j = 0; j < V; ++j) st[j].start();
        if (col < Dv) lt_online_rows(x, q.a + lanes.row, q.b, lanes.rows, Dv, col, st);
        lt_online_warp_fold(st, lanes);
        if (lanes.row == 0 && col < Dv) {
            const i64 at = (pieces == 1 ? q.s * D : (plan[n + 1 + q.s] + q.k) * D) + col * V;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                (pieces == 1 ? M : pm)[at + j] = st[j].m;
                (pieces == 1 ? Z : pz)[at + j] = st[j].z;
            }
        }
    });
}

template <typename A>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_combine(const i64* __restrict__ plan, const A* __restrict__ pm, const A* __restrict__ pz,
                   A* __restrict__ M, A* __restrict__ Z, i64 n, i64 D) {
    __shared__ A tm[LT_WARPS][32];
    __shared__ A tz[LT_WARPS][32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const i64* __restrict__ multi = plan + 2 * (n + 1);
    const i64 tiles = (D + 31) >> 5;
    for (i64 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        const i64 col = (tile << 5) + lane;
        for (i64 j = blockIdx.x; j < multi[n]; j += gridDim.x) {  // uniform across the block
            const lt_multi q = lt_find_multi(plan, n, j);
            lt_online<A> st;
            st.start();
            if (col < D)
                for (i64 k = warp; k < q.pieces; k += LT_WARPS)
                    st.merge(pm[(q.slot + k) * D + col], pz[(q.slot + k) * D + col]);
            tm[warp][lane] = st.m;
            tz[warp][lane] = st.z;
            __syncthreads();
            for (int h = LT_WARPS / 2; h > 0; h >>= 1) {
                if (warp < h) {
                    lt_online<A> t;
                    t.m = tm[warp][lane];
                    t.z = tz[warp][lane];
                    t.merge(tm[warp + h][lane], tz[warp + h][lane]);
                    tm[warp][lane] = t.m;
                    tz[warp][lane] = t.z;
                }
                __syncthreads();
            }
            if (warp == 0 && col < D) {
                M[q.s * D + col] = tm[0][lane];
                Z[q.s * D + col] = tz[0][lane];
            }
            __syncthreads();
        }
    }
}

// out[r, c] = exp(x[r, c] - M[s, c]) / Z[s, c], one warp per piece as in pass 1.
template <typename T, typename A, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_apply(const T* __restrict__ x_, const i64* __restrict__ off, const i64* __restrict__ plan,
                 const A* __restrict__ M, const A* __restrict__ Z, A* __restrict__ out,
                 i64 n, i64 D, int log2cw, i64 chunk, int multi_only, int tiles_first) {
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    lt_pack<A, V>* __restrict__ y = reinterpret_cast<lt_pack<A, V>*>(out);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    lt_each_piece(off, plan, n, Dv, lanes, chunk, multi_only, tiles_first, [&](const lt_piece& q, i64 col) {
        if (col >= Dv) return;  // after the warp's search: every lane took part in its ballots
        A m[V], inv[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
            m[j] = M[q.s * D + col * V + j];
            inv[j] = A(1) / Z[q.s * D + col * V + j];
        }
        lt_write_softmax(x, m, inv, q.a + lanes.row, q.b, lanes.rows, Dv, col, y);
    });
}

// Softmax of each one-piece sequence (plan: exactly one piece) by a whole block: its 8 warps split the
// rows, each warp's running (max, sum of exp) per column is merged in shared memory, then the same
// warps apply the result to the rows they have just read. Between the two reads of a row lie only
// the rows of the blocks resident at the time (at most 4 per SM x `chunk` rows: 4 x 132 x 128 KiB
// for float32 D = 128 on an H100, about 21 MB for its mean of 80 rows), which fit the L2 cache: the
// data crosses HBM once each way instead of twice in and once out. Blocks stride over the
// sequences (no search), over the column tiles as the piece kernels do (lt_grid).
template <typename T, typename A, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_block(const T* __restrict__ x_, const i64* __restrict__ off, const i64* __restrict__ plan,
                 A* __restrict__ out, i64 n, i64 D, int log2cw, int tiles_first) {
    __shared__ A sm[LT_WARPS][32][V];
    __shared__ A sz[LT_WARPS][32][V];
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    lt_pack<A, V>* __restrict__ y = reinterpret_cast<lt_pack<A, V>*>(out);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    const int warp = threadIdx.x >> 5;
    const lt_block_rows rows(lanes);
    lt_each_sequence(off, plan, n, Dv, lanes, tiles_first, [&](i64 s, i64 a, i64 b, i64 col) {
        lt_online<A> st[V];
#pragma unroll
        for (int j = 0; j < V; ++j) st[j].start();
        if (col < Dv) lt_online_rows(x, a + rows.first, b, rows.step, Dv, col, st);
        lt_online_warp_fold(st, lanes);
        if (lanes.row == 0) {
#pragma unroll
            for (int j = 0; j < V; ++j) {
                sm[warp][lanes.lane_col][j] = st[j].m;
                sz[warp][lanes.lane_col][j] = st[j].z;
            }
        }
        __syncthreads();
        A m[V], inv[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
            lt_online<A> t;
            t.start();
            for (int w = 0; w < LT_WARPS; ++w) t.merge(sm[w][lanes.lane_col][j], sz[w][lanes.lane_col][j]);
            m[j] = t.m;
            inv[j] = A(1) / t.z;
        }
        __syncthreads();  // the next sequence overwrites sm, sz
        if (col < Dv) lt_write_softmax(x, m, inv, a + rows.first, b, rows.step, Dv, col, y);
    });
}

// The softmax of each sequence of at most short_max rows, one thread each: the running (max, sum
// of exp) over its rows, then exp(x - max) / sum (the rows stay in L1 between the two reads).
template <typename T, typename A>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_short(const T* __restrict__ x, const i64* __restrict__ off, A* __restrict__ out,
                 i64 n, i64 D, i64 short_max) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x; s < n; s += stride) {
        const i64 a = off[s], b = off[s + 1];
        if (b - a > short_max) continue;
        for (i64 c = 0; c < D; ++c) {
            lt_online<A> st;
            st.start();
            for (i64 r = a; r < b; ++r) st.add(A(x[r * D + c]));
            const A inv = A(1) / st.z;
            for (i64 r = a; r < b; ++r) out[r * D + c] = lt_exp(A(x[r * D + c]) - st.m) * inv;
        }
    }
}

// -- backward: dx = y * (g - dot), dot[s, c] the sum over sequence s's rows of g * y -----------------
// The same two routes as the forward: a block per one-piece sequence (lt_softmax_grad_block: the
// second read of g and y from L2), or the pieces (segment.cu's lt_segment_dot, its combine pass, then
// lt_softmax_grad_apply); sequences of a few narrow rows one thread each (lt_softmax_grad_short).
// The unfused backward (products, a segment sum, a gather by segment ids, a difference, a product)
// reads 7 and writes 4 arrays of the data's size; these read 2 (from HBM) and write 1.

// out[r] = y[r] * (g[r] - dot) for one lane's column over rows r, r + step, ... < end.
template <typename T, int V>
__device__ __forceinline__ void lt_write_grads(const lt_pack<T, V>* __restrict__ g, const lt_pack<T, V>* __restrict__ y,
                                               const T (&dot)[V], i64 r, i64 end, i64 step, i64 Dv, i64 col,
                                               lt_pack<T, V>* __restrict__ out) {
#pragma unroll 4
    for (; r < end; r += step) {
        const lt_pack<T, V> gv = g[r * Dv + col], yv = y[r * Dv + col];
        lt_pack<T, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = yv.v[j] * (gv.v[j] - dot[j]);
        out[r * Dv + col] = o;
    }
}

// out[r, c] = y[r, c] * (g[r, c] - dot[s, c]) over the pieces, one warp each, as lt_softmax_apply.
template <typename T, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_grad_apply(const T* __restrict__ g_, const T* __restrict__ y_, const i64* __restrict__ off,
                      const i64* __restrict__ plan, const T* __restrict__ dot, T* __restrict__ out_,
                      i64 n, i64 D, int log2cw, i64 chunk, int multi_only, int tiles_first) {
    const lt_pack<T, V>* __restrict__ g = reinterpret_cast<const lt_pack<T, V>*>(g_);
    const lt_pack<T, V>* __restrict__ y = reinterpret_cast<const lt_pack<T, V>*>(y_);
    lt_pack<T, V>* __restrict__ out = reinterpret_cast<lt_pack<T, V>*>(out_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    lt_each_piece(off, plan, n, Dv, lanes, chunk, multi_only, tiles_first, [&](const lt_piece& q, i64 col) {
        if (col >= Dv) return;  // after the warp's search: every lane took part in its ballots
        const lt_pack<T, V> d = reinterpret_cast<const lt_pack<T, V>*>(dot)[q.s * Dv + col];
        lt_write_grads(g, y, d.v, q.a + lanes.row, q.b, lanes.rows, Dv, col, out);
    });
}

// The backward of each one-piece sequence by a whole block, as lt_softmax_block: the 8 warps sum
// g * y over its rows, the sums meet in shared memory (lt_block_fold), then each warp writes the rows
// it has just read, their second read served by L2.
template <typename T, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_grad_block(const T* __restrict__ g_, const T* __restrict__ y_, const i64* __restrict__ off,
                      const i64* __restrict__ plan, T* __restrict__ out_, i64 n, i64 D, int log2cw, int tiles_first) {
    __shared__ T tree[LT_WARPS][32][V];
    const lt_pack<T, V>* __restrict__ g = reinterpret_cast<const lt_pack<T, V>*>(g_);
    const lt_pack<T, V>* __restrict__ y = reinterpret_cast<const lt_pack<T, V>*>(y_);
    lt_pack<T, V>* __restrict__ out = reinterpret_cast<lt_pack<T, V>*>(out_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    const lt_block_rows rows(lanes);
    lt_each_sequence(off, plan, n, Dv, lanes, tiles_first, [&](i64, i64 a, i64 b, i64 col) {
        T dot[V];
#pragma unroll
        for (int j = 0; j < V; ++j) dot[j] = T(0);
        if (col < Dv) lt_fold_rows<lt_add, LT_PRODUCTS>(g, y, a + rows.first, b, rows.step, Dv, col, dot);
        lt_block_fold<lt_add, true>(dot, tree, lanes);
        if (col < Dv) lt_write_grads(g, y, dot, a + rows.first, b, rows.step, Dv, col, out);
    });
}

// The backward of each sequence of at most short_max rows, one thread each (the rows stay in L1
// between the two reads).
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_softmax_grad_short(const T* __restrict__ g, const T* __restrict__ y, const i64* __restrict__ off,
                      T* __restrict__ out, i64 n, i64 D, i64 short_max) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x; s < n; s += stride) {
        const i64 a = off[s], b = off[s + 1];
        if (b - a > short_max) continue;
        for (i64 c = 0; c < D; ++c) {
            T dot = T(0);
            for (i64 r = a; r < b; ++r) dot += g[r * D + c] * y[r * D + c];
            for (i64 r = a; r < b; ++r) out[r * D + c] = y[r * D + c] * (g[r * D + c] - dot);
        }
    }
}

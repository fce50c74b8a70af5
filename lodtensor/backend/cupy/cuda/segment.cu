// Segment reductions (sum, mean, max, min) over the rows of each sequence, for skewed LoDs: no
// device-to-host synchronisation, empty sequences defined. (Segment softmax, on the same pieces and
// plan: softmax.cu.)
//
// Work is cut into pieces (common.cuh: lt_lanes, lt_find_piece): a sequence of len rows is
// max(1, ceil(len / chunk)) pieces of at most `chunk` rows, and one warp reduces one piece (so a
// block of 8 warps serves many short sequences at once). Rows of D = V * k values are read as k
// packs of V values (common.cuh: lt_pack; 16-byte loads), V = 1 where D is not a multiple.
// `plan` holds three exclusive prefix sums over sequences, plan[0..n] = first piece of each
// sequence, plan[n+1..2n+1] = first slot of each multi-piece sequence in the `partial` workspace
// and plan[2n+2..3n+2] = the ordinal of each multi-piece sequence among them. A one-piece sequence
// is finished by its warp; a long sequence's pieces leave partials that the combine kernel reduces
// with one block per (multi-piece sequence, 32 columns), found by its ordinal (so millions of short
// sequences cost the combine pass nothing): warps stride over the pieces, then a shared-memory tree.
//
// Narrow rows (a few values) in short sequences would leave most of a warp idle: there, sequences
// of at most `short_max` rows get no piece (lt_piece_counts) and the *_short kernels give each one
// thread, neighbouring threads reading neighbouring rows; only the long sequences are planned.
#include "common.cuh"

#define OP_SUM 0
#define OP_MAX 1
#define OP_MIN 2
#define OP_MEAN 3

template <int OP, typename A> struct lt_reduce_op {
    static __device__ __forceinline__ A identity() {
        return OP == OP_MAX ? lt_limits<A>::lowest() : (OP == OP_MIN ? lt_limits<A>::highest() : A(0));
    }
    // max/min propagate NaN, as NumPy's maximum/minimum do (v != v only for a NaN)
    static __device__ __forceinline__ A combine(A acc, A v) {
        if (OP == OP_MAX) return (v > acc || v != v) ? v : acc;
        if (OP == OP_MIN) return (v < acc || v != v) ? v : acc;
        return acc + v;
    }
    static __device__ __forceinline__ A finish(A acc, i64 len, A empty) {
        if (len == 0) return empty;
        if (OP == OP_MEAN) return acc / A(len);
        return acc;
    }
};

// Piece counts per sequence (plan[1..n], plan[n+2..2n+1], plan[2n+3..3n+2]; zeros at plan[0],
// plan[n+1], plan[2n+2]); an inclusive scan of each third then gives the three prefix sums. Sequences of at most
// `short_max` rows get no piece (a *_short kernel serves them; short_max < 0: every sequence has one).
extern "C" __global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_piece_counts(const i64* __restrict__ off, i64 n, i64 chunk, i64 short_max, i64* __restrict__ plan) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x; s <= n; s += stride) {
        if (s == 0) {
            plan[0] = 0;
            plan[n + 1] = 0;
            plan[2 * n + 2] = 0;
            continue;
        }
        const i64 len = off[s] - off[s - 1];
        const i64 pieces = len <= short_max ? 0 : (len > chunk ? (len + chunk - 1) / chunk : 1);
        plan[s] = pieces;
        plan[n + 1 + s] = pieces > 1 ? pieces : 0;
        plan[2 * n + 2 + s] = pieces > 1 ? 1 : 0;
    }
}

// lt_piece_counts and the inclusive scans of its thirds in one launch, for few sequences
// (_tuning.PLAN_ONE_BLOCK), where a count kernel and three scans cost more launches than work: one
// block walks the sequences LT_BLOCK * LT_PLAN_ITEMS at a time, each thread LT_PLAN_ITEMS consecutive
// ones (summed serially, then counted again to write them), then an exclusive scan of the threads' sums (warp shuffles, then the warps'
// totals in shared memory); the running totals carry from one round to the next. Launch (1), (LT_BLOCK).
#define LT_PLAN_ITEMS 8
__device__ __forceinline__ i64 lt_pieces_of(const i64* __restrict__ off, i64 s, i64 n, i64 chunk, i64 short_max) {
    if (s < 1 || s > n) return 0;
    const i64 len = off[s] - off[s - 1];
    return len <= short_max ? 0 : (len > chunk ? (len + chunk - 1) / chunk : 1);
}

extern "C" __global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_piece_plan(const i64* __restrict__ off, i64 n, i64 chunk, i64 short_max, i64* __restrict__ plan) {
    __shared__ i64 warp_sums[3][LT_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    i64 carry[3] = {0, 0, 0};
    for (i64 base = 0; base <= n; base += (i64)LT_BLOCK * LT_PLAN_ITEMS) {
        const i64 first = base + (i64)threadIdx.x * LT_PLAN_ITEMS;
        i64 sum[3] = {0, 0, 0};
#pragma unroll
        for (int j = 0; j < LT_PLAN_ITEMS; ++j) {
            const i64 p = lt_pieces_of(off, first + j, n, chunk, short_max);
            sum[0] += p;
            sum[1] += p > 1 ? p : 0;
            sum[2] += p > 1 ? 1 : 0;
        }
        i64 before[3];
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            i64 v = sum[k];
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                const i64 u = __shfl_up_sync(0xffffffffu, v, d);
                if (lane >= d) v += u;
            }
            if (lane == 31) warp_sums[k][warp] = v;
            before[k] = carry[k] + v - sum[k];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            for (int w = 0; w < LT_WARPS; ++w) {
                const i64 t = warp_sums[k][w];
                if (w < warp) before[k] += t;
                carry[k] += t;
            }
        }
#pragma unroll
        for (int j = 0; j < LT_PLAN_ITEMS; ++j) {  // the counts again (their offsets now in L1), written scanned
            const i64 s = first + j, p = lt_pieces_of(off, s, n, chunk, short_max);
            before[0] += p;
            before[1] += p > 1 ? p : 0;
            before[2] += p > 1 ? 1 : 0;
            if (s <= n) {
                plan[s] = before[0];
                plan[n + 1 + s] = before[1];
                plan[2 * n + 2 + s] = before[2];
            }
        }
        __syncthreads();  // warp_sums is written again in the next round
    }
}

// Pass 1: one warp per piece. x is [rows, D] row-major, read as [rows, D / V] packs (with y, by MODE:
// lt_fold_rows; for LT_HITS y is [n, D], each sequence's row); out is [n, D]; partial [slots, D].
template <class Op, int MODE, typename T, typename A, int V>
__device__ __forceinline__ void lt_reduce_pieces(const T* __restrict__ x_, const T* __restrict__ y_,
                                                 const i64* __restrict__ off, const i64* __restrict__ plan,
                                                 A* __restrict__ out, A* __restrict__ partial, i64 n, i64 D,
                                                 int log2cw, i64 chunk, A empty, int multi_only, int tiles_first) {
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    const lt_pack<T, V>* __restrict__ y = reinterpret_cast<const lt_pack<T, V>*>(y_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    // multi_only: see lt_segment_reduce_block
    lt_each_piece(off, plan, n, Dv, lanes, chunk, multi_only, tiles_first, [&](const lt_piece& q, i64 col) {
        const i64 pieces = plan[q.s + 1] - plan[q.s];
        A acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = Op::identity();
        if (col < Dv)
            lt_fold_rows<Op, MODE>(x, MODE == LT_HITS ? y + q.s * Dv : y, q.a + lanes.row, q.b, lanes.rows, Dv, col,
                                   acc);
        lt_warp_fold<Op>(acc, lanes);
        if (lanes.row == 0 && col < Dv) {
            lt_pack<A, V> res;
#pragma unroll
            for (int j = 0; j < V; ++j) res.v[j] = pieces == 1 ? Op::finish(acc[j], q.end - q.start, empty) : acc[j];
            const i64 at = pieces == 1 ? q.s * D : (plan[n + 1 + q.s] + q.k) * D;
            *reinterpret_cast<lt_pack<A, V>*>((pieces == 1 ? out : partial) + at + col * V) = res;
        }
    });
}

template <int OP, typename T, typename A, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_segment_reduce(const T* __restrict__ x, const i64* __restrict__ off, const i64* __restrict__ plan,
                  A* __restrict__ out, A* __restrict__ partial, i64 n, i64 D, int log2cw, i64 chunk, A empty,
                  int multi_only, int tiles_first) {
    lt_reduce_pieces<lt_reduce_op<OP, A>, LT_ROWS, T, A, V>(x, x, off, plan, out, partial, n, D, log2cw, chunk, empty,
                                                          multi_only, tiles_first);
}

// The sum over each sequence's rows of x * y, per column (softmax's backward: grad * y), as
// lt_segment_reduce sums; the combine pass is lt_segment_combine's sum.
template <typename T, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_segment_dot(const T* __restrict__ x, const T* __restrict__ y, const i64* __restrict__ off,
               const i64* __restrict__ plan, T* __restrict__ out, T* __restrict__ partial, i64 n, i64 D, int log2cw,
               i64 chunk, int multi_only, int tiles_first) {
    lt_reduce_pieces<lt_reduce_op<OP_SUM, T>, LT_PRODUCTS, T, T, V>(x, y, off, plan, out, partial, n, D, log2cw, chunk, T(0),
                                                             multi_only, tiles_first);
}

// The rows of each sequence equal to m's row of it, counted per column (segment max's and min's
// backward: their gradient is shared among those rows), as lt_segment_reduce sums; the combine pass
// is lt_segment_combine's sum. Counts are T values.
template <typename T, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_segment_hits(const T* __restrict__ x, const T* __restrict__ m, const i64* __restrict__ off,
                const i64* __restrict__ plan, T* __restrict__ out, T* __restrict__ partial, i64 n, i64 D, int log2cw,
                i64 chunk, int multi_only, int tiles_first) {
    lt_reduce_pieces<lt_reduce_op<OP_SUM, T>, LT_HITS, T, T, V>(x, m, off, plan, out, partial, n, D, log2cw, chunk,
                                                                T(0), multi_only, tiles_first);
}

// The reduction of each one-piece sequence by a whole block (the host's choice where the sequences
// average enough rows: _launch.segment_reduce): its 8 warps split the rows, their results meet in
// shared memory. Blocks stride over the sequences (no search of the plan) and a block's warps end
// together (a warp per sequence leaves a block's slots idle until its longest sequence is done:
// lengths 1..159 keep 8 warps busy about 57% of the time). Multi-piece sequences are left to
// lt_segment_reduce (multi_only: pieces numbered by the plan's partial slots) and the combine pass.
template <int OP, typename T, typename A, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_segment_reduce_block(const T* __restrict__ x_, const i64* __restrict__ off, const i64* __restrict__ plan,
                        A* __restrict__ out, i64 n, i64 D, int log2cw, A empty, int tiles_first) {
    typedef lt_reduce_op<OP, A> Op;
    __shared__ A tree[LT_WARPS][32][V];
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    const lt_block_rows rows(lanes);
    lt_each_sequence(off, plan, n, Dv, lanes, tiles_first, [&](i64 s, i64 a, i64 b, i64 col) {
        A acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = Op::identity();
        if (col < Dv) lt_fold_rows<Op, LT_ROWS>(x, x, a + rows.first, b, rows.step, Dv, col, acc);
        lt_block_fold<Op, false>(acc, tree, lanes);
        if (threadIdx.x < 32 && lanes.row == 0 && col < Dv) {
            lt_pack<A, V> res;
#pragma unroll
            for (int j = 0; j < V; ++j) res.v[j] = Op::finish(acc[j], b - a, empty);
            *reinterpret_cast<lt_pack<A, V>*>(out + s * D + col * V) = res;
        }
    });
}

// The sequences of at most short_max rows, one thread each (narrow rows: see the top).
template <int OP, typename T, typename A>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_segment_reduce_short(const T* __restrict__ x, const i64* __restrict__ off, A* __restrict__ out,
                        i64 n, i64 D, i64 short_max, A empty) {
    typedef lt_reduce_op<OP, A> Op;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x; s < n; s += stride) {
        const i64 a = off[s], b = off[s + 1];
        if (b - a > short_max) continue;  // a piece kernel's
        for (i64 c = 0; c < D; ++c) {
            A acc = Op::identity();
            for (i64 r = a; r < b; ++r) acc = Op::combine(acc, A(x[r * D + c]));
            out[s * D + c] = Op::finish(acc, b - a, empty);
        }
    }
}

// Pass 2, only for sequences of several pieces: one block per (sequence, 32 columns).
template <int OP, typename A>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_segment_combine(const i64* __restrict__ off, const i64* __restrict__ plan, const A* __restrict__ partial,
                   A* __restrict__ out, i64 n, i64 D, A empty) {
    typedef lt_reduce_op<OP, A> Op;
    __shared__ A tree[LT_WARPS][32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const i64* __restrict__ multi = plan + 2 * (n + 1);
    const i64 tiles = (D + 31) >> 5;
    for (i64 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        const i64 col = (tile << 5) + lane;
        for (i64 j = blockIdx.x; j < multi[n]; j += gridDim.x) {  // uniform across the block
            const lt_multi q = lt_find_multi(plan, n, j);
            A acc = Op::identity();
            if (col < D)
                for (i64 k = warp; k < q.pieces; k += LT_WARPS) acc = Op::combine(acc, partial[(q.slot + k) * D + col]);
            tree[warp][lane] = acc;
            __syncthreads();
            for (int h = LT_WARPS / 2; h > 0; h >>= 1) {
                if (warp < h) tree[warp][lane] = Op::combine(tree[warp][lane], tree[warp + h][lane]);
                __syncthreads();
            }
            if (warp == 0 && col < D) out[q.s * D + col] = Op::finish(tree[0][lane], off[q.s + 1] - off[q.s], empty);
            __syncthreads();
        }
    }
}

// -- segment max's and min's backward: each sequence's gradient g[s] shared evenly, per column, among
// its rows equal to its result m[s] (as scatter_reduce's; a NaN result matches no row: zeros). Two
// routes as softmax's backward: a block per one-piece sequence (lt_extreme_grad_block: count, then
// write, the rows' second read from L2), or the pieces (lt_segment_hits, its combine pass, then
// lt_extreme_grad_apply); sequences of a few narrow rows one thread each (lt_extreme_grad_short).

// A sequence's share of its gradient per column: g / max(count, 1).
template <typename T, int V>
__device__ __forceinline__ void lt_share(const lt_pack<T, V>& g, const T (&count)[V], T (&share)[V]) {
#pragma unroll
    for (int j = 0; j < V; ++j) share[j] = g.v[j] / (count[j] > T(1) ? count[j] : T(1));
}

// out[r] = (x[r] == m) * share for one lane's column over rows r, r + step, ... < end (a product, as
// the unfused ops': an inf or NaN gradient makes NaN on the sequence's other rows too).
template <typename T, int V>
__device__ __forceinline__ void lt_write_shares(const lt_pack<T, V>* __restrict__ x, const lt_pack<T, V> m,
                                                const T (&share)[V], i64 r, i64 end, i64 step, i64 Dv, i64 col,
                                                lt_pack<T, V>* __restrict__ out) {
#pragma unroll 4
    for (; r < end; r += step) {
        const lt_pack<T, V> v = x[r * Dv + col];
        lt_pack<T, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = (v.v[j] == m.v[j] ? T(1) : T(0)) * share[j];
        out[r * Dv + col] = o;
    }
}

// out[r, c] = (x[r, c] == m[s, c]) * g[s, c] / max(count[s, c], 1) over the pieces, one warp each.
template <typename T, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_extreme_grad_apply(const T* __restrict__ x_, const T* __restrict__ m_, const T* __restrict__ g_,
                      const i64* __restrict__ off, const i64* __restrict__ plan, const T* __restrict__ count_,
                      T* __restrict__ out_, i64 n, i64 D, int log2cw, i64 chunk, int multi_only, int tiles_first) {
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    lt_pack<T, V>* __restrict__ out = reinterpret_cast<lt_pack<T, V>*>(out_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    lt_each_piece(off, plan, n, Dv, lanes, chunk, multi_only, tiles_first, [&](const lt_piece& q, i64 col) {
        if (col >= Dv) return;  // after the warp's search: every lane took part in its ballots
        const i64 at = q.s * Dv + col;
        const lt_pack<T, V> m = reinterpret_cast<const lt_pack<T, V>*>(m_)[at];
        T share[V];
        lt_share(reinterpret_cast<const lt_pack<T, V>*>(g_)[at], reinterpret_cast<const lt_pack<T, V>*>(count_)[at].v,
                 share);
        lt_write_shares(x, m, share, q.a + lanes.row, q.b, lanes.rows, Dv, col, out);
    });
}

// The backward of each one-piece sequence by a whole block: its 8 warps count the rows equal to the
// result, the counts meet in shared memory (lt_block_fold), then each warp writes the rows it has just
// read.
template <typename T, int V>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_extreme_grad_block(const T* __restrict__ x_, const T* __restrict__ m_, const T* __restrict__ g_,
                      const i64* __restrict__ off, const i64* __restrict__ plan, T* __restrict__ out_, i64 n, i64 D,
                      int log2cw, int tiles_first) {
    __shared__ T tree[LT_WARPS][32][V];
    const lt_pack<T, V>* __restrict__ x = reinterpret_cast<const lt_pack<T, V>*>(x_);
    const lt_pack<T, V>* __restrict__ m = reinterpret_cast<const lt_pack<T, V>*>(m_);
    lt_pack<T, V>* __restrict__ out = reinterpret_cast<lt_pack<T, V>*>(out_);
    const i64 Dv = D / V;
    const lt_lanes lanes(log2cw);
    const lt_block_rows rows(lanes);
    lt_each_sequence(off, plan, n, Dv, lanes, tiles_first, [&](i64 s, i64 a, i64 b, i64 col) {
        T count[V];
#pragma unroll
        for (int j = 0; j < V; ++j) count[j] = T(0);
        if (col < Dv) lt_fold_rows<lt_add, LT_HITS>(x, m + s * Dv, a + rows.first, b, rows.step, Dv, col, count);
        lt_block_fold<lt_add, true>(count, tree, lanes);
        if (col >= Dv) return;
        T share[V];
        lt_share(reinterpret_cast<const lt_pack<T, V>*>(g_)[s * Dv + col], count, share);
        lt_write_shares(x, m[s * Dv + col], share, a + rows.first, b, rows.step, Dv, col, out);
    });
}

// The backward of each sequence of at most short_max rows, one thread each.
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_extreme_grad_short(const T* __restrict__ x, const T* __restrict__ m, const T* __restrict__ g,
                      const i64* __restrict__ off, T* __restrict__ out, i64 n, i64 D, i64 short_max) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x; s < n; s += stride) {
        const i64 a = off[s], b = off[s + 1];
        if (b - a > short_max) continue;
        for (i64 c = 0; c < D; ++c) {
            const T mc = m[s * D + c];
            T count = T(0);
            for (i64 r = a; r < b; ++r) count += x[r * D + c] == mc ? T(1) : T(0);
            const T share = g[s * D + c] / (count > T(1) ? count : T(1));
            for (i64 r = a; r < b; ++r) out[r * D + c] = (x[r * D + c] == mc ? T(1) : T(0)) * share;
        }
    }
}

// Shared device helpers for lodtensor's CUDA kernels (included by every .cu here).
//
// Layout used by every kernel: blocks of LT_BLOCK threads, split into warps; a warp
// covers `cw` consecutive columns (a power of two, min(32, next_pow2(D))) and
// `32 / cw` rows at once, so a warp reads 32 neighbouring elements per step: one
// 128-byte line for float32 rows of 32 or more columns, and still full lines for
// narrow rows (D = 1 reads 32 consecutive rows). All sizes are int64.
#pragma once

#define LT_BLOCK 256
#define LT_WARPS (LT_BLOCK / 32)
#define LT_MIN_BLOCKS 4  // 4 x 256 threads per SM: at most 64 registers, >= 50% occupancy
#define LT_FULL 0xffffffffu

typedef long long i64;
typedef unsigned long long u64;

template <typename T> struct lt_limits;
template <> struct lt_limits<float> {
    static __device__ __forceinline__ float lowest() { return -__int_as_float(0x7f800000); }
    static __device__ __forceinline__ float highest() { return __int_as_float(0x7f800000); }
};
template <> struct lt_limits<double> {
    static __device__ __forceinline__ double lowest() { return -__longlong_as_double(0x7ff0000000000000LL); }
    static __device__ __forceinline__ double highest() { return __longlong_as_double(0x7ff0000000000000LL); }
};
template <> struct lt_limits<int> {
    static __device__ __forceinline__ int lowest() { return -2147483647 - 1; }
    static __device__ __forceinline__ int highest() { return 2147483647; }
};
template <> struct lt_limits<long long> {
    static __device__ __forceinline__ long long lowest() { return -9223372036854775807LL - 1; }
    static __device__ __forceinline__ long long highest() { return 9223372036854775807LL; }
};
template <> struct lt_limits<unsigned long long> {
    static __device__ __forceinline__ unsigned long long lowest() { return 0ULL; }
    static __device__ __forceinline__ unsigned long long highest() { return 0xffffffffffffffffULL; }
};

// exp and tanh in the precision of their argument
__device__ __forceinline__ float lt_exp(float v) { return expf(v); }
__device__ __forceinline__ double lt_exp(double v) { return exp(v); }
__device__ __forceinline__ float lt_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double lt_tanh(double v) { return tanh(v); }

// V consecutive values of type T read or written as one access (16 bytes for V = 16 / sizeof(T)):
// the segment kernels move rows of D = V * k values as k packs, so a warp step covers 4x (float)
// or 2x (double) the columns of scalar loads with the same instructions.
template <typename T, int V> struct __align__(sizeof(T) * V) lt_pack { T v[V]; };

// Largest s in [0, n) with a[s] <= v, for a non-decreasing a[0..n] with a[0] <= v < a[n].
__device__ __forceinline__ i64 lt_find_segment(const i64* __restrict__ a, i64 n, i64 v) {
    i64 lo = 0, hi = n;  // invariant: a[lo] <= v < a[hi]
    while (hi - lo > 1) {
        const i64 mid = lo + ((hi - lo) >> 1);
        if (__ldg(a + mid) <= v) lo = mid; else hi = mid;
    }
    return lo;
}

// The same search by a whole warp (every lane calls it with the same a, n, v): each round
// the 32 lanes probe 32 evenly spaced entries and a ballot keeps the last one <= v, so
// it takes log32(n) dependent loads (4 for 100K sequences) instead of log2(n).
__device__ __forceinline__ i64 lt_warp_find_segment(const i64* __restrict__ a, i64 n, i64 v) {
    const int lane = threadIdx.x & 31;
    i64 lo = 0, hi = n;  // invariant: a[lo] <= v < a[hi]
    while (hi - lo > 1) {
        const i64 step = (hi - lo + 31) >> 5;
        const i64 pos = lo + (i64)lane * step;
        const unsigned le = __ballot_sync(LT_FULL, pos < hi && __ldg(a + pos) <= v);
        const i64 next = lo + (i64)(31 - __clz(le)) * step;  // lane 0 probes lo: le != 0
        hi = next + step < hi ? next + step : hi;
        lo = next;
    }
    return lo;
}

// -- pieces: the work unit of the segment kernels (segment.cu) and of unpad (dense.cu) --------
// A sequence of len rows is max(1, ceil(len / chunk)) pieces of at most `chunk` rows;
// plan[0..n] is the first piece of each sequence (lt_piece_counts, then a scan). One warp
// takes one piece; its lanes cover cw = 2^log2cw consecutive columns (a tile of D) and
// 32 / cw rows at a time. A kernel strides its blocks over the tiles (lt_grid) and its warps
// over the pieces:
//
//     const lt_lanes lanes(log2cw);
//     const lt_grid grid(tiles_first);
//     for (i64 tile = grid.tile0; tile < lanes.tiles(D); tile += grid.tile_step) {
//         const i64 col = lanes.col(tile);
//         for (i64 p = grid.warp(); p < plan[n]; p += grid.warps()) {
//             const lt_piece q = lt_find_piece(off, plan, n, p, chunk);
//             for (i64 r = q.a + lanes.row; r < q.b; r += lanes.rows) ... x[r * D + col] ...

// This lane's place in a warp that covers cw columns and 32 / cw rows.
struct lt_lanes {
    int log2cw;
    int cw;    // columns per warp
    int rows;  // rows per warp step: 32 / cw
    int row;   // this lane's row in a step, 0 <= row < rows
    int lane_col;  // this lane's column in a tile of cw columns
    __device__ __forceinline__ explicit lt_lanes(int log2cw_)
        : log2cw(log2cw_), cw(1 << log2cw_), rows(32 >> log2cw_),
          row((threadIdx.x & 31) >> log2cw_), lane_col(threadIdx.x & ((1 << log2cw_) - 1)) {}
    // Tiles of cw columns over D columns.
    __device__ __forceinline__ i64 tiles(i64 D) const { return (D + cw - 1) >> log2cw; }
    // This lane's column in `tile` (>= D in the last tile's spare lanes).
    __device__ __forceinline__ i64 col(i64 tile) const { return (tile << log2cw) + lane_col; }
};

// Where a block of a piece kernel stands in its grid: the column tiles along one grid dimension, the
// blocks over pieces (8 warps each) or sequences along the other. `tiles_first` puts the tiles along
// x, which the GPU dispatches first, so the blocks resident at one time cover every tile of the same
// rows (whole rows streamed); else along y, each wave of blocks reading one tile of many rows (a
// 512-byte stripe of every 16 KiB row for float32 D = 4096).
struct lt_grid {
    i64 tile0, tile_step;  // this block's first tile, and the stride over tiles
    i64 block, blocks;     // this block's index along the other dimension, and their number
    __device__ __forceinline__ explicit lt_grid(int tiles_first)
        : tile0(tiles_first ? blockIdx.x : blockIdx.y), tile_step(tiles_first ? gridDim.x : gridDim.y),
          block(tiles_first ? blockIdx.y : blockIdx.x), blocks(tiles_first ? gridDim.y : gridDim.x) {}
    // This warp's index among the warps over pieces, and their number: the stride over pieces. (The
    // piece kernels use no shared memory: the host picks their threads per block, up to LT_BLOCK.)
    __device__ __forceinline__ i64 warp() const { return block * (blockDim.x >> 5) + (threadIdx.x >> 5); }
    __device__ __forceinline__ i64 warps() const { return blocks * (blockDim.x >> 5); }
};

// Combine, with Op::combine, the values of the lanes of a warp that share a column (32 / cw rows of
// a step, lanes cw apart): every lane ends with the fold of its column.
template <class Op, typename A, int V>
__device__ __forceinline__ void lt_warp_fold(A (&acc)[V], const lt_lanes& lanes) {
    for (int o = lanes.cw; o < 32; o <<= 1) {
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = Op::combine(acc[j], __shfl_xor_sync(LT_FULL, acc[j], o));
    }
}

// One lane's fold, with Op, of column `col` (of Dv packs) over rows r, r + step, ... < end into acc (as
// accumulator values), by MODE: LT_ROWS x's packs; LT_PRODUCTS the products of x's and y's packs
// (softmax's backward sums grad * y over a sequence's rows); LT_HITS 1 where x's value equals y's of
// the same column in pack `col` of y (segment max's / min's backward counts the rows equal to the
// result: y points at the sequence's result row). The loop is unrolled with a remainder, 4 rows deep
// (2 for products: two loads a row), so a warp keeps four loads in flight (a loop that calls a
// function, even an inlined one, is unrolled with a branch after each load: one load in flight).
#define LT_ROWS 0
#define LT_PRODUCTS 1
#define LT_HITS 2
template <class Op, int MODE, typename T, typename A, int V>
__device__ __forceinline__ void lt_fold_rows(const lt_pack<T, V>* __restrict__ x, const lt_pack<T, V>* __restrict__ y,
                                             i64 r, i64 end, i64 step, i64 Dv, i64 col, A (&acc)[V]) {
    lt_pack<T, V> h;
    if (MODE == LT_HITS) h = y[col];
#pragma unroll(MODE == LT_PRODUCTS ? 2 : 4)
    for (; r < end; r += step) {
        const lt_pack<T, V> p = x[r * Dv + col];
        if (MODE == LT_PRODUCTS) {
            const lt_pack<T, V> q = y[r * Dv + col];
#pragma unroll
            for (int j = 0; j < V; ++j) acc[j] = Op::combine(acc[j], A(p.v[j]) * A(q.v[j]));
        } else if (MODE == LT_HITS) {
#pragma unroll
            for (int j = 0; j < V; ++j) acc[j] = Op::combine(acc[j], p.v[j] == h.v[j] ? A(1) : A(0));
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) acc[j] = Op::combine(acc[j], A(p.v[j]));
        }
    }
}

// The rows of a sequence a lane reads when a whole block takes the sequence (the *_block kernels):
// its first row, and the rows per block step (8 warps x 32 / cw rows).
struct lt_block_rows {
    i64 first, step;
    __device__ __forceinline__ explicit lt_block_rows(const lt_lanes& lanes)
        : first((i64)(threadIdx.x >> 5) * lanes.rows + lanes.row), step((i64)LT_WARPS * lanes.rows) {}
};

// The fold that adds (lt_warp_fold, lt_block_fold), for kernels without segment.cu's ops.
struct lt_add {
    template <typename A> static __device__ __forceinline__ A combine(A a, A b) { return a + b; }
};

// The fold of each column over a block's 8 warps (as lt_warp_fold, then through `tree` in shared
// memory, warp 0's value first): the lanes of warp 0, or where ALL of every warp, end with their
// column's total. Every thread of the block must call it (two barriers).
template <class Op, bool ALL, typename A, int V>
__device__ __forceinline__ void lt_block_fold(A (&acc)[V], A (&tree)[LT_WARPS][32][V], const lt_lanes& lanes) {
    lt_warp_fold<Op>(acc, lanes);
    if (lanes.row == 0) {
#pragma unroll
        for (int j = 0; j < V; ++j) tree[threadIdx.x >> 5][lanes.lane_col][j] = acc[j];
    }
    __syncthreads();
    if (ALL || threadIdx.x < 32) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            A total = tree[0][lanes.lane_col][j];
            for (int w = 1; w < LT_WARPS; ++w) total = Op::combine(total, tree[w][lanes.lane_col][j]);
            acc[j] = total;
        }
    }
    __syncthreads();  // the block's next use overwrites the tree
}

struct lt_piece {
    i64 s;      // its sequence
    i64 k;      // its index among the pieces of sequence s
    i64 start;  // the first row of sequence s: off[s]
    i64 end;    // the end of sequence s: off[s + 1]
    i64 a, b;   // its rows: [a, b)
};

// Piece p, numbered by `firsts` (n + 1 non-decreasing entries, firsts[s] the number of pieces before
// sequence s): the plan's first third numbers every piece; its second (the partial slots) numbers
// only the pieces of multi-piece sequences. Every lane of the warp calls it with the same p (the
// search is a warp ballot).
__device__ __forceinline__ lt_piece lt_find_piece(const i64* __restrict__ off, const i64* __restrict__ firsts,
                                                  i64 n, i64 p, i64 chunk) {
    lt_piece q;
    q.s = lt_warp_find_segment(firsts, n, p);
    q.k = p - firsts[q.s];
    q.start = off[q.s];
    q.end = off[q.s + 1];
    q.a = q.start + q.k * chunk;
    q.b = q.a + chunk < q.end ? q.a + chunk : q.end;
    return q;
}

// The two loops of the kernels. lt_each_piece: this warp's pieces (numbered by the plan's first third,
// or where multi_only by its partial slots: only the multi-piece sequences), over the column tiles,
// calling body(q, col) with every lane of the warp (col >= Dv in the last tile's spare lanes, which
// must still take part in the warp's shuffles). lt_each_sequence: this block's one-piece sequences
// (blocks stride over them, no search), calling body(s, a, b, col) with every thread of the block
// (uniform control flow: the body may hold barriers). The bodies keep their row loops (and their
// unroll pragmas) inside: called once a piece or sequence, not from an unrolled loop.
template <class Body>
__device__ __forceinline__ void lt_each_piece(const i64* __restrict__ off, const i64* __restrict__ plan, i64 n,
                                              i64 Dv, const lt_lanes& lanes, i64 chunk, int multi_only,
                                              int tiles_first, Body body) {
    const i64* __restrict__ firsts = multi_only ? plan + n + 1 : plan;
    const i64 total = firsts[n];
    const i64 tiles = lanes.tiles(Dv);
    const lt_grid grid(tiles_first);
    for (i64 tile = grid.tile0; tile < tiles; tile += grid.tile_step) {
        const i64 col = lanes.col(tile);
        for (i64 p = grid.warp(); p < total; p += grid.warps()) body(lt_find_piece(off, firsts, n, p, chunk), col);
    }
}

template <class Body>
__device__ __forceinline__ void lt_each_sequence(const i64* __restrict__ off, const i64* __restrict__ plan, i64 n,
                                                 i64 Dv, const lt_lanes& lanes, int tiles_first, Body body) {
    const i64 tiles = lanes.tiles(Dv);
    const lt_grid grid(tiles_first);
    for (i64 tile = grid.tile0; tile < tiles; tile += grid.tile_step) {
        const i64 col = lanes.col(tile);
        for (i64 s = grid.block; s < n; s += grid.blocks)
            if (plan[s + 1] - plan[s] == 1) body(s, off[s], off[s + 1], col);  // uniform across the block
    }
}

// The j-th multi-piece sequence (every lane of a warp asks for the same j): its index, its pieces and
// its first slot in the partials; the plan's third prefix sum numbers them.
struct lt_multi {
    i64 s, pieces, slot;
};
__device__ __forceinline__ lt_multi lt_find_multi(const i64* __restrict__ plan, i64 n, i64 j) {
    lt_multi q;
    q.s = lt_warp_find_segment(plan + 2 * (n + 1), n, j);
    q.pieces = plan[q.s + 1] - plan[q.s];
    q.slot = plan[n + 1 + q.s];
    return q;
}

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

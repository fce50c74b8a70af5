// A CPU stand-in for the CUDA runtime features the lodtensor kernels use, so their
// .cu sources compile with g++ and run on the host (tests/backend/cuda_emu.py).
// One block at a time; threads of a block are fibers when the kernel cooperates
// (warp shuffles and ballots, __syncthreads), else run one after another.
#pragma once
#include <ucontext.h>

#include <functional>
#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

namespace emu {
// Cooperative blocks run their threads as fibers (ucontext) on the calling thread: a
// barrier parks the fiber until every thread of the warp (or block) has arrived.
struct Fiber { ucontext_t ctx; std::vector<char> stack; bool done = false; };
inline std::vector<Fiber> fibers;
inline ucontext_t scheduler;
inline unsigned current = 0;
inline unsigned long long slots[1024];
inline unsigned arrived[33], generation[33];  // per warp; [32]: the block
inline unsigned block_threads = 0;
inline std::function<void()> body;

inline void park() { swapcontext(&fibers[current].ctx, &scheduler); }

inline void barrier(unsigned group, unsigned members) {
    const unsigned gen = generation[group];
    if (++arrived[group] == members) {
        arrived[group] = 0;
        ++generation[group];
        return;
    }
    while (generation[group] == gen) park();
}
inline void warp_barrier() {
    const unsigned w = threadIdx.x / 32;
    const unsigned lanes = block_threads - w * 32 < 32 ? block_threads - w * 32 : 32;
    barrier(w, lanes);
}
inline void entry() {
    body();
    fibers[current].done = true;
}
}  // namespace emu

inline void __syncthreads() { emu::barrier(32, emu::block_threads); }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
template <typename T> inline T __ldg(const T* p) { return *p; }

namespace emu {
// Every lane of the warp posts v; each reads the value of lane ``src`` (a thread index in the block).
template <typename T> inline T shuffle_from(T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    std::memcpy(&slots[threadIdx.x], &v, sizeof(T));
    warp_barrier();
    T out;
    std::memcpy(&out, &slots[src], sizeof(T));
    warp_barrier();
    return out;
}
}  // namespace emu

template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask) {
    const unsigned t = threadIdx.x;
    return emu::shuffle_from(v, t / 32 * 32 + ((t % 32) ^ mask));
}

template <typename T> inline T __shfl_up_sync(unsigned, T v, unsigned delta) {
    const unsigned t = threadIdx.x;
    return emu::shuffle_from(v, t % 32 >= delta ? t - delta : t);
}

inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }

inline unsigned __ballot_sync(unsigned, bool pred) {
    const unsigned t = threadIdx.x, warp = t / 32;
    emu::slots[t] = pred ? 1 : 0;
    emu::warp_barrier();
    unsigned out = 0;
    for (unsigned l = 0; l < 32; ++l) out |= (emu::slots[warp * 32 + l] ? 1u : 0u) << l;
    emu::warp_barrier();
    return out;
}

namespace emu {
template <typename... P, std::size_t... I>
void call(void (*k)(P...), void** args, std::index_sequence<I...>) {
    k(*reinterpret_cast<P*>(args[I])...);
}

// Launch like cuLaunchKernel: args[i] points at the value of parameter i.
template <typename... P>
void launch(void (*k)(P...), unsigned gx, unsigned gy, unsigned bx, void** args, bool cooperative) {
    gridDim = dim3{gx, gy, 1};
    blockDim = dim3{bx, 1, 1};
    for (unsigned y = 0; y < gy; ++y) {
        for (unsigned x = 0; x < gx; ++x) {
            auto run_one = [&](unsigned t) {
                threadIdx = dim3{t, 0, 0};
                blockIdx = dim3{x, y, 0};
                call(k, args, std::index_sequence_for<P...>{});
            };
            if (!cooperative) {
                for (unsigned t = 0; t < bx; ++t) run_one(t);
                continue;
            }
            block_threads = bx;
            fibers.resize(bx);
            std::memset(arrived, 0, sizeof(arrived));
            for (unsigned t = 0; t < bx; ++t) {
                Fiber& f = fibers[t];
                f.stack.resize(1 << 16);
                f.done = false;
                getcontext(&f.ctx);
                f.ctx.uc_stack.ss_sp = f.stack.data();
                f.ctx.uc_stack.ss_size = f.stack.size();
                f.ctx.uc_link = &scheduler;
                makecontext(&f.ctx, entry, 0);
            }
            body = [&] { call(k, args, std::index_sequence_for<P...>{}); };
            for (unsigned left = bx; left;) {
                left = 0;
                for (unsigned t = 0; t < bx; ++t) {
                    if (fibers[t].done) continue;
                    current = t;
                    threadIdx = dim3{t, 0, 0};
                    blockIdx = dim3{x, y, 0};
                    swapcontext(&scheduler, &fibers[t].ctx);
                    left += !fibers[t].done;
                }
            }
        }
    }
}
}  // namespace emu

// A CPU stand-in for the CUDA runtime features the lodtensor kernels use, so their
// .cu sources compile with g++ and run on the host (tests/backend/cuda_emu.py).
// One block at a time; threads of a block are std::threads when the kernel
// cooperates (warp shuffles, __syncthreads), else run one after another.
#pragma once
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
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

namespace emu {
inline std::unique_ptr<std::barrier<>> block_barrier;
inline std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
inline unsigned long long slots[1024];
}  // namespace emu

inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
template <typename T> inline T __ldg(const T* p) { return *p; }

template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    const unsigned t = threadIdx.x, warp = t / 32, src = warp * 32 + ((t % 32) ^ mask);
    std::memcpy(&emu::slots[t], &v, sizeof(T));
    emu::warp_barriers[warp]->arrive_and_wait();
    T out;
    std::memcpy(&out, &emu::slots[src], sizeof(T));
    emu::warp_barriers[warp]->arrive_and_wait();
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
            auto body = [&](unsigned t) {
                threadIdx = dim3{t, 0, 0};
                blockIdx = dim3{x, y, 0};
                call(k, args, std::index_sequence_for<P...>{});
            };
            if (!cooperative) {
                for (unsigned t = 0; t < bx; ++t) body(t);
                continue;
            }
            block_barrier = std::make_unique<std::barrier<>>(bx);
            warp_barriers.clear();
            for (unsigned w = 0; w < (bx + 31) / 32; ++w) warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < bx; ++t) threads.emplace_back(body, t);
            for (auto& th : threads) th.join();
        }
    }
}
}  // namespace emu

// The element-wise part of one step of Paddle's LSTM, forward and backward, fused: one launch per
// step beside the step's GEMM, instead of a dozen element-wise ops (the recurrences of
// backend/torch/_recurrent.py on CUDA tensors; backend/torch/_fused_steps.py launches these).
//
// Rows are the sequences still running at the step (a prefix of the previous step's), each of D
// values per gate; the gates are step-major [n, 4D] in Paddle's order candidate, input, forget,
// output. One thread per (row, column), blocks striding over the n * D values. The activations are
// codes (lt_act): 0 identity, 1 sigmoid, 2 tanh, 3 relu; packed as gate | cell << 4 | candidate << 8.
// A null pointer is an absent operand: no previous cell (the first step without c_0), no peepholes,
// no output gradient, no cell activations kept.
#include "common.cuh"

template <typename T> __device__ __forceinline__ T lt_act(int code, T v) {
    if (code == 1) return T(1) / (T(1) + lt_exp(-v));
    if (code == 2) return lt_tanh(v);
    if (code == 3) return v > T(0) ? v : T(0);
    return v;
}

// The derivative of activation `code` from its output y.
template <typename T> __device__ __forceinline__ T lt_act_grad(int code, T y) {
    if (code == 1) return y * (T(1) - y);
    if (code == 2) return T(1) - y * y;
    if (code == 3) return y > T(0) ? T(1) : T(0);
    return T(1);
}

// g (the step's gates, x_t + b + h_{t-1} @ W already in it) activated in place; c = cand * i + c_prev * f
// (peepholes: W_ic, W_fc on c_prev into i, f; W_oc on c into o), h = o * cell(c), tc = cell(c).
// peep: [W_ic | W_fc | W_oc], 3D values.
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_lstm_step(T* __restrict__ g, const T* __restrict__ c_prev, const T* __restrict__ peep, T* __restrict__ c,
             T* __restrict__ h, T* __restrict__ tc, i64 n, i64 D, int acts) {
    const int gate = acts & 15, cell = (acts >> 4) & 15, cand = (acts >> 8) & 15;
    const i64 total = n * D;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const i64 r = e / D, j = e - r * D;
        T* __restrict__ gr = g + r * 4 * D;
        const T cp = c_prev ? c_prev[e] : T(0);
        T gi = gr[D + j], gf = gr[2 * D + j], go = gr[3 * D + j];
        if (peep && c_prev) {
            gi += cp * peep[j];
            gf += cp * peep[D + j];
        }
        const T gc = lt_act(cand, gr[j]);
        gi = lt_act(gate, gi);
        gf = lt_act(gate, gf);
        const T ct = c_prev ? gc * gi + cp * gf : gc * gi;
        if (peep) go += ct * peep[2 * D + j];
        go = lt_act(gate, go);
        const T t = lt_act(cell, ct);
        gr[j] = gc;
        gr[D + j] = gi;
        gr[2 * D + j] = gf;
        gr[3 * D + j] = go;
        c[e] = ct;
        h[e] = t * go;
        if (tc) tc[e] = t;
    }
}

// The step backward: from dh (the next step's h gradient, plus this step's output gradient gh)
// and dc (likewise, plus gc), the gates' gradient dg [n, 4D] and, where there is a previous cell,
// its gradient in place of dc. g holds the activated gates and tc = cell(c) of the forward.
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_lstm_step_grad(const T* __restrict__ g, const T* __restrict__ tc, const T* __restrict__ c_prev,
                  const T* __restrict__ peep, const T* __restrict__ gh, const T* __restrict__ gc,
                  const T* __restrict__ dh, T* __restrict__ dc, T* __restrict__ dg, i64 n, i64 D, int acts) {
    const int gate = acts & 15, cell = (acts >> 4) & 15, cand = (acts >> 8) & 15;
    const i64 total = n * D;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const i64 r = e / D, j = e - r * D;
        const T* __restrict__ gr = g + r * 4 * D;
        T* __restrict__ dgr = dg + r * 4 * D;
        const T a = gr[j], i = gr[D + j], f = gr[2 * D + j], o = gr[3 * D + j];
        const T dhv = gh ? dh[e] + gh[e] : dh[e];
        T dcv = gc ? dc[e] + gc[e] : dc[e];
        const T t = tc[e];
        const T d_o = dhv * t * lt_act_grad(gate, o);
        dcv += dhv * o * lt_act_grad(cell, t);
        if (peep) dcv += d_o * peep[2 * D + j];
        const T d_a = dcv * i * lt_act_grad(cand, a);
        const T d_i = dcv * a * lt_act_grad(gate, i);
        T d_f = T(0);
        if (c_prev) {
            d_f = dcv * c_prev[e] * lt_act_grad(gate, f);
            T back = dcv * f;
            if (peep) back += d_i * peep[j] + d_f * peep[D + j];
            dc[e] = back;
        }
        dgr[j] = d_a;
        dgr[D + j] = d_i;
        dgr[2 * D + j] = d_f;
        dgr[3 * D + j] = d_o;
    }
}

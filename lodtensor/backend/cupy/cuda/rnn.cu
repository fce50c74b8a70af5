// The element-wise parts of one step of Paddle's LSTM and GRU, forward and backward, fused: one launch per
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
    if (code == 3) return (v > T(0) || v != v) ? v : T(0);  // NaN stays NaN, as torch's relu and np.maximum
    return v;
}

// The gradient g through activation `code`, from its output y (the formulas of torch's
// sigmoid_backward, tanh_backward and threshold_backward: relu passes g where y > 0, else 0, so an
// infinite g past the threshold gives 0, not NaN).
template <typename T> __device__ __forceinline__ T lt_act_back(int code, T y, T g) {
    if (code == 1) return g * (T(1) - y) * y;
    if (code == 2) return g * (T(1) - y * y);
    if (code == 3) return y > T(0) ? g : T(0);
    return g;
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
        const T d_o = lt_act_back(gate, o, dhv * t);
        dcv += lt_act_back(cell, t, dhv * o);
        if (peep) dcv += d_o * peep[2 * D + j];
        const T d_a = lt_act_back(cand, a, dcv * i);
        const T d_i = lt_act_back(gate, i, dcv * a);
        T d_f = T(0);
        if (c_prev) {
            d_f = lt_act_back(gate, f, dcv * c_prev[e]);
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

// -- GRU: gates [n, 3D] in Paddle's order update, reset, candidate; acts = gate | candidate << 8 --
// Forward, with a previous state: after the gates' GEMM, u and r activated in place and rh = r * h_prev
// (the candidate GEMM's left operand) ...
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_gru_step_gates(T* __restrict__ g, const T* __restrict__ h_prev, T* __restrict__ rh, i64 n, i64 D, int acts) {
    const int gate = acts & 15;
    const i64 total = n * D;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const i64 r = e / D, j = e - r * D;
        T* __restrict__ gr = g + r * 3 * D;
        gr[j] = lt_act(gate, gr[j]);
        const T reset = lt_act(gate, gr[D + j]);
        gr[D + j] = reset;
        rh[e] = reset * h_prev[e];
    }
}

// ... then, after the candidate's GEMM, c activated in place and the new state
// h = h_prev + u * (c - h_prev) (origin: c + u * (h_prev - c)). Without a previous state (the first
// step without h_0) this is the whole step: u activated here, r left as it is, h = u * c
// (origin: c - u * c).
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_gru_step_out(T* __restrict__ g, const T* __restrict__ h_prev, T* __restrict__ out, i64 n, i64 D, int acts,
                int origin) {
    const int gate = acts & 15, cand = (acts >> 8) & 15;
    const i64 total = n * D;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const i64 r = e / D, j = e - r * D;
        T* __restrict__ gr = g + r * 3 * D;
        T u = gr[j];
        if (!h_prev) {
            u = lt_act(gate, u);
            gr[j] = u;
        }
        const T c = lt_act(cand, gr[2 * D + j]);
        gr[2 * D + j] = c;
        if (h_prev) {
            const T hp = h_prev[e];
            out[e] = origin ? (hp - c) * u + c : (c - hp) * u + hp;
        } else {
            out[e] = origin ? c - u * c : u * c;
        }
    }
}

// Backward, first half: from dh (+ gh, this step's output gradient) the update's and the candidate's
// gradients into dg, and dh becomes the direct part of the previous state's gradient (dh * (1 - u);
// origin: dh * u). Without a previous state: the reset's gradient is 0 and dh is left alone.
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_gru_step_grad_out(const T* __restrict__ g, const T* __restrict__ h_prev, const T* __restrict__ gh,
                     T* __restrict__ dh, T* __restrict__ dg, i64 n, i64 D, int acts, int origin) {
    const int gate = acts & 15, cand = (acts >> 8) & 15;
    const i64 total = n * D;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const i64 r = e / D, j = e - r * D;
        const T* __restrict__ gr = g + r * 3 * D;
        T* __restrict__ dgr = dg + r * 3 * D;
        const T u = gr[j], c = gr[2 * D + j];
        const T dhv = gh ? dh[e] + gh[e] : dh[e];
        T du, dc;
        if (h_prev) {
            const T hp = h_prev[e];
            if (origin) {
                du = (hp - c) * dhv;
                const T t = dhv * u;
                dc = dhv - t;
                dh[e] = t;
            } else {
                du = (c - hp) * dhv;
                dc = dhv * u;
                dh[e] = dhv - dc;
            }
        } else {
            du = origin ? -(dhv * c) : dhv * c;
            dc = origin ? dhv - dhv * u : dhv * u;
            dgr[D + j] = T(0);
        }
        dgr[j] = lt_act_back(gate, u, du);
        dgr[2 * D + j] = lt_act_back(cand, c, dc);
    }
}

// Backward, second half, after the candidate's GEMM gave drh (the gradient of r * h_prev): the
// reset's gradient into dg, and dh += drh * r (the previous state's gradient through r * h_prev).
template <typename T>
__global__ void __launch_bounds__(LT_BLOCK, LT_MIN_BLOCKS)
lt_gru_step_grad_reset(const T* __restrict__ g, const T* __restrict__ h_prev, const T* __restrict__ drh,
                       T* __restrict__ dh, T* __restrict__ dg, i64 n, i64 D, int acts) {
    const int gate = acts & 15;
    const i64 total = n * D;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const i64 r = e / D, j = e - r * D;
        const T reset = g[r * 3 * D + D + j];
        const T t = drh[e];
        dg[r * 3 * D + D + j] = lt_act_back(gate, reset, t * h_prev[e]);
        dh[e] += t * reset;
    }
}

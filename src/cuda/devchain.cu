// devchain.cu: the chain's epilogue pass on the GPU (docs/algorithms/chains.md, "The epilogue pass", On the GPU).
// Each thread takes one element through what the host's pass (src/ops/chainepi.c) computes over a chunk in its last
// run, both witnesses and the function's variants at once: the base's inner values and bracket (the fast path's
// er_dot_inner_row, or a tensor's value), each stage on the witnesses and the bracket, the classes and the hull's
// er_set_rel. The host's three runs give every element the class and hull this one run gives (chainepi.c,
// er__epi_decide), so the classes and the widest hull are the host pass's. Each function below repeats its host
// counterpart (named) operation for operation; built with -fmad=false, every float and double operation rounds once,
// as on the host (-ffp-contract=off), and float division is IEEE's (nvcc's default -prec-div=true).
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>
#include <exactref/ref.h>
#include "cuda/devchain.h"
#include "cuda/devrec.cuh"
#include "core/tanhser.h"

namespace {

// er_epi_up, er_epi_dn (chainepi.c)
__device__ inline double ce_up(double x) {
    double a = fabs(x);
    return x + (a > 0x1p-960 ? a : 0x1p-960) * 0x1p-52;
}
__device__ inline double ce_dn(double x) {
    double a = fabs(x);
    return x - (a > 0x1p-960 ? a : 0x1p-960) * 0x1p-52;
}

#define CE_GT_K32 ((float)0.79788456080286535588)
#define CE_GT_C32 ((float)0.044715)
#define CE_GT_M2K (-2.0 * 0.79788456080286535588)
#define CE_GT_C 0.044715
#define CE_L2E32 ((float)1.44269504088896340736)
#define CE_LN2 0.69314718055994530942

__device__ inline bool ce_quot(int k) { return k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU || k == ER_STAGE_SIGMOID; }

// er_epi_arg, er_epi_earg, er_epi_warg
__device__ inline double ce_arg(int k, double x) {
    if (k == ER_STAGE_EXP) return x;
    if (k == ER_STAGE_TANH) return 2.0 * fabs(x);
    if (k == ER_STAGE_GELU_TANH) return CE_GT_M2K * (x + CE_GT_C * ((x * x) * x));
    return -x;
}
__device__ inline double ce_earg(int tri, float v) { return tri ? (double)(v * CE_L2E32) * CE_LN2 : (double)v; }
__device__ inline float ce_gelu_u(float x) { return CE_GT_K32 * (x + CE_GT_C32 * ((x * x) * x)); }
__device__ inline double ce_warg(int k, int tri, float x) {
    if (k == ER_STAGE_GELU_TANH) return 2.0 * fabs((double)ce_gelu_u(x));
    if (k == ER_STAGE_TANH) return 2.0 * fabs((double)x);
    return ce_earg(tri, k == ER_STAGE_EXP ? x : -x);
}

// er_epi_widen
__device__ inline bool ce_widen(double z, double *el, double *eh) {
    double d = fabs(z) * 0x1p-51 + 0x1p-52, l = ce_dn(*el * (1.0 - 2.0 * d));
    *el = l > 0 ? l : 0.0;
    *eh = ce_up(*eh * (1.0 + 2.0 * d));
    return fabs(z) <= 1000.0;
}

// er__exp_shift_run1 (ival.h)
__device__ inline void ce_shift(double dl, double dh, double v, double *lo, double *hi) {
    double p = 1.0 + (v + 0.5 * (v * v)), l = dl * (p - 0x1p-51), h = dh * (p + 0x1p-51);
    *lo = l > 0 ? er_from_bits(er_bits(l) - 1) : 0.0;
    *hi = h <= DBL_MAX ? er_from_bits(er_bits(h) + 1) : h;
}

// er__tanh_bounds, er__tanh_small_bounds (core/tanhser.h), er__tanh_any_bounds (ival.h)
__device__ inline bool ce_tanh_any(double x, double elo, double ehi, double *lo, double *hi) {
    double a = fabs(x);
    double tl = 1.0 - 2.0 / (elo + 1.0), th = 1.0 - 2.0 / (ehi + 1.0);
    tl = tl - tl * 0x1p-46;
    th = th + th * 0x1p-46;
    bool big = a >= 0.25;
    double sl, sh;
    er_tanh_series_bounds(a, &sl, &sh);
    double l = big ? tl : sl, h = big ? th : sh;
    *lo = x > 0 ? l : -h;
    *hi = x > 0 ? h : -l;
    return (a == 0) | ((a >= 0x1p-900) & (a <= DBL_MAX));
}

// er__quot_1p_bound (ival.h)
__device__ inline double ce_quot_1p(double c, double elo, double ehi, int up) {
    double q = c / (1.0 + ((c >= 0) != (up != 0) ? ehi : elo));
    return up ? q + fabs(q) * 0x1p-48 : q - fabs(q) * 0x1p-48;
}

// er_epi_fn_bound
__device__ inline double ce_fn_bound(int k, double p, double elo, double ehi, int up, bool *good) {
    double t = ce_arg(k, p);
    if (ce_quot(k)) {
        bool tiny = t < -700.0, huge = t > 700.0;
        elo = tiny ? 0.0 : huge ? 0x1p1000 : elo;
        ehi = tiny ? 0x1p-1000 : huge ? INFINITY : ehi;
    }
    if (k == ER_STAGE_GELU_TANH) {
        double d = fabs(t) * 0x1p-49 + 0x1p-52, f = 1.0 - 2.0 * d, g = 1.0 + 2.0 * d, lf = ce_dn(elo * f);
        *good &= (p == 0) | ((fabs(p) >= 0x1p-300) & (fabs(p) <= 0x1p16));
        elo = lf > 0 ? lf : 0.0;
        ehi = ce_up(ehi * g);
    }
    if (k == ER_STAGE_EXP) return up ? ehi : elo;
    if (k == ER_STAGE_TANH) {
        double l, h;
        *good &= ce_tanh_any(p, elo, ehi, &l, &h);
        return up ? h : l;
    }
    double q = ce_quot_1p(k == ER_STAGE_SIGMOID ? 1.0 : p, elo, ehi, up);
    return up ? q + 0x1p-1000 : q - 0x1p-1000;
}

// er_epi_step1
__device__ inline float ce_step1(float v, int up, bool can) {
    uint32_t b = (uint32_t)__float_as_int(v), neg = b >> 31;
    b = up ? b + 1 - 2 * neg : b - 1 + 2 * neg;
    float r = __int_as_float((int)b);
    return (can && fabsf(v) >= 0x1p-126f && fabsf(v) <= FLT_MAX) ? r : v;
}

// er_vec_rn_fmt, er_vec_rn_ok (format/vecround.h)
__device__ inline double ce_rn(double v, const er_dev_vfmt &f) {
    if (!f.narrow) return (double)(float)(fabs(v) <= FLT_MAX ? v : 0.0);
    uint64_t u = er_bits(v);
    u = (u + f.half + ((u >> f.drop) & 1)) & f.mask;
    double r = er_from_bits(u), sub = copysign((v + f.big) - f.big, v);
    return fabs(v) >= f.minn ? r : sub;
}
__device__ inline bool ce_rn_ok(double v, double r, const er_dev_vfmt &f) {
    return f.narrow ? fabs(r) <= f.maxv : fabs(v) <= FLT_MAX;
}

// One element's state: the witnesses from l (0) and h (1), then their variants (2 + 2 (v - 1) + e), whether each is
// formed, and the bracket [lo, hi] of the exact result and whether it holds (er_epi_scratch's, for one element).
struct ce_el {
    float w[10];
    bool okw[10];
    double lo, hi;
    bool oke;
};

// er_epi_fn_witness for witness e, with exp's bounds at its argument (el, eh) and, for gelu's variants, at -2 u
// (el2, eh2).
__device__ inline void ce_fn_witness(int k, int nvar, bool can, double el, double eh, double el2, double eh2,
                                     ce_el &s, int e) {
    float x = s.w[e], r, v[4] = {0, 0, 0, 0};
    bool good, good34 = true, in0 = s.okw[e];
    if (k == ER_STAGE_TANH || k == ER_STAGE_GELU_TANH) {
        float u = k == ER_STAGE_TANH ? x : ce_gelu_u(x);
        double tl, th;
        bool in = ce_tanh_any((double)u, el, eh, &tl, &th);
        float t = (float)tl, tu = ce_step1(t, 1, can), td = ce_step1(t, 0, can);
        good = in && t == (float)th && (k == ER_STAGE_TANH || fabsf(x) <= 0x1p16f);
        r = k == ER_STAGE_TANH ? t : (x * 0.5f) * (1.0f + t);
        v[0] = k == ER_STAGE_TANH ? tu : (x * 0.5f) * (1.0f + tu);
        v[1] = k == ER_STAGE_TANH ? td : (x * 0.5f) * (1.0f + td);
        if (k == ER_STAGE_GELU_TANH && nvar == 4) {
            float a2 = (float)el2, d = 1.0f + a2;
            good34 = a2 == (float)eh2 && fabsf(a2) <= FLT_MAX;
            v[2] = x / d;
            v[3] = x * (1.0f / d);
        }
    } else {
        float a = (float)el, au = ce_step1(a, 1, can), ad = ce_step1(a, 0, can);
        good = a == (float)eh && fabsf(a) <= FLT_MAX;
        r = k == ER_STAGE_EXP ? a : k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + a) : x / (1.0f + a);
        v[0] = k == ER_STAGE_EXP ? au : k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + au) : x / (1.0f + au);
        v[1] = k == ER_STAGE_EXP ? ad : k == ER_STAGE_SIGMOID ? 1.0f / (1.0f + ad) : x / (1.0f + ad);
        v[2] = r;
        v[3] = x * (1.0f / (1.0f + a));
    }
    s.w[e] = r;
    s.okw[e] = in0 && good && fabsf(r) <= FLT_MAX;
    if (nvar >= 2) {
        s.w[2 + e] = v[0];
        s.okw[2 + e] = in0 && good && fabsf(v[0]) <= FLT_MAX;
        s.w[4 + e] = v[1];
        s.okw[4 + e] = in0 && good && fabsf(v[1]) <= FLT_MAX;
    }
    if (nvar == 4) {
        s.w[6 + e] = v[2];
        s.okw[6 + e] = in0 && good && good34 && fabsf(v[2]) <= FLT_MAX;
        s.w[8 + e] = v[3];
        s.okw[8 + e] = in0 && good && good34 && fabsf(v[3]) <= FLT_MAX;
    }
}

// er_epi_fn with both witnesses and the variants (nvar): exp's bounds at rows 0 (the first witness's argument), 1
// (lo's), 2 (the second's), 3 and 4 (gelu's -2 u at each witness), 5 (hi's, from lo's by the shift).
__device__ void ce_fn(const er_dev_epi &p, int k, ce_el &s) {
    int nvar = p.nvar, tri = p.tri;
    bool g34 = k == ER_STAGE_GELU_TANH && nvar == 4, ex = k != ER_STAGE_TANH && k != ER_STAGE_GELU_TANH;
    double t[6], el[6] = {0, 0, 0, 0, 0, 0}, eh[6] = {0, 0, 0, 0, 0, 0};
    float x0 = s.w[0], x1 = s.w[1];
    t[0] = ce_warg(k, tri, x0);
    t[1] = ce_arg(k, s.lo);
    t[2] = ce_warg(k, tri, x1);
    t[5] = ce_arg(k, s.hi) - t[1];
    t[3] = g34 ? ce_earg(tri, -2.0f * ce_gelu_u(x0)) : 0.0;
    t[4] = g34 ? ce_earg(tri, -2.0f * ce_gelu_u(x1)) : 0.0;
    int rows = g34 ? 5 : 3;
#pragma unroll
    for (int r = 0; r < 5; r++)
        if (r < rows) er_exp_bounds(p, t[r], &el[r], &eh[r]);
    if (tri) {
#pragma unroll
        for (int r = 0; r < 5; r++) {
            bool wit = r == 0 || r == 2;
            if (r >= rows || (wit && !ex) || r == 1) continue;
            bool in = ce_widen(t[r], &el[r], &eh[r]);
            if (wit) s.okw[r / 2] = s.okw[r / 2] && in;
            else el[r] = in ? el[r] : NAN;
        }
    }
    {
        double tt = t[1], v = t[5], dl = el[1], dh = eh[1];
        bool tiny = ce_quot(k) && tt < -700.0;
        dl = tiny ? 0.0 : dl;
        dh = tiny ? 0x1p-1000 : dh;
        el[1] = dl;
        eh[1] = dh;
        ce_shift(dl, dh, v, &el[5], &eh[5]);
        double th = tt + v;
        bool tail_hi = ce_quot(k) && (th < -701.0 || th > 701.0) && fabs(v) <= 0x1p40;
        s.oke = s.oke && (fabs(v) <= 0x1p-18 || tail_hi);
    }
    bool can = p.can != 0;
    ce_fn_witness(k, nvar, can, el[0], eh[0], el[3], eh[3], s, 0);
    ce_fn_witness(k, nvar, can, el[2], eh[2], el[4], eh[4], s, 1);
    // er_epi_fn_enclose
    double a = s.lo, b = s.hi;
    bool two = k == ER_STAGE_GELU_TANH || k == ER_STAGE_SILU, good = true;
    bool inc = !two || a > (k == ER_STAGE_SILU ? -0.9 : -0.4), dec = two && b < -2.0;
    bool lb = dec, hb = inc;
    double l = ce_fn_bound(k, lb ? b : a, lb ? el[5] : el[1], lb ? eh[5] : eh[1], 0, &good),
           h = ce_fn_bound(k, hb ? b : a, hb ? el[5] : el[1], hb ? eh[5] : eh[1], 1, &good),
           w = inc || dec ? 0.0 : 1.25 * (b - a);
    l = ce_dn(l - w);
    h = ce_up(h + w);
    s.lo = l;
    s.hi = h;
    s.oke = s.oke && good && fabs(l) <= DBL_MAX && fabs(h) <= DBL_MAX;
}

// A tensor operand's value at element idx (er__offset over its shape and strides).
__device__ inline double ce_operand(const er_dev_epi_stage &st, int64_t idx) {
    int64_t off = 0;
    for (int i = st.ndim - 1; i >= 0; i--) {
        off += (idx % st.shape[i]) * st.strides[i];
        idx /= st.shape[i];
    }
    return st.op[off];
}

// Stage j (er_epi_stage_body with both witnesses and the variants): nw witnesses live.
__device__ void ce_stage(const er_dev_epi &p, int j, int64_t idx, ce_el &s) {
    const er_dev_epi_stage &st = p.st[j];
    int k = st.kind, nw = p.fn >= 0 && j > p.fn ? 2 + 2 * p.nvar : 2;
    if (k == ER_STAGE_ADD || k == ER_STAGE_MUL) { // er_epi_addmul, sources 0 and 1
        bool add = k == ER_STAGE_ADD;
        double c = st.src == 1 ? ce_operand(st, idx) : st.c0;
        float wc = st.src == 1 ? (float)c : st.wc0;
#pragma unroll
        for (int q = 0; q < 10; q++) {
            if (q >= nw) break;
            float w = add ? s.w[q] + wc : s.w[q] * wc;
            s.w[q] = w;
            s.okw[q] = s.okw[q] && fabsf(w) <= FLT_MAX;
        }
        double a = s.lo, b = s.hi, l, h;
        if (add) {
            l = a + c;
            h = b + c;
        } else {
            double p1 = a * c, p3 = b * c; // the four corners of a value's operand: two
            l = p1 < p3 ? p1 : p3;
            h = p1 < p3 ? p3 : p1;
        }
        l = ce_dn(l);
        h = ce_up(h);
        s.lo = l;
        s.hi = h;
        s.oke = s.oke && fabs(l) <= DBL_MAX && fabs(h) <= DBL_MAX;
    } else if (k == ER_STAGE_RELU) {
#pragma unroll
        for (int q = 0; q < 10; q++)
            if (q < nw) s.w[q] = s.w[q] > 0 ? s.w[q] : 0.0f;
        s.lo = s.lo > 0 ? s.lo : 0.0;
        s.hi = s.hi > 0 ? s.hi : 0.0;
    } else if (k == ER_STAGE_CAST) {
        if (!st.cast.narrow) return;
#pragma unroll
        for (int q = 0; q < 10; q++) {
            if (q >= nw) break;
            double r = ce_rn(s.w[q], st.cast);
            s.okw[q] = s.okw[q] && ce_rn_ok(s.w[q], r, st.cast);
            s.w[q] = (float)r;
        }
    } else {
        ce_fn(p, k, s);
    }
}

// The base's inner values (the witnesses' start) and bracket (er_dot_inner_row_body; er_tensor_cursor_inner_run).
__device__ inline void ce_base(const er_dev_epi &p, int64_t idx, ce_el &s) {
    double wl, wh;
    bool ok;
    if (p.base == 0) {
        int64_t MN = p.M * p.N, bi = idx / MN, r = idx % MN, i = r / p.N, j = r % p.N;
        double Sh = p.fs[idx], Plo, Phi;
        er_fast_bracket b;
        er_fast_stage1(&p.fc, Sh, p.an[p.ia[bi] * p.M + i], p.bn[p.ib[bi] * p.N + j], &Plo, &Phi);
        int in = er_fast_bracket_of(&p.fc, Sh, Plo, Phi, &b);
        // er_fast_edge_f32: RU_F(tlo), RD_F(thi)
        wl = (double)__double2float_ru(b.tlo);
        wh = (double)__double2float_rd(b.thi);
        s.lo = b.slo;
        s.hi = b.shi;
        ok = in && wl <= wh;
    } else {
        double x = p.x[idx];
        ok = fabs(x) <= FLT_MAX;
        wl = wh = (double)(float)(ok ? x : 0.0);
        s.lo = s.hi = x;
    }
    s.w[0] = (float)wl;
    s.w[1] = (float)wh;
    s.okw[0] = s.okw[1] = s.oke = ok;
}

// er_epi_classes_body with both witnesses and nvar variants: the class (0, 1, 255) and the hull's rel (-1: none).
__device__ inline int ce_class(const er_dev_epi &p, double y, const ce_el &s, double *relp) {
    const er_dev_vfmt &o = p.o;
    double o1 = ce_rn(s.w[0], o), o2 = ce_rn(s.w[1], o), ra = ce_rn(s.lo, o), rb = ce_rn(s.hi, o);
    bool g1 = s.okw[0] && ce_rn_ok(s.w[0], o1, o), g2 = s.okw[1] && ce_rn_ok(s.w[1], o2, o),
         ge = s.oke && ce_rn_ok(s.lo, ra, o) && ce_rn_ok(s.hi, rb, o);
    double wl = o1 < o2 ? o1 : o2, wh = o1 < o2 ? o2 : o1, vl = wl, vh = wh;
    bool gv = p.nvar > 0;
    int nq = 2 + 2 * p.nvar;
#pragma unroll
    for (int q = 2; q < 10; q++) {
        if (q >= nq) break;
        double ov = ce_rn(s.w[q], o);
        gv = gv && s.okw[q] && ce_rn_ok(s.w[q], ov, o);
        vl = ov < vl ? ov : vl;
        vh = ov > vh ? ov : vh;
    }
    bool one = ra == rb, f1 = g1 && y == o1, f2 = g1 && g2 && y >= wl && y <= wh,
         f4 = g1 && g2 && gv && y >= vl && y <= vh;
    ge = ge && fabs(y) <= DBL_MAX;
    bool exact = ge && one && y == ra, covered = ge && (f1 || f2 || f4) && ((one && y != ra) || y < ra || y > rb);
    double hl = f2 ? wl : vl, hh = f2 ? wh : vh, al = fabs(hl), ah = fabs(hh), mx = al > ah ? al : ah;
    double rel = (hh - hl) / (mx > 0 ? mx : 1.0);
    *relp = (covered && !f1 && hl < hh && mx > 0 && rel <= DBL_MAX) ? rel : -1.0;
    return exact ? 0 : covered ? 1 : 255;
}

__global__ void __launch_bounds__(256) ce_k_decide(const er_dev_epi *pp, const void *out, int64_t n,
                                                   uint8_t *classes, double *brel, long long *bidx) {
    const er_dev_epi &p = *pp;
    double best = -1;
    long long bi = LLONG_MAX;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        ce_el s;
        ce_base(p, idx, s);
        for (int j = 0; j < p.ns; j++) ce_stage(p, j, idx, s);
        double rel;
        classes[idx] = (uint8_t)ce_class(p, er_load(out, p.ofmt, idx), s, &rel);
        if (rel > best) { // (each thread's elements increase: the first of equals stays)
            best = rel;
            bi = idx;
        }
    }
    __shared__ double sr[256];
    __shared__ long long si[256];
    sr[threadIdx.x] = best;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            double r2 = sr[threadIdx.x + h];
            long long i2 = si[threadIdx.x + h];
            if (r2 > sr[threadIdx.x] || (r2 == sr[threadIdx.x] && i2 < si[threadIdx.x])) {
                sr[threadIdx.x] = r2;
                si[threadIdx.x] = i2;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        brel[blockIdx.x] = sr[0];
        bidx[blockIdx.x] = si[0];
    }
}

} // namespace

extern "C" int er__devchain_decide(const er_dev_epi *p, const void *out, int64_t n, uint8_t *classes, double *brel,
                                   long long *bidx, void *stream) {
    ce_k_decide<<<ER_DEV_EPI_BLOCKS, 256, 0, (cudaStream_t)stream>>>(p, out, n, classes, brel, bidx);
    return (int)cudaGetLastError();
}

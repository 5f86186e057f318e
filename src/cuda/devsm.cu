// devsm.cu: softmax's rows on the GPU (docs/algorithms/softmax.md, On the GPU). Each function below repeats, operation
// for operation, a host function of the sets in double (src/enclose/ival.h, approx.h, approx.c, exps.c, softmax.c) or
// of the engine's record (src/ops/modules.c, src/covers/covers.c), so that a row gives the host's bits; t-cuda
// compares the two on every element. Built with -fmad=false: every double operation rounds once, as on the host
// (-ffp-contract=off).
#include <cstring>
#include "cuda/devsm.h"
#include "cuda/devrec.cuh"
#include "core/ddsign.h"
#include "core/expdd.h"
#include "cuda/devapprox.cuh"

#define ER_SM_THREADS 256

// The constants as the kernels read them: the scalars from the launch's parameters (constant memory, which the
// instructions take as operands: no register holds them, and none is spilled), exp's tables from shared memory (a
// warp's lookups at different indices, which constant memory would serialise).
struct er_sm_tabs { const double *tlo, *thi, *t1, *t2; };
// er_exp_bounds's view of them (devrec.cuh)
struct er_sm_expc { const double *exp_tlo, *exp_thi; double exp_lh, exp_ll; };
// The tables copied into shared memory by the block (then a barrier).
#define ER_SM_TABLES(c, tb)                                                                                           \
    __shared__ double sh_tlo[64], sh_thi[64], sh_t1[64], sh_t2[64];                                                   \
    for (int k_ = threadIdx.x; k_ < 64; k_ += blockDim.x) {                                                           \
        sh_tlo[k_] = c.exp_tlo[k_];                                                                                   \
        sh_thi[k_] = c.exp_thi[k_];                                                                                   \
        sh_t1[k_] = c.exp_t1[k_];                                                                                     \
        sh_t2[k_] = c.exp_t2[k_];                                                                                     \
    }                                                                                                                 \
    __syncthreads();                                                                                                  \
    const er_sm_tabs tb = {sh_tlo, sh_thi, sh_t1, sh_t2}

// ---- exp enclosed in double: the shift of exps.c (er_exp_bounds: devrec.cuh) ----

// exp(x_j - m) enclosed, with t + e = x_j - m (er__exps_fill: TwoSum, the bounds of exp(t), er_exps_shift by e).
__device__ static void er_exp_diff(const er_devsm_consts &c, const er_sm_tabs &tb, double v, double m, double *lo,
                                   double *hi) {
    if (v == -INFINITY) { *lo = *hi = 0; return; }
    double t = v - m, bb = t - v, e = (v - (t - bb)) + (-m - bb);
    er_exp_bounds(er_sm_expc{tb.tlo, tb.thi, c.exp_lh, c.exp_ll}, t, lo, hi);
    er_exps_shift(e, lo, hi);
}

// The kernel's exp of d_j = fl32(x_j - m): the values of fp32 it may give (er__exp_ends, softmax.h); 0 at -inf.
__device__ static void er_kernel_exp(const er_devsm_consts &c, const er_sm_tabs &tb, double v, double m, double *elo,
                                     double *ehi) {
    *elo = *ehi = 0;
    if (v == -INFINITY) return;
    double dj = (double)__fadd_rn((float)v, (float)-m), zl, zh;
    if (dj == -INFINITY) return;
    er_exp_bounds(er_sm_expc{tb.tlo, tb.thi, c.exp_lh, c.exp_ll}, dj, &zl, &zh);
    double Uj = c.exp_fast ? 2.0 + floor(er_mul_up(1.1730001, fabs(dj))) : c.U;
    er_approx_ends(Uj, zl, zh, elo, ehi);
    if (!(*elo >= ER_F32_MIN_NORMAL)) *elo = 0;
}

// ---- Lemma S7's pass (er_exact_row_dd, softmax.c; er__dd_fx_term, er__dd_fx_pair: ival.h; er_dd_sign and er__exp_dd:
// core/ddsign.h and core/expdd.h, shared) for the elements whose enclosure in double rounds to two values of the
// output ----

typedef __int128 er_i128;

// An integral double 0 <= v < 2^127 as an integer (exact).
__device__ static er_i128 er_i128_of(double v) {
    if (v < 0x1p63) return (er_i128)(unsigned long long)v;
    uint64_t b = er_bits(v), mant = (b & ((1ULL << 52) - 1)) | (1ULL << 52);
    return (er_i128)((er_u128)mant << ((int)(b >> 52) - 1075));
}
// A 128-bit integer of magnitude below 2^127 to the nearest double, ties to even (the host's conversion).
__device__ static double er_i128_to_double(er_i128 v) {
    return v < 0 ? -er_u128_to_double((er_u128)-v) : er_u128_to_double((er_u128)v);
}

// exp(t + e) as *h + *l (er_exp_dd_shift, softmax.c).
__device__ static void er_exp_dd_shift(const er_devsm_consts &c, const er_sm_tabs &tb, double t, double e, double *h,
                                       double *l) {
    er_exp_dd_tab(t, c.exp_lh, c.exp_ll, tb.t1, tb.t2, h, l); // er__exp_dd (core/expdd.h)
    if (e == 0) return;
    double cc = *l + *h * e, s = *h + cc;
    *l = cc - (s - *h);
    *h = s;
}
// The fixed-point bounds of h + l in units of 2^-96 (er__dd_fx_term).
__device__ static void er_dd_fx_term(double h, double l, er_i128 *L, er_i128 *U) {
    double A = h * 0x1p96, fA = floor(A), fr = A - fA, B = l * 0x1p96, c = h * 0x1p32;
    er_i128 I = er_i128_of(fA);
    *L = I + (er_i128)(long long)floor(er_dn(er_dn(fr + B) - c));
    *U = I + (er_i128)(long long)ceil(er_up(er_up(fr + B) + c));
}
// I 2^-96 as h + l below it (up = 0) or above it (up = 1) (er__dd_fx_pair).
__device__ static void er_dd_fx_pair(er_i128 I, int up, double *h, double *l) {
    double a = er_i128_to_double(I), b = er_i128_to_double(I - er_i128_of(a));
    b = up ? er_up(b) : er_dn(b);
    *h = a * 0x1p-96;
    *l = b * 0x1p-96;
}

// The bounds of the row's sum of exp(x_j - m) in double-double for Lemma S7 (er_exact_row_dd's S below in dd[0] +
// dd[1], above in dd[2] + dd[3]), by the block; sl, sh: one 128-bit integer per warp. Ends with a barrier.
__device__ static void er_sm_dd_sums(const er_devsm_consts &c, const er_sm_tabs &tb, const void *x, int64_t base,
                                     int64_t n, double m, er_u128 *sl, er_u128 *sh, double *dd) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x / 32;
    er_u128 L = 0, U = 0;
    for (int64_t j = tid; j < n; j += blockDim.x) {
        double v = er_load(x, c.x_fmt, base + j), t = v - m, bb = t - v, e = (v - (t - bb)) + (-m - bb);
        er_i128 tl = 0, tu = 1; // exp(x_j - m) < 2^-995 below -690 (and 0 at -inf)
        if (t >= -690.0) {
            double h, l;
            er_exp_dd_shift(c, tb, t, e, &h, &l);
            er_dd_fx_term(h, l, &tl, &tu);
        }
        L += (er_u128)tl;
        U += (er_u128)tu;
    }
    for (int off = 16; off; off >>= 1) {
        L += er_shfl_u128(L, off);
        U += er_shfl_u128(U, off);
    }
    if (lane == 0) { sl[warp] = L; sh[warp] = U; }
    __syncthreads();
    if (tid == 0) {
        for (int k = 1; k < nw; k++) { sl[0] += sl[k]; sh[0] += sh[k]; }
        er_dd_fx_pair((er_i128)sl[0], 0, &dd[0], &dd[1]);
        er_dd_fx_pair((er_i128)sh[0], 1, &dd[2], &dd[3]);
    }
    __syncthreads();
}

// An element whose enclosure [x1, x2] of the exact quotient rounds to r1 < r2 (er_exact_row_dd's test): where r1 and
// r2 are neighbours of fp32 and e / S lies on one side of their midpoint, its correct rounding into *rounded and the
// quotient to about 2^-100 into *exact; 0 where the test does not decide (the host's MPFR then does).
__device__ static __noinline__ int er_sm_dd_decide(const er_devsm_consts &c, const er_sm_tabs &tb, double v,
                                                   double m, double r1, double r2, const double *dd, double *rounded,
                                                   double *exact) {
    double t = v - m, bb = t - v, e = (v - (t - bb)) + (-m - bb);
    if (!(t >= -690.0)) return 0;
    double mu = 0.5 * r1 + 0.5 * r2;
    if (!(r1 >= 0 && r1 < r2 && r2 <= 1) || mu == r1 || mu == r2 || er_f32_rd(mu) != r1 || er_f32_ru(mu) != r2)
        return 0; // not neighbours of fp32
    double h, l;
    er_exp_dd_shift(c, tb, t, e, &h, &l);
    int above = er_dd_sign(h, er_dn(l - h * 0x1p-64), mu, 0.0, dd[2], dd[3]) > 0;
    int below = er_dd_sign(h, er_up(l + h * 0x1p-64), mu, 0.0, dd[0], dd[1]) < 0;
    if (!above && !below) return 0;
    double q0 = h / dd[0], p = q0 * dd[0], pe = fma(q0, dd[0], -p);
    *exact = q0 + (((h - p) - pe) + (l - q0 * dd[1])) / dd[0];
    *rounded = above ? r2 : r1;
    return 1;
}

// The row's constants, computed by its first thread.
struct er_sm_row { double sl, sh, one_minus, one_plus, klo, khi, rl, rh; int overflow; };

// Element i of a row: its set in fp32 (er_softmax_sets_dbl's main case), the output's set and the exact result
// (er_exact_row_dbl), its class. Returns 1 where decided, 2 where the correct rounding is not decided in double and
// Lemma S7's pass may decide it (dd NULL: the first pass, nothing recorded), 0 where the host must take the row (a
// quotient that may be infinite, an end beyond the output's range, a correct rounding neither pass decides, an output
// outside the set or NaN). With dd (er_sm_dd_sums's bounds: the second pass), only the elements the first left open
// are recorded.
__device__ static int er_element(const er_devsm_consts &c, const er_sm_tabs &tb, const er_sm_row &w, double v,
                                 double m, double elo, double ehi, double y, int64_t idx, uint8_t *cls, er_rec_acc &a,
                                 const double *dd) {
    double lo, hi;
    er_exp_diff(c, tb, v, m, &lo, &hi);
    double x1 = lo * w.rl, x2 = hi * w.rh;
    if (!(fabs(x1) <= c.omax && fabs(x2) <= c.omax)) return 0;
    double rounded = er_out_rn(x1, c.out_fmt), exact = 0.5 * x1 + 0.5 * x2, r2 = er_out_rn(x2, c.out_fmt);
    if (rounded != r2) {
        if (!dd) return c.dd ? 2 : 0;
        if (!er_sm_dd_decide(c, tb, v, m, rounded, r2, dd, &rounded, &exact)) return 0;
    } else if (dd) return 1; // recorded in the first pass
    double ql = 0, qh = 0;
    if (elo != 0) ql = er_f32_rn((elo / (((w.sh - ehi) + elo) * w.one_plus)) * w.klo);
    if (ehi != 0) {
        double den = ((w.sl - elo) + ehi) * w.one_minus;
        if (!(den > 0)) return 0;
        qh = er_f32_rn((ehi / den) * w.khi);
    }
    if (w.overflow) ql = 0;
    if (!(fabs(ql) <= c.omax && fabs(qh) <= c.omax)) return 0;
    double clo = INFINITY, chi = -INFINITY;
    if (ql <= qh) { clo = er_out_rn(ql, c.out_fmt); chi = er_out_rn(qh, c.out_fmt); }
    if (clo > chi) clo = chi = rounded;
    else {
        if (rounded < clo) clo = rounded;
        if (rounded > chi) chi = rounded;
    }
    return er_record(clo, chi, rounded, exact, y, idx, c.bug, c.omax, c.out_fmt, cls, a);
}


// The head of row `base` (n elements) in a block: its maximum *m (every thread); 0 where the row is the host's (a NaN
// or +inf: NaN everywhere; or -inf alone); else the ends of the kernel's exps (values of fp32) into el and eh, and in
// thread 0 the sums to nearest of those ends in er__sums32's order (s[0], s[1]) and the bounds of the exact sum of
// exp(x_j - m) (s[2], s[3]: er__fxsum_lo and er__fxsum_hi). Ends with a barrier.
__device__ static int er_sm_head(const er_devsm_consts &c, const er_sm_tabs &tb, const void *x, int64_t base,
                                 int64_t n, float *el, float *eh, double *shd, er_u128 *shl, er_u128 *shh, double *mp,
                                 double s[4]) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x / 32;
    double m = -INFINITY;
    int bad = 0;
    for (int64_t j = tid; j < n; j += blockDim.x) {
        double v = er_load(x, c.x_fmt, base + j);
        bad |= (v != v) | (v == INFINITY);
        if (v > m) m = v;
    }
    for (int off = 16; off; off >>= 1) m = fmax(m, __shfl_down_sync(ER_FULL, m, off));
    if (lane == 0) shd[warp] = m;
    bad = __syncthreads_or(bad);
    m = shd[0];
    for (int k = 1; k < nw; k++) m = fmax(m, shd[k]);
    *mp = m;
    if (bad || m == -INFINITY) {
        __syncthreads(); // every warp has read shd before the next row writes it
        return 0;
    }
    // the kernel's exps (their ends, for the sums in order) and the exact sum's fixed-point parts
    er_u128 fl = 0, fh = 0;
    for (int64_t j = tid; j < n; j += blockDim.x) {
        double v = er_load(x, c.x_fmt, base + j), lo, hi, a, b;
        er_exp_diff(c, tb, v, m, &lo, &hi);
        er_u128 tl, th;
        er_fx_terms(lo, hi, &tl, &th);
        fl += tl;
        fh += th;
        er_kernel_exp(c, tb, v, m, &a, &b);
        el[j] = (float)a; // values of fp32 (or 0, or an infinity): exact
        eh[j] = (float)b;
    }
    for (int off = 16; off; off >>= 1) {
        fl += er_shfl_u128(fl, off);
        fh += er_shfl_u128(fh, off);
    }
    if (lane == 0) { shl[warp] = fl; shh[warp] = fh; }
    __syncthreads(); // shd is free: every thread has read the maximum
    if (warp < 2) {
        // er__sums32's order (er_softmax_sets_dbl's sums to nearest), the lower ends' sum in warp 0 and the upper
        // ends' in warp 1: lane l adds the ends of elements l, l + 32, ... in turn, then the 32 partial sums are added
        // in lane order, each taken from the lane that holds it
        const float *e = warp == 0 ? el : eh;
        double p = 0, q = 0;
        for (int64_t j = lane; j < n; j += 32) p += e[j];
        for (int k = 0; k < 32; k++) q += __shfl_sync(ER_FULL, p, k);
        if (lane == 0) shd[warp] = q;
    }
    __syncthreads();
    if (tid == 0) {
        for (int k = 1; k < nw; k++) { shl[0] += shl[k]; shh[0] += shh[k]; }
        s[0] = shd[0];
        s[1] = shd[1];
        s[2] = er_dn(ldexp(er_dn(er_u128_to_double(shl[0])), -90));
        s[3] = er_up(ldexp(er_up(er_u128_to_double(shh[0])), -90));
    }
    __syncthreads();
    return 1;
}

// A row's constants from its head's sums (er_sm_head's s): er_softmax_sets_dbl's sums widened once (Lemma D4), then
// Lemma D5's factors; er_exact_row_dbl's bounds of 1/S from the exact sums.
__device__ static void er_sm_row_consts(const er_devsm_consts &c, int64_t n, const double sums[4], er_sm_row &w) {
    double sl = sums[0], sh = sums[1], Sl = sums[2], Sh = sums[3];
    if ((double)n > 0x1p49) { sl = 0; sh = INFINITY; }
    else {
        sl = er_dn(sl * er_dn(1.0 - 2.0 * (double)n * 0x1p-53));
        sh = er_up(sh * er_up(1.0 + 4.0 * (double)n * 0x1p-53));
    }
    const double u = 0x1p-24;
    w.sl = sl;
    w.sh = sh;
    w.overflow = er_mul_up(c.g, sh) >= c.thr;
    w.one_minus = er_dn(1.0 - c.c1);
    w.one_plus = er_up(1.0 + c.c1);
    w.klo = c.div != 1 ? er_dn(er_dn(1.0 - u) * er_dn(1.0 - 0x1p-50)) : er_dn(1.0 - 0x1p-50);
    w.khi = c.div != 1 ? er_up(er_up(1.0 + u) * er_up(1.0 + 0x1p-50)) : er_up(1.0 + 0x1p-50);
    w.rl = er_dn(er_dn(1.0 / Sh) * (1.0 - 0x1p-51));
    w.rh = er_up(er_up(1.0 / Sl) * (1.0 + 0x1p-51));
}

__global__ void __launch_bounds__(ER_SM_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_softmax_rows(const void *x, const void *out, int64_t rows, int64_t n,
                      const __grid_constant__ er_devsm_consts c, float *scratch, uint8_t *classes, er_dev_part *parts,
                      int64_t *pend, unsigned long long *npend) {
    __shared__ double shd[ER_SM_THREADS / 32];
    __shared__ er_u128 shl[ER_SM_THREADS / 32], shh[ER_SM_THREADS / 32];
    __shared__ er_rec_acc sha[ER_SM_THREADS / 32];
    __shared__ er_sm_row w;
    __shared__ double dd[4];
    int tid = threadIdx.x;
    ER_SM_TABLES(c, tb);
    float *el = scratch + (int64_t)blockIdx.x * 2 * n, *eh = el + n;
    er_rec_acc tot;
    er_acc_init(tot);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t base = row * n;
        double m, sums[4];
        if (!er_sm_head(c, tb, x, base, n, el, eh, shd, shl, shh, &m, sums)) {
            er_pend_row(classes, base, n, row, pend, npend);
            continue;
        }
        if (tid == 0) er_sm_row_consts(c, n, sums, w);
        __syncthreads();
        er_rec_acc a;
        er_acc_init(a);
        int ok = 1, open = 0;
        for (int64_t i = tid; i < n && ok; i += blockDim.x) {
            double v = er_load(x, c.x_fmt, base + i), y = er_load(out, c.out_fmt, base + i);
            int k = er_element(c, tb, w, v, m, el[i], eh[i], y, base + i, &classes[base + i], a, NULL);
            ok = k != 0;
            open |= k == 2;
        }
        // the elements left open, where every other is decided: Lemma S7's pass, as the host's rows take it
        if (__syncthreads_or(open) && __syncthreads_and(ok)) {
            er_sm_dd_sums(c, tb, x, base, n, m, shl, shh, dd);
            for (int64_t i = tid; i < n && ok; i += blockDim.x) {
                double v = er_load(x, c.x_fmt, base + i), y = er_load(out, c.out_fmt, base + i);
                ok = er_element(c, tb, w, v, m, el[i], eh[i], y, base + i, &classes[base + i], a, dd) != 0;
            }
        }
        // then sha, shd, shl, dd and w are the next row's
        er_row_end(ok, a, sha, tot, classes, base, n, row, pend, npend);
    }
    if (tid == 0) {
        parts[blockIdx.x] = er_acc_part(tot);
    }
}

// Element idx that er_k_softmax_rows decided, decided again by one block (its row's head and constants, then the
// element in thread 0, with Lemma S7's pass where the element needs it) for the report's widest set: its set into *set
// (set->ok 0: not decided). scratch: 2 n floats.
__global__ void __launch_bounds__(ER_SM_THREADS)
    er_k_softmax_one(const void *x, const void *out, int64_t n, const __grid_constant__ er_devsm_consts c,
                     float *scratch, int64_t idx, er_dev_cset *set) {
    __shared__ double shd[ER_SM_THREADS / 32];
    __shared__ er_u128 shl[ER_SM_THREADS / 32], shh[ER_SM_THREADS / 32];
    __shared__ er_sm_row w;
    __shared__ double dd[4];
    __shared__ int open;
    int tid = threadIdx.x;
    if (tid == 0) set->ok = 0; // er_record sets it where it decides
    ER_SM_TABLES(c, tb);
    int64_t base = idx - idx % n;
    float *el = scratch, *eh = el + n;
    double m, sums[4];
    if (!er_sm_head(c, tb, x, base, n, el, eh, shd, shl, shh, &m, sums)) return;
    er_rec_acc a;
    er_acc_init(a);
    a.set = set;
    uint8_t cls;
    double v = er_load(x, c.x_fmt, idx), y = er_load(out, c.out_fmt, idx);
    if (tid == 0) {
        er_sm_row_consts(c, n, sums, w);
        open = er_element(c, tb, w, v, m, el[idx - base], eh[idx - base], y, idx, &cls, a, NULL) == 2;
    }
    __syncthreads();
    if (!open) return;
    er_sm_dd_sums(c, tb, x, base, n, m, shl, shh, dd);
    if (tid == 0) (void)er_element(c, tb, w, v, m, el[idx - base], eh[idx - base], y, idx, &cls, a, dd);
}

// ---- log_softmax: the rows' heads, the host's logs (er__log_softmax_dev_consts), then the elements ----

__global__ void __launch_bounds__(ER_SM_THREADS)
    er_k_lsm_heads(const void *x, int64_t rows, int64_t n, const __grid_constant__ er_devsm_consts c, float *scratch,
                   double *ms, double *sums) {
    __shared__ double shd[ER_SM_THREADS / 32];
    __shared__ er_u128 shl[ER_SM_THREADS / 32], shh[ER_SM_THREADS / 32];
    ER_SM_TABLES(c, tb);
    float *el = scratch + (int64_t)blockIdx.x * 2 * n, *eh = el + n;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        double m, s[4];
        int ok = er_sm_head(c, tb, x, row * n, n, el, eh, shd, shl, shh, &m, s);
        if (threadIdx.x == 0) {
            ms[row] = m;
            for (int k = 0; k < 4; k++) sums[4 * row + k] = ok ? s[k] : NAN;
        }
    }
}

// Element i of a log_softmax row with maximum m and constants rc (the ends of the kernel's log of its sum, log(S)
// enclosed): its set, y = fl(d_i - l) or fl(x_i - fl(m + l)) at both ends of l (er_log_sets), its exact result
// (er_exact_row_dbl's log case) and its record. 0 where the host must take the row: x_i = -inf, a value beyond the
// output's range, a rounding double cannot decide, an output outside the set or NaN.
__device__ static int er_lsm_element(const er_devsm_consts &c, const double *rc, double m, double v, double y,
                                     int64_t idx, uint8_t *cls, er_rec_acc &a) {
    if (v == -INFINITY) return 0;
    float xf = (float)v, mf = (float)m, ll = (float)rc[0], lh = (float)rc[1], d = __fadd_rn(xf, -mf);
    double y1 = __fadd_rn(d, -lh), y2 = __fadd_rn(d, -ll);
    double z1 = __fadd_rn(xf, -__fadd_rn(mf, lh)), z2 = __fadd_rn(xf, -__fadd_rn(mf, ll));
    double lo = y1 < z1 ? y1 : z1, hi = y2 > z2 ? y2 : z2;
    if (!(fabs(lo) <= c.omax && fabs(hi) <= c.omax)) return 0;
    double clo = er_out_rn(lo, c.out_fmt), chi = er_out_rn(hi, c.out_fmt);
    // the exact result: (x_i - m) - log(S), with x_i - m = t + e (TwoSum, as er__exps_fill)
    double t = v - m, bb = t - v, e = (v - (t - bb)) + (-m - bb);
    double tl = e == 0 ? t : er_dn(t), th = e == 0 ? t : er_up(t);
    double ql = er_dn(tl - rc[3]), qh = er_up(th - rc[2]);
    return er_record_bracket(clo, chi, ql, qh, y, idx, c.bug, c.omax, c.out_fmt, cls, a);
}

__global__ void __launch_bounds__(ER_SM_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_lsm_rows(const void *x, const void *out, int64_t rows, int64_t n, const __grid_constant__ er_devsm_consts c,
                  const double *ms,
                  const double *rcs, uint8_t *classes, er_dev_part *parts, int64_t *pend, unsigned long long *npend) {
    __shared__ er_rec_acc sha[ER_SM_THREADS / 32];
    er_rows_by_consts<4>(0, rows, n, rcs, classes, sha, parts, pend, npend,
                         [&](const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
                             return er_lsm_element(c, rc, ms[row], er_load(x, c.x_fmt, idx),
                                                   er_load(out, c.out_fmt, idx), idx, cls, a);
                         });
}

__global__ void er_k_lsm_one(const void *x, const void *out, int64_t n, const __grid_constant__ er_devsm_consts c,
                             const double *ms,
                             const double *rcs, int64_t idx, er_dev_cset *set) {
    er_one_by_consts<4>(idx, n, rcs, set, [&](const double *rc, int64_t row, int64_t i, uint8_t *cls, er_rec_acc &a) {
        return er_lsm_element(c, rc, ms[row], er_load(x, c.x_fmt, i), er_load(out, c.out_fmt, i), i, cls, a);
    });
}

__global__ void er_k_sm_gather(const int64_t *rows, int64_t np, const void *x, int xf, const void *out, int of,
                               int64_t n, double *xs, double *ys) {
    for (int64_t p = blockIdx.x; p < np; p += gridDim.x)
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            xs[p * n + j] = er_load(x, xf, rows[p] * n + j);
            ys[p * n + j] = er_load(out, of, rows[p] * n + j);
        }
}

extern "C" {

int er__dev_blocks(int64_t rows) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
                                                  cudaSuccess || sms < 1) {
        (void)cudaGetLastError();
        sms = 16;
    }
    int64_t b = (int64_t)sms * 8;
    return (int)(rows < b ? (rows > 0 ? rows : 1) : b);
}

int er__devsm_rows(const void *x, const void *out, int64_t rows, int64_t n, const er_devsm_consts *c, int blocks,
                   float *scratch, uint8_t *classes, er_dev_part *parts, int64_t *pend, unsigned long long *npend,
                   void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_softmax_rows<<<blocks, ER_SM_THREADS, 0, (cudaStream_t)stream>>>(
        x, out, rows, n, *c, scratch, classes, parts, pend, npend);
    return (int)cudaGetLastError();
}

int er__devsm_log_heads(const void *x, int64_t rows, int64_t n, const er_devsm_consts *c, int blocks, float *scratch,
                        double *m, double *sums, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_lsm_heads<<<blocks, ER_SM_THREADS, 0, (cudaStream_t)stream>>>(x, rows, n, *c, scratch, m, sums);
    return (int)cudaGetLastError();
}

int er__devsm_log_rows(const void *x, const void *out, int64_t rows, int64_t n, const er_devsm_consts *c,
                       const double *m, const double *rc, int blocks, uint8_t *classes, er_dev_part *parts,
                       int64_t *pend, unsigned long long *npend, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_lsm_rows<<<blocks, ER_SM_THREADS, 0, (cudaStream_t)stream>>>(x, out, rows, n, *c, m, rc, classes, parts,
                                                                     pend, npend);
    return (int)cudaGetLastError();
}

int er__devsm_one(const void *x, const void *out, int64_t n, const er_devsm_consts *c, float *scratch, int64_t idx,
                  er_dev_cset *set, void *stream) {
    er_k_softmax_one<<<1, ER_SM_THREADS, 0, (cudaStream_t)stream>>>(x, out, n, *c, scratch, idx, set);
    return (int)cudaGetLastError();
}

int er__devsm_log_one(const void *x, const void *out, int64_t n, const er_devsm_consts *c, const double *m,
                      const double *rc, int64_t idx, er_dev_cset *set, void *stream) {
    er_k_lsm_one<<<1, 1, 0, (cudaStream_t)stream>>>(x, out, n, *c, m, rc, idx, set);
    return (int)cudaGetLastError();
}

int er__dev_gather(const int64_t *rows, int64_t np, const void *x, int x_fmt, const void *out, int out_fmt,
                     int64_t n, double *xs, double *ys, void *stream) {
    if (np == 0) return 0;
    er_k_sm_gather<<<(unsigned)(np < 65535 ? np : 65535), 256, 0, (cudaStream_t)stream>>>(rows, np, x, x_fmt, out,
                                                                                          out_fmt, n, xs, ys);
    return (int)cudaGetLastError();
}

} // extern "C"

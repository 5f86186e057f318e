// devsbwd.cu: softmax's and log_softmax's backward passes along rows on the GPU (docs/algorithms/softmax-backward.md,
// On the GPU). Each row's sum (D = sum dy_j y_j; log_softmax's S = sum dy_j) is a window of floors (core/pwin.h:
// exact, the same in any order) with the sums of its positive and negative terms in er_pwin_lanes's order; each
// element's set and exact result repeat er__sbwd_row's fast pass (er_sbwd_forms_body, er_sbwd_exact_body,
// er_row_map_ival_body), or er__lsbwd_row's (exp's ends of er__exp_ends_f32_of and er__approx_ends,
// er_lsbwd_forms_body, er_lsbwd_exact_body), operation for operation, so that a row gives the host's bits; t-cuda
// compares the two on every element. Built with -fmad=false: every operation rounds once, as on the host
// (-ffp-contract=off).
#include "cuda/devsbwd.h"
#include "cuda/devrec.cuh"
#include "cuda/devapprox.cuh"

#define ER_SB_THREADS ER_PWIN_LANES // one thread a lane of er_pwin_lanes's order

// Element j's product p = dy_j y_j (exact in double; y NULL: p = dy_j) and, where c.p_fmt >= 0, p rounded to that
// format (*t; NaN where p lies beyond its largest value: the host's row).
__device__ static double er_sb_prod(const er_devsbwd_consts &c, const void *dy, const void *y, int64_t i, double *t) {
    double p = er_load(dy, c.dy_fmt, i) * (y ? er_load(y, c.y_fmt, i) : 1.0);
    *t = c.p_fmt < 0 ? 0.0 : fabs(p) <= c.pmax ? er_out_rn(p, c.p_fmt) : NAN;
    return p;
}

// The largest of a block's values (every thread gets it); shd: one double per warp.
__device__ static double er_sb_bmax(double v, double *shd) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x / 32;
    for (int off = 16; off; off >>= 1) v = fmax(v, __shfl_down_sync(ER_FULL, v, off));
    if (lane == 0) shd[warp] = v;
    __syncthreads();
    v = shd[0];
    for (int k = 1; k < nw; k++) v = fmax(v, shd[k]);
    __syncthreads(); // every warp has read shd
    return v;
}

// One window's row: the lanes' sums pos[] and negs[] (shared, one a thread) added in turn from the 0th, W joined over
// the block (shw: one per warp), by thread 0.
__device__ static er_pwin_row er_sb_row_of(er_pw_u128 W, const er_pw_u128 *shw, const double *pos, const double *negs,
                                           int b, int tail, int special) {
    int nw = ER_SB_THREADS / 32;
    for (int k = 1; k < nw; k++) W += shw[k];
    double sp = 0, sn = 0;
    for (int k = 0; k < ER_SB_THREADS; k++) {
        sp += pos[k];
        sn += negs[k];
    }
    er_pwin_row r = {(uint64_t)W, (uint64_t)(W >> 64), sp, sn, b, (uint8_t)tail, (uint8_t)special, {0, 0}};
    return r;
}

__global__ void __launch_bounds__(ER_SB_THREADS)
    er_k_sbwd_sums(const void *dy, const void *y, int64_t rows, int64_t n, const __grid_constant__ er_devsbwd_consts c,
                   er_pwin_row *win) {
    __shared__ double shd[ER_SB_THREADS / 32], shl[4][ER_SB_THREADS];
    __shared__ er_pw_u128 shw[2][ER_SB_THREADS / 32];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, two = c.p_fmt >= 0;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t base = row * n;
        // the largest |p| and |t|, and whether a value is not finite or a product beyond p_fmt's range
        double pm = 0, tm = 0;
        int bad = 0, bad2 = 0;
        for (int64_t j = tid; j < n; j += blockDim.x) {
            double t, p = er_sb_prod(c, dy, y, base + j, &t);
            bad |= !(fabs(p) <= DBL_MAX) || !(fabs(er_load(dy, c.dy_fmt, base + j)) <= DBL_MAX) ||
                   (y && !(fabs(er_load(y, c.y_fmt, base + j)) <= DBL_MAX));
            bad2 |= t != t;
            pm = fmax(pm, fabs(p));
            tm = fmax(tm, fabs(t));
        }
        bad = __syncthreads_or(bad);
        bad2 = __syncthreads_or(bad2);
        pm = er_sb_bmax(bad ? 0.0 : pm, shd);
        tm = er_sb_bmax(bad || bad2 ? 0.0 : tm, shd);
        // the windows (exact, the same in any order) and thread tid's lane of er_pwin_lanes's order
        int b1 = pm > 0 ? er_pwin_base(pm) : 0, b2 = tm > 0 ? er_pwin_base(tm) : 0, tail1 = 0, tail2 = 0;
        er_pw_u128 W1 = 0, W2 = 0;
        double p1 = 0, n1 = 0, p2 = 0, n2 = 0;
        for (int64_t j = tid; j < n && !bad; j += blockDim.x) {
            double t, p = er_sb_prod(c, dy, y, base + j, &t);
            if (pm > 0) W1 += (er_pw_u128)er_pwin_term(p, b1, &tail1);
            p1 += p > 0 ? p : 0.0;
            n1 += p < 0 ? -p : 0.0;
            if (!two || bad2) continue;
            if (tm > 0) W2 += (er_pw_u128)er_pwin_term(t, b2, &tail2);
            p2 += t > 0 ? t : 0.0;
            n2 += t < 0 ? -t : 0.0;
        }
        for (int off = 16; off; off >>= 1) {
            W1 += er_shfl_u128(W1, off);
            W2 += er_shfl_u128(W2, off);
        }
        if (lane == 0) {
            shw[0][warp] = W1;
            shw[1][warp] = W2;
        }
        shl[0][tid] = p1;
        shl[1][tid] = n1;
        shl[2][tid] = p2;
        shl[3][tid] = n2;
        tail1 = __syncthreads_or(tail1);
        tail2 = __syncthreads_or(tail2);
        if (tid == 0) {
            win[2 * row] = er_sb_row_of(shw[0][0], shw[0], shl[0], shl[1], b1, tail1, bad);
            if (two) win[2 * row + 1] = er_sb_row_of(shw[1][0], shw[1], shl[2], shl[3], b2, tail2, bad || bad2);
        }
        __syncthreads(); // shw and shl are the next row's
    }
}

__device__ static inline float er_sb_min(float a, float b) { return a < b ? a : b; }
__device__ static inline float er_sb_max(float a, float b) { return a > b ? a : b; }
// The least and greatest of eight forms' values (er_sbwd_ends8, softmax_bwd.c; the caller has checked them finite).
__device__ static inline void er_sb_ends8(const float f[8], float *l, float *h) {
    *l = er_sb_min(er_sb_min(er_sb_min(f[0], f[1]), er_sb_min(f[2], f[3])),
                   er_sb_min(er_sb_min(f[4], f[5]), er_sb_min(f[6], f[7])));
    *h = er_sb_max(er_sb_max(er_sb_max(f[0], f[1]), er_sb_max(f[2], f[3])),
                   er_sb_max(er_sb_max(f[4], f[5]), er_sb_max(f[6], f[7])));
}
__device__ static inline void er_sb_two_sum(double a, double b, double *s, double *e) {
    double x = a + b, z = x - a;
    *s = x;
    *e = (a - (x - z)) + (b - z);
}
// er__up_wide, er__dn_wide (ival.h)
__device__ static inline double er_sb_up_wide(double x) { return x + (fabs(x) * 0x1p-52 + 0x1p-1074); }
__device__ static inline double er_sb_dn_wide(double x) { return x - (fabs(x) * 0x1p-52 + 0x1p-1074); }

// er_row_map_ival_body: an element's set [lo, hi] in F (finite, within the output's range) rounded into the output
// format and joined with the correct rounding rd, then its record (exact result ex, output yo).
__device__ static int er_sb_put(const er_devsbwd_consts &c, double lo, double hi, double rd, double ex, double yo,
                                int64_t idx, uint8_t *cls, er_rec_acc &a) {
    double clo = er_out_rn(lo, c.out_fmt), chi = er_out_rn(hi, c.out_fmt);
    clo = rd < clo ? rd : clo;
    chi = rd > chi ? rd : chi;
    return er_record(clo, chi, rd, ex, yo, idx, 0.0, c.omax, c.out_fmt, cls, a);
}

// Element (dy, y; output yo) of a row with D~'s set [rc[0], rc[1]] and D = rc[2] + rc[3] + r, |r| <= rc[4]: its set in
// the output format, its exact result, its record. 0 where the host must take the row: a form not finite or beyond
// the output's range, an exact result Lemma B3 leaves open, an output outside the set or NaN.
__device__ static int er_sb_element(const er_devsbwd_consts &c, const double *rc, double dy, double y, double yo,
                                    int64_t idx, uint8_t *cls, er_rec_acc &a) {
    // er_sbwd_forms_body: the forms of Lemma B2 in fp32 at D~ = d0 and d1
    float g = (float)dy, v = (float)y, d0 = (float)rc[0], d1 = (float)rc[1], pr = __fmul_rn(g, v),
          b0 = __fmul_rn(v, d0), b1 = __fmul_rn(v, d1);
    float f[8] = {__fmul_rn(v, __fsub_rn(g, d0)), __fsub_rn(pr, b0), __fmaf_rn(-v, d0, pr), __fmaf_rn(g, v, -b0),
                  __fmul_rn(v, __fsub_rn(g, d1)), __fsub_rn(pr, b1), __fmaf_rn(-v, d1, pr), __fmaf_rn(g, v, -b1)};
    for (int k = 0; k < 8; k++)
        if (!isfinite(f[k])) return 0;
    float l, h;
    er_sb_ends8(f, &l, &h);
    if (c.p_fmt >= 0) { // t the product rounded to the inputs' format (finite: the sums' kernel checked it)
        float p = (float)er_out_rn(dy * y, c.p_fmt), e0 = __fsub_rn(p, b0), e1 = __fmaf_rn(-v, d0, p),
              e2 = __fsub_rn(p, b1), e3 = __fmaf_rn(-v, d1, p);
        if (!isfinite(e0) || !isfinite(e1) || !isfinite(e2) || !isfinite(e3)) return 0;
        l = er_sb_min(l, er_sb_min(er_sb_min(e0, e1), er_sb_min(e2, e3)));
        h = er_sb_max(h, er_sb_max(er_sb_max(e0, e1), er_sb_max(e2, e3)));
    }
    double lo = l, hi = h;
    if (!(fabs(lo) <= c.omax && fabs(hi) <= c.omax)) return 0;
    // er_sbwd_exact_body (Lemma B3 and its exact case)
    double s, se, uh, ul, cc, ce, t, te, xl, xe;
    er_sb_two_sum(dy, -rc[2], &s, &se);
    er_sb_two_sum(se, -rc[3], &t, &te);
    er_sb_two_sum(s, t, &uh, &ul);
    double e1 = fabs(t) * 0x1p-52 + rc[4];
    double ph = y * uh, pl = fma(y, uh, -ph), q = y * ul, qe = fma(y, ul, -q);
    er_sb_two_sum(pl, q, &xl, &xe);
    er_sb_two_sum(ph, xl, &cc, &ce);
    double E = ((fabs(q) + fabs(xl)) * 0x1p-52 + fabs(y) * e1) * (1 + 0x1p-48) + 0x1p-1070;
    double wl = er_sb_dn_wide(ce - E), wh = er_sb_up_wide(ce + E);
    int exact = rc[4] == 0 && te == 0 && qe == 0 && xe == 0 && (uh == 0 || fabs(ph) >= 0x1p-969) &&
                (ul == 0 || fabs(q) >= 0x1p-969);
    double L = exact ? (ce < 0 ? er_dn(cc) : cc) : er_sb_dn_wide(cc + wl),
           H = exact ? (ce > 0 ? er_up(cc) : cc) : er_sb_up_wide(cc + wh), ex, rd;
    if (y == 0) {
        if (!(fabs(uh) > 2 * (fabs(ul) + e1 * (1 + 0x1p-48)))) return 0;
        ex = rd = copysign(0.0, copysign(1.0, y) * uh);
    } else {
        if (!(fabs(L) <= c.omax && fabs(H) <= c.omax && (L > 0 || H < 0))) return 0;
        rd = er_out_rn(L, c.out_fmt);
        double hu = (er_up(cc) - cc) * 0.5, hd = (cc - er_dn(cc)) * 0.5;
        if (rd != er_out_rn(H, c.out_fmt) || !(exact || (wl > -hd && wh < hu))) return 0;
        ex = cc;
    }
    return er_sb_put(c, lo, hi, rd, ex, yo, idx, cls, a);
}

// Element idx of row `row` with its row's constants rc, its class into *cls (er_rows_by_consts's elem).
__device__ static int er_sb_at(const er_devsbwd_consts &c, const void *dy, const void *y, const void *out,
                               const double *rc, int64_t idx, uint8_t *cls, er_rec_acc &a) {
    return er_sb_element(c, rc, er_load(dy, c.dy_fmt, idx), er_load(y, c.y_fmt, idx), er_load(out, c.out_fmt, idx),
                         idx, cls, a);
}

__global__ void __launch_bounds__(ER_SB_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_sbwd_rows(const void *dy, const void *y, const void *out, int64_t rows, int64_t n,
                   const __grid_constant__ er_devsbwd_consts c, const double *rcs, uint8_t *classes,
                   er_dev_part *parts, int64_t *pend, unsigned long long *npend) {
    __shared__ er_rec_acc sha[ER_SB_THREADS / 32];
    er_rows_by_consts<5>(0, rows, n, rcs, classes, sha, parts, pend, npend,
                         [&](const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
                             return er_sb_at(c, dy, y, out, rc, idx, cls, a);
                         });
}

__global__ void er_k_sbwd_one(const void *dy, const void *y, const void *out, int64_t n,
                              const __grid_constant__ er_devsbwd_consts c, const double *rcs, int64_t idx,
                              er_dev_cset *set) {
    er_one_by_consts<5>(idx, n, rcs, set, [&](const double *rc, int64_t row, int64_t i, uint8_t *cls, er_rec_acc &a) {
        return er_sb_at(c, dy, y, out, rc, i, cls, a);
    });
}

// ---- log_softmax: dx_i = dy_i - exp(y_i) S, S = sum_j dy_j (Theorem B2) ----


// er_lsbwd_dd (softmax_bwd.c): dx = dy - exp(y) S's correct rounding into *rd and its report value into *ex by Lemma B5
// (core/lsbdd.h, shared), S's parts from the row's constants: M the lesser of its bounds' magnitudes, rc[5], rc[6]; 0
// where it does not decide.
__device__ static int er_lsb_dev_dd(const er_devsbwd_consts &c, const double *rc, double dy, double y, double *ex,
                                    double *rd) {
    double M = fmin(fabs(rc[2]), fabs(rc[3])), r;
    int neg = rc[2] < 0, p = c.out_fmt == 0 ? 24 : c.out_fmt == 1 ? 11 : 8, emin = c.out_fmt == 1 ? -14 : -126;
    if (y < -600) { // (b): exp(y) S below 2^-665
        r = er_out_rn(dy, c.out_fmt);
        if (!(r != 0 && fabs(r) < c.omax && er_lsb_dd_tiny(dy, y, M, neg, r, p, emin, rd))) return 0;
        *ex = dy;
        return 1;
    }
    er_lsb_dd d;
    double v;
    if (!er_lsb_dd_value(dy, y, M, rc[5], rc[6], neg, c.exp_lh, c.exp_ll, c.exp_t1, c.exp_t2, &d, &v)) return 0;
    r = er_out_rn(v, c.out_fmt);
    if (!(r != 0 && fabs(r) < c.omax && er_lsb_dd_rounds_to(&d, dy, r, p, emin))) return 0;
    *ex = v;
    *rd = r;
    return 1;
}

// Element (dy, y; output yo) of a row with S~'s set [rc[0], rc[1]], S's bounds [rc[2], rc[3]] (doubles), rc[4] 1
// where S = 0 and |S|'s low parts rc[5], rc[6] (Lemma B5): its set in the output format, its exact result, its record.
// 0 where the host must take the row: y above 2^10 or NaN (no log_softmax output: the host's row claims nothing), a
// form not finite or beyond the output's range, an exact result the double step and Lemma B5 leave open (the host's
// MPFR), an output outside the set or NaN.
__device__ static int er_lsb_element(const er_devsbwd_consts &c, const er_sh_expc &ec, const double *rc, double dy,
                                     double y, double yo, int64_t idx, uint8_t *cls, er_rec_acc &a) {
    if (!(y <= 0x1p10)) return 0;
    // exp(y)'s bounds [zl, zh] (Theorem D1) and the kernel's exp's values in fp32 within U ulps [elo, ehi]
    // (er__approx_ends, which er__exp_ends_f32_of's common case repeats), 0 where it may be flushed; 0 at -inf
    double zl, zh, elo = 0, ehi = 0;
    er_exp_bounds(ec, y, &zl, &zh);
    if (y != -INFINITY) {
        er_approx_ends(c.U, zl, zh, &elo, &ehi);
        if (!(elo >= ER_F32_MIN_NORMAL)) elo = 0;
    }
    // er_lsbwd_forms_body: the forms of Theorem B2 in fp32 at the corners of [elo, ehi] x [s0, s1]
    float g = (float)dy, e0 = (float)elo, e1 = (float)ehi, s0 = (float)rc[0], s1 = (float)rc[1];
    float f[8] = {__fsub_rn(g, __fmul_rn(e0, s0)), __fmaf_rn(-e0, s0, g), __fsub_rn(g, __fmul_rn(e0, s1)),
                  __fmaf_rn(-e0, s1, g),           __fsub_rn(g, __fmul_rn(e1, s0)), __fmaf_rn(-e1, s0, g),
                  __fsub_rn(g, __fmul_rn(e1, s1)), __fmaf_rn(-e1, s1, g)};
    if (!isfinite(ehi)) return 0;
    for (int k = 0; k < 8; k++)
        if (!isfinite(f[k])) return 0;
    float l, h;
    er_sb_ends8(f, &l, &h);
    double lo = l, hi = h;
    if (!(fabs(lo) <= c.omax && fabs(hi) <= c.omax)) return 0;
    // er_lsbwd_exact_body: the exact result's step in double from exp(y)'s and S's bounds
    double Sl = rc[2], Sh = rc[3], ex, rd;
    int sok = fabs(Sl) >= 0x1p-500 && fabs(Sh) <= 0x1p500 && (Sl > 0) == (Sh > 0);
    double c0 = zl * Sl, c1 = zl * Sh, c2 = zh * Sl, c3 = zh * Sh;
    double pmin = fmin(fmin(c0, c1), fmin(c2, c3)), pmax = fmax(fmax(c0, c1), fmax(c2, c3));
    double xl = er_dn(dy - er_up(pmax)), xh = er_up(dy - er_dn(pmin));
    if (sok && zl >= 0x1p-500 && zh <= 0x1p500 && fabs(xl) <= c.omax && fabs(xh) <= c.omax && (xl > 0 || xh < 0) &&
        xh - xl <= 0x1p-40 * fabs(xl) && er_out_rn(xl, c.out_fmt) == er_out_rn(xh, c.out_fmt)) {
        rd = er_out_rn(xl, c.out_fmt);
        ex = 0.5 * xl + 0.5 * xh;
    } else if (y == -INFINITY || rc[4] != 0) { // exp(-inf) = 0, or S = 0: dx = dy
        if (!(fabs(dy) <= c.omax)) return 0;
        ex = dy;
        rd = er_out_rn(dy, c.out_fmt);
    } else if (!er_lsb_dev_dd(c, rc, dy, y, &ex, &rd)) {
        return 0;
    }
    return er_sb_put(c, lo, hi, rd, ex, yo, idx, cls, a);
}

__device__ static int er_lsb_at(const er_devsbwd_consts &c, const er_sh_expc &ec, const void *dy, const void *y,
                                const void *out, const double *rc, int64_t idx, uint8_t *cls, er_rec_acc &a) {
    return er_lsb_element(c, ec, rc, er_load(dy, c.dy_fmt, idx), er_load(y, c.y_fmt, idx),
                          er_load(out, c.out_fmt, idx), idx, cls, a);
}

__global__ void __launch_bounds__(ER_SB_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_lsbwd_rows(const void *dy, const void *y, const void *out, int64_t rows, int64_t n,
                    const __grid_constant__ er_devsbwd_consts c, const double *rcs, uint8_t *classes,
                    er_dev_part *parts, int64_t *pend, unsigned long long *npend) {
    __shared__ er_rec_acc sha[ER_SB_THREADS / 32];
    ER_EXP_TABLES_SHARED(c, ec);
    er_rows_by_consts<ER_LSBWD_DEV_CONSTS>(
        0, rows, n, rcs, classes, sha, parts, pend, npend,
        [&](const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
            return er_lsb_at(c, ec, dy, y, out, rc, idx, cls, a);
        });
}

__global__ void er_k_lsbwd_one(const void *dy, const void *y, const void *out, int64_t n,
                               const __grid_constant__ er_devsbwd_consts c, const double *rcs, int64_t idx,
                               er_dev_cset *set) {
    ER_EXP_TABLES_SHARED(c, ec);
    er_one_by_consts<ER_LSBWD_DEV_CONSTS>(
        idx, n, rcs, set, [&](const double *rc, int64_t row, int64_t i, uint8_t *cls, er_rec_acc &a) {
            return er_lsb_at(c, ec, dy, y, out, rc, i, cls, a);
        });
}

extern "C" {

int er__devsbwd_sums(const void *dy, const void *y, int64_t rows, int64_t n, const er_devsbwd_consts *c, int blocks,
                     er_pwin_row *win, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_sbwd_sums<<<blocks, ER_SB_THREADS, 0, (cudaStream_t)stream>>>(dy, y, rows, n, *c, win);
    return (int)cudaGetLastError();
}

int er__devsbwd_rows(const void *dy, const void *y, const void *out, int64_t rows, int64_t n,
                     const er_devsbwd_consts *c, const double *rc, int blocks, uint8_t *classes, er_dev_part *parts,
                     int64_t *pend, unsigned long long *npend, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    if (c->log)
        er_k_lsbwd_rows<<<blocks, ER_SB_THREADS, 0, (cudaStream_t)stream>>>(dy, y, out, rows, n, *c, rc, classes,
                                                                           parts, pend, npend);
    else
        er_k_sbwd_rows<<<blocks, ER_SB_THREADS, 0, (cudaStream_t)stream>>>(dy, y, out, rows, n, *c, rc, classes,
                                                                          parts, pend, npend);
    return (int)cudaGetLastError();
}

int er__devsbwd_one(const void *dy, const void *y, const void *out, int64_t n, const er_devsbwd_consts *c,
                    const double *rc, int64_t idx, er_dev_cset *set, void *stream) {
    if (c->log) er_k_lsbwd_one<<<1, 1, 0, (cudaStream_t)stream>>>(dy, y, out, n, *c, rc, idx, set);
    else er_k_sbwd_one<<<1, 1, 0, (cudaStream_t)stream>>>(dy, y, out, n, *c, rc, idx, set);
    return (int)cudaGetLastError();
}

} // extern "C"

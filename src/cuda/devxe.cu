// devxe.cu: cross_entropy's rows on the GPU (devxe.h; docs/algorithms/cross-entropy.md, On the GPU). Each function
// below repeats, operation for operation, a host function (src/enclose/exps.c's er_exps_kernel_one,
// src/enclose/xent.c's row sums and fast decision of the gradient), so that a row gives the host's bits; t-cuda
// compares the two on every element. Built with -fmad=false: every double operation rounds once, as on the host
// (-ffp-contract=off).
#include "cuda/devxe.h"
#include "cuda/devrec.cuh"
#include "cuda/devapprox.cuh"

#define ER_XE_THREADS 256
#define ER_XE_WARPS (ER_XE_THREADS / 32)

// er_exps_kernel_one (exps.c) for an fp32 compute format, x_j = v and m finite floats: exp(x_j - m) enclosed in
// [*lo, *hi], the lower bound *dl of exp(d_j) for the kernel's difference d_j = fl32(x_j - m) (0 where d_j is -inf),
// and, where el is not NULL, the ends of the kernel's exp of d_j (er__exp_ends; 0 at -inf).
__device__ static void er_xe_exps(const er_devxe_consts &c, const er_sh_expc &tb, double v, double m, double *lo,
                                  double *hi, double *dl, double *el, double *eh) {
    double t = v - m, bb = t - v, e = (v - (t - bb)) + (-m - bb); // TwoSum: t + e = x_j - m
    double dj = (double)__fadd_rn((float)v, (float)-m), dh;
    if (el) *el = *eh = 0;
    if (dj == -INFINITY) {
        *dl = 0;
        er_exp_bounds(tb, t, lo, hi);
        er_exps_shift(e, lo, hi);
        return;
    }
    er_exp_bounds(tb, dj, dl, &dh);
    if (el) {
        double Uj = c.exp_fast ? 2.0 + floor(er_mul_up(1.1730001, fabs(dj))) : c.U;
        er_approx_ends(Uj, *dl, dh, el, eh);
        if (!(*el >= ER_F32_MIN_NORMAL)) *el = 0;
    }
    double w = (t - dj) + e; // Lemma D7's shift from exp(d_j) (er__exp_shift)
    if (dj == t && e == 0) {
        *lo = *dl;
        *hi = dh;
    } else if (fabs(w) <= 0x1p-18) {
        double p = 1.0 + (w + 0.5 * (w * w)), l = er_dn(*dl * (p - 0x1p-51));
        *lo = l > 0 ? l : 0.0;
        *hi = er_up(dh * (p + 0x1p-51));
    } else {
        er_exp_bounds(tb, t, lo, hi);
        er_exps_shift(e, lo, hi);
    }
}

// er__up_wide, er__dn_wide (ival.h)
__device__ static inline double er_up_wide(double x) { return x + (fabs(x) * 0x1p-52 + 0x1p-1074); }
__device__ static inline double er_dn_wide(double x) { return x - (fabs(x) * 0x1p-52 + 0x1p-1074); }

// A row's constants for its gradient (er_xent_grad_fast's): the witness's sum and its reciprocal, bounds of S, of R
// and of 1/S.
struct er_xe_row { double Sl, Sh, Rl, Rh, rSl, rSh; float s, inv, lw[2]; int second; };

// er_xent_fast_encl (xent.c): a non-target class's exact gradient enclosed from e_j in [lo, hi].
__device__ static void er_xe_encl(const er_devxe_consts &c, const er_xe_row &w, double lo, double hi, double *el,
                                  double *eh) {
    double al = er_dn_wide(er_dn_wide(lo * w.rSl) - c.ech);
    double ah = er_up_wide(er_up_wide(hi * w.rSh) - c.ecl);
    *el = er_dn_wide(al * (al < 0 ? c.rWh : c.rWl));
    *eh = er_up_wide(ah * (ah < 0 ? c.rWl : c.rWh));
}
// er_xent_fast_iv (xent.c): Theorem X1's interval over P = {p}, c in [cl, ch], the target's term tt.
__device__ static void er_xe_iv(const er_devxe_consts &c, double p, double cl, double ch, double tt, double *il,
                                double *ih) {
    double mw = er_dn_wide(er_dn_wide(er_dn_wide(er_dn_wide(p * (1.0 + 2.0 * c.eps)) + tt) + c.ecl) * c.rWl);
    double B = er_dn_wide(c.g * mw);
    double vl = er_up_wide(p - ch), vh = er_dn_wide(p - cl);
    *il = er_up_wide(er_up_wide(vl * (vl < 0 ? c.rWl : c.rWh)) - B);
    *ih = er_dn_wide(er_dn_wide(vh * (vh < 0 ? c.rWh : c.rWl)) + B);
}

// er__xent_in (xent.c) for fp32's F: y of the output's format the rounding of an fp32 value of [lo, hi].
__device__ static int er_xe_in(const er_devxe_consts &c, double y, double lo, double hi) {
    if (c.g_fmt == 0) return y >= lo && y <= hi;
    double a = er_f32_ru(lo), b = er_f32_rd(hi);
    return a <= b && y >= er_out_rn(a, c.g_fmt) && y <= er_out_rn(b, c.g_fmt);
}

// Element j's class (0 exact, 1 covered) as er_xent_grad_fast gives it, or -1 where it leaves the element (to the
// host's row): the correct rounding from the product enclosure, else from er_xent_exact_grad2's quotients; the output
// exact where it is that rounding, covered where it lies in the witness's interval.
__device__ static int er_xe_grad(const er_devxe_consts &c, const er_sh_expc &tb, const er_xe_row &w, double v,
                                 double m, double lo, double hi, double dl, int tj, double y) {
    float e = (float)dl;
    float p = c.div2 ? __fmul_rn(e, w.inv) : __fdiv_rn(e, w.s);
    double el, eh, r1, r2;
    if (!tj) {
        er_xe_encl(c, w, lo, hi, &el, &eh);
        r1 = er_out_rn(el, c.g_fmt);
        r2 = er_out_rn(eh, c.g_fmt);
        if (r1 != r2) {
            el = er_dn(er_dn(er_dn(lo / w.Sh) - c.ech) / c.W);
            eh = er_up(er_up(er_up(hi / w.Sl) - c.ecl) / c.W);
            r1 = er_out_rn(el, c.g_fmt);
            r2 = er_out_rn(eh, c.g_fmt);
        }
    } else {
        el = er_dn(er_dn(c.e1l - er_up(w.Rh / w.Sl)) / c.W);
        eh = er_up(er_up(c.e1h - er_dn(w.Rl / w.Sh)) / c.W);
        r1 = er_out_rn(el, c.g_fmt);
        r2 = er_out_rn(eh, c.g_fmt);
    }
    if (r1 != r2) return -1;
    if (y == r1) return 0;
    double cl = tj ? er_dn(c.oml + c.ecl) : c.ecl, ch = tj ? er_up(c.omh + c.ech) : c.ech, il, ih, un;
    double tt = tj ? 1.0 + c.eps : 0.0;
    er_xe_iv(c, (double)p, cl, ch, tt, &il, &ih);
    if (er_xe_in(c, y, il, ih)) return 1;
    if (!w.second) return -1;
    // the second witnesses: exp of v = fl(d_j - l) and fl(x_j - fl(m + l)) at both ends of the kernel's log l, their
    // least and greatest
    float xj = (float)v, mf = (float)m, dj = __fsub_rn(xj, mf), q[4];
    for (int i = 0; i < 2; i++) {
        q[2 * i] = __fsub_rn(dj, w.lw[i]);
        q[2 * i + 1] = __fsub_rn(xj, __fadd_rn(mf, w.lw[i]));
    }
    float vmin = q[0], vmax = q[0];
    for (int i = 1; i < 4; i++) {
        vmin = q[i] < vmin ? q[i] : vmin;
        vmax = q[i] > vmax ? q[i] : vmax;
    }
    if (c.s_narrow) { // the log-probabilities stored in the logits' format
        float a = (float)er_out_rn((double)vmin, c.x_fmt), b = (float)er_out_rn((double)vmax, c.x_fmt);
        vmin = a < vmin ? a : vmin;
        vmax = b > vmax ? b : vmax;
    }
    double zl, zh, qlo, qhi; // er_xent_exp_witness: RN of Theorem D1's lower bound
    er_exp_bounds(tb, (double)vmin, &zl, &zh);
    qlo = (double)__double2float_rn(zl);
    er_exp_bounds(tb, (double)vmax, &zl, &zh);
    qhi = (double)__double2float_rn(zl);
    er_xe_iv(c, qlo, cl, ch, tt, &il, &un);
    er_xe_iv(c, qhi, cl, ch, tt, &un, &ih);
    return er_xe_in(c, y, il, ih) ? 1 : -1;
}

// The fixed-point sum's lower or upper part to a double rounded down or up (er__fxsum_lo, er__fxsum_hi).
__device__ static double er_xe_fx_lo(er_u128 v) { return er_dn(ldexp(er_dn(er_u128_to_double(v)), -90)); }
__device__ static double er_xe_fx_hi(er_u128 v) { return er_up(ldexp(er_up(er_u128_to_double(v)), -90)); }


// Each row's sums (er__xent_row's, for the host's loss and the second pass): head[row] 1 where the row's sums are
// given (an ignored row: none needed), 0 where the row holds a NaN or an infinity (the host's).
__global__ void __launch_bounds__(ER_XE_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_xent_heads(const void *x, const int64_t *target, int64_t rows, const __grid_constant__ er_devxe_consts c,
                    er_devxe_sums *sums, uint8_t *head) {
    __shared__ float s_el[2][ER_XE_THREADS], s_eh[2][ER_XE_THREADS], s_w[2][ER_XE_THREADS];
    __shared__ double s_x[2][ER_XE_THREADS];
    __shared__ double shd[ER_XE_WARPS], shx[ER_XE_WARPS], shq[5], sht[2];
    __shared__ er_u128 shl[ER_XE_WARPS], shh[ER_XE_WARPS];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    ER_EXP_TABLES_SHARED(c, tb);
    const int64_t C = c.C;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t base = row * C, t = target[row];
        if (t == c.ignore) {
            if (tid == 0) head[row] = 1;
            continue;
        }
        // the maximum, whether the row holds a NaN, +inf or -inf, and max |x_j|
        double m = -INFINITY, xm = 0;
        int bad = 0;
        for (int64_t j = tid; j < C; j += blockDim.x) {
            double v = er_load(x, c.x_fmt, base + j);
            bad |= (v != v) | (v == INFINITY) | (v == -INFINITY);
            if (v > m) m = v;
            xm = fabs(v) > xm ? fabs(v) : xm;
        }
        for (int off = 16; off; off >>= 1) {
            m = fmax(m, __shfl_down_sync(ER_FULL, m, off));
            xm = fmax(xm, __shfl_down_sync(ER_FULL, xm, off));
        }
        if (lane == 0) {
            shd[warp] = m;
            shx[warp] = xm;
        }
        bad = __syncthreads_or(bad);
        m = shd[0];
        xm = shx[0];
        for (int k = 1; k < ER_XE_WARPS; k++) {
            m = fmax(m, shd[k]);
            xm = fmax(xm, shx[k]);
        }
        if (bad) {
            if (tid == 0) head[row] = 0;
            __syncthreads(); // every warp has read shd before the next row writes it
            continue;
        }
        // the exps, their fixed-point sum, and in warps 0 to 3 the sums in the lanes' order (xent.h) of the kernel's
        // exps' lower and upper ends, of the witness's e_j (fp32), and of x_j and |x_j|: each chunk's values through
        // shared memory (two buffers), added by lane l of the summing warp in element order
        er_u128 fl = 0, fh = 0;
        double pa = 0, pb = 0;
        float pf = 0;
        for (int64_t c0 = 0, it = 0; c0 < C; c0 += ER_XE_THREADS, it++) {
            int b = (int)(it & 1);
            int64_t j = c0 + tid;
            if (j < C) {
                double v = er_load(x, c.x_fmt, base + j), lo, hi, dl, el, eh;
                er_xe_exps(c, tb, v, m, &lo, &hi, &dl, &el, &eh);
                er_u128 tl, th;
                er_fx_terms(lo, hi, &tl, &th);
                fl += tl;
                fh += th;
                s_el[b][tid] = (float)el; // values of fp32 (or 0): exact
                s_eh[b][tid] = (float)eh;
                s_w[b][tid] = (float)dl; // the witness's e_j: RN of exp(d_j)'s lower bound
                s_x[b][tid] = v;
                if (j == t) {
                    sht[0] = lo;
                    sht[1] = hi;
                }
            }
            __syncthreads();
            if (warp < 4)
                for (int w2 = 0; w2 < ER_XE_WARPS && c0 + w2 * 32 + lane < C; w2++) {
                    int q = w2 * 32 + lane;
                    if (warp == 0) pa += (double)s_el[b][q];
                    else if (warp == 1) pa += (double)s_eh[b][q];
                    else if (warp == 2) pf = __fadd_rn(pf, s_w[b][q]);
                    else {
                        pa += s_x[b][q];
                        pb += fabs(s_x[b][q]);
                    }
                }
        }
        for (int off = 16; off; off >>= 1) {
            fl += er_shfl_u128(fl, off);
            fh += er_shfl_u128(fh, off);
        }
        if (lane == 0) {
            shl[warp] = fl;
            shh[warp] = fh;
        }
        if (warp < 4) { // the lanes' partial sums in turn from lane 0
            double qa = 0, qb = 0;
            float qf = 0;
            for (int k = 0; k < 32; k++) {
                qa += __shfl_sync(ER_FULL, pa, k);
                qb += __shfl_sync(ER_FULL, pb, k);
                qf = __fadd_rn(qf, __shfl_sync(ER_FULL, pf, k));
            }
            if (lane == 0) {
                if (warp == 2) shq[2] = (double)qf;
                else shq[warp] = qa;
                if (warp == 3) shq[4] = qb;
            }
        }
        __syncthreads();
        if (tid == 0) {
            er_u128 Sl = shl[0], Sh = shh[0];
            for (int k = 1; k < ER_XE_WARPS; k++) {
                Sl += shl[k];
                Sh += shh[k];
            }
            er_devxe_sums z;
            z.m = m;
            z.esl = shq[0];
            z.esh = shq[1];
            z.s = shq[2];
            z.xt = er_load(x, c.x_fmt, base + t);
            z.tlo = sht[0];
            z.thi = sht[1];
            z.sx = shq[3];
            z.sa = shq[4];
            z.xm = xm;
            z.Slo0 = (uint64_t)Sl;
            z.Slo1 = (uint64_t)(Sl >> 64);
            z.Shi0 = (uint64_t)Sh;
            z.Shi1 = (uint64_t)(Sh >> 64);
            sums[row] = z;
            head[row] = 1;
        }
        __syncthreads(); // then shd, shx, shq, sht, shl and shh are the next row's
    }
}

// Each row the heads gave, its gradient decided against y (classes: 0 exact, 1 covered) with its witness's sums and
// the ends of its computed log lw[2 row], lw[2 row + 1] (the second witnesses'; NaN: none); whole[row] 1 where every
// element is decided (its classes then counted into counts), 0 else.
__global__ void __launch_bounds__(ER_XE_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_xent_grads(const void *x, const void *yp, const int64_t *target, int64_t rows,
                    const __grid_constant__ er_devxe_consts c, const er_devxe_sums *sums, const uint8_t *head,
                    const float *lw, uint8_t *whole, uint8_t *classes, unsigned long long *counts) {
    __shared__ er_xe_row w;
    __shared__ unsigned long long sce, scc;
    int tid = threadIdx.x, lane = tid & 31;
    if (tid == 0) sce = scc = 0;
    ER_EXP_TABLES_SHARED(c, tb); // (its barrier orders the tallies' start too)
    const int64_t C = c.C;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t base = row * C, t = target[row];
        if (!head[row]) {
            if (tid == 0) whole[row] = 0;
            continue;
        }
        unsigned ce = 0, cc = 0;
        int ok = 1;
        double m = 0;
        if (t == c.ignore) { // an ignored row: gradient 0
            for (int64_t j = tid; j < C && ok; j += blockDim.x) {
                ok = er_load(yp, c.g_fmt, base + j) == 0;
                classes[base + j] = 0;
                ce++;
            }
        } else {
            const er_devxe_sums &z = sums[row];
            m = z.m;
            if (tid == 0) {
                er_u128 Sl = ((er_u128)z.Slo1 << 64) | z.Slo0, Sh = ((er_u128)z.Shi1 << 64) | z.Shi0, tl, th;
                er_fx_terms(z.tlo, z.thi, &tl, &th);
                w.Sl = er_xe_fx_lo(Sl);
                w.Sh = er_xe_fx_hi(Sh);
                w.Rl = er_xe_fx_lo(Sl - tl);
                w.Rh = er_xe_fx_hi(Sh - th);
                w.rSl = er_dn(1.0 / w.Sh);
                w.rSh = er_up(1.0 / w.Sl);
                w.s = (float)z.s;
                w.inv = __fdiv_rn(1.0f, w.s);
                w.lw[0] = lw[2 * row];
                w.lw[1] = lw[2 * row + 1];
                w.second = w.lw[0] == w.lw[0];
            }
            __syncthreads();
            for (int64_t j = tid; j < C && ok; j += blockDim.x) {
                double v = er_load(x, c.x_fmt, base + j), lo, hi, dl;
                er_xe_exps(c, tb, v, m, &lo, &hi, &dl, NULL, NULL);
                int k = er_xe_grad(c, tb, w, v, m, lo, hi, dl, j == t, er_load(yp, c.g_fmt, base + j));
                ok = k >= 0;
                classes[base + j] = (uint8_t)k;
                ce += k == 0;
                cc += k == 1;
            }
        }
        // the row's tally, where every thread decided its elements; then w is the next row's
        ce = __reduce_add_sync(ER_FULL, ce);
        cc = __reduce_add_sync(ER_FULL, cc);
        if (lane == 0) {
            atomicAdd(&sce, (unsigned long long)ce);
            atomicAdd(&scc, (unsigned long long)cc);
        }
        ok = __syncthreads_and(ok);
        if (tid == 0) {
            whole[row] = (uint8_t)ok;
            if (ok) {
                atomicAdd(&counts[0], sce);
                atomicAdd(&counts[1], scc);
            }
            sce = scc = 0;
        }
        __syncthreads();
    }
}

int er__devxe_heads(const void *x, const int64_t *target, int64_t rows, const er_devxe_consts *c, int blocks,
                    er_devxe_sums *sums, uint8_t *head, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_xent_heads<<<blocks, ER_XE_THREADS, 0, (cudaStream_t)stream>>>(x, target, rows, *c, sums, head);
    return (int)cudaGetLastError();
}

int er__devxe_grads(const void *x, const void *y, const int64_t *target, int64_t rows, const er_devxe_consts *c,
                    const er_devxe_sums *sums, const uint8_t *head, const float *lw, int blocks, uint8_t *whole,
                    uint8_t *classes, unsigned long long *counts, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_xent_grads<<<blocks, ER_XE_THREADS, 0, (cudaStream_t)stream>>>(x, y, target, rows, *c, sums, head, lw, whole,
                                                                         classes, counts);
    return (int)cudaGetLastError();
}

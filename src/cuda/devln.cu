// devln.cu: layernorm's rows on the GPU (docs/algorithms/layernorm.md, On the GPU). Each row's sums are exact
// integers (core/lnsums.h), the same in any order; each element's set and exact result repeat er__layernorm_row's fp32
// compositions (er_ln_y_f32_body, with and without weight and bias) and double case (er_ln_dbl_body) operation for
// operation, so
// that a row gives the host's bits; t-cuda compares the two on every element. Built with -fmad=false: every operation
// rounds once, as on the host (-ffp-contract=off).
#include "cuda/devln.h"
#include "cuda/devrec.cuh"

#define ER_LN_THREADS 256

// A row's scan, joined over the block: max |x|, least and greatest x, the lowest and highest bits, a NaN or infinity.
struct er_ln_scan {
    double X, xmin, xmax;
    int lo, hi, bad;
};
__device__ static void er_ln_scan_join(er_ln_scan &a, const er_ln_scan &b) {
    a.X = fmax(a.X, b.X);
    a.xmin = fmin(a.xmin, b.xmin);
    a.xmax = fmax(a.xmax, b.xmax);
    a.lo = min(a.lo, b.lo);
    a.hi = max(a.hi, b.hi);
    a.bad |= b.bad;
}
__device__ static void er_ln_scan_shfl(er_ln_scan &a, int off) {
    er_ln_scan b = {__shfl_down_sync(ER_FULL, a.X, off),  __shfl_down_sync(ER_FULL, a.xmin, off),
                    __shfl_down_sync(ER_FULL, a.xmax, off), __shfl_down_sync(ER_FULL, a.lo, off),
                    __shfl_down_sync(ER_FULL, a.hi, off), __shfl_down_sync(ER_FULL, a.bad, off)};
    er_ln_scan_join(a, b);
}

__global__ void __launch_bounds__(ER_LN_THREADS)
    er_k_ln_sums(const void *x, int xf, int64_t rows, int64_t n, er_ln_sums *out) {
    __shared__ er_ln_scan shs[ER_LN_THREADS / 32];
    __shared__ er_u128 shw[3][ER_LN_THREADS / 32];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = ER_LN_THREADS / 32;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t base = row * n;
        er_ln_scan sc = {0, INFINITY, -INFINITY, 100000, -100000, 0};
        for (int64_t j = tid; j < n; j += blockDim.x) {
            double v = er_load(x, xf, base + j);
            if (!(fabs(v) <= DBL_MAX)) { sc.bad = 1; continue; }
            sc.X = fmax(sc.X, fabs(v));
            sc.xmin = fmin(sc.xmin, v);
            sc.xmax = fmax(sc.xmax, v);
            int lo, hi;
            if (er_ln_bits(v, &lo, &hi)) { sc.lo = min(sc.lo, lo); sc.hi = max(sc.hi, hi); }
        }
        for (int off = 16; off; off >>= 1) er_ln_scan_shfl(sc, off);
        if (lane == 0) shs[warp] = sc;
        __syncthreads();
        sc = shs[0];
        for (int k = 1; k < nw; k++) er_ln_scan_join(sc, shs[k]);
        int fits = !sc.bad && er_ln_fits(sc.lo, sc.hi, n), lsb = sc.hi < sc.lo ? 0 : sc.lo;
        er_ln_u128 S = 0, Q = 0, A = 0;
        for (int64_t j = tid; j < n && fits; j += blockDim.x) {
            double v = er_load(x, xf, base + j);
            er_ln_add(v, er_ln_units(v, lsb), &S, &Q, &A);
        }
        for (int off = 16; off && fits; off >>= 1) {
            S += er_shfl_u128(S, off);
            Q += er_shfl_u128(Q, off);
            A += er_shfl_u128(A, off);
        }
        if (lane == 0) { shw[0][warp] = S; shw[1][warp] = Q; shw[2][warp] = A; }
        __syncthreads();
        if (tid == 0) {
            for (int k = 1; k < nw; k++) { S += shw[0][k]; Q += shw[1][k]; A += shw[2][k]; }
            er_ln_sums s = {(uint64_t)S, (uint64_t)(S >> 64), (uint64_t)Q, (uint64_t)(Q >> 64), (uint64_t)A,
                            (uint64_t)(A >> 64), sc.X, sc.xmin, sc.xmax, fits ? lsb : 0, (uint8_t)sc.bad,
                            (uint8_t)fits, {0, 0}};
            out[row] = s;
        }
        __syncthreads(); // shared memory is the next row's
    }
}

// Element (x, w, b; output y) of a row with the mean's set [rc[0], rc[1]], rstd's [rc[2], rc[3]] and the enclosures
// rc[4 .. 8) of the exact mean and rstd: its set in the output format, its exact result in double, its record. 0 where
// the host must take the row: a NaN or an infinite composition, a value beyond the output's range, a rounding double
// cannot decide, an output outside the set or NaN.
__device__ static int er_ln_element(const er_devln_consts &c, const double *rc, double x, double w, double b, double y,
                                    int64_t idx, uint8_t *cls, er_rec_acc &a) {
    float xf = (float)x, lo = INFINITY, hi = -INFINITY;
    if (c.w_fmt < 0 && c.b_fmt < 0) {
        // er_ln_y_f32_body without weight and bias: fl(fl(x - m) r) at the four corners
        float d0 = __fsub_rn(xf, (float)rc[0]), d1 = __fsub_rn(xf, (float)rc[1]);
        float t0 = __fmul_rn(d0, (float)rc[2]), t1 = __fmul_rn(d0, (float)rc[3]), t2 = __fmul_rn(d1, (float)rc[2]),
              t3 = __fmul_rn(d1, (float)rc[3]);
        if (t0 != t0 || t1 != t1 || t2 != t2 || t3 != t3) return 0;
        lo = t2 < t3 ? t2 : t3;
        hi = t0 > t1 ? t0 : t1;
    } else {
        // er_ln_y_f32_body's corners (weight 1 and bias 0 where absent)
        float wf = (float)w, bf = (float)b;
        for (int k = 0; k < 4; k++) {
            float m = (float)rc[k >> 1], r = (float)rc[2 + (k & 1)];
            float d = __fsub_rn(xf, m), t = __fmul_rn(d, r), s = __fmul_rn(r, wf), tw = __fmul_rn(t, wf),
                  ds = __fmul_rn(d, s);
            float v[4] = {__fadd_rn(tw, bf), __fmaf_rn(t, wf, bf), __fadd_rn(ds, bf), __fmaf_rn(d, s, bf)};
            for (int q = 0; q < 4; q++) {
                if (v[q] != v[q]) return 0;
                if (v[q] < lo) lo = v[q];
                if (v[q] > hi) hi = v[q];
            }
        }
    }
    if (!(fabs((double)lo) <= c.omax && fabs((double)hi) <= c.omax)) return 0;
    double clo = er_out_rn(lo, c.out_fmt), chi = er_out_rn(hi, c.out_fmt);
    // the exact result (er_ln_dbl_body): d r over the box, r > 0, then the weight's and the bias's steps outward
    double dl = er_dn(x - rc[5]), dh = er_up(x - rc[4]);
    double p0 = dl * rc[6], p1 = dl * rc[7], p2 = dh * rc[6], p3 = dh * rc[7];
    double yl = er_dn(p0 < p1 ? p0 : p1), yh = er_up(p2 > p3 ? p2 : p3);
    if (c.w_fmt >= 0) {
        double lw = w < 0 ? yh : yl, hw = w < 0 ? yl : yh;
        yl = er_dn(lw * w);
        yh = er_up(hw * w);
    }
    if (c.b_fmt >= 0) {
        yl = er_dn(yl + b);
        yh = er_up(yh + b);
    }
    return er_record_bracket(clo, chi, yl, yh, y, idx, c.bug, c.omax, c.out_fmt, cls, a);
}

// Element idx of row `row` with its row's constants rc, its class into *cls (er_rows_by_consts's elem).
__device__ static int er_ln_at(const er_devln_consts &c, const void *x, const void *wt, const void *bs, const void *out,
                               int64_t n, const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
    int64_t i = idx - row * n;
    double xi = er_load(x, c.x_fmt, idx), wi = c.w_fmt >= 0 ? er_load(wt, c.w_fmt, i) : 1.0,
           bi = c.b_fmt >= 0 ? er_load(bs, c.b_fmt, i) : 0.0;
    return er_ln_element(c, rc, xi, wi, bi, er_load(out, c.out_fmt, idx), idx, cls, a);
}

__global__ void __launch_bounds__(ER_LN_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_ln_rows(const void *x, const void *wt, const void *bs, const void *out, int64_t row0, int64_t rows, int64_t n,
                 const __grid_constant__ er_devln_consts c, const double *rcs, uint8_t *classes, er_dev_part *parts,
                 int64_t *pend, unsigned long long *npend) {
    __shared__ er_rec_acc sha[ER_LN_THREADS / 32];
    er_rows_by_consts<8>(row0, rows, n, rcs, classes, sha, parts, pend, npend,
                         [&](const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
                             return er_ln_at(c, x, wt, bs, out, n, rc, row, idx, cls, a);
                         });
}

__global__ void er_k_ln_one(const void *x, const void *wt, const void *bs, const void *out, int64_t n,
                            const __grid_constant__ er_devln_consts c, const double *rcs, int64_t idx,
                            er_dev_cset *set) {
    er_one_by_consts<8>(idx, n, rcs, set, [&](const double *rc, int64_t row, int64_t i, uint8_t *cls, er_rec_acc &a) {
        return er_ln_at(c, x, wt, bs, out, n, rc, row, i, cls, a);
    });
}

extern "C" {

int er__devln_sums(const void *x, int x_fmt, int64_t rows, int64_t n, int blocks, er_ln_sums *sums, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_ln_sums<<<blocks, ER_LN_THREADS, 0, (cudaStream_t)stream>>>(x, x_fmt, rows, n, sums);
    return (int)cudaGetLastError();
}

int er__devln_rows(const void *x, const void *w, const void *b, const void *out, int64_t row0, int64_t rows, int64_t n,
                   const er_devln_consts *c, const double *rc, int blocks, uint8_t *classes, er_dev_part *parts,
                   int64_t *pend, unsigned long long *npend, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_ln_rows<<<blocks, ER_LN_THREADS, 0, (cudaStream_t)stream>>>(x, w, b, out, row0, rows, n, *c, rc, classes,
                                                                    parts, pend, npend);
    return (int)cudaGetLastError();
}

int er__devln_one(const void *x, const void *w, const void *b, const void *out, int64_t n, const er_devln_consts *c,
                  const double *rc, int64_t idx, er_dev_cset *set, void *stream) {
    er_k_ln_one<<<1, 1, 0, (cudaStream_t)stream>>>(x, w, b, out, n, *c, rc, idx, set);
    return (int)cudaGetLastError();
}

} // extern "C"

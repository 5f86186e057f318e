// devrms.cu: rmsnorm's rows on the GPU (docs/algorithms/rmsnorm.md, On the GPU). The sums of squares are the window
// of core/sqwin.h (exact, the same in any order) and the sum to nearest in er_sqwin_pos's order; each element's
// set and exact result repeat er__rmsnorm_row's double case (er_compose, er__cval_from_interval, er__cset_build with
// any = 1) operation for operation, so that a row gives the host's bits; t-cuda compares the two on every element.
// Built with -fmad=false: every operation rounds once, as on the host (-ffp-contract=off).
#include "cuda/devrms.h"
#include "cuda/devrec.cuh"

#define ER_RMS_THREADS ER_SQWIN_LANES // one thread a lane of er_sqwin_pos's order

// The row's largest |x_j| and whether it holds a NaN or an infinity (every thread gets both).
__device__ static double er_row_amax(const void *x, int xf, int64_t base, int64_t n, int *bad, double *shd) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x / 32, b = 0;
    double amax = 0;
    for (int64_t j = tid; j < n; j += blockDim.x) {
        double v = fabs(er_load(x, xf, base + j));
        b |= !(v <= DBL_MAX);
        if (v > amax) amax = v;
    }
    for (int off = 16; off; off >>= 1) amax = fmax(amax, __shfl_down_sync(ER_FULL, amax, off));
    if (lane == 0) shd[warp] = amax;
    *bad = __syncthreads_or(b);
    amax = shd[0];
    for (int k = 1; k < nw; k++) amax = fmax(amax, shd[k]);
    __syncthreads(); // every warp has read shd
    return amax;
}

__global__ void __launch_bounds__(ER_RMS_THREADS)
    er_k_rms_sums(const void *x, int xf, int64_t rows, int64_t n, er_sqwin_row *win) {
    __shared__ double shd[ER_RMS_THREADS / 32], shp[ER_RMS_THREADS];
    __shared__ er_u128 shw[ER_RMS_THREADS / 32];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = ER_RMS_THREADS / 32;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t base = row * n;
        int bad;
        double amax = er_row_amax(x, xf, base, n, &bad, shd);
        if (bad) {
            if (tid == 0) {
                er_sqwin_row w = {0, 0, 0, 0, 0, 1, {0, 0}};
                win[row] = w;
            }
            continue;
        }
        // the window (exact, the same in any order) and thread tid's lane of er_sqwin_pos's order: x_j^2 to nearest
        // for j = tid, tid + 256, ... in turn (each square exact)
        int b = amax > 0 ? er_sqwin_base(amax) : 0, tail = 0;
        er_u128 W = 0;
        double pos = 0;
        for (int64_t j = tid; j < n && amax > 0; j += blockDim.x) {
            double v = er_load(x, xf, base + j);
            W += er_sqwin_term(v, b, &tail);
            pos += v * v;
        }
        for (int off = 16; off; off >>= 1) W += er_shfl_u128(W, off);
        if (lane == 0) shw[warp] = W;
        shp[tid] = pos;
        tail = __syncthreads_or(tail);
        if (tid == 0) {
            for (int k = 1; k < nw; k++) shw[0] += shw[k];
            double s = 0;
            for (int k = 0; k < ER_RMS_THREADS; k++) s += shp[k]; // the lanes added in turn from the 0th
            er_sqwin_row w = {(uint64_t)shw[0], (uint64_t)(shw[0] >> 64), s, b, (uint8_t)tail, 0, {0, 0}};
            win[row] = w;
        }
        __syncthreads(); // shw is the next row's
    }
}

// er_compose (rmsnorm.c) at one value r of rstd's set: fl(fl(x r) w), fl_O(fl_O(fl(x r)) w) and fl(x fl(r w)); x, r,
// w values of fp32, the products of fp32 rounded once. NaN where a value leaves the output's range (the host's row).
__device__ static void er_rms_compose(const er_devrms_consts &c, double x, double r, double w, double o[3]) {
    float xf = (float)x, rf = (float)r, wf = (float)w, xr = __fmul_rn(xf, rf), rw = __fmul_rn(rf, wf);
    o[0] = __fmul_rn(xr, wf);
    o[2] = __fmul_rn(xf, rw);
    if (c.out_fmt == 0) { o[1] = o[0]; return; }
    double xo = (double)xr;
    o[1] = NAN;
    if (!(fabs(xo) <= c.omax)) return;
    double p = er_out_rn(xo, c.out_fmt) * w; // exact: two values of at most 24 bits
    if (fabs(p) <= c.omax) o[1] = er_out_rn(p, c.out_fmt);
}

// Element idx (x, w, output y) of a row with rstd's set [rlo, rhi] and 1/sqrt(S/n + eps) in [r_lo, r_hi]: its set in
// the output format, its exact result in double (er__rmsnorm_row's double case), its record. 0 where the host must take
// the row: a value beyond the output's range, a rounding double cannot decide, an output outside the set or NaN.
__device__ static int er_rms_element(const er_devrms_consts &c, const double *rc, double x, double w, double y,
                                     int64_t idx, uint8_t *cls, er_rec_acc &a) {
    double v[6], lo = INFINITY, hi = -INFINITY;
    er_rms_compose(c, x, rc[0], w, v);
    er_rms_compose(c, x, rc[1], w, v + 3);
    for (int k = 0; k < 3; k++) {
        if (!(fabs(v[k]) <= c.omax && fabs(v[k + 3]) <= c.omax)) return 0;
        double l = v[k] < v[k + 3] ? v[k] : v[k + 3], h = v[k] > v[k + 3] ? v[k] : v[k + 3];
        if (l < lo) lo = l;
        if (h > hi) hi = h;
    }
    double clo = er_out_rn(lo, c.out_fmt), chi = er_out_rn(hi, c.out_fmt);
    // the exact result: p = x w in [p_lo, p_hi]; the lowest y at p_lo and the highest at p_hi, each at one end of r
    double p = x * w, pl = er_dn(p), ph = er_up(p);
    double a0 = pl * rc[2], a1 = pl * rc[3], b0 = ph * rc[2], b1 = ph * rc[3];
    double yl = er_dn(a0 < a1 ? a0 : a1), yh = er_up(b0 > b1 ? b0 : b1);
    return er_record_bracket(clo, chi, yl, yh, y, idx, c.bug, c.omax, c.out_fmt, cls, a);
}

// Element idx of row `row` with its row's constants rc, its class into *cls (er_rows_by_consts's elem).
__device__ static int er_rms_at(const er_devrms_consts &c, const void *x, const void *wt, const void *out, int64_t n,
                                const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
    int64_t i = idx - row * n;
    double xi = er_load(x, c.x_fmt, idx), wi = c.w_fmt >= 0 ? er_load(wt, c.w_fmt, i) : 1.0;
    return er_rms_element(c, rc, xi, wi, er_load(out, c.out_fmt, idx), idx, cls, a);
}

__global__ void __launch_bounds__(ER_RMS_THREADS, ER_ROWS_MIN_BLOCKS)
    er_k_rms_rows(const void *x, const void *wt, const void *out, int64_t rows, int64_t n,
                  const __grid_constant__ er_devrms_consts c, const double *rcs, uint8_t *classes, er_dev_part *parts,
                  int64_t *pend, unsigned long long *npend) {
    __shared__ er_rec_acc sha[ER_RMS_THREADS / 32];
    er_rows_by_consts<4>(0, rows, n, rcs, classes, sha, parts, pend, npend,
                         [&](const double *rc, int64_t row, int64_t idx, uint8_t *cls, er_rec_acc &a) {
                             return er_rms_at(c, x, wt, out, n, rc, row, idx, cls, a);
                         });
}

__global__ void er_k_rms_one(const void *x, const void *wt, const void *out, int64_t n,
                             const __grid_constant__ er_devrms_consts c, const double *rcs, int64_t idx,
                             er_dev_cset *set) {
    er_one_by_consts<4>(idx, n, rcs, set, [&](const double *rc, int64_t row, int64_t i, uint8_t *cls, er_rec_acc &a) {
        return er_rms_at(c, x, wt, out, n, rc, row, i, cls, a);
    });
}

extern "C" {

int er__devrms_sums(const void *x, int x_fmt, int64_t rows, int64_t n, int blocks, er_sqwin_row *win, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_rms_sums<<<blocks, ER_RMS_THREADS, 0, (cudaStream_t)stream>>>(x, x_fmt, rows, n, win);
    return (int)cudaGetLastError();
}

int er__devrms_rows(const void *x, const void *w, const void *out, int64_t rows, int64_t n, const er_devrms_consts *c,
                    const double *rc, int blocks, uint8_t *classes, er_dev_part *parts, int64_t *pend,
                    unsigned long long *npend, void *stream) {
    if (rows == 0 || blocks < 1) return 0;
    er_k_rms_rows<<<blocks, ER_RMS_THREADS, 0, (cudaStream_t)stream>>>(x, w, out, rows, n, *c, rc, classes, parts,
                                                                      pend, npend);
    return (int)cudaGetLastError();
}

int er__devrms_one(const void *x, const void *w, const void *out, int64_t n, const er_devrms_consts *c,
                   const double *rc, int64_t idx, er_dev_cset *set, void *stream) {
    er_k_rms_one<<<1, 1, 0, (cudaStream_t)stream>>>(x, w, out, n, *c, rc, idx, set);
    return (int)cudaGetLastError();
}

} // extern "C"

// devmm.cu: the matmul fast path on the GPU (docs/algorithms/fast-path.md, On the GPU): decoding the operands, the
// bounds of their norms, the decisions of every output element in two stages, gathering what is left for the exact
// engine, and the fp64 GEMM through cuBLAS, loaded on first use. Built with -fmad=false: every double operation rounds
// once, as the decision's margins assume.
#include <climits>
#include <cmath>
#include <cstdint>
#include <dlfcn.h>
#include <pthread.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "cuda/devmm.h"

static inline int er_grid(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (int)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

// ---- decoding, with the statistics of the exact engine's walk (er_dense_stats) ----

__global__ void er_k_stats_init(er_dev_stats *st) {
    st->emin_lsb = st->emin = st->qmin = INT_MAX;
    st->emax = INT_MIN;
    st->any_nonzero = st->nonfinite = 0;
}

__global__ void er_k_decode(const void *src, int bits, const double *lut, int prec, int64_t n, double *d,
                            er_dev_stats *st) {
    int lmin = INT_MAX, emn = INT_MAX, emx = INT_MIN, qmn = INT_MAX, nz = 0, nf = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double x;
        if (bits == 32) x = ((const float *)src)[i];
        else if (bits == 16 && prec == 11) x = __half2float(__ushort_as_half(((const uint16_t *)src)[i]));
        else if (bits == 16) x = __uint_as_float((unsigned)((const uint16_t *)src)[i] << 16); // bf16: fp32's top half
        else x = lut[((const uint8_t *)src)[i]];
        d[i] = x;
        if (!isfinite(x)) { nf = 1; continue; }
        if (x == 0) continue;
        nz = 1;
        int e = (int)((__double_as_longlong(x) >> 52) & 0x7ff) - 1023; // a value of at most 24 bits: a normal double
        if (e - 52 < lmin) lmin = e - 52;
        if (e - (prec - 1) < qmn) qmn = e - (prec - 1);
        if (e < emn) emn = e;
        if (e > emx) emx = e;
    }
    /* the block's statistics in shared memory, then one set of atomics per block */
    __shared__ int sh[6];
    if (threadIdx.x == 0) { sh[0] = sh[1] = sh[3] = INT_MAX; sh[2] = INT_MIN; sh[4] = sh[5] = 0; }
    __syncthreads();
    unsigned full = 0xffffffffu;
    lmin = __reduce_min_sync(full, lmin);
    emn = __reduce_min_sync(full, emn);
    emx = __reduce_max_sync(full, emx);
    qmn = __reduce_min_sync(full, qmn);
    nz = __reduce_or_sync(full, (unsigned)nz);
    nf = __reduce_or_sync(full, (unsigned)nf);
    if ((threadIdx.x & 31) == 0) {
        atomicMin(&sh[0], lmin);
        atomicMin(&sh[1], emn);
        atomicMax(&sh[2], emx);
        atomicMin(&sh[3], qmn);
        atomicOr(&sh[4], nz);
        atomicOr(&sh[5], nf);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicMin(&st->emin_lsb, sh[0]);
        atomicMin(&st->emin, sh[1]);
        atomicMax(&st->emax, sh[2]);
        atomicMin(&st->qmin, sh[3]);
        if (sh[4]) atomicOr(&st->any_nonzero, 1);
        if (sh[5]) atomicOr(&st->nonfinite, 1);
    }
}

// B [batches][K][N] into Bt [batches][N][K], in 32 x 32 tiles through shared memory (reads and writes coalesced).
__global__ void er_k_transpose(const double *b, int64_t K, int64_t N, double *bt) {
    __shared__ double tile[32][33];
    int64_t batch = blockIdx.z, k0 = (int64_t)blockIdx.y * 32, n0 = (int64_t)blockIdx.x * 32;
    const double *src = b + batch * K * N;
    double *dst = bt + batch * K * N;
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        int64_t k = k0 + r, n = n0 + threadIdx.x;
        if (k < K && n < N) tile[r][threadIdx.x] = src[k * N + n];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        int64_t n = n0 + r, k = k0 + threadIdx.x;
        if (k < K && n < N) dst[n * K + k] = tile[threadIdx.x][r];
    }
}

// Upper bounds of the 2-norms of the rows of [rows][K], one warp per row, every addition and the root rounded upward
// (the squares of values of at most 24 bits are exact doubles); with ps non-NULL, each row's scale 2^-s for P's
// integer bracket: 2^s the largest power of two with ceil(max_k |a_k| 2^s) <= 127 (1 for a row of zeros).
__global__ void er_k_row_norms(const double *a, int64_t rows, int64_t K, double *norm, double *ps) {
    int64_t row = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return; // the whole warp shares the row
    double s = 0, m = 0;
    for (int64_t k = lane; k < K; k += 32) {
        double v = a[row * K + k];
        s = __dadd_ru(s, v * v);
        m = fmax(m, fabs(v));
    }
    for (int off = 16; off; off >>= 1) {
        s = __dadd_ru(s, __shfl_down_sync(0xffffffffu, s, off));
        m = fmax(m, __shfl_down_sync(0xffffffffu, m, off));
    }
    if (lane == 0) {
        norm[row] = __dsqrt_ru(s);
        if (ps) { // m in [2^e, 2^(e+1)): m 2^(6 - e) in [64, 128), or m 2^(5 - e) in [32, 64) where that is above 127
            int e = m > 0 ? ilogb(m) : 0, sh = m > 0 && ldexp(m, 6 - e) > 127.0 ? 5 - e : 6 - e;
            ps[row] = m > 0 ? ldexp(1.0, -sh) : 1.0;
        }
    }
}

// Each row's values as int8 magnitudes around |a| / ps[row] (exact: ps a power of two): up = ceil, dn = floor, each
// in [0, 127] (fast-path.md, Lemma F4).
__global__ void er_k_quant8(const double *a, int64_t n, int64_t K, const double *ps, int8_t *up, int8_t *dn) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double v = fabs(a[i]) / ps[i / K];
        up[i] = (int8_t)ceil(v);
        dn[i] = (int8_t)floor(v);
    }
}

// ---- the decision (ops/fastdecide.h, with the output-format roundings of CUDA) ----

// x rounded to nearest in fp16 or bf16 from a double in one rounding: rounded to odd in fp32 first (24 bits, more
// than 2 beyond either), then to nearest.
__device__ static float er_round_out(double x, int fmt) {
    float z = __double2float_rz(x);
    if ((double)z != x && isfinite(z)) z = __int_as_float(__float_as_int(z) | 1);
    return fmt == 1 ? __half2float(__float2half_rn(z)) : __bfloat162float(__float2bfloat16_rn(z));
}
// A value of F = fp32 at or above (dir > 0) / below t, then rounded to nearest in the output.
__device__ static float er_edge_out(double t, int dir, int fmt) {
    float f = dir > 0 ? __double2float_ru(t) : __double2float_rd(t);
    return fmt == 0 ? f : fmt == 1 ? __half2float(__float2half_rn(f)) : __bfloat162float(__float2bfloat16_rn(f));
}

// er_format_ulp of the output format (out_fmt 0 fp32, 1 fp16, 2 bf16) at a finite t.
__device__ static double er_ulp_out(double t, int fmt) {
    int p = fmt == 0 ? 24 : fmt == 1 ? 11 : 8, e;
    double a = fabs(t), mn = fmt == 1 ? 0x1p-14 : 0x1p-126, ms = fmt == 0 ? 0x1p-149 : fmt == 1 ? 0x1p-24 : 0x1p-133;
    if (!(a >= mn)) return ms;
    frexp(a, &e);
    return ldexp(1.0, e - p);
}

// The class of output y from the bracket b (ER_PENDING where it does not decide it); an output beyond the set's outer
// ends is ER_FAST_OUT, its distance in [*dlo, *dhi] (fast-path.md, Lemma F3).
__device__ static int er_class_of(const er_fast_consts &c, double y, const er_fast_bracket &b, double *dlo,
                                  double *dhi) {
    int f = c.out_fmt;
    double r1 = f == 0 ? __double2float_rn(b.slo) : er_round_out(b.slo, f);
    double r2 = f == 0 ? __double2float_rn(b.shi) : er_round_out(b.shi, f);
    double lt = er_edge_out(b.tlo, 1, f), ht = er_edge_out(b.thi, -1, f);
    int cls = f == 0 ? er_fast_class(y, b.tlo, b.thi, r1, r2) : er_fast_class(y, lt, ht, r1, r2);
    if (cls != ER_PENDING) return cls;
    double l = er_edge_out(b.ulo, 1, f), h = er_edge_out(b.uhi, -1, f), near, far, mlo, mhi;
    if (!er_fast_out_ends(y, l < r1 ? l : r1, lt < r2 ? lt : r2, ht > r1 ? ht : r1, h > r2 ? h : r2, &near, &far, &mlo,
                          &mhi))
        return ER_PENDING;
    *dlo = fabs(y - near) / er_ulp_out(mhi, f);
    *dhi = fabs(y - far) / er_ulp_out(mlo, f);
    return ER_FAST_OUT;
}

__device__ static int er_decide(const er_fast_consts &c, double y, double Sh, double Plo, double Phi, double *dlo,
                                double *dhi) {
    er_fast_bracket b;
    if (!er_fast_bracket_of(&c, Sh, Plo, Phi, &b)) return ER_PENDING;
    return er_class_of(c, y, b, dlo, dhi);
}

// An output decided outside: its distance's upper bound into Dh (a float at or above it), and its lower bound into
// *dmax where larger (the bits of a non-negative double order as its values).
__device__ static void er_mark_out(float *Dh, int64_t idx, double dlo, double dhi, unsigned long long *dmax) {
    Dh[idx] = __double2float_ru(dhi); // an upper bound still
    unsigned long long bits = (unsigned long long)__double_as_longlong(dlo);
    if (bits > *dmax) *dmax = bits;
}

__device__ static double er_load_out(const void *out, int fmt, int64_t idx) {
    return fmt == 0   ? (double)((const float *)out)[idx]
           : fmt == 1 ? (double)__half2float(((const __half *)out)[idx])
                      : (double)__bfloat162float(((const __nv_bfloat16 *)out)[idx]);
}

// P's bracket from P_hat = fl64(|A| |B|) (any order: every product is exact in fp64): (1 - gK) P_hat <= P <=
// (1 + 2 gK) P_hat, each end moved outward by the decision's 2^-40 (fast-path.md, On the GPU).
__device__ static void er_p_hat_bracket(const er_fast_consts &c, double Ph, double *Plo, double *Phi) {
    double lo = Ph * ((1.0 - c.gK) * ER_FAST_DN), hi = Ph * ((1.0 + 2.0 * c.gK) * ER_FAST_UP);
    if (lo > *Plo) *Plo = lo;
    if (hi < *Phi) *Phi = hi;
}

// [*Plo, *Phi] narrowed by what pb holds for element idx (A's row ra, B's column rb): P_hat's bracket, and the
// integer bracket 2^-(s_a + s_b) [G_dn, G_up] (Lemma F4: exact, each product of scales and counts a power of two
// times an integer below 2^31, far inside the doubles' range).
__device__ static void er_pb_bracket(const er_fast_consts &c, const er_dev_pb &pb, int64_t idx, int64_t ra, int64_t rb,
                                     double *Plo, double *Phi) {
    if (pb.P) er_p_hat_bracket(c, pb.P[idx], Plo, Phi);
    if (pb.gup) {
        double sc = pb.sa[ra] * pb.sb[rb], lo = (double)pb.gdn[idx] * sc, hi = (double)pb.gup[idx] * sc;
        if (lo > *Plo) *Plo = lo;
        if (hi < *Phi) *Phi = hi;
    }
}

// Stage 1: P between |S| and the norms' product, narrowed by P_hat or the integer bracket (pb). Undecided elements
// become candidates for stage 2; NaN or infinite outputs go straight to the exact engine.
__global__ void er_k_decide(const void *out, const double *S, er_dev_pb pb, const double *an, const double *bn,
                            const int64_t *ia,
                            const int64_t *ib, int64_t nbatch, int64_t M, int64_t N, er_fast_consts c, uint8_t *classes,
                            unsigned long long *counts, int64_t *cand, unsigned long long *ncand, int64_t *pending,
                            unsigned long long *npending, float *Dh) {
    int64_t n = nbatch * M * N, MN = M * N;
    unsigned long long ce = 0, cc = 0, co = 0, dm = 0;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        double y = er_load_out(out, c.out_fmt, idx);
        int64_t bi = idx / MN, i = (idx % MN) / N, j = idx % N;
        double Sh = S[idx];
        int cls = ER_PENDING;
        if (fabs(y) < INFINITY) {
            double Plo, Phi;
            int64_t ra = ia[bi] * M + i, rb = ib[bi] * N + j;
            er_fast_stage1(&c, Sh, an[ra], bn[rb], &Plo, &Phi);
            er_pb_bracket(c, pb, idx, ra, rb, &Plo, &Phi);
            double dlo, dhi;
            cls = er_decide(c, y, Sh, Plo, Phi, &dlo, &dhi);
            if (cls == ER_PENDING) cand[atomicAdd(ncand, 1ULL)] = idx;
            if (cls == ER_FAST_OUT) er_mark_out(Dh, idx, dlo, dhi, &dm);
        } else {
            pending[atomicAdd(npending, 1ULL)] = idx; /* a NaN or infinite output: the exact engine's */
        }
        classes[idx] = (uint8_t)cls;
        if (cls == 0) ce++;
        else if (cls == 1) cc++;
        else if (cls == ER_FAST_OUT) co++;
    }
    unsigned full = 0xffffffffu;
    for (int off = 16; off; off >>= 1) {
        ce += __shfl_down_sync(full, ce, off);
        cc += __shfl_down_sync(full, cc, off);
        co += __shfl_down_sync(full, co, off);
        unsigned long long o = __shfl_down_sync(full, dm, off);
        dm = o > dm ? o : dm;
    }
    if ((threadIdx.x & 31) == 0) {
        if (ce) atomicAdd(&counts[0], ce);
        if (cc) atomicAdd(&counts[1], cc);
        if (co) atomicAdd(&counts[4], co);
        if (dm) atomicMax(&counts[5], dm);
    }
}

// hi + lo += a + b: hi's sum by TwoSum (exact; no fused operation under -fmad=false), its error and b into lo, each
// addition rounded to nearest (fast-path.md, Lemma F2). Returns whether the TwoSum was inexact (its error not 0, or
// NaN): where no TwoSum of a sum was, hi is the exact sum (Lemma F5).
__device__ static int er_two_sum_acc(double *hi, double *lo, double a, double b) {
    double s = *hi + a, bb = s - *hi, e = (*hi - (s - bb)) + (a - bb);
    *hi = s;
    *lo = *lo + b + e;
    return !(e == 0);
}

// The warp's bracket of P = sum |a_k b_k| over ar and bc (K values each): every exact product added rounded down
// into *pl and up into *ph, in any order of the lanes; lane 0 holds the whole sums.
__device__ static void er_warp_p(const float *ar, const float *bc, int64_t K, int lane, double *pl, double *ph) {
    double l = 0, h = 0;
    for (int64_t k = lane; k < K; k += 32) {
        double p = fabs((double)ar[k] * (double)bc[k]); // exact in double: two values of at most 24 bits
        l = __dadd_rd(l, p);
        h = __dadd_ru(h, p);
    }
    for (int off = 16; off; off >>= 1) {
        l = __dadd_rd(l, __shfl_down_sync(0xffffffffu, l, off));
        h = __dadd_ru(h, __shfl_down_sync(0xffffffffu, h, off));
    }
    *pl = l;
    *ph = h;
}

// Stage 2, one warp per candidate: P bracketed by directed sums of the exact products |a_k b_k| (in any order, each
// addition rounded down for the lower end and up for the upper), then the decision again, with S in double-double
// (Lemma F2); where that leaves it open and every TwoSum of the warp was exact, S is the exact sum (Lemma F5) and its
// correct rounding decides the class (a sum on a rounding tie, mostly); the rest pending.
__global__ void er_k_stage2(const int64_t *cand, const unsigned long long *ncand, const void *out, const double *S,
                            const float *A, const float *Bt, const double *an, const double *bn, const int64_t *ia,
                            const int64_t *ib, int64_t M, int64_t N, int64_t K, er_fast_consts c, uint8_t *classes,
                            unsigned long long *counts, int64_t *pending, unsigned long long *npending,
                            double gK2, float *Dh) {
    int64_t nc = (int64_t)*ncand, MN = M * N;
    int lane = threadIdx.x & 31;
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < nc;
         w += ((int64_t)gridDim.x * blockDim.x) / 32) {
        int64_t idx = cand[w], bi = idx / MN, i = (idx % MN) / N, j = idx % N;
        const float *ar = A + (ia[bi] * M + i) * K, *bc = Bt + (ib[bi] * N + j) * K;
        double pl = 0, ph = 0, hi = 0, lo = 0;
        int inexact = 0;
        for (int64_t k = lane; k < K; k += 32) {
            double q = (double)ar[k] * (double)bc[k], p = fabs(q); // exact in double: two values of at most 24 bits
            pl = __dadd_rd(pl, p);
            ph = __dadd_ru(ph, p);
            inexact |= er_two_sum_acc(&hi, &lo, q, 0.0);
        }
        for (int off = 16; off; off >>= 1) {
            pl = __dadd_rd(pl, __shfl_down_sync(0xffffffffu, pl, off));
            ph = __dadd_ru(ph, __shfl_down_sync(0xffffffffu, ph, off));
            inexact |= er_two_sum_acc(&hi, &lo, __shfl_down_sync(0xffffffffu, hi, off),
                                      __shfl_down_sync(0xffffffffu, lo, off));
        }
        // lane 0's sum is a tree of TwoSums over every lane's chain; any lane's inexact step (those outside the tree
        // too) counts, which only leaves more elements to the exact engine
        inexact = __any_sync(0xffffffffu, inexact);
        if (lane == 0) {
            double y = er_load_out(out, c.out_fmt, idx), Sh = S[idx];
            double Plo, Phi;
            er_fast_stage1(&c, Sh, an[ia[bi] * M + i], bn[ib[bi] * N + j], &Plo, &Phi);
            Plo = pl > Plo ? pl : Plo;
            Phi = ph < Phi ? ph : Phi;
            double dlo, dhi;
            int cls = er_decide(c, y, Sh, Plo, Phi, &dlo, &dhi);
            if (cls == ER_PENDING) { // again with S in double-double: within gK2 P of the exact sum (Lemma F2)
                er_fast_consts c2 = c;
                c2.gK = gK2;
                cls = er_decide(c2, y, hi + lo, Plo, Phi, &dlo, &dhi);
                er_fast_bracket b;
                if (cls == ER_PENDING && !inexact && er_fast_bracket_of(&c2, hi, Plo, Phi, &b)) {
                    int f = c.out_fmt; // hi = S exactly: RN_O(S), ties to even, against the set's edges
                    double rs = f == 0 ? __double2float_rn(hi) : er_round_out(hi, f);
                    cls = f == 0 ? er_fast_class(y, b.tlo, b.thi, rs, rs)
                                 : er_fast_class(y, er_edge_out(b.tlo, 1, f), er_edge_out(b.thi, -1, f), rs, rs);
                }
            }
            classes[idx] = (uint8_t)cls;
            if (cls == ER_PENDING) pending[atomicAdd(npending, 1ULL)] = idx;
            else if (cls == ER_FAST_OUT) {
                unsigned long long dm = 0;
                er_mark_out(Dh, idx, dlo, dhi, &dm);
                atomicAdd(&counts[4], 1ULL);
                if (dm) atomicMax(&counts[5], dm);
            } else atomicAdd(&counts[cls], 1ULL);
        }
    }
}

// x as floats for n values.
__global__ void er_k_tofloat(const double *x, int64_t n, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (float)x[i];
}

// d[idx[i]] = v[i] for n values.
__global__ void er_k_scatter8(const int64_t *idx, const uint8_t *v, int64_t n, uint8_t *d) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[idx[i]] = v[i];
}

// |x| for n values.
__global__ void er_k_abs(const double *x, int64_t n, double *y) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = fabs(x[i]);
}

// The relative width of the set of the element whose P lies in [Plo, Phi] (fast-path.md, The sets; On the GPU), where
// the bracket decides the set; else -2 - ub, ub an upper bound of the width (er_fast_rel_ub), and *lb a lower bound
// of it (0 where none is known): the set's ends lie in [L1, L2] and [H1, H2], so hi - lo >= H1 - L2 and max(|lo|,
// |hi|) <= D, the largest magnitude of the four, and rounding is monotone: fl(fl(H1 - L2) / D) <= er_set_rel(lo, hi).
__device__ static double er_set_rel_of(const er_fast_consts &c, double Sh, double Plo, double Phi, double *lb) {
    er_fast_bracket b;
    *lb = 0;
    if (!er_fast_bracket_of(&c, Sh, Plo, Phi, &b)) return -2 - INFINITY; // near overflow: the exact engine's
    int f = c.out_fmt;
    double r1 = f == 0 ? __double2float_rn(b.slo) : er_round_out(b.slo, f);
    double r2 = f == 0 ? __double2float_rn(b.shi) : er_round_out(b.shi, f);
    double l = er_edge_out(b.ulo, 1, f), h = er_edge_out(b.uhi, -1, f), lo, hi;
    double lt = er_edge_out(b.tlo, 1, f), ht = er_edge_out(b.thi, -1, f);
    if (er_fast_join(l == lt && h == ht, l, h, r1, r2, &lo, &hi)) {
        double rel = er_set_rel(lo, hi);
        *lb = rel > 0 ? rel : 0;
        return rel;
    }
    // lo = min(edge, r) lies in [min(l, r1), min(l_t, r2)], hi in [max(h_t, r1), max(h, r2)]
    double L1 = l < r1 ? l : r1, L2 = lt < r2 ? lt : r2, H1 = ht > r1 ? ht : r1, H2 = h > r2 ? h : r2;
    double D = fmax(fmax(fabs(L1), fabs(L2)), fmax(fabs(H1), fabs(H2)));
    if (H1 > L2 && D > 0 && D <= 1.7976931348623157e308) *lb = (H1 - L2) / D;
    return -2 - er_fast_rel_ub(L1, L2, H1, H2);
}

// The sets of the decided elements: each one's relative width into R (-1 where none counts; -2 - ub where the
// bracket does not decide it, er_set_rel_of), the largest decided width into w[0] and the largest lower bound of any
// width into w[2] (the bits of non-negative doubles, which order as their values).
__global__ void er_k_widest(const double *S, er_dev_pb pb, const int64_t *ia, const int64_t *ib, int64_t n, int64_t M,
                            int64_t N, er_fast_consts c, const uint8_t *classes, double *R, unsigned long long *w) {
    unsigned long long best = 0, blb = 0;
    int64_t MN = M * N;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        double rel = -1, lb = 0;
        int cls = classes[idx];
        if (cls == 0 || cls == 1 || cls == ER_FAST_OUT) { // an outside element's set may be the widest too
            int64_t bi = idx / MN, ra = ia[bi] * M + (idx % MN) / N, rb = ib[bi] * N + idx % N;
            double Plo = 0, Phi = INFINITY;
            er_pb_bracket(c, pb, idx, ra, rb, &Plo, &Phi);
            rel = er_set_rel_of(c, S[idx], Plo, Phi, &lb);
        }
        R[idx] = rel;
        if (rel >= 0 && (unsigned long long)__double_as_longlong(rel) > best)
            best = (unsigned long long)__double_as_longlong(rel);
        if ((unsigned long long)__double_as_longlong(lb) > blb) blb = (unsigned long long)__double_as_longlong(lb);
    }
    for (int off = 16; off; off >>= 1) {
        unsigned long long o = __shfl_down_sync(0xffffffffu, best, off), o2 = __shfl_down_sync(0xffffffffu, blb, off);
        if (o > best) best = o;
        if (o2 > blb) blb = o2;
    }
    if ((threadIdx.x & 31) == 0 && best) atomicMax(&w[0], best);
    if ((threadIdx.x & 31) == 0 && blb) atomicMax(&w[2], blb);
}

// The elements whose set the bracket did not decide and whose width may reach the largest lower bound (w[0], w[2]):
// candidates (cand, their count in w[3]) for er_k_widest_refine. Any other element's width is below some decided
// element's, so it is not the widest.
__global__ void er_k_widest_cand(const double *R, int64_t n, const unsigned long long *w, int64_t *cand,
                                 unsigned long long *ncand) {
    unsigned long long t = w[0] > w[2] ? w[0] : w[2];
    double T = __longlong_as_double((long long)t);
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        double r = R[idx];
        if (r <= -2 && -2 - r >= T) cand[atomicAdd(ncand, 1ULL)] = idx;
    }
}

// One warp per candidate: P bracketed by the directed sums of the exact |a_k b_k| (as stage 2), then its set again;
// a set decided now counts for the largest width (w[0]).
__global__ void er_k_widest_refine(const int64_t *cand, const unsigned long long *ncand, const double *S,
                                   const float *A, const float *Bt, const double *an, const double *bn,
                                   const int64_t *ia, const int64_t *ib, int64_t M, int64_t N, int64_t K,
                                   er_fast_consts c, double *R, unsigned long long *w) {
    int64_t nc = (int64_t)*ncand, MN = M * N;
    int lane = threadIdx.x & 31;
    for (int64_t wi = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; wi < nc;
         wi += ((int64_t)gridDim.x * blockDim.x) / 32) {
        int64_t idx = cand[wi], bi = idx / MN, ra = ia[bi] * M + (idx % MN) / N, rb = ib[bi] * N + idx % N;
        // a candidate whose width's upper bound (R = -2 - ub) is below a width already decided is not the widest:
        // left as it is, er_k_widest_idx passes it over (the whole warp reads lane 0's w[0])
        unsigned long long best = lane == 0 ? *(volatile unsigned long long *)&w[0] : 0;
        best = __shfl_sync(0xffffffffu, best, 0);
        if (-2 - R[idx] < __longlong_as_double((long long)best)) continue;
        double pl, ph;
        er_warp_p(A + ra * K, Bt + rb * K, K, lane, &pl, &ph);
        if (lane == 0) {
            double Plo, Phi, lb;
            er_fast_stage1(&c, S[idx], an[ra], bn[rb], &Plo, &Phi);
            Plo = pl > Plo ? pl : Plo;
            Phi = ph < Phi ? ph : Phi;
            double rel = er_set_rel_of(c, S[idx], Plo, Phi, &lb);
            if (rel > R[idx]) R[idx] = rel; // decided, or a narrower upper bound (-2 - ub)
            if (rel >= 0) atomicMax(&w[0], (unsigned long long)__double_as_longlong(rel));
        }
    }
}

// The first element whose R is the largest decided width, into w[1] (starting at ULLONG_MAX); an element whose set
// is not decided but may be as wide as the widest (its width's upper bound reaching both the largest decided width
// w[0] and the largest lower bound w[2], which some element's width reaches) becomes pending, for the exact engine.
// Any other element is not the widest and stays decided: were the threshold w[0] alone, a product whose bracket
// decides no width (w[0] = 0) would send every element to the host.
__global__ void er_k_widest_idx(const double *R, int64_t n, unsigned long long *w, uint8_t *classes,
                                unsigned long long *counts, int64_t *pending, unsigned long long *npending) {
    unsigned long long m = w[0], t = w[0] > w[2] ? w[0] : w[2];
    double best = __longlong_as_double((long long)t);
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        double r = R[idx];
        if (r >= 0 && (unsigned long long)__double_as_longlong(r) == m) atomicMin(&w[1], (unsigned long long)idx);
        if (r <= -2 && -2 - r >= best) {
            atomicAdd(&counts[classes[idx] == ER_FAST_OUT ? 4 : classes[idx]], ~0ULL); // minus one
            classes[idx] = ER_PENDING;
            pending[atomicAdd(npending, 1ULL)] = idx;
        }
    }
}

// The outputs decided outside whose distance may reach D, the largest lower bound of them all (the candidates for
// the report's worst, fast-path.md Lemma F3), become pending.
__global__ void er_k_out_select(const float *Dh, int64_t n, uint8_t *classes, unsigned long long *counts,
                                int64_t *pending, unsigned long long *npending) {
    double D = __longlong_as_double((long long)counts[5]);
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x)
        if (classes[idx] == ER_FAST_OUT && Dh[idx] >= D) {
            atomicAdd(&counts[4], ~0ULL);
            classes[idx] = ER_PENDING;
            pending[atomicAdd(npending, 1ULL)] = idx;
        }
}

// For each of the n pending elements: its A row and B column (K values each, exact as floats) into rows[2 n K], and its
// output value.
__global__ void er_k_gather(const int64_t *pending, int64_t n, const void *out, int out_fmt, const float *A,
                            const float *Bt, const int64_t *ia, const int64_t *ib, int64_t M, int64_t N, int64_t K,
                            float *rows, double *ys) {
    for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
        int64_t idx = pending[p], MN = M * N, bi = idx / MN, i = (idx % MN) / N, j = idx % N;
        const float *ar = A + (ia[bi] * M + i) * K, *bc = Bt + (ib[bi] * N + j) * K;
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            rows[2 * p * K + k] = ar[k];
            rows[(2 * p + 1) * K + k] = bc[k];
        }
        if (threadIdx.x == 0) ys[p] = er_load_out(out, out_fmt, idx);
    }
}

// ---- cuBLAS, loaded on first use (the library needs it only for this path) ----

typedef int (*er_cublas_create)(void **);
typedef int (*er_cublas_set_stream)(void *, cudaStream_t);
typedef int (*er_cublas_dgemm)(void *, int, int, int, int, int, const double *, const double *, int, const double *,
                               int, const double *, double *, int);
static pthread_mutex_t er_cublas_lock = PTHREAD_MUTEX_INITIALIZER;
static void *er_cublas_handle;
static er_cublas_set_stream er_set_stream;
typedef int (*er_cublas_gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *,
                                 int, int, const void *, void *, int, int, int, int);
static er_cublas_dgemm er_dgemm;
static er_cublas_gemm_ex er_gemm_ex; // NULL where the library lacks it: P_hat's GEMM then
static int er_cublas_state; // 0 not tried, 1 ready, -1 missing

static int er_cublas_load(void) {
    if (er_cublas_state) return er_cublas_state;
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *lib = NULL;
    for (int i = 0; i < 3 && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    er_cublas_create create = lib ? (er_cublas_create)dlsym(lib, "cublasCreate_v2") : NULL;
    er_set_stream = lib ? (er_cublas_set_stream)dlsym(lib, "cublasSetStream_v2") : NULL;
    er_dgemm = lib ? (er_cublas_dgemm)dlsym(lib, "cublasDgemm_v2") : NULL;
    er_gemm_ex = lib ? (er_cublas_gemm_ex)dlsym(lib, "cublasGemmEx") : NULL;
    er_cublas_state = create && er_set_stream && er_dgemm && create(&er_cublas_handle) == 0 ? 1 : -1;
    return er_cublas_state;
}

extern "C" {

int er__devmm_stats_init(er_dev_stats *st, void *stream) {
    er_k_stats_init<<<1, 1, 0, (cudaStream_t)stream>>>(st);
    return (int)cudaGetLastError();
}

int er__devmm_decode(const void *src, int bits, const double *lut, int prec, int64_t n, double *d, er_dev_stats *st,
                     void *stream) {
    if (n == 0) return 0;
    er_k_decode<<<er_grid(n, 256), 256, 0, (cudaStream_t)stream>>>(src, bits, lut, prec, n, d, st);
    return (int)cudaGetLastError();
}

int er__devmm_transpose(const double *B, int64_t batches, int64_t K, int64_t N, double *Bt, void *stream) {
    if (batches * K * N == 0) return 0;
    dim3 grid((unsigned)((N + 31) / 32), (unsigned)((K + 31) / 32), (unsigned)batches), block(32, 8);
    er_k_transpose<<<grid, block, 0, (cudaStream_t)stream>>>(B, K, N, Bt);
    return (int)cudaGetLastError();
}

int er__devmm_norms(const double *A, int64_t arows, const double *Bt, int64_t brows, int64_t K, double *an, double *bn,
                    double *pa, double *pb, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (arows) er_k_row_norms<<<(unsigned)((arows * 32 + 255) / 256), 256, 0, s>>>(A, arows, K, an, pa);
    if (brows) er_k_row_norms<<<(unsigned)((brows * 32 + 255) / 256), 256, 0, s>>>(Bt, brows, K, bn, pb);
    return (int)cudaGetLastError();
}

int er__devmm_quant8(const double *x, int64_t n, int64_t K, const double *ps, int8_t *up, int8_t *dn, void *stream) {
    if (n) er_k_quant8<<<er_grid(n, 256), 256, 0, (cudaStream_t)stream>>>(x, n, K, ps, up, dn);
    return (int)cudaGetLastError();
}

int er__devmm_decide(const void *out, const double *S, er_dev_pb pb, const float *A, const float *Bt,
                     const double *an, const double *bn, const int64_t *ia, const int64_t *ib, int64_t nbatch,
                     int64_t M, int64_t N, int64_t K, er_fast_consts c, uint8_t *classes, unsigned long long *counts,
                     int64_t *cand, int64_t *pending, float *Dh, int stages, void *stream) {
    int64_t n = nbatch * M * N;
    if (n == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (stages & 1)
        er_k_decide<<<er_grid(n, 256), 256, 0, s>>>(out, S, pb, an, bn, ia, ib, nbatch, M, N, c, classes, counts,
                                                    cand, counts + 2, pending, counts + 3, Dh);
    // Lemma F2: |fl(hi + lo) - S| <= (u (1 + 2^-40) + 4 m^2 u^2) P, u = 2^-53, m = K + 32 TwoSums at most (a lane's
    // K / 32 and the 31 of the lanes' reduction, with room), inflated as the decision's constants
    double m = (double)K + 32.0, gK2 = (0x1p-53 * (1.0 + 0x1p-40) + 4.0 * m * m * 0x1p-106) * ER_FAST_UP;
    if (stages & 2)
        er_k_stage2<<<4096, 256, 0, s>>>(cand, counts + 2, out, S, A, Bt, an, bn, ia, ib, M, N, K, c, classes, counts,
                                         pending, counts + 3, gK2, Dh);
    return (int)cudaGetLastError();
}

int er__devmm_tofloat(const double *x, int64_t n, float *y, void *stream) {
    if (n) er_k_tofloat<<<er_grid(n, 256), 256, 0, (cudaStream_t)stream>>>(x, n, y);
    return (int)cudaGetLastError();
}

int er__devmm_scatter8(const int64_t *idx, const uint8_t *v, int64_t n, uint8_t *d, void *stream) {
    if (n) er_k_scatter8<<<er_grid(n, 256), 256, 0, (cudaStream_t)stream>>>(idx, v, n, d);
    return (int)cudaGetLastError();
}

int er__devmm_abs(const double *x, int64_t n, double *y, void *stream) {
    if (n) er_k_abs<<<er_grid(n, 256), 256, 0, (cudaStream_t)stream>>>(x, n, y);
    return (int)cudaGetLastError();
}

int er__devmm_widest(const double *S, er_dev_pb pb, const float *A, const float *Bt, const double *an,
                     const double *bn, const int64_t *ia, const int64_t *ib, int64_t nbatch, int64_t M, int64_t N,
                     int64_t K, er_fast_consts c, uint8_t *classes, unsigned long long *counts, int64_t *pending,
                     double *R, int64_t *cand, unsigned long long *w, const float *Dh, void *stream) {
    int64_t n = nbatch * M * N;
    if (n == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    er_k_widest<<<er_grid(n, 256), 256, 0, s>>>(S, pb, ia, ib, n, M, N, c, classes, R, w);
    er_k_widest_cand<<<er_grid(n, 256), 256, 0, s>>>(R, n, w, cand, w + 3);
    er_k_widest_refine<<<1024, 256, 0, s>>>(cand, w + 3, S, A, Bt, an, bn, ia, ib, M, N, K, c, R, w);
    er_k_widest_idx<<<er_grid(n, 256), 256, 0, s>>>(R, n, w, classes, counts, pending, counts + 3);
    er_k_out_select<<<er_grid(n, 256), 256, 0, s>>>(Dh, n, classes, counts, pending, counts + 3);
    return (int)cudaGetLastError();
}

int er__devmm_gather(const int64_t *pending, int64_t n, const void *out, int out_fmt, const float *A, const float *Bt,
                     const int64_t *ia, const int64_t *ib, int64_t M, int64_t N, int64_t K, float *rows, double *ys,
                     void *stream) {
    if (n == 0) return 0;
    er_k_gather<<<(unsigned)(n < 65535 ? n : 65535), 128, 0, (cudaStream_t)stream>>>(pending, n, out, out_fmt, A, Bt,
                                                                                     ia, ib, M, N, K, rows, ys);
    return (int)cudaGetLastError();
}

int er__devmm_dgemm(const double *A, const double *B, double *S, const int64_t *ia_host, const int64_t *ib_host,
                    int64_t nbatch, int64_t M, int64_t N, int64_t K, void *stream) {
    pthread_mutex_lock(&er_cublas_lock);
    int st = er_cublas_load() == 1 ? 0 : -1;
    if (st == 0 && er_set_stream(er_cublas_handle, (cudaStream_t)stream) != 0) st = -2;
    const double one = 1.0, zero = 0.0;
    // row-major S = A B is column-major S^T = B^T A^T
    for (int64_t bi = 0; st == 0 && bi < nbatch; bi++)
        if (er_dgemm(er_cublas_handle, 0, 0, (int)N, (int)M, (int)K, &one, B + ib_host[bi] * K * N, (int)N,
                     A + ia_host[bi] * M * K, (int)K, &zero, S + bi * M * N, (int)N) != 0)
            st = -2;
    pthread_mutex_unlock(&er_cublas_lock);
    return st;
}

int er__devmm_igemm(const int8_t *A8, const int8_t *Bt8, int32_t *G, const int64_t *ia_host, const int64_t *ib_host,
                    int64_t nbatch, int64_t M, int64_t N, int64_t K, void *stream) {
    pthread_mutex_lock(&er_cublas_lock);
    int st = er_cublas_load() == 1 ? 0 : -1;
    if (st == 0 && !er_gemm_ex) st = -3;
    if (st == 0 && er_set_stream(er_cublas_handle, (cudaStream_t)stream) != 0) st = -2;
    const int32_t one = 1, zero = 0;
    // row-major G = A8 Bt8^T is column-major G^T = Bt8 (as K x N, transposed) times A8 (as K x M): "TN", K
    // contiguous in both; CUDA_R_8I = 3, CUDA_R_32I = 10, CUBLAS_COMPUTE_32I = 72, CUBLAS_GEMM_DEFAULT = -1
    for (int64_t bi = 0; st == 0 && bi < nbatch; bi++)
        if (er_gemm_ex(er_cublas_handle, 1, 0, (int)N, (int)M, (int)K, &one, Bt8 + ib_host[bi] * N * K, 3, (int)K,
                       A8 + ia_host[bi] * M * K, 3, (int)K, &zero, G + bi * M * N, 10, (int)N, 72, -1) != 0)
            st = -3;
    pthread_mutex_unlock(&er_cublas_lock);
    return st;
}

} // extern "C"

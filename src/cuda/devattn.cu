// devattn.cu: attention's loops over the keys on the GPU (docs/algorithms/attention.md, On the GPU). Each value repeats
// er__attn_row's loops (src/enclose/attention.c) operation for operation and, where they add, in their order: a score
// is er__attn_dot's four chains over d (products into chain d mod 4 up to the last multiple of 4, the rest into the
// first), N_d and A_d add the keys from the first to the last; the maxima and minima and the fixed-point sums are the
// same in any order (the largest score's zero sign: the first key's of equal ones, as the host's loop keeps). So a
// row gives the host's bits; t-cuda compares the two on every row. Built with -fmad=false: every double operation
// rounds once, as on the host (-ffp-contract=off). The scores' chains add with fused multiply-adds: q and k hold
// values of fp32, fp16 or bf16, whose products (at most 48 bits, at least 2^-298) are exact doubles, so each rounds
// once as the host's product then sum.
#include "cuda/devattn.h"
#include "cuda/devrec.cuh"

#define ER_AT_THREADS 256
#define ER_AT_R ER_DEVATTN_TILE // rows of a tile
#define ER_AT_K 64              // keys a time (scores)
#define ER_AT_D 32              // head dimensions a time (scores)
#define ER_AV_R 16              // rows of a block (values: half a tile)
#define ER_AV_K 16              // keys a time (values)
#define ER_AV_D 128             // value dimensions a time

// er__attn_keys (attnmod.c): the unmasked keys of query i.
__device__ static void er_at_keys(const er_devattn_consts &c, int64_t i, int64_t *j0, int64_t *n) {
    int64_t ii = i + (c.bottom_right ? c.Sk - c.Sq : 0), a = 0, b = c.Sk - 1;
    if (c.causal && ii < b) b = ii;
    if (c.window) {
        if (ii - a > c.win_l) a = ii - c.win_l;
        if (b - ii > c.win_r) b = ii + c.win_r;
    }
    *n = b >= a ? b - a + 1 : 0;
    *j0 = *n ? a : 0;
}

__global__ void er_k_at_decode(const void *t, int fmt, const int64_t *base, int64_t nbh, int64_t S, int64_t Dd,
                               int64_t sS, int64_t sD, double *out) {
    int64_t total = nbh * S * Dd;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t d = e % Dd, s = (e / Dd) % S, bh = e / (Dd * S);
        out[e] = er_load(t, fmt, base[bh] + s * sS + d * sD);
    }
}

// er_attn_qnorm's and er__attn_load_kv's norm bounds: the squares summed from the first dimension.
__global__ void er_k_at_norms(const er_devattn_consts c, const double *q, int64_t rows, const double *k,
                              const double *v, int64_t keys, double *qn, double *kn) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows + keys;
         e += (int64_t)gridDim.x * blockDim.x) {
        int isq = e < rows;
        int64_t j = isq ? e : e - rows;
        const double *x = isq ? q + j * c.D : k + j * c.D;
        double ss = 0;
        int nf = 0;
        for (int64_t d = 0; d < c.D; d++) {
            ss += x[d] * x[d];
            nf |= !isfinite(x[d]);
        }
        double r = er_up(sqrt(er_up(ss * c.c1)));
        if (isq) { qn[j] = r; continue; }
        for (int64_t d = 0; d < c.Dv; d++) nf |= !isfinite(v[j * c.Dv + d]);
        kn[j] = nf ? INFINITY : r;
    }
}

// A tile's head and first row, its kv head's first key (as an index of keys), and its rows' keys.
struct er_at_tile {
    int64_t bh, i0, kvh;
};
__device__ static er_at_tile er_at_tile_of(const er_devattn_consts &c, int64_t T) {
    int64_t tph = (c.Sq + ER_AT_R - 1) / ER_AT_R, bh = T / tph, h = bh % c.H, b = bh / c.H;
    return er_at_tile{bh, (T % tph) * ER_AT_R, b * c.Hkv + h / (c.H / c.Hkv)};
}
// The tile's rows' key ranges into j0s, ns (shared) and the union [*jlo, *jhi) of them.
__device__ static void er_at_ranges(const er_devattn_consts &c, const er_at_tile &tl, int64_t *j0s, int64_t *ns,
                                    int64_t *jlo, int64_t *jhi) {
    int tid = threadIdx.x;
    if (tid < ER_AT_R) {
        int64_t i = tl.i0 + tid, j0 = 0, n = 0;
        if (i < c.Sq) er_at_keys(c, i, &j0, &n);
        j0s[tid] = j0;
        ns[tid] = n;
    }
    __syncthreads();
    int64_t lo = INT64_MAX, hi = 0;
    for (int r = 0; r < ER_AT_R; r++)
        if (ns[r] > 0) {
            lo = min(lo, j0s[r]);
            hi = max(hi, j0s[r] + ns[r]);
        }
    *jlo = lo;
    *jhi = hi;
}

// A row's running quantities of the scores' loop (er_attn_raw), with the largest score's key.
struct er_at_raw {
    double Mt, smin, smax, numax, errmax, kmax;
    int64_t mi;
};
__device__ static void er_at_raw_join(er_at_raw &a, const er_at_raw &b) {
    if (b.Mt > a.Mt || (b.Mt == a.Mt && b.mi < a.mi)) { a.Mt = b.Mt; a.mi = b.mi; }
    if (b.smin < a.smin) a.smin = b.smin;
    if (b.smax > a.smax) a.smax = b.smax;
    if (b.numax > a.numax) a.numax = b.numax;
    if (b.errmax > a.errmax) a.errmax = b.errmax;
    if (b.kmax > a.kmax) a.kmax = b.kmax;
}

// The scores of a tile: thread (ty, tx) holds rows 2 ty, 2 ty + 1 and keys tx + 16 m (m < 4) of each 64, with
// er__attn_dot's four chains each.
__global__ void __launch_bounds__(ER_AT_THREADS, 2)
    er_k_at_scores(const er_devattn_consts c, const double *q, const double *k, const double *qn, const double *kn,
                   int64_t t0, int64_t r0, double *slo, double *shi, double *raw) {
    __shared__ double qs[ER_AT_R][ER_AT_D + 1], ks[ER_AT_K][ER_AT_D + 1];
    __shared__ int64_t j0s[ER_AT_R], ns[ER_AT_R];
    int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
    er_at_tile tl = er_at_tile_of(c, t0 + blockIdx.x);
    int64_t jlo, jhi;
    er_at_ranges(c, tl, j0s, ns, &jlo, &jhi);
    const double *kh = k + tl.kvh * c.Sk * c.D, *knh = kn + tl.kvh * c.Sk;
    int64_t D = c.D, D4 = D & ~(int64_t)3, Sk = c.Sk;
    er_at_raw run[2];
    double qnr[2];
    for (int r = 0; r < 2; r++) {
        run[r] = er_at_raw{-INFINITY, INFINITY, -INFINITY, 0, 0, 0, INT64_MAX};
        int64_t i = tl.i0 + 2 * ty + r;
        qnr[r] = i < c.Sq ? qn[tl.bh * c.Sq + i] : 0;
    }
    for (int64_t kt = jlo; kt < jhi; kt += ER_AT_K) {
        double acc[2][4][4];
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int m = 0; m < 4; m++)
#pragma unroll
                for (int ch = 0; ch < 4; ch++) acc[r][m][ch] = 0;
        for (int64_t d0 = 0; d0 < D; d0 += ER_AT_D) {
            for (int e = tid; e < ER_AT_R * ER_AT_D; e += ER_AT_THREADS) {
                int r = e / ER_AT_D, dd = e % ER_AT_D;
                int64_t i = tl.i0 + r, d = d0 + dd;
                qs[r][dd] = i < c.Sq && d < D ? q[(tl.bh * c.Sq + i) * D + d] : 0;
            }
            for (int e = tid; e < ER_AT_K * ER_AT_D; e += ER_AT_THREADS) {
                int kk = e / ER_AT_D, dd = e % ER_AT_D;
                int64_t t = kt + kk, d = d0 + dd;
                ks[kk][dd] = t < Sk && d < D ? kh[t * D + d] : 0;
            }
            __syncthreads();
            int dn = (int)(D - d0 < ER_AT_D ? D - d0 : ER_AT_D);
            for (int dd = 0; dd < dn; dd += 4) {
                if (d0 + dd + 4 <= D4) { // four dimensions, one into each chain
#pragma unroll
                    for (int ch = 0; ch < 4; ch++)
#pragma unroll
                        for (int r = 0; r < 2; r++)
#pragma unroll
                            for (int m = 0; m < 4; m++)
                                acc[r][m][ch] = __fma_rn(qs[2 * ty + r][dd + ch], ks[tx + 16 * m][dd + ch],
                                                         acc[r][m][ch]);
                } else { // the dimensions past the last multiple of 4, into the first chain
                    for (int e = dd; e < dn; e++)
#pragma unroll
                        for (int r = 0; r < 2; r++)
#pragma unroll
                            for (int m = 0; m < 4; m++)
                                acc[r][m][0] = __fma_rn(qs[2 * ty + r][e], ks[tx + 16 * m][e], acc[r][m][0]);
                }
            }
            __syncthreads();
        }
        // er__attn_scores's loop body for each key of the row's range
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int rr = 2 * ty + r;
            int64_t i = tl.i0 + rr;
#pragma unroll
            for (int m = 0; m < 4; m++) {
                int64_t t = kt + tx + 16 * m;
                if (i >= c.Sq || t < j0s[rr] || t >= j0s[rr] + ns[rr]) continue;
                double S = (acc[r][m][0] + acc[r][m][1]) + (acc[r][m][2] + acc[r][m][3]);
                double nu = er_up(qnr[r] * knh[t]);
                double e = c.gD * nu * (1 + 0x1p-50);
                double err = (e + (fabs(S) + e) * c.screl + fabs(S) * 0x1p-52) * c.asc * (1 + 0x1p-40);
                double s = S * c.sc, lo = er_dn(s - err), hi = er_up(s + err);
                int64_t o = (tl.bh * c.Sq + i - r0) * Sk + t;
                slo[o] = lo;
                shi[o] = hi;
                er_at_raw &a = run[r];
                if (s > a.Mt) { a.Mt = s; a.mi = t; } // keys come in increasing order: the first of equal ones
                if (lo < a.smin) a.smin = lo;
                if (hi > a.smax) a.smax = hi;
                if (nu > a.numax) a.numax = nu;
                if (knh[t] > a.kmax) a.kmax = knh[t];
                if (err > a.errmax) a.errmax = err;
            }
        }
    }
    // each row's quantities over its sixteen threads (neighbouring lanes)
    for (int r = 0; r < 2; r++) {
        er_at_raw &a = run[r];
        for (int off = 8; off; off >>= 1) {
            er_at_raw b = {__shfl_down_sync(ER_FULL, a.Mt, off),     __shfl_down_sync(ER_FULL, a.smin, off),
                           __shfl_down_sync(ER_FULL, a.smax, off),   __shfl_down_sync(ER_FULL, a.numax, off),
                           __shfl_down_sync(ER_FULL, a.errmax, off), __shfl_down_sync(ER_FULL, a.kmax, off),
                           (int64_t)__shfl_down_sync(ER_FULL, (long long)a.mi, off)};
            er_at_raw_join(a, b);
        }
        int rr = 2 * ty + r;
        int64_t i = tl.i0 + rr;
        if (tx == 0 && i < c.Sq && ns[rr] > 0) {
            double *o = raw + 7 * (tl.bh * c.Sq + i - r0);
            o[0] = a.Mt;
            o[1] = a.smin;
            o[2] = a.smax;
            o[3] = a.numax;
            o[4] = a.errmax;
            o[5] = a.kmax;
        }
    }
}

// B_d of every row whose keys run from its head's first key to key j: bs[(h Sk + j) Dv + d] = sum_{t <= j} |v_td| of
// kv head h, added from the first key as the values kernel (and the host) add B, so the same bits.
__global__ void er_k_at_bsums(const double *__restrict__ v, int64_t nkv, int64_t Sk, int64_t Dv,
                              double *__restrict__ bs) {
    int64_t n = nkv * Dv;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t off = (e / Dv) * Sk * Dv + e % Dv;
        double s = 0;
#pragma unroll 16
        for (int64_t j = 0; j < Sk; j++) {
            s += fabs(v[off + j * Dv]);
            bs[off + j * Dv] = s;
        }
    }
}

// One key's terms (weights a, b; its values' row vr) of N, A and B (not with BS) at the thread's value dimensions
// tx + 16 m.
template <bool NCOMP, bool BS>
__device__ __forceinline__ static void er_av_terms(double a, double b, const double *vr, int tx, double *N, double *Nc,
                                                   double *A, double *Bs) {
#pragma unroll
    for (int m = 0; m < 8; m++) {
        double x = vr[tx + 16 * m], ax = fabs(x);
        if (NCOMP) { // er_attn_nab_term's TwoSum
            double p = a * x, s = N[m] + p, bb = s - N[m];
            Nc[m] += (N[m] - (s - bb)) + (p - bb);
            N[m] = s;
        } else {
            N[m] = __fma_rn(a, x, N[m]);
        }
        A[m] = __fma_rn(b, ax, A[m]);
        if (!BS) Bs[m] += ax;
    }
}

// The weights and values of half a tile (block 2 T + half: rows 16 half .. 16 half + 15 of tile T): each key's
// weights (thread: row tid / 16, key tid mod 16 of each 16) into shared memory, then thread (ty, tx) adds them and
// |v_jd| into row ty at value dimensions tx + 16 m (m < 8) of each 128, the keys in increasing order (N, A and B of
// er_attn_weights; with NCOMP (c.ncomp), N's additions' errors kept by TwoSum and added at the end, as
// er_attn_nab_term). NCOMP is a template parameter so that the innermost loop holds its one form: tested at run time
// there, it cost the kernel 40% of its time (docs/benchmarks.md). Each row's keys among a block's 16 are a range:
// a full one in a loop the compiler unrolls. With BS (every row's keys start at its head's first), B is read from
// er_k_at_bsums's sums at the row's last key.
template <bool NCOMP, bool BS>
__global__ void __launch_bounds__(ER_AT_THREADS, 2)
    er_k_at_values(const er_devattn_consts c, const double *v, const double *bs, int64_t t0, int64_t r0,
                   const double *slo, const double *shi, double *raw, uint64_t *fx, double *na) {
    __shared__ double wl[ER_AV_R][ER_AV_K + 1], wh[ER_AV_R][ER_AV_K + 1];
    __shared__ double vs[ER_AV_K][ER_AV_D];
    __shared__ int64_t j0s[ER_AT_R], ns[ER_AT_R];
    __shared__ double Mts[ER_AV_R];
    int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15, half = blockIdx.x & 1;
    er_at_tile tl = er_at_tile_of(c, t0 + blockIdx.x / 2);
    int64_t jlo, jhi;
    er_at_ranges(c, tl, j0s, ns, &jlo, &jhi);
    int64_t Sk = c.Sk, Dv = c.Dv;
    int rr = ER_AV_R * half + ty; // the thread's row in the tile
    int64_t i = tl.i0 + rr, row = tl.bh * c.Sq + i - r0;
    int live = i < c.Sq && ns[rr] > 0;
    if (tx == 0) Mts[ty] = live ? raw[7 * row] : 0;
    __syncthreads();
    const double *vh = v + tl.kvh * Sk * Dv;
    for (int64_t d0 = 0; d0 < Dv; d0 += ER_AV_D) {
        double N[8], Nc[8], A[8], Bs[8];
#pragma unroll
        for (int m = 0; m < 8; m++) N[m] = Nc[m] = A[m] = Bs[m] = 0;
        er_u128 Lo = 0, Hi = 0;
        double rho = 0;
        for (int64_t kt = jlo; kt < jhi; kt += ER_AV_K) {
            { // er_attn_weights's weights: row ty, key tx
                int64_t t = kt + tx;
                int in = live && t >= j0s[rr] && t < j0s[rr] + ns[rr];
                double lo = 0, hi = 0, tmp;
                if (in) {
                    double Mt = Mts[ty];
                    er_exp_bounds(c, er_dn(slo[row * Sk + t] - Mt), &lo, &tmp);
                    er_exp_bounds(c, er_up(shi[row * Sk + t] - Mt), &tmp, &hi);
                    if (d0 == 0) {
                        er_u128 tl128, th128;
                        er_fx_terms(lo, hi, &tl128, &th128);
                        Lo += tl128;
                        Hi += th128;
                        if (hi > 0) {
                            double rt = (hi - lo) / hi;
                            if (rt > rho) rho = rt;
                        }
                    }
                }
                wl[ty][tx] = lo;
                wh[ty][tx] = hi;
            }
            for (int e = tid; e < ER_AV_K * ER_AV_D; e += ER_AT_THREADS) {
                int kk = e / ER_AV_D, dd = e % ER_AV_D;
                int64_t t = kt + kk, d = d0 + dd;
                vs[kk][dd] = t < Sk && d < Dv ? vh[t * Dv + d] : 0;
            }
            __syncthreads();
            // the row's keys among these 16, [k0, k1): all of them but at its ends
            int64_t ka = j0s[rr] - kt, kb = j0s[rr] + ns[rr] - kt;
            int k0 = live ? (int)(ka > 0 ? ka : 0) : 0, k1 = live ? (int)(kb < ER_AV_K ? kb : ER_AV_K) : 0;
            if (k0 == 0 && k1 == ER_AV_K) {
#pragma unroll 4
                for (int kk = 0; kk < ER_AV_K; kk++)
                    er_av_terms<NCOMP, BS>(wl[ty][kk], wh[ty][kk], vs[kk], tx, N, Nc, A, Bs);
            } else {
                for (int kk = k0; kk < k1; kk++)
                    er_av_terms<NCOMP, BS>(wl[ty][kk], wh[ty][kk], vs[kk], tx, N, Nc, A, Bs);
            }
            __syncthreads();
        }
        if (live) {
            double *o = na + 3 * Dv * row;
            const double *b = BS ? bs + (tl.kvh * Sk + j0s[rr] + ns[rr] - 1) * Dv : NULL;
#pragma unroll
            for (int m = 0; m < 8; m++) {
                int64_t d = d0 + tx + 16 * m;
                if (d < Dv) {
                    o[d] = NCOMP ? N[m] + Nc[m] : N[m];
                    o[Dv + d] = A[m];
                    o[2 * Dv + d] = BS ? b[d] : Bs[m];
                }
            }
        }
        if (d0 == 0) { // the weights' sums over the row's sixteen threads (neighbouring lanes)
            for (int off = 8; off; off >>= 1) {
                Lo += er_shfl_u128(Lo, off);
                Hi += er_shfl_u128(Hi, off);
                double o = __shfl_down_sync(ER_FULL, rho, off);
                if (o > rho) rho = o;
            }
            if (tx == 0 && live) {
                uint64_t *f = fx + 4 * row;
                f[0] = (uint64_t)Lo;
                f[1] = (uint64_t)(Lo >> 64);
                f[2] = (uint64_t)Hi;
                f[3] = (uint64_t)(Hi >> 64);
                raw[7 * row + 6] = rho;
            }
        }
    }
}

static int er_at_grid(int64_t total) {
    int64_t g = (total + ER_AT_THREADS - 1) / ER_AT_THREADS;
    return (int)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

extern "C" int er__devattn_decode(const void *t, int fmt, const int64_t *base, int64_t nbh, int64_t S, int64_t Dd,
                                  int64_t sS, int64_t sD, double *out, void *stream) {
    er_k_at_decode<<<er_at_grid(nbh * S * Dd), ER_AT_THREADS, 0, (cudaStream_t)stream>>>(t, fmt, base, nbh, S, Dd,
                                                                                           sS, sD, out);
    return (int)cudaGetLastError();
}

extern "C" int er__devattn_norms(const er_devattn_consts *c, const double *q, int64_t rows, const double *k,
                                 const double *v, int64_t keys, double *qn, double *kn, void *stream) {
    er_k_at_norms<<<er_at_grid(rows + keys), ER_AT_THREADS, 0, (cudaStream_t)stream>>>(*c, q, rows, k, v, keys, qn,
                                                                                         kn);
    return (int)cudaGetLastError();
}

extern "C" int er__devattn_bsums(const double *v, int64_t nkv, int64_t Sk, int64_t Dv, double *bs, void *stream) {
    int64_t n = nkv * Dv, g = (n + 63) / 64; // small blocks: the heads' sums over many multiprocessors
    er_k_at_bsums<<<(unsigned)(g < 65535 ? g : 65535), 64, 0, (cudaStream_t)stream>>>(v, nkv, Sk, Dv, bs);
    return (int)cudaGetLastError();
}

extern "C" int er__devattn_rows(const er_devattn_consts *c, const double *q, const double *k, const double *v,
                                const double *bs, const double *qn, const double *kn, int64_t t0, int64_t t1,
                                int64_t r0, double *slo, double *shi, double *raw, uint64_t *fx, double *na,
                                void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (t1 <= t0) return 0;
    er_k_at_scores<<<(unsigned)(t1 - t0), ER_AT_THREADS, 0, s>>>(*c, q, k, qn, kn, t0, r0, slo, shi, raw);
    int e = (int)cudaGetLastError();
    if (e) return e;
    unsigned nb = (unsigned)(2 * (t1 - t0));
    void (*values)(const er_devattn_consts, const double *, const double *, int64_t, int64_t, const double *,
                   const double *, double *, uint64_t *, double *) =
        c->ncomp ? (bs ? er_k_at_values<true, true> : er_k_at_values<true, false>)
                 : (bs ? er_k_at_values<false, true> : er_k_at_values<false, false>);
    values<<<nb, ER_AT_THREADS, 0, s>>>(*c, v, bs, t0, r0, slo, shi, raw, fx, na);
    return (int)cudaGetLastError();
}

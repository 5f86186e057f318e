// devrec.cuh: the device code the row paths on the GPU share (devsm.cu, devrms.cu): doubles' bits and outward steps,
// the roundings to the output formats, loads, a 128-bit integer to double, and the record of a decided element (the
// engine's er_classify and er_sink_record for an element whose set holds its output), each repeating a host function
// operation for operation. Included by .cu files built with -fmad=false.
#ifndef ER_DEVREC_CUH
#define ER_DEVREC_CUH

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "cuda/devrec.h"
#include "core/setwidth.h"

typedef unsigned __int128 er_u128;

__device__ static inline uint64_t er_bits(double x) { return (uint64_t)__double_as_longlong(x); }
__device__ static inline double er_from_bits(uint64_t b) { return __longlong_as_double((long long)b); }

// er__up, er__dn and er__next_up (ival.h, internal.h).
__device__ static inline double er_up(double x) {
    uint64_t b = er_bits(x);
    if (x != x || b == 0x7ff0000000000000ULL) return x;
    if ((b << 1) == 0) return 4.9406564584124654e-324;
    return er_from_bits(b + (uint64_t)(1 | ((int64_t)b >> 63)));
}
__device__ static inline double er_dn(double x) { return -er_up(-x); }
__device__ static inline double er_mul_up(double a, double b) { return er_up(a * b); }

// fp32 roundings of a double (er__round_double for fp32 with the IEEE rule): the hardware's conversions.
__device__ static inline double er_f32_rn(double x) { return (double)__double2float_rn(x); }
__device__ static inline double er_f32_ru(double x) { return (double)__double2float_ru(x); }
__device__ static inline double er_f32_rd(double x) { return (double)__double2float_rd(x); }
// er__round_by_constant (format.h): to nearest with frac fraction bits and least exponent qmin.
__device__ static inline double er_round_by_constant(double x, int frac, int qmin) {
    int q = (int)((er_bits(x) >> 52) & 0x7ff) - 1023 - frac;
    if (q < qmin) q = qmin;
    double c = er_from_bits(((uint64_t)(q + 52 + 1023) << 52) | (1ULL << 51));
    return copysign((x + c) - c, x);
}
// x to nearest in the output format, for |x| <= its largest value (er__round_double's inline cases).
__device__ static inline double er_out_rn(double x, int fmt) {
    return fmt == 0 ? er_f32_rn(x) : fmt == 1 ? er_round_by_constant(x, 10, -24) : er_round_by_constant(x, 7, -133);
}

__device__ static inline double er_load(const void *p, int fmt, int64_t i) {
    return fmt == 0   ? (double)((const float *)p)[i]
           : fmt == 1 ? (double)__half2float(((const __half *)p)[i])
                      : (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

// A 128-bit integer (below 2^127) to the nearest double, ties to even (the host's conversion).
__device__ static double er_u128_to_double(er_u128 v) {
    uint64_t H = (uint64_t)(v >> 64), L = (uint64_t)v;
    if (H == 0) return __ull2double_rn(L);
    int lz = __clzll((long long)H);
    if (lz) { H = (H << lz) | (L >> (64 - lz)); L <<= lz; }
    uint64_t mant = H >> 11, rest = H & 0x7ff;
    int half = (int)((rest >> 10) & 1), sticky = (rest & 0x3ff) != 0 || L != 0;
    if (half && (sticky || (mant & 1))) mant++;
    return ldexp((double)mant, 75 - lz);
}

// ---- exp enclosed in double (ival.h) ----

__device__ static inline double er_scale2(double x, int q, int dir) {
    if (q < -1000) { x *= 0x1p-64; q += 64; }
    double y = x * er_from_bits((uint64_t)(q + 1023) << 52);
    if (y < 0x1p-1022) y = dir < 0 ? er_dn(y) : er_up(y);
    return y;
}

// er__exp_bounds (ival.h, Theorem D1), the tables er__exp_tlo, er__exp_thi, er__exp_lh and er__exp_ll as c's exp_tlo,
// exp_thi, exp_lh and exp_ll.
template <class C> __device__ static void er_exp_bounds(const C &c, double t, double *lo, double *hi) {
    if (t != t) { *lo = *hi = t; return; }
    if (t < -745.0) {
        *lo = 0.0;
        *hi = t == -INFINITY ? 0.0 : 4.9406564584124654e-324;
        return;
    }
    if (t > 709.0) { *lo = 0x1p1022; *hi = INFINITY; return; }
    double kd = (t * 92.332482616893656877 + 0x1.8p52) - 0x1.8p52;
    int k = (int)kd;
    double r = (t - kd * c.exp_lh) - kd * c.exp_ll;
    double p = 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int j = k & 63, q = (k - j) / 64;
    *lo = er_scale2(c.exp_tlo[j] * (p - 0x1p-51), q, -1);
    *hi = er_scale2(c.exp_thi[j] * (p + 0x1p-51), q, 1);
}

// er_exp_bounds's view of the tables in shared memory (a warp's lookups at different indices, which constant memory
// would serialise): c's exp_tlo and exp_thi copied by the block (then a barrier), their view in tb.
struct er_sh_expc { const double *exp_tlo, *exp_thi; double exp_lh, exp_ll; };
#define ER_EXP_TABLES_SHARED(c, tb)                                                                                   \
    __shared__ double sh_tlo[64], sh_thi[64];                                                                         \
    for (int k_ = threadIdx.x; k_ < 64; k_ += blockDim.x) {                                                           \
        sh_tlo[k_] = c.exp_tlo[k_];                                                                                   \
        sh_thi[k_] = c.exp_thi[k_];                                                                                   \
    }                                                                                                                 \
    __syncthreads();                                                                                                  \
    const er_sh_expc tb = {sh_tlo, sh_thi, c.exp_lh, c.exp_ll}

// The fixed-point terms of er__fxsum_terms (ival.h): lo 2^90 rounded down, hi 2^90 up.
__device__ static inline void er_fx_terms(double lo, double hi, er_u128 *tl, er_u128 *th) {
    uint64_t bl = er_bits(lo), bh = er_bits(hi);
    int el = (int)(bl >> 52), eh = (int)(bh >> 52);
    uint64_t ml = (bl & ((1ULL << 52) - 1)) | ((uint64_t)(el != 0) << 52);
    uint64_t mh = (bh & ((1ULL << 52) - 1)) | ((uint64_t)(eh != 0) << 52);
    int sl = (el ? el : 1) - 1075 + 90, sh = (eh ? eh : 1) - 1075 + 90;
    *tl = sl >= 0 ? (er_u128)ml << sl : sl > -64 ? (er_u128)(ml >> -sl) : 0;
    *th = sh >= 0    ? (er_u128)mh << sh
          : sh > -64 ? (er_u128)((mh >> -sh) + ((mh & ((1ULL << -sh) - 1)) != 0))
                     : (er_u128)(mh != 0);
}
// ---- the record of decided elements ----

// A thread's tally; set: where a one-element kernel wants its element's set (NULL in the rows' kernels, where the
// compiler drops its stores).
struct er_rec_acc {
    unsigned long long exact, covered, away, tried, seen, unb;
    double coarse, fine, wrel;
    long long widx;
    er_dev_cset *set;
};
__device__ static void er_acc_init(er_rec_acc &a) {
    a.exact = a.covered = a.away = a.tried = a.seen = a.unb = 0;
    a.coarse = -1;
    a.fine = INFINITY;
    a.wrel = -1;
    a.widx = LLONG_MAX;
    a.set = NULL;
}
__device__ static void er_acc_join(er_rec_acc &a, const er_rec_acc &b) {
    a.exact += b.exact;
    a.covered += b.covered;
    a.away += b.away;
    a.tried += b.tried;
    a.seen += b.seen;
    a.unb += b.unb;
    if (b.coarse > a.coarse) a.coarse = b.coarse;
    if (b.fine < a.fine) a.fine = b.fine;
    if (b.wrel > a.wrel || (b.wrel == a.wrel && b.widx < a.widx)) { a.wrel = b.wrel; a.widx = b.widx; }
}

// The least number of blocks of 256 threads the row kernels keep resident on an SM (__launch_bounds__'s second
// argument): 4 hold a thread to 64 registers. The compiler's own choice (90 to 128 registers) left 2 blocks, a quarter
// of the SM's warps, and the kernels waited on their operations' latencies (benchmarks.md, The row kernels' registers).
// Only the registers' use changes: every operation still rounds once.
#define ER_ROWS_MIN_BLOCKS 4

// Warp reductions: each lane's value joined with lane + off's (the joins are exact and commutative: any order gives
// the same result).
#define ER_FULL 0xffffffffu
__device__ static er_u128 er_shfl_u128(er_u128 v, int off) {
    unsigned long long lo = __shfl_down_sync(ER_FULL, (unsigned long long)v, off),
                       hi = __shfl_down_sync(ER_FULL, (unsigned long long)(v >> 64), off);
    return ((er_u128)hi << 64) | lo;
}
__device__ static void er_acc_shfl(er_rec_acc &a, int off) {
    er_rec_acc b;
    b.exact = __shfl_down_sync(ER_FULL, a.exact, off);
    b.covered = __shfl_down_sync(ER_FULL, a.covered, off);
    b.away = __shfl_down_sync(ER_FULL, a.away, off);
    b.tried = __shfl_down_sync(ER_FULL, a.tried, off);
    b.seen = __shfl_down_sync(ER_FULL, a.seen, off);
    b.unb = __shfl_down_sync(ER_FULL, a.unb, off);
    b.coarse = __shfl_down_sync(ER_FULL, a.coarse, off);
    b.fine = __shfl_down_sync(ER_FULL, a.fine, off);
    b.wrel = __shfl_down_sync(ER_FULL, a.wrel, off);
    b.widx = __shfl_down_sync(ER_FULL, a.widx, off);
    er_acc_join(a, b);
}

// The record of an element whose set [clo, chi] (finite, in the output format) and correctly rounded result `rounded`
// are known, with output y and exact result `exact` (er_classify, er_sink_record): its class (0 exact, 1 covered) into
// *cls and the tally in a (and the set into *a.set where given). 0 where the host must take the element: y outside
// the set or NaN, or the classic bug's value (bug: its relative move, 0 none) beyond the output's range.
__device__ static int er_record(double clo, double chi, double rounded, double exact, double y, int64_t idx, double bug,
                                double omax, int out_fmt, uint8_t *cls, er_rec_acc &a) {
    if (!(y >= clo && y <= chi)) return 0;
    int k = y == rounded ? 0 : 1;
    *cls = (uint8_t)k;
    if (k == 0) a.exact++;
    else a.covered++;
    double rel, away; // one division for both: er_set_rel's and er_set_away_rel's, bit for bit
    er_set_rels(clo, chi, &rel, &away);
    if (rel >= 0 && (rel > a.wrel || (rel == a.wrel && idx < a.widx))) { a.wrel = rel; a.widx = idx; }
    if (bug != 0 && isfinite(exact)) {
        double yb = exact * (1 + bug);
        if (!(fabs(yb) <= omax)) return 0;
        yb = er_out_rn(yb, out_fmt);
        a.tried++;
        a.seen += !(yb >= clo && yb <= chi);
    }
    if (clo <= -omax && chi >= omax) a.unb++;
    if (away >= 0) {
        a.away++;
        if (away > a.coarse) a.coarse = away;
        if (away < a.fine) a.fine = away;
    }
    if (a.set) *a.set = er_dev_cset{clo, chi, rounded, exact, y, 1};
    return 1;
}

// The record of an element whose set's hull [clo, chi] (finite, in the output format) is known and whose exact result
// lies in the double bracket [yl, yh]: its correct rounding where both ends round alike (the host's double cases),
// which the set holds (er__cset_build's any_order rule), then er_record. 0 where the host must take the element: a
// bracket end beyond the output's range, ends that round apart, and er_record's cases.
__device__ static int er_record_bracket(double clo, double chi, double yl, double yh, double y, int64_t idx,
                                        double bug, double omax, int out_fmt, uint8_t *cls, er_rec_acc &a) {
    if (!(fabs(yl) <= omax && fabs(yh) <= omax)) return 0;
    double rounded = er_out_rn(yl, out_fmt);
    if (rounded != er_out_rn(yh, out_fmt)) return 0;
    double exact = 0.5 * yl + 0.5 * yh;
    if (rounded < clo) clo = rounded;
    if (rounded > chi) chi = rounded;
    return er_record(clo, chi, rounded, exact, y, idx, bug, omax, out_fmt, cls, a);
}

// Row `row` (elements base .. base + n) left to the host: its classes pending, its number into pend[].
__device__ static void er_pend_row(uint8_t *classes, int64_t base, int64_t n, int64_t row, int64_t *pend,
                                   unsigned long long *npend) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) classes[base + i] = 0xFF;
    if (threadIdx.x == 0) pend[atomicAdd(npend, 1ULL)] = row;
}

// The end of a row in a block, after each thread has taken its elements (ok: all decided, a: its tally): where every
// thread's are, the threads' tallies joined into thread 0's tot (sha: one er_rec_acc per warp in shared memory), else
// the row left to the host. Ends with a barrier, after which shared memory is the next row's.
__device__ static void er_row_end(int ok, er_rec_acc &a, er_rec_acc *sha, er_rec_acc &tot, uint8_t *classes,
                                  int64_t base, int64_t n, int64_t row, int64_t *pend, unsigned long long *npend) {
    if (!__syncthreads_and(ok)) { er_pend_row(classes, base, n, row, pend, npend); return; }
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x / 32;
    for (int off = 16; off; off >>= 1) er_acc_shfl(a, off);
    if (lane == 0) sha[warp] = a;
    __syncthreads();
    if (tid == 0)
        for (int k = 0; k < nw; k++) er_acc_join(tot, sha[k]);
    __syncthreads();
}

// A block's tally as the host reads it.
__device__ static er_dev_part er_acc_part(const er_rec_acc &t) {
    er_dev_part p = { t.exact, t.covered, t.away, t.tried, t.seen, t.unb, t.coarse, t.fine, t.wrel, t.widx };
    return p;
}

// A block's share of rows row0 .. row0 + rows (of n elements each) of a path whose rows' constants the host computed:
// rcs[K row .. K row + K) (NaN: the host's row). elem(rc, row, idx, cls, a) decides element idx of row `row` into a
// (its class into *cls; 0: the host's row); each row then ends with er_row_end. Rows and elements are numbered from
// the tensor's first. sha: one er_rec_acc per warp in shared memory; the block's tally into parts[blockIdx.x].
template <int K, class Elem>
__device__ static void er_rows_by_consts(int64_t row0, int64_t rows, int64_t n, const double *rcs, uint8_t *classes,
                                         er_rec_acc *sha, er_dev_part *parts, int64_t *pend, unsigned long long *npend,
                                         Elem elem) {
    er_rec_acc tot;
    er_acc_init(tot);
    for (int64_t row = row0 + blockIdx.x; row < row0 + rows; row += gridDim.x) {
        int64_t base = row * n;
        double rc[K];
        for (int k = 0; k < K; k++) rc[k] = rcs[K * row + k];
        if (rc[0] != rc[0]) { // the host's row (the same for every thread)
            er_pend_row(classes, base, n, row, pend, npend);
            continue;
        }
        er_rec_acc a;
        er_acc_init(a);
        int ok = 1;
        for (int64_t i = threadIdx.x; i < n && ok; i += blockDim.x) ok = elem(rc, row, base + i, &classes[base + i], a);
        er_row_end(ok, a, sha, tot, classes, base, n, row, pend, npend);
    }
    if (threadIdx.x == 0) parts[blockIdx.x] = er_acc_part(tot);
}

// Element idx (rows of n) of such a path decided again by one thread, as er_rows_by_consts decides it, its set into
// *set (set->ok 0: not decided); its class goes nowhere.
template <int K, class Elem>
__device__ static void er_one_by_consts(int64_t idx, int64_t n, const double *rcs, er_dev_cset *set, Elem elem) {
    int64_t row = idx / n;
    double rc[K];
    for (int k = 0; k < K; k++) rc[k] = rcs[K * row + k];
    er_rec_acc a;
    er_acc_init(a);
    a.set = set;
    set->ok = 0; // er_record sets it where it decides
    uint8_t cls;
    if (rc[0] == rc[0]) (void)elem(rc, row, idx, &cls, a);
}

#endif

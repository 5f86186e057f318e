/* t-attention.c: attention forward (docs/algorithms/attention.md). Flash-style implementations in the kernel's own
 * arithmetic (fp32 floats): key blocks of 1 to 128 in forward, reverse or shuffled order, the running maximum and
 * the rescaling of O and of the denominator, exp or exp2 (the scale applied to the scores, folded into exp2's
 * argument with an fma as FlashAttention does, or Triton's product by scale * log2 e), every exp result at either
 * edge of its 2-ulp budget or at a random edge, P rounded to v's format (fp16, bf16) before P V or not, the
 * denominator summed from the rounded P or not, split-KV with 1 to 4 splits combined through their LSEs, the math
 * path (softmax first, then P V), a division or a reciprocal, fma or not; causal masks in both alignments, sliding
 * windows, GQA, fully masked rows. Inputs: normal data and scores on integers of log2 units (every p a power of two,
 * then pushed off it). None may fall outside; planted bugs are caught; bad calls are refused. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_test.h"
#include "../common/attn_kernel.h"

enum { MAXH = 4, MAXS = 1024, MAXD = 48 };
static int H, Hkv, Sq, Sk, D, Dv;
static er_format IF; /* q, k, v's format */
static double qd[MAXH * MAXS * MAXD], kd[MAXH * MAXS * MAXD], vd[MAXH * MAXS * MAXD];
static uint16_t qb[MAXH * MAXS * MAXD], kb[MAXH * MAXS * MAXD], vb[MAXH * MAXS * MAXD], ob[MAXH * MAXS * MAXD];
static float qf[MAXH * MAXS * MAXD], kf[MAXH * MAXS * MAXD], vf[MAXH * MAXS * MAXD], of[MAXH * MAXS * MAXD], outl[MAXH * MAXS];
static double user_scale; /* 0: 1/sqrt(D) */
static int lse_unchecked;  /* check_outputs leaves LSE out (O alone) */
static int causal, bottom_right, window, wl, wr;
/* fp8 attention (er_attention_fp8): the kernels' scales and what they write besides O and LSE */
static int fp8, amax_norm;   /* amax_norm: amax_s of P normalised by the row's sum, else of p as computed */
static int fp8_bug;          /* 1 amax_o written 0, 2 descale_v left out, 3 P quantised without scale_s, 4 amax_s after
                                scale_s, 5 descale_q left out */
static double f8q, f8k, f8v, f8s, f8ds, f8o; /* descale_q, _k, _v, scale_s, descale_s (0: 1/scale_s), scale_o */
static er_format OF8;        /* O's format in fp8 trials */
static float amax_s_out[1], amax_o_out[1], row_pmax, row_dsv;
static const char *fp8_order = "mma:sm90"; /* the order fp8 trials are checked under */

typedef struct kcfg {
    int block;     /* keys per block */
    int order;     /* 0 forward, 1 reverse, 2 shuffled */
    int mode;      /* 0 exp(s sc - m); 1 FlashAttention: exp2(fma(s, sc log2 e, -m sc log2 e)), m the raw maximum;
                      2 Triton: t = s fl(sc log2 e), exp2(t - m) */
    int edge;      /* each exp: 0 nearest, 1 U ulps up, -1 U ulps down, 2 either at random */
    int pround;    /* P rounded to v's format before P V */
    int lround;    /* the denominator summed from the rounded P */
    int splits;    /* split-KV */
    int mathpath;  /* softmax (p / l) first, then P V; no online rescaling */
    int qkin;      /* with mathpath: q and k times fl(sqrt(scale)) rounded to their format, the scores rounded to it
                      too, softmax (p / l) rounded to it (torch's math path in fp16 and bf16; qk_scale=input) */
    int recip;     /* O = acc * (1 / l) */
    int fma;       /* the sums with fmaf */
    int bug;       /* 0 none; 1 scale 1/D; 2 no rescale; 3 causal off by one; 4 GQA head h % Hkv; 5 LSE in base 2;
                      6 padded keys of the last block unmasked; 7 LSE without the maximum */
} kcfg;

static double kU = 2.0; /* the exps' ulps as the kernels use them (2: at the edge of the standard's budget) */

static double rnd(er_format f, double v) { double r; er_round_double(&r, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT); return r; }

/* exp (base2 = 0) or exp2 of x as a U-ulp function at the edge dir of its budget: U ulps from the correctly rounded
 * value, as CUDA's table counts them (up to U + 1/2 ulps from the exact value). */
static float fexp(double x, int base2, int dir) { return er_test_fexp(x, base2, dir, (int)kU); }

static float fadd(const kcfg *c, float acc, float a, float b) { return c->fma ? fmaf(a, b, acc) : acc + a * b; }

/* The keys of query i: [*j0, *j1] (empty when j1 < j0). */
static void keys_of(int i, int *j0, int *j1, int off_by_one) {
    er_test_keys_of(i, Sq, Sk, causal, bottom_right, window, wl, wr, off_by_one, j0, j1);
}

/* One row (query i of head h) over keys [j0, j1] as one split: the running state m (in the mode's units), l and acc. */
static void run_split(const kcfg *c, int h, int i, int j0, int j1, float *m_out, float *l_out, float *acc) {
    int g = c->bug == 4 ? h % Hkv : h / (H / Hkv);
    float sc = (float)(user_scale != 0 ? user_scale : 1.0 / sqrt((double)D));
    if (c->bug == 1) sc = (float)(1.0 / D);
    float l2e = (float)1.4426950408889634, sl2 = (float)((user_scale != 0 ? user_scale : 1.0 / sqrt((double)D)) * 1.4426950408889634);
    if (c->bug == 1) sl2 = (float)(1.4426950408889634 / D);
    if (fp8) { /* the descales folded into the constant in fp32, one rounding each */
        sc = sc * (float)f8q;
        if (fp8_bug != 5) sc = sc * (float)f8k;
        sl2 = sc * l2e;
    }
    float ssf = (float)f8s, dsf = f8ds != 0 ? (float)f8ds : 1.0f / (float)f8s;
    float qs = sc * l2e; /* Triton's qk_scale */
    if (c->mode == 2 && c->bug == 1) qs = (float)(1.0 / D) * l2e;
    float m = -INFINITY, l = 0;
    for (int d = 0; d < Dv; d++) acc[d] = 0;
    int n = j1 - j0 + 1, nb = (n + c->block - 1) / c->block, ord[MAXS + 1];
    int pad_end = c->bug == 6 ? j0 + nb * c->block - 1 : j1; /* the padded last block's keys: k = 0, v = 0 */
    for (int b = 0; b < nb; b++) ord[b] = c->order == 1 ? nb - 1 - b : b;
    if (c->order == 2)
        for (int b = nb - 1; b > 0; b--) { int r = (int)er_rand_int(0, b), t = ord[b]; ord[b] = ord[r]; ord[r] = t; }
    for (int bi = 0; bi < nb; bi++) {
        int b0 = j0 + ord[bi] * c->block, b1 = b0 + c->block - 1;
        if (b1 > pad_end) b1 = pad_end;
        float t[128], p[128];
        float bm = -INFINITY;
        for (int j = b0; j <= b1; j++) {
            float acc_s = 0;
            if (j <= j1 && j < Sk)
                for (int d = 0; d < D; d++) acc_s = fadd(c, acc_s, (float)qd[(h * Sq + i) * D + d], (float)kd[(g * Sk + j) * D + d]);
            t[j - b0] = c->mode == 0 ? acc_s * sc : c->mode == 1 ? acc_s : acc_s * qs;
            if (t[j - b0] > bm) bm = t[j - b0];
        }
        float mn = m > bm ? m : bm, alpha;
        if (c->mode == 0) alpha = m == -INFINITY ? 0.0f : fexp((double)(m - mn), 0, c->edge);
        else if (c->mode == 1) alpha = m == -INFINITY ? 0.0f : fexp((double)((m - mn) * sl2), 1, c->edge);
        else alpha = m == -INFINITY ? 0.0f : fexp((double)(m - mn), 1, c->edge);
        if (c->bug == 2 && m != -INFINITY) alpha = 1.0f;
        float bl = 0, pv[MAXD];
        for (int d = 0; d < Dv; d++) pv[d] = 0;
        for (int j = b0; j <= b1; j++) {
            float x = t[j - b0];
            if (c->mode == 0) p[j - b0] = fexp((double)(x - mn), 0, c->edge);
            else if (c->mode == 1) p[j - b0] = fexp((double)fmaf(x, sl2, -(mn * sl2)), 1, c->edge);
            else p[j - b0] = fexp((double)(x - mn), 1, c->edge);
            float pr = c->pround ? (float)rnd(er_format_precision(IF) == 8 ? ER_BF16 : ER_FP16, p[j - b0]) : p[j - b0];
            if (er_format_precision(IF) == 24) pr = p[j - b0];
            if (fp8) { /* P times scale_s in fp32, then to v's format; the denominator descaled where it sums it */
                if (p[j - b0] > row_pmax) row_pmax = p[j - b0];
                float ps = fp8_bug == 3 ? p[j - b0] : p[j - b0] * ssf;
                pr = c->pround ? (float)rnd(IF, ps) : ps;
                if (fp8_bug == 3) pr = pr * ssf;
            }
            bl += c->lround ? (fp8 ? pr * dsf : pr) : p[j - b0];
            for (int d = 0; d < Dv; d++) {
                float vv = j <= j1 && j < Sk ? (float)vd[(g * Sk + j) * Dv + d] : 0.0f;
                pv[d] = fadd(c, pv[d], pr, vv);
            }
        }
        l = l * alpha + bl;
        for (int d = 0; d < Dv; d++) acc[d] = c->fma ? fmaf(acc[d], alpha, pv[d]) : acc[d] * alpha + pv[d];
        m = mn;
    }
    *m_out = m;
    *l_out = l;
}

/* The kernel's O row and LSE for query i of head h. */
static void kernel_row(const kcfg *c, int h, int i, float *o, float *lse) {
    int j0, j1;
    keys_of(i, &j0, &j1, c->bug == 3);
    int n = j1 - j0 + 1;
    if (n <= 0) { /* a fully masked row: O = 0, LSE -inf, +inf (FlashAttention) or NaN */
        int r = (int)er_rand_int(0, 2);
        for (int d = 0; d < Dv; d++) o[d] = 0.0f;
        *lse = r == 0 ? -INFINITY : r == 1 ? INFINITY : NAN;
        return;
    }
    float ln2 = (float)0.6931471805599453, sc = (float)(user_scale != 0 ? user_scale : 1.0 / sqrt((double)D));
    if (fp8) sc = sc * (float)f8q * (float)f8k; /* as run_split's constant */
    if (c->mathpath) { /* torch's math path: scores, softmax, then P V */
        int g = h / (H / Hkv);
        float t[MAXS], m = -INFINITY, l = 0;
        float cs = sqrtf(sc);
        for (int j = j0; j <= j1; j++) {
            float a = 0;
            for (int d = 0; d < D; d++) {
                float qv = (float)qd[(h * Sq + i) * D + d], kv = (float)kd[(g * Sk + j) * D + d];
                if (c->qkin) { qv = (float)rnd(IF, qv * cs); kv = (float)rnd(IF, kv * cs); }
                a = fadd(c, a, qv, kv);
            }
            t[j - j0] = c->qkin ? (float)rnd(IF, a) : a * sc;
            if (t[j - j0] > m) m = t[j - j0];
        }
        for (int j = j0; j <= j1; j++) { t[j - j0] = fexp((double)(t[j - j0] - m), 0, c->edge); l += t[j - j0]; }
        float rl = 1.0f / l;
        for (int d = 0; d < Dv; d++) o[d] = 0;
        for (int j = j0; j <= j1; j++) {
            float a = c->recip ? t[j - j0] * rl : t[j - j0] / l;
            if (c->qkin) a = (float)rnd(IF, a);
            for (int d = 0; d < Dv; d++) o[d] = fadd(c, o[d], a, (float)vd[(g * Sk + j) * Dv + d]);
        }
        *lse = c->bug == 7 ? logf(l) : m + logf(l);
        return;
    }
    int ns = c->splits < n ? c->splits : n;
    float Os[4][MAXD], Ls[4], Lsn[4], acc[MAXD];
    for (int sp = 0; sp < ns; sp++) {
        float m, l;
        run_split(c, h, i, j0 + n * sp / ns, j0 + n * (sp + 1) / ns - 1, &m, &l, acc);
        float rl = 1.0f / l;
        for (int d = 0; d < Dv; d++) Os[sp][d] = c->recip ? acc[d] * rl : acc[d] / l;
        if (fp8) { /* descale_s and descale_v: as one fp32 constant, or one after the other */
            float dsf = f8ds != 0 ? (float)f8ds : 1.0f / (float)f8s, dvf = fp8_bug == 2 ? 1.0f : (float)f8v;
            float both = dsf * dvf;
            for (int d = 0; d < Dv; d++) Os[sp][d] = c->fma ? Os[sp][d] * both : (Os[sp][d] * dsf) * dvf;
            Lsn[sp] = 1.0f / l; /* the largest normalised P of the split: its maximum's p (1) over l */
        }
        if (c->mode == 0) Ls[sp] = (c->bug == 7 ? 0.0f : m) + logf(l);
        else if (c->mode == 1) Ls[sp] = (c->bug == 7 ? 0.0f : m * sc) + logf(l);
        else Ls[sp] = c->bug == 5 ? m + log2f(l) : ((c->bug == 7 ? 0.0f : m) + log2f(l)) * ln2;
    }
    if (ns == 1) {
        for (int d = 0; d < Dv; d++) o[d] = Os[0][d];
        *lse = Ls[0];
        if (fp8) row_dsv = Lsn[0];
        return;
    }
    float lmax = -INFINITY, den = 0, w[4];
    for (int sp = 0; sp < ns; sp++) if (Ls[sp] > lmax) lmax = Ls[sp];
    for (int sp = 0; sp < ns; sp++) { w[sp] = fexp((double)(Ls[sp] - lmax), 0, c->edge); den += w[sp]; }
    if (fp8) { /* the largest normalised P: a split's maximum's weight in the combined sum */
        row_dsv = 0;
        for (int sp = 0; sp < ns; sp++) row_dsv = fmaxf(row_dsv, Lsn[sp] * (w[sp] / den));
    }
    for (int d = 0; d < Dv; d++) {
        float a = 0;
        for (int sp = 0; sp < ns; sp++) a = fadd(c, a, w[sp], Os[sp][d]);
        o[d] = a / den;
    }
    *lse = lmax + logf(den);
}

static int pfmt_ok(void) { return IF == ER_FP16 || IF == ER_BF16 || IF == ER_FP32; }

/* Rounds the inputs to IF and stores them. */
static void store_inputs(void) {
    int nq = H * Sq * D, nk = Hkv * Sk * D, nv = Hkv * Sk * Dv;
    double *a[3] = {qd, kd, vd};
    uint16_t *b[3] = {qb, kb, vb};
    float *f[3] = {qf, kf, vf};
    int cnt[3] = {nq, nk, nv};
    for (int t = 0; t < 3; t++)
        for (int x = 0; x < cnt[t]; x++) {
            a[t][x] = rnd(IF, a[t][x]);
            uint64_t bits = 0;
            er_encode(&bits, IF, a[t][x], ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
            b[t][x] = (uint16_t)bits;
            f[t][x] = (float)a[t][x];
        }
}

/* Inputs: kind 0 normal data of magnitude mag; 1 small integers with the scale ln 2 (scores on integers of log2 units). */
static void gen(int kind, double mag) {
    user_scale = kind == 1 ? 0.6931471805599453 : 0.0;
    for (int x = 0; x < H * Sq * D; x++) qd[x] = kind == 1 ? (double)er_rand_int(-2, 2) : mag * er_rand_normal();
    for (int x = 0; x < Hkv * Sk * D; x++) kd[x] = kind == 1 ? (double)er_rand_int(-2, 2) : mag * er_rand_normal();
    for (int x = 0; x < Hkv * Sk * Dv; x++) vd[x] = er_rand_normal();
    store_inputs();
}

static er_format out_format(void) { return fp8 ? OF8 : IF == ER_FP32 ? ER_FP32 : IF; }

/* Writes element at of O (the kernel's value o rounded to O's format, in both storages). */
static void put_output(int at, double o) {
    er_format OF = out_format();
    uint64_t bits = 0;
    of[at] = (float)rnd(OF, o);
    er_encode(&bits, OF, o, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    ob[at] = (uint16_t)bits;
}

/* Checks the stored (O, LSE) against the reference of the stored inputs under any_order with opts (fp8 trials: the
 * four outputs of er_attention_fp8 under mma:sm90); reps (2, or 4 in fp8 trials) must be cleared. */
static er_status check_outputs(const char *opts, er_report *reps) {
    int fp32 = IF == ER_FP32;
    er_tensor tq, tk, tv, to, tl;
    /* one-byte formats (fp8) from the 16-bit storage's low bytes */
    static uint8_t q8[MAXH * MAXS * MAXD], k8[MAXH * MAXS * MAXD], v8[MAXH * MAXS * MAXD], o8[MAXH * MAXS * MAXD];
    const uint16_t *src[4] = {qb, kb, vb, ob};
    uint8_t *dst[4] = {q8, k8, v8, o8};
    int cnt[4] = {H * Sq * D, Hkv * Sk * D, Hkv * Sk * Dv, H * Sq * Dv};
    for (int t = 0; t < 4; t++)
        if ((t < 3 ? IF : out_format()) == ER_FP8_E4M3FN)
            for (int x = 0; x < cnt[t]; x++) dst[t][x] = (uint8_t)src[t][x];
    int b8 = IF == ER_FP8_E4M3FN, o1 = out_format() == ER_FP8_E4M3FN;
    er_tensor_view(&tq, IF, 3, (int64_t[]){H, Sq, D}, NULL, fp32 ? (void *)qf : b8 ? (void *)q8 : (void *)qb);
    er_tensor_view(&tk, IF, 3, (int64_t[]){Hkv, Sk, D}, NULL, fp32 ? (void *)kf : b8 ? (void *)k8 : (void *)kb);
    er_tensor_view(&tv, IF, 3, (int64_t[]){Hkv, Sk, Dv}, NULL, fp32 ? (void *)vf : b8 ? (void *)v8 : (void *)vb);
    er_tensor_view(&to, out_format(), 3, (int64_t[]){H, Sq, Dv}, NULL,
                   out_format() == ER_FP32 ? (void *)of : o1 ? (void *)o8 : (void *)ob);
    er_tensor_view(&tl, ER_FP32, 2, (int64_t[]){H, Sq}, NULL, outl);
    er_attention_opts ao = {user_scale, causal, bottom_right, window, wl, wr, H != Hkv};
    er_ref *ref = NULL;
    er_tensor tas, tao;
    er_tensor_view(&tas, ER_FP32, 1, (int64_t[]){1}, NULL, amax_s_out);
    er_tensor_view(&tao, ER_FP32, 4, (int64_t[]){1, 1, 1, 1}, NULL, amax_o_out); /* cuDNN's shape */
    er_attention_fp8_scales sc = {f8q, f8k, f8v, f8s, f8ds, f8o};
    er_status st = fp8 ? er_attention_fp8(&ref, &tq, &tk, &tv, &ao, &sc) : er_attention(&ref, &tq, &tk, &tv, &ao);
    if (st != ER_OK) return st;
    er_standard std;
    st = er_standard_parse(&std, fp8 ? fp8_order : "any_order", opts);
    const er_tensor *outs[4] = {&to, lse_unchecked ? NULL : &tl, &tas, &tao};
    if (st == ER_OK) st = er_covers_outputs(reps, ref, outs, fp8 ? 4 : 2, &std);
    er_ref_free(ref);
    return st;
}

/* Runs kernel c over every row and checks (O, LSE) under the standard's options; reps must be cleared. */
static er_status run_and_check(const kcfg *c, const char *opts, er_report *reps) {
    float amo = 0, ams = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            float o[MAXD];
            row_pmax = row_dsv = 0;
            kernel_row(c, h, i, o, &outl[h * Sq + i]);
            for (int d = 0; d < Dv; d++) {
                if (fp8) amo = fmaxf(amo, fabsf(o[d])), o[d] = o[d] * (float)f8o; /* amax_o before scale_o */
                put_output((h * Sq + i) * Dv + d, o[d]);
            }
            ams = fmaxf(ams, amax_norm ? row_dsv : row_pmax);
        }
    amax_o_out[0] = fp8_bug == 1 ? 0.0f : amo;
    amax_s_out[0] = fp8_bug == 4 ? ams * (float)f8s : ams;
    return check_outputs(opts, reps);
}

/* Sets the problem's formats and sizes, with no mask. */
static void problem(er_format f, int h, int hkv, int sq, int sk, int d, int dv) {
    IF = f;
    H = h;
    Hkv = hkv;
    Sq = sq;
    Sk = sk;
    D = d;
    Dv = dv;
    causal = bottom_right = window = 0;
}

static void random_problem(void) {
    static const er_format fmts[3] = {ER_FP16, ER_BF16, ER_FP32};
    IF = fmts[er_rand_int(0, 2)];
    H = (int)er_rand_int(1, MAXH);
    Hkv = H % 2 == 0 && er_rand_int(0, 1) ? H / 2 : H;
    Sq = (int)er_rand_int(1, 40);
    Sk = (int)er_rand_int(1, 160);
    D = 16 * (int)er_rand_int(1, MAXD / 16);
    Dv = 16 * (int)er_rand_int(1, 2);
    causal = (int)er_rand_int(0, 1);
    bottom_right = (int)er_rand_int(0, 1);
    window = er_rand_int(0, 3) == 0;
    wl = (int)er_rand_int(0, 40);
    wr = (int)er_rand_int(0, 40);
}

/* A kernel in key blocks of `block` in order, exps to nearest, P rounded to v's format, `splits` splits. */
static kcfg plain_kernel(int block, int mode, int splits) {
    kcfg c;
    memset(&c, 0, sizeof c);
    c.block = block;
    c.mode = mode;
    c.pround = 1;
    c.splits = splits;
    return c;
}

static kcfg random_kernel(void) {
    static const int blocks[5] = {1, 16, 32, 64, 128};
    kcfg c;
    memset(&c, 0, sizeof c);
    c.block = blocks[er_rand_int(0, 4)];
    c.order = (int)er_rand_int(0, 2);
    c.mode = (int)er_rand_int(0, 2);
    c.edge = (int)er_rand_int(-1, 2);
    c.pround = (int)er_rand_int(0, 3) != 0;
    c.lround = (int)er_rand_int(0, 1);
    c.splits = (int)er_rand_int(1, 4);
    c.mathpath = er_rand_int(0, 5) == 0;
    c.qkin = c.mathpath && er_rand_int(0, 1);
    c.recip = (int)er_rand_int(0, 1);
    c.fma = (int)er_rand_int(0, 1);
    return c;
}

START_TEST(flash_kernels_are_covered) {
    er_test_reseed(1601);
    int trials = (int)(160 * er_test_multiplier());
    int64_t exact = 0, covered = 0;
    for (int tr = 0; tr < trials; tr++) {
        random_problem();
        kcfg c = random_kernel();
        int kind = (int)er_rand_int(0, 2);
        gen(kind == 2 ? 0 : kind, kind == 2 ? 3.0 : 1.0);
        char opts[64] = "";
        if (c.block < 16) snprintf(opts, sizeof opts, "kv_block=%d", c.block);
        if (c.qkin) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "%sqk_scale=input", *opts ? " " : "");
        er_report reps[2];
        er_status st = run_and_check(&c, opts, reps);
        ER_REQUIRE(st == ER_OK, "trial %d: status %d", tr, (int)st);
        for (int o = 0; o < 2; o++)
            ER_REQUIRE_PASS(&reps[o], "trial %d (%s, H %d/%d, Sq %d, Sk %d, D %d, causal %d/%d, window %d [%d, %d]; block %d "
                            "order %d mode %d edge %d pround %d lround %d splits %d math %d recip %d fma %d; data %d): output %d",
                            tr, er_format_name(IF), H, Hkv, Sq, Sk, D, causal, bottom_right, window, wl, wr, c.block, c.order,
                            c.mode, c.edge, c.pround, c.lround, c.splits, c.mathpath, c.recip, c.fma, kind, o);
        exact += reps[0].counts[ER_CLASS_EXACT];
        covered += reps[0].counts[ER_CLASS_COVERED];
        for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
        if (!c.lround && !c.mathpath) { /* the denominator from the fp32 p: the narrower p_sum=fp32 holds it */
            char o2[96];
            snprintf(o2, sizeof o2, "%s%sp_sum=fp32", opts, *opts ? " " : "");
            ck_assert_int_eq(check_outputs(o2, reps), ER_OK);
            for (int o = 0; o < 2; o++) ER_REQUIRE_PASS(&reps[o], "trial %d under %s: output %d", tr, o2, o);
            for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
        }
    }
    ck_assert(pfmt_ok());
    ER_REQUIRE(exact > 0 && covered > 0, "both classes seen (exact %lld, covered %lld)", (long long)exact, (long long)covered);
}
END_TEST

/* Each planted bug on inputs that trigger it: caught in O or in LSE. */
START_TEST(planted_bugs_are_caught) {
    er_test_reseed(1602);
    static const char *const names[8] = {"", "scale 1/D", "no rescale", "causal off by one", "GQA head h % Hkv", "LSE in base 2",
                                         "padded keys unmasked", "LSE without the maximum"};
    for (int bug = 1; bug <= 7; bug++) {
        problem(ER_FP16, 4, bug == 4 ? 2 : 4, 24, bug == 6 ? 100 : 150, 32, 16); /* 100 keys: 28 padded in the last block */
        causal = bug == 3;
        gen(0, 1.0);
        kcfg c = plain_kernel(64, bug == 5 ? 2 : 1, 1);
        c.bug = bug;
        er_report reps[2];
        ck_assert_int_eq(run_and_check(&c, NULL, reps), ER_OK);
        ER_REQUIRE(!er_report_all(&reps[0]) || !er_report_all(&reps[1]), "bug '%s' not caught", names[bug]);
        /* the same kernel without its bug passes */
        er_report good[2];
        c.bug = 0;
        ck_assert_int_eq(run_and_check(&c, NULL, good), ER_OK);
        ER_REQUIRE_PASS(&good[0], "bug '%s' fixed: O", names[bug]);
        ER_REQUIRE_PASS(&good[1], "bug '%s' fixed: LSE", names[bug]);
        for (int o = 0; o < 2; o++) { er_report_clear(&reps[o]); er_report_clear(&good[o]); }
    }
}
END_TEST

/* q = 0: every weight is exactly 1 and O is the mean of v; a mean on a midpoint of fp16 rounds to even. */
START_TEST(exact_ties_round_to_even) {
    problem(ER_FP16, 1, 1, 1, 2, 16, 16);
    user_scale = 0;
    for (int x = 0; x < D * Sk; x++) kd[x] = er_rand_normal();
    for (int x = 0; x < D; x++) qd[x] = 0;
    for (int d = 0; d < Dv; d++) { vd[d] = 1.0; vd[Dv + d] = 1.0 + 0x1p-10; } /* mean 1 + 2^-11: a midpoint */
    store_inputs();
    kcfg c = plain_kernel(16, 1, 1);
    er_report reps[2];
    ck_assert_int_eq(run_and_check(&c, NULL, reps), ER_OK);
    ER_REQUIRE_PASS(&reps[0], "O");
    /* (1 + (1 + 2^-10)) / 2 in fp32 is 1 + 2^-11, rounded to fp16 by the kernel: to even, 1 */
    ck_assert(of[0] == 1.0f);
    ck_assert_int_eq(reps[0].counts[ER_CLASS_EXACT], Dv);
    ER_REQUIRE_PASS(&reps[1], "LSE");
    ck_assert_int_eq(reps[1].counts[ER_CLASS_EXACT], 1); /* log 2 */
    for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
    /* 1 + 2^-10 is in the set (a kernel may land there) but not the exact result */
    er_tensor tq, tk, tv, to;
    uint64_t bits;
    er_encode(&bits, ER_FP16, 1.0 + 0x1p-10, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    for (int d = 0; d < Dv; d++) ob[d] = (uint16_t)bits;
    er_tensor_view(&tq, IF, 3, (int64_t[]){1, 1, D}, NULL, qb);
    er_tensor_view(&tk, IF, 3, (int64_t[]){1, 2, D}, NULL, kb);
    er_tensor_view(&tv, IF, 3, (int64_t[]){1, 2, Dv}, NULL, vb);
    er_tensor_view(&to, ER_FP16, 3, (int64_t[]){1, 1, Dv}, NULL, ob);
    er_ref *ref;
    ck_assert_int_eq(er_attention(&ref, &tq, &tk, &tv, NULL), ER_OK);
    er_report rep;
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_covers(&rep, ref, &to, &std), ER_OK);
    ER_REQUIRE_PASS(&rep, "the other neighbour of the midpoint");
    ck_assert_int_eq(rep.counts[ER_CLASS_COVERED], Dv);
    er_report_clear(&rep);
    er_ref_free(ref);
}
END_TEST

/* Bottom-right causal with Sq > Sk: the first Sq - Sk rows have no key; O = 0 is exact, LSE -inf exact and +inf or
 * NaN covered; a kernel writing LSE = 0 there is caught. */
START_TEST(fully_masked_rows) {
    er_test_reseed(1603);
    problem(ER_BF16, 2, 2, 30, 20, 16, 16);
    causal = bottom_right = 1;
    gen(0, 1.0);
    kcfg c = plain_kernel(16, 2, 2);
    er_report reps[2];
    ck_assert_int_eq(run_and_check(&c, NULL, reps), ER_OK);
    ER_REQUIRE_PASS(&reps[0], "O");
    ER_REQUIRE_PASS(&reps[1], "LSE");
    ck_assert(reps[0].counts[ER_CLASS_EXACT] >= H * (Sq - Sk) * Dv);
    for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
    /* LSE 0 for a row without keys */
    er_tensor tq, tk, tv, tl;
    er_tensor_view(&tq, IF, 3, (int64_t[]){H, Sq, D}, NULL, qb);
    er_tensor_view(&tk, IF, 3, (int64_t[]){Hkv, Sk, D}, NULL, kb);
    er_tensor_view(&tv, IF, 3, (int64_t[]){Hkv, Sk, Dv}, NULL, vb);
    er_tensor_view(&tl, ER_FP32, 2, (int64_t[]){H, Sq}, NULL, outl);
    outl[0] = 0.0f;
    er_attention_opts ao = {0, 1, 1, 0, 0, 0, 0};
    er_ref *ref;
    ck_assert_int_eq(er_attention(&ref, &tq, &tk, &tv, &ao), ER_OK);
    const er_tensor *outs[2] = {NULL, &tl};
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 2, &std), ER_OK);
    ck_assert(!er_report_all(&reps[1]));
    ck_assert_int_eq(reps[1].n_failed, 1);
    for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
    /* a window as wide as int64 allows is no window: the same sets (the mask's ends are compared, never computed
     * past the keys: i + INT64_MAX overflowed, and the Python binding wrapped 2**64 to a window of 0) */
    static double lo0[64 * 64], hi0[64 * 64], lo1[64 * 64], hi1[64 * 64];
    static uint8_t f0[64 * 64], f1[64 * 64];
    ck_assert(H * Sq <= 64 * 64);
    ck_assert_int_eq(er_ref_enclosure(ref, 1, &std, ER_FP32, lo0, hi0, f0), ER_OK);
    er_ref *wide;
    er_attention_opts aw = {0, 1, 1, 1, INT64_MAX, INT64_MAX, 0};
    ck_assert_int_eq(er_attention(&wide, &tq, &tk, &tv, &aw), ER_OK);
    ck_assert_int_eq(er_ref_enclosure(wide, 1, &std, ER_FP32, lo1, hi1, f1), ER_OK);
    for (int64_t i = 0; i < H * Sq; i++)
        ck_assert_msg(f0[i] == f1[i] && (lo0[i] == lo1[i] || (isnan(lo0[i]) && isnan(lo1[i]))) &&
                      (hi0[i] == hi1[i] || (isnan(hi0[i]) && isnan(hi1[i]))), "row %lld: the widest window changed the set", (long long)i);
    er_ref_free(wide);
    er_ref_free(ref);
}
END_TEST

/* Without a window a row's B_d (the sum of |v_jd| over its keys) is read from its kv head's sums from the first key; a
 * window that masks nothing sums it row by row: the same sets, bit for bit, causal or not. fp16 inputs, whose
 * subnormal step makes B's term of Theorem A2 (2 B_d eta_V) move the sets' ends. */
START_TEST(b_from_the_heads_sums_is_the_rows) {
    er_test_reseed(1621);
    static double lo0[MAXH * MAXS * MAXD], hi0[MAXH * MAXS * MAXD], lo1[MAXH * MAXS * MAXD], hi1[MAXH * MAXS * MAXD];
    static uint8_t f0[MAXH * MAXS * MAXD], f1[MAXH * MAXS * MAXD];
    int64_t elems = 0;
    for (int tr = 0; tr < 8; tr++) {
        problem(ER_FP16, 2, 1 + tr % 2, (int)er_rand_int(1, 40), (int)er_rand_int(1, 60), 8, (int)er_rand_int(1, 24));
        gen(0, 1.0);
        er_tensor tq, tk, tv;
        er_tensor_view(&tq, IF, 3, (int64_t[]){H, Sq, D}, NULL, qb);
        er_tensor_view(&tk, IF, 3, (int64_t[]){Hkv, Sk, D}, NULL, kb);
        er_tensor_view(&tv, IF, 3, (int64_t[]){Hkv, Sk, Dv}, NULL, vb);
        er_standard std;
        ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
        int cz = tr % 2;
        er_attention_opts a0 = {0, cz, 0, 0, 0, 0, H != Hkv}, a1 = {0, cz, 0, 1, Sq + Sk, Sq + Sk, H != Hkv};
        er_ref *r0, *r1;
        ck_assert_int_eq(er_attention(&r0, &tq, &tk, &tv, &a0), ER_OK);
        ck_assert_int_eq(er_attention(&r1, &tq, &tk, &tv, &a1), ER_OK);
        ck_assert_int_eq(er_ref_enclosure(r0, 0, &std, ER_FP16, lo0, hi0, f0), ER_OK);
        ck_assert_int_eq(er_ref_enclosure(r1, 0, &std, ER_FP16, lo1, hi1, f1), ER_OK);
        for (int64_t e = 0; e < (int64_t)H * Sq * Dv; e++, elems++)
            ER_REQUIRE(f0[e] == f1[e] && (lo0[e] == lo1[e] || (isnan(lo0[e]) && isnan(lo1[e]))) &&
                           (hi0[e] == hi1[e] || (isnan(hi0[e]) && isnan(hi1[e]))),
                       "trial %d (causal %d, H %d/%d, Sq %d, Sk %d, Dv %d), element %lld: [%a, %a] without a window, "
                       "[%a, %a] with one that masks nothing", tr, cz, H, Hkv, Sq, Sk, Dv, (long long)e, lo0[e], hi0[e],
                       lo1[e], hi1[e]);
        er_ref_free(r0);
        er_ref_free(r1);
    }
    printf("B from the kv heads' sums: %lld fp16 sets the same with a window that masks nothing\n", (long long)elems);
}
END_TEST

START_TEST(refusals) {
    float a[2 * 3 * 4] = {0}, l[16];
    double dd[2 * 3 * 4] = {0};
    er_tensor q, k, v, q64, k5, o, lw;
    er_tensor_view(&q, ER_FP32, 3, (int64_t[]){2, 3, 4}, NULL, a);
    er_tensor_view(&k, ER_FP32, 3, (int64_t[]){2, 3, 4}, NULL, a);
    er_tensor_view(&v, ER_FP32, 3, (int64_t[]){2, 3, 4}, NULL, a);
    er_tensor_view(&q64, ER_FP64, 3, (int64_t[]){2, 3, 4}, NULL, dd);
    er_tensor_view(&k5, ER_FP32, 3, (int64_t[]){2, 3, 2}, NULL, a);
    er_ref *ref = (er_ref *)&a; /* untouched on refusal */
    ck_assert_int_eq(er_attention(&ref, &q64, &k, &v, NULL), ER_ERR_UNSUPPORTED);
    ck_assert_int_eq(er_attention(&ref, &q, &k5, &v, NULL), ER_ERR_SHAPE);
    ck_assert_int_eq(er_attention(&ref, NULL, &k, &v, NULL), ER_ERR_NULL);
    er_tensor k1;
    er_tensor_view(&k1, ER_FP32, 3, (int64_t[]){1, 3, 4}, NULL, a);
    ck_assert_int_eq(er_attention(&ref, &q, &k1, &k1, NULL), ER_ERR_SHAPE); /* 2 heads and 1 without enable_gqa */
    er_attention_opts ao = {INFINITY, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(er_attention(&ref, &q, &k, &v, &ao), ER_ERR_INVALID);
    er_attention_opts aw = {0, 0, 0, 1, -1, 0, 0};
    ck_assert_int_eq(er_attention(&ref, &q, &k, &v, &aw), ER_ERR_INVALID);
    ck_assert_ptr_eq(ref, (er_ref *)&a);
    ck_assert_int_eq(er_attention(&ref, &q, &k, &v, NULL), ER_OK);
    er_tensor_view(&o, ER_FP32, 3, (int64_t[]){2, 3, 4}, NULL, a);
    er_tensor_view(&lw, ER_FP32, 2, (int64_t[]){2, 4}, NULL, l);
    er_standard std;
    er_report rep, reps[2];
    static const char *const bad[5][2] = {{"sequential", NULL}, {"any_order", "compute=fp16"}, {"any_order", "div=divide"},
                                          {"any_order", "variance=welford"}, {"blocked:16", NULL}};
    for (int b = 0; b < 5; b++) {
        ck_assert_int_eq(er_standard_parse(&std, bad[b][0], bad[b][1]), ER_OK);
        er_status st = er_covers(&rep, ref, &o, &std);
        ER_REQUIRE(st == ER_ERR_STANDARD || st == ER_ERR_UNSUPPORTED, "standard %s %s: status %d", bad[b][0], bad[b][1] ? bad[b][1] : "", (int)st);
        ck_assert(!er_report_all(&rep));
        er_report_clear(&rep);
    }
    const er_tensor *outs[2] = {&o, &lw}; /* lse of the wrong shape */
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    ck_assert_int_eq(er_covers_outputs(reps, ref, outs, 2, &std), ER_ERR_OUTPUT);
    er_report_clear(&reps[0]);
    er_report_clear(&reps[1]);
    /* er_ref_rounded writes nothing over an input: O over v's memory is refused, naming v */
    float vbuf[2 * 3 * 4] = {0};
    er_tensor v2, o2;
    er_tensor_view(&v2, ER_FP32, 3, (int64_t[]){2, 3, 4}, NULL, vbuf);
    er_tensor_view(&o2, ER_FP32, 3, (int64_t[]){2, 3, 4}, NULL, vbuf);
    er_ref *r2;
    ck_assert_int_eq(er_attention(&r2, &q, &k, &v2, NULL), ER_OK);
    ck_assert_int_eq(er_ref_rounded(&o2, r2), ER_ERR_OUTPUT);
    ck_assert_msg(strstr(er_last_error(), "shares memory with v,") != NULL, "%s", er_last_error());
    er_ref_free(r2);
    er_ref_free(ref);
    /* kv_block= on another op */
    er_ref *mm;
    er_tensor A;
    er_tensor_view(&A, ER_FP32, 2, (int64_t[]){4, 4}, NULL, a);
    ck_assert_int_eq(er_matmul(&mm, &A, &A), ER_OK);
    ck_assert_int_eq(er_standard_parse(&std, "any_order", "kv_block=4"), ER_OK);
    er_tensor C;
    er_tensor_view(&C, ER_FP32, 2, (int64_t[]){4, 4}, NULL, a);
    ck_assert_int_eq(er_covers(&rep, mm, &C, &std), ER_ERR_STANDARD);
    er_report_clear(&rep);
    er_ref_free(mm);
}
END_TEST

/* The deepest rescale chain: one key per block (kv_block=1), every exp (the rescale factors' included) at the top of
 * its budget, v splitting the keys into halves of opposite signs. Scores a little above the last (the running maximum
 * grows at every key, each rescale factor just below 1) or a little below (each factor exp(0), pushed 2 ulps of 1
 * above it: the budget's relative edge). fp32 inputs: no P rounding to hide behind. Covered at kv_block=1; the same
 * kernels with exps far outside their budget are outside. */
START_TEST(rescale_chain_at_the_edge) {
    problem(ER_FP32, 1, 1, 1, 1000, 16, 16);
    user_scale = 1.0;
    /* dir 2: the first key dominates the sum (the others 21 below it) and meets all 999 rescales */
    for (int dir = -1; dir <= 2; dir += dir == -1 ? 2 : 1) {
        for (int x = 0; x < D * Sk; x++) kd[x] = 0;
        for (int x = 0; x < D; x++) qd[x] = x == 0;
        for (int j = 0; j < Sk; j++) {
            kd[j * D] = dir == 2 ? (j ? -20.0 - j * 0x1p-16 : 1.0) : 1.0 + dir * j * 0x1p-21;
            for (int d = 0; d < Dv; d++) vd[j * Dv + d] = j < Sk / 2 ? 1.0 : -1.0;
        }
        store_inputs();
        for (int mode = 0; mode < 3; mode++) {
            kcfg c;
            memset(&c, 0, sizeof c);
            c.block = 1;
            c.mode = mode;
            c.edge = 1;
            c.splits = 1;
            er_report reps[2];
            kU = 2.0;
            ck_assert_int_eq(run_and_check(&c, "kv_block=1", reps), ER_OK);
            ER_REQUIRE_PASS(&reps[0], "scores %+d, mode %d: O", dir, mode);
            ER_REQUIRE_PASS(&reps[1], "scores %+d, mode %d: LSE", dir, mode);
            for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
            /* outside the budget: 64 ulps; with the dominant key, 24 (the set, which holds tensor cores' blocks of one key
             * too, is within 12 times what this kernel reaches) */
            kU = dir == 2 ? 24.0 : 64.0;
            ck_assert_int_eq(run_and_check(&c, "kv_block=1", reps), ER_OK);
            if (dir != 1)
                ER_REQUIRE(!er_report_all(&reps[0]) || !er_report_all(&reps[1]), "scores %+d, mode %d: exps %g ulps off pass", dir,
                           mode, kU);
            kU = 2.0;
            for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
        }
    }
}
END_TEST

/* torch's math path in the input format (q and k scaled by sqrt(scale) and rounded to fp16 or bf16, the scores and
 * the softmax rounded to it): covered under qk_scale=input, and outside the default set (the scale applied in fp32)
 * on some of these rows. */
START_TEST(qk_scale_input) {
    er_test_reseed(1605);
    int outside = 0;
    for (int tr = 0; tr < 8; tr++) {
        problem(tr % 2 ? ER_BF16 : ER_FP16, 2, 2, 16, 96, 64, 32);
        gen(0, 1.5);
        kcfg c = plain_kernel(16, 0, 1);
        c.mathpath = c.qkin = 1;
        er_report reps[2];
        ck_assert_int_eq(run_and_check(&c, "qk_scale=input", reps), ER_OK);
        ER_REQUIRE_PASS(&reps[0], "trial %d: O under qk_scale=input", tr);
        ER_REQUIRE_PASS(&reps[1], "trial %d: LSE under qk_scale=input", tr);
        for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
        ck_assert_int_eq(check_outputs(NULL, reps), ER_OK);
        outside += !er_report_all(&reps[0]) || !er_report_all(&reps[1]);
        for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
    }
    ER_REQUIRE(outside > 0, "the input-format scaling never left the default set");
}
END_TEST

/* One fp32 query row q (D = 2) over n keys k (n x 2) and values v (n x 1) under any_order: the output `right` must be
 * called exact and `other` covered only. */
static void require_right_exact(float *q, float *k, float *v, int n, float right, float other, const char *what) {
    er_tensor tq, tk, tv, to;
    er_tensor_view(&tq, ER_FP32, 2, (int64_t[]){1, 2}, NULL, q);
    er_tensor_view(&tk, ER_FP32, 2, (int64_t[]){n, 2}, NULL, k);
    er_tensor_view(&tv, ER_FP32, 2, (int64_t[]){n, 1}, NULL, v);
    er_ref *ref;
    ck_assert_int_eq(er_attention(&ref, &tq, &tk, &tv, NULL), ER_OK);
    er_standard std;
    ck_assert_int_eq(er_standard_parse(&std, "any_order", NULL), ER_OK);
    float o[1];
    for (int w = 0; w < 2; w++) {
        o[0] = w ? other : right;
        er_tensor_view(&to, ER_FP32, 2, (int64_t[]){1, 1}, NULL, o);
        er_report rep;
        ck_assert_int_eq(er_covers(&rep, ref, &to, &std), ER_OK);
        ER_REQUIRE(rep.counts[w ? ER_CLASS_COVERED : ER_CLASS_EXACT] == 1, "%s, output %a: not %s", what, (double)o[0],
                   w ? "covered" : "exact");
        er_report_clear(&rep);
    }
    er_ref_free(ref);
}

/* A long row whose exact O lies 2^-44 from an fp32 midpoint (its double enclosure, about 2^-41 wide from N's double
 * sum over 4096 keys, holds the midpoint): the scores are exactly 0 by cancellation (q = (1, 1), k_j = (x_j, -x_j)
 * with x_j of all sizes), so every weight is 1 and O is the mean of v: 4093 ones, 1 + 2^-12, 2 - 2^-9 and
 * 2^-9 + 2^-32 (mean 1 + 2^-24 + 2^-44), or with the last 2^-9 - 2^-32 (mean 1 + 2^-24 - 2^-44). The correct
 * rounding (1 + 2^-23, then 1) must be called exact and its neighbour covered only. */
START_TEST(long_row_near_a_midpoint_is_exact) {
    er_test_reseed(1630);
    enum { N = 4096 };
    static float q[2] = {1, 1}, k[N * 2], v[N];
    for (int side = 0; side < 2; side++) {
        for (int j = 0; j < N; j++) {
            float x = (float)ldexp(1 + er_rand_unit(), (int)er_rand_int(-20, 6));
            k[2 * j] = x;
            k[2 * j + 1] = -x;
            v[j] = 1;
        }
        int a = (int)er_rand_int(0, N - 1), b = (a + 1 + (int)er_rand_int(0, N - 3)) % N, c = b;
        while (c == a || c == b) c = (int)er_rand_int(0, N - 1);
        v[a] = 1 + 0x1p-12f;
        v[b] = 2 - 0x1p-9f;
        v[c] = side ? 0x1p-9f - 0x1p-32f : 0x1p-9f + 0x1p-32f;
        float right = side ? 1.0f : 1 + 0x1p-23f, other = side ? 1 + 0x1p-23f : 1.0f;
        require_right_exact(q, k, v, N, right, other, side ? "mean 1 + 2^-24 - 2^-44" : "mean 1 + 2^-24 + 2^-44");
    }
}
END_TEST

/* Row i of head h at 300 bits: its keys [*j0, *j1] (empty when j1 < j0), the weights w[j - j0] = exp(s_j - m) of
 * the scores s_j (exact, times the scale 1/sqrt(D) rounded to nearest at 300 bits), the largest score m and the
 * weights' sum L (each exp and sum rounded to nearest at 300 bits); w's numbers initialised here, cleared by the
 * caller (oracle_clear). */
static void oracle_row(int h, int i, int *j0, int *j1, mpfr_t *w, mpfr_t m, mpfr_t L) {
    int g = h / (H / Hkv);
    mpfr_t S, x, sc;
    mpfr_inits2(300, S, x, sc, (mpfr_ptr)0);
    if (user_scale != 0) mpfr_set_d(sc, user_scale, MPFR_RNDN);
    else { mpfr_set_si(sc, D, MPFR_RNDN); mpfr_rec_sqrt(sc, sc, MPFR_RNDN); }
    keys_of(i, j0, j1, 0);
    mpfr_set_inf(m, -1);
    for (int j = *j0; j <= *j1; j++) {
        mpfr_init2(w[j - *j0], 300);
        mpfr_set_zero(S, 1);
        for (int d = 0; d < D; d++) {
            mpfr_set_d(x, qd[(h * Sq + i) * D + d] * kd[(g * Sk + j) * D + d], MPFR_RNDN); /* exact */
            mpfr_add(S, S, x, MPFR_RNDN);                                              /* exact at 300 bits */
        }
        mpfr_mul(w[j - *j0], S, sc, MPFR_RNDN);
        if (mpfr_cmp(w[j - *j0], m) > 0) mpfr_set(m, w[j - *j0], MPFR_RNDN);
    }
    mpfr_set_zero(L, 1);
    for (int j = *j0; j <= *j1; j++) {
        mpfr_sub(w[j - *j0], w[j - *j0], m, MPFR_RNDN);
        mpfr_exp(w[j - *j0], w[j - *j0], MPFR_RNDN);
        mpfr_add(L, L, w[j - *j0], MPFR_RNDN);
    }
    mpfr_clears(S, x, sc, (mpfr_ptr)0);
}

static void oracle_clear(int j0, int j1, mpfr_t *w) {
    for (int j = j0; j <= j1; j++) mpfr_clear(w[j - j0]);
}

/* O_d of a row of head h from its weights (oracle_row) into o, at 300 bits. */
static void oracle_o(int h, int d, int j0, int j1, mpfr_t *w, mpfr_t L, mpfr_t o) {
    int g = h / (H / Hkv);
    mpfr_t x;
    mpfr_init2(x, 300);
    mpfr_set_zero(o, 1);
    for (int j = j0; j <= j1; j++) {
        mpfr_mul_d(x, w[j - j0], vd[(g * Sk + j) * Dv + d], MPFR_RNDN);
        mpfr_add(o, o, x, MPFR_RNDN);
    }
    mpfr_div(o, o, L, MPFR_RNDN);
    mpfr_clear(x);
}

/* The stored problem's O and LSE at 300 bits (oracle_row, oracle_o), rounded by er_oracle_round, written as the
 * kernel's outputs. */
static void oracle_outputs(void) {
    mpfr_t x, L, m;
    mpfr_inits2(300, x, L, m, (mpfr_ptr)0);
    er_format OF = out_format();
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            int j0, j1;
            mpfr_t w[MAXS];
            oracle_row(h, i, &j0, &j1, w, m, L);
            for (int d = 0; d < Dv; d++) {
                double o = 0;
                if (j1 >= j0) {
                    oracle_o(h, d, j0, j1, w, L, x);
                    o = er_oracle_round(OF, x, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
                }
                put_output((h * Sq + i) * Dv + d, o);
            }
            if (j1 >= j0) {
                mpfr_log(x, L, MPFR_RNDN);
                mpfr_add(x, x, m, MPFR_RNDN);
                outl[h * Sq + i] = (float)er_oracle_round(ER_FP32, x, MPFR_RNDN, ER_OVERFLOW_DEFAULT);
            } else {
                outl[h * Sq + i] = -INFINITY;
            }
            oracle_clear(j0, j1, w);
        }
    mpfr_clears(x, L, m, (mpfr_ptr)0);
}

/* A long row whose double sum of N rounds the same way 4091 times: every score exactly 0 (q = (1, 1), k_j = (x_j,
 * -x_j)), so every weight is 1 and O = N / 4096; v = 1, 2^-24, 4094 2^-53, -4094 2^-70, -2^-42, then 4091 values of
 * -(2^-53 - 2^-70), each below half an ulp of the running sum, which a plain double sum drops. N lies 2^-42 - 3 2^-53
 * below the fp32 midpoint 1 + 2^-24, where the plain sum lands 2^-42 above it: the correct rounding (2^-12) must be
 * called exact and its neighbour covered only (Lemma A1's N with its additions' errors kept, for an fp32 output). */
START_TEST(long_row_whose_sum_rounds_one_way_is_exact) {
    enum { N = 4096 };
    static float q[2] = {1, 1}, k[N * 2], v[N];
    er_test_reseed(1670);
    for (int j = 0; j < N; j++) {
        float x = (float)ldexp(1 + er_rand_unit(), (int)er_rand_int(-20, 6));
        k[2 * j] = x;
        k[2 * j + 1] = -x;
        v[j] = -(0x1p-53f - 0x1p-70f);
    }
    v[0] = 1;
    v[1] = 0x1p-24f;
    v[2] = 4094 * 0x1p-53f;
    v[3] = -4094 * 0x1p-70f;
    v[4] = -0x1p-42f;
    require_right_exact(q, k, v, N, 0x1p-12f, (1 + 0x1p-23f) * 0x1p-12f, "N 2^-42 below a midpoint");
}
END_TEST

/* The MPFR oracle (oracle_outputs) written as the kernel's output: every element must be exact.
 * Random problems in fp16, bf16 and fp32, masks and GQA, and O in fp16, bf16 and fp32. */
START_TEST(mpfr_oracle_is_exact) {
    er_test_reseed(1604);
    int trials = (int)(12 * er_test_multiplier());
    for (int tr = 0; tr < trials; tr++) {
        random_problem();
        Sk = (int)er_rand_int(1, 80);
        gen((int)er_rand_int(0, 1), 1.0);
        oracle_outputs();
        er_report reps[2];
        ck_assert_int_eq(check_outputs(NULL, reps), ER_OK);
        ER_REQUIRE(reps[0].counts[ER_CLASS_EXACT] == (int64_t)H * Sq * Dv, "trial %d (%s): O exact %lld of %lld", tr,
                   er_format_name(IF), (long long)reps[0].counts[ER_CLASS_EXACT], (long long)H * Sq * Dv);
        ER_REQUIRE(reps[1].counts[ER_CLASS_EXACT] == (int64_t)H * Sq, "trial %d: LSE exact %lld of %lld", tr,
                   (long long)reps[1].counts[ER_CLASS_EXACT], (long long)H * Sq);
        for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
    }
}
END_TEST

/* Long rows with fp32 outputs, each element of O moved next to a midpoint of fp32: v of the key whose weight is
 * nearest 2^-16 of the row's sum set so that O lies within about 2^-41 |v| of the midpoint (closer than double's
 * enclosure, each score's bound and N's double sum, can decide, farther than the first enclosure's 2^-48 or so:
 * Lemma A5, scores and N's ends in two doubles). The oracle's O must be exact, and O with every element moved one
 * ulp must have no exact element. */
START_TEST(long_rows_near_midpoints_are_exact) {
    er_test_reseed(1640);
    int trials = (int)(6 * er_test_multiplier()) + 1;
    mpfr_t L, m, o, x;
    mpfr_inits2(300, L, m, o, x, (mpfr_ptr)0);
    for (int tr = 0; tr < trials; tr++) {
        problem(ER_FP32, 1, 1, 1, MAXS, MAXD, 32);
        gen(0, 1.0 + er_rand_unit());
        int j0, j1, jt = 0;
        mpfr_t w[MAXS];
        oracle_row(0, 0, &j0, &j1, w, m, L);
        double best = INFINITY;
        for (int j = j0; j <= j1; j++) {
            mpfr_div(x, w[j - j0], L, MPFR_RNDN);
            double r = fabs(log2(mpfr_get_d(x, MPFR_RNDN)) + 16);
            if (r < best) { best = r; jt = j; }
        }
        for (int d = 0; d < Dv; d++) { /* v_jt,d += (midpoint - O_d) L / w_jt, rounded to fp32 */
            oracle_o(0, d, j0, j1, w, L, o);
            double od = mpfr_get_d(o, MPFR_RNDN), f = (double)(float)od;
            double g = f <= od ? (double)nextafterf((float)f, INFINITY) : (double)nextafterf((float)f, -INFINITY);
            mpfr_set_d(x, f, MPFR_RNDN);
            mpfr_add_d(x, x, g, MPFR_RNDN);
            mpfr_div_2ui(x, x, 1, MPFR_RNDN);
            mpfr_sub(x, x, o, MPFR_RNDN);
            mpfr_mul(x, x, L, MPFR_RNDN);
            mpfr_div(x, x, w[jt - j0], MPFR_RNDN);
            vd[jt * Dv + d] = rnd(ER_FP32, vd[jt * Dv + d] + mpfr_get_d(x, MPFR_RNDN));
        }
        oracle_clear(j0, j1, w);
        store_inputs();
        oracle_outputs();
        er_report reps[2];
        ck_assert_int_eq(check_outputs(NULL, reps), ER_OK);
        ER_REQUIRE(reps[0].counts[ER_CLASS_EXACT] == (int64_t)Dv, "trial %d: O exact %lld of %d", tr,
                   (long long)reps[0].counts[ER_CLASS_EXACT], Dv);
        for (int k = 0; k < 2; k++) er_report_clear(&reps[k]);
        for (int k = 0; k < Dv; k++) of[k] = nextafterf(of[k], er_rand_int(0, 1) ? INFINITY : -INFINITY);
        ck_assert_int_eq(check_outputs(NULL, reps), ER_OK);
        ER_REQUIRE(reps[0].counts[ER_CLASS_EXACT] == 0, "trial %d: %lld elements one ulp off called exact", tr,
                   (long long)reps[0].counts[ER_CLASS_EXACT]);
        for (int k = 0; k < 2; k++) er_report_clear(&reps[k]);
    }
    mpfr_clears(L, m, o, x, (mpfr_ptr)0);
}
END_TEST

/* fp8 attention: the scales of a random fp8 problem (descales of fp8 data around their ranges, scale_s a power of two
 * or not up to 448, descale_s given or not, scale_o), O in fp8 e4m3 or bf16, amax_s of normalised or raw P. */
static void fp8_problem(void) {
    random_problem();
    IF = ER_FP8_E4M3FN;
    fp8 = 1;
    fp8_bug = 0;
    OF8 = er_rand_int(0, 1) ? ER_FP8_E4M3FN : ER_BF16;
    f8q = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-6, 1));
    f8k = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-6, 1));
    f8v = ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-8, 2));
    int sk = (int)er_rand_int(0, 2);
    f8s = sk == 0 ? 448.0 : sk == 1 ? ldexp(1.0, (int)er_rand_int(0, 8)) : 1.0 + 446.0 * er_rand_unit();
    f8ds = er_rand_int(0, 1) ? (double)(1.0f / (float)f8s) : 0.0;
    f8o = er_rand_int(0, 1) ? 1.0 : ldexp(1.0 + er_rand_unit(), (int)er_rand_int(-2, 6));
    amax_norm = (int)er_rand_int(0, 1);
}

/* Flash-style kernels on fp8 q, k, v with their scales (P quantised after scale_s, O descaled and scaled, amax_s and
 * amax_o written): all four outputs covered. */
START_TEST(fp8_kernels_are_covered) {
    er_test_reseed(1610);
    int trials = (int)(120 * er_test_multiplier());
    int64_t cls[ER_CLASS_COUNT] = {0};
    for (int tr = 0; tr < trials; tr++) {
        fp8_problem();
        kcfg c = random_kernel();
        c.mathpath = c.qkin = 0;
        int kind = (int)er_rand_int(0, 2);
        gen(kind == 2 ? 0 : kind, kind == 2 ? 3.0 : 1.0);
        char opts[64] = "";
        if (c.block < 16) snprintf(opts, sizeof opts, "kv_block=%d", c.block);
        er_report reps[4];
        er_status st = run_and_check(&c, opts, reps);
        ER_REQUIRE(st == ER_OK, "trial %d: status %d: %s", tr, (int)st, er_last_error());
        for (int o = 0; o < 4; o++)
            ER_REQUIRE_PASS(&reps[o], "fp8 trial %d (H %d/%d, Sq %d, Sk %d, D %d, causal %d/%d, window %d; block %d order %d "
                            "mode %d edge %d pround %d lround %d splits %d recip %d fma %d; data %d; descales %g %g %g, "
                            "scale_s %g descale_s %g scale_o %g, O %s, amax_s %s): output %d",
                            tr, H, Hkv, Sq, Sk, D, causal, bottom_right, window, c.block, c.order, c.mode, c.edge,
                            c.pround, c.lround, c.splits, c.recip, c.fma, kind, f8q, f8k, f8v, f8s, f8ds, f8o,
                            er_format_name(OF8), amax_norm ? "normalised" : "raw", o);
        for (int k = 0; k < ER_CLASS_COUNT; k++) cls[k] += reps[0].counts[k];
        for (int o = 0; o < 4; o++) er_report_clear(&reps[o]);
    }
    fp8 = 0;
    printf("fp8 attention: %d kernels covered (O: exact %lld, covered %lld)\n", trials, (long long)cls[ER_CLASS_EXACT],
           (long long)cls[ER_CLASS_COVERED]);
    ER_REQUIRE(cls[ER_CLASS_EXACT] > 0 && cls[ER_CLASS_COVERED] > 0, "both classes seen");
}
END_TEST

/* fp8 bugs on inputs that show them: amax_o written 0 (the cuDNN harness's months-long miss), descale_v left out, P
 * quantised without scale_s (rows of many small weights, most of them below e4m3's normal range unscaled), amax_s
 * after scale_s, descale_q left out: each caught in some output, the same kernel without it passing. */
START_TEST(fp8_bugs_are_caught) {
    er_test_reseed(1611);
    static const char *const names[6] = {"", "amax_o written 0", "descale_v left out", "P without scale_s",
                                         "amax_s after scale_s", "descale_k left out"};
    /* the kernel adds in fp32 and sums p before quantising it: any_order p_sum=fp32 holds it, and is narrower than
     * mma:sm90's fp8 tensor cores (which let O move by about a third here) */
    fp8_order = "any_order";
    for (int bug = 1; bug <= 5; bug++) {
        problem(ER_FP8_E4M3FN, 2, 2, 16, 512, 32, 16);
        fp8 = 1;
        OF8 = ER_BF16;
        f8q = 1.0, f8k = bug == 5 ? 0.125 : 1.0, f8v = 0.75, f8s = 448.0, f8ds = 0.0, f8o = 1.0;
        amax_norm = 0;
        /* q is e_0, so a score is scale descale_q descale_k k_j0: keys spread over -10 to 0 in natural units. For
         * the unscaled P: one key at 0 and the rest at -32 with descale_q 1.0298, so each of them has p = 0.002946,
         * 1.508 of e4m3's least subnormal: unscaled it rounds to 2 of them (+36%), scaled by 448 to 1.375 (+4%) */
        user_scale = 0.0;
        if (bug == 3) f8q = 1.0298;
        for (int x = 0; x < H * Sq * D; x++) qd[x] = x % D == 0 ? 1.0 : 0.0;
        for (int x = 0; x < Hkv * Sk * D; x++)
            kd[x] = x % D != 0 ? 0.0 : bug != 3 ? -56.0 * er_rand_unit() / f8k : (x / D) % Sk == 0 ? 0.0 : -32.0;
        for (int x = 0; x < Hkv * Sk * Dv; x++)
            vd[x] = bug != 3 ? 1.0 + 0.25 * er_rand_unit() : (x / Dv) % Sk == 0 ? 1.0 : 1.25;
        store_inputs();
        kcfg c = plain_kernel(64, 1, 1);
        c.pround = 1;
        er_report reps[4], good[4];
        fp8_bug = bug;
        ck_assert_int_eq(run_and_check(&c, "p_sum=fp32", reps), ER_OK);
        int caught = 0;
        for (int o = 0; o < 4; o++) caught |= !er_report_all(&reps[o]);
        if (!caught) {
            char text[4096];
            er_report_text(&reps[0], text, sizeof text, NULL);
            ck_abort_msg("fp8 bug '%s' not caught: O %s", names[bug], text);
        }
        fp8_bug = 0;
        ck_assert_int_eq(run_and_check(&c, "p_sum=fp32", good), ER_OK);
        for (int o = 0; o < 4; o++) ER_REQUIRE_PASS(&good[o], "fp8 bug '%s' fixed: output %d", names[bug], o);
        for (int o = 0; o < 4; o++) { er_report_clear(&reps[o]); er_report_clear(&good[o]); }
    }
    fp8 = 0;
    fp8_order = "mma:sm90";
    /* refusals: a scale_s that may round P past 448, a negative descale; nothing made */
    problem(ER_FP8_E4M3FN, 1, 1, 4, 8, 16, 16);
    gen(0, 1.0);
    er_tensor tq, tk, tv;
    er_tensor_view(&tq, IF, 3, (int64_t[]){H, Sq, D}, NULL, qb);
    er_tensor_view(&tk, IF, 3, (int64_t[]){Hkv, Sk, D}, NULL, kb);
    er_tensor_view(&tv, IF, 3, (int64_t[]){Hkv, Sk, Dv}, NULL, vb);
    er_ref *ref = NULL;
    er_attention_fp8_scales bad = {-1, 0, 0, 0, 0, 0};
    ck_assert_int_eq(er_attention_fp8(&ref, &tq, &tk, &tv, NULL, &bad), ER_ERR_INVALID);
    ck_assert_ptr_null(ref);
    er_attention_fp8_scales big = {0, 0, 0, 470.0, 0, 0};
    ck_assert_int_eq(er_attention_fp8(&ref, &tq, &tk, &tv, NULL, &big), ER_OK);
    float o[4 * 16], l[4], as[1], ao[1];
    er_tensor to, tl, tas, tao;
    er_tensor_view(&to, ER_FP32, 3, (int64_t[]){1, 4, 16}, NULL, o);
    er_tensor_view(&tl, ER_FP32, 2, (int64_t[]){1, 4}, NULL, l);
    er_tensor_view(&tas, ER_FP32, 1, (int64_t[]){1}, NULL, as);
    er_tensor_view(&tao, ER_FP32, 1, (int64_t[]){1}, NULL, ao);
    const er_tensor *outs[4] = {&to, lse_unchecked ? NULL : &tl, &tas, &tao};
    er_report r4[4];
    er_standard std;
    er_standard_init(&std);
    ck_assert_int_eq(er_covers_outputs(r4, ref, outs, 4, &std), ER_ERR_UNSUPPORTED);
    ER_REQUIRE(strstr(er_last_error(), "scale_s = 470") != NULL, "%s", er_last_error());
    for (int x = 0; x < 4; x++) er_report_clear(&r4[x]);
    er_ref_free(ref);
}
END_TEST

/* A row that claims nothing (a q holding inf) is counted and named in the report: its Dv sets hold every value. */
START_TEST(rows_that_claim_nothing_are_counted) {
    er_test_reseed(1612);
    problem(ER_FP16, 1, 1, 4, 16, 16, 16);
    gen(0, 1.0);
    qd[2 * D + 3] = INFINITY; /* row 2 */
    store_inputs();
    kcfg c = plain_kernel(16, 0, 1);
    er_report reps[2];
    ck_assert_int_eq(run_and_check(&c, NULL, reps), ER_OK);
    ck_assert_int_eq(reps[0].n_unbounded, Dv);
    ck_assert_int_eq(reps[1].n_unbounded, 1);
    char text[2048];
    er_report_text(&reps[0], text, sizeof text, NULL);
    ER_REQUIRE(strstr(text, "16 of 64 elements' sets hold every value of the output's format") != NULL, "%s", text);
    for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
}
END_TEST

/* Moves O's element at to the next value of its format above it. */
static void output_up(int at) {
    double v = of[at], r;
    er_round_double(&r, out_format(), v + fabs(v) * 0x1p-30 + 0x1p-140, ER_ROUND_UP, ER_OVERFLOW_DEFAULT);
    put_output(at, r);
}

/* O's sets decided in runs (attnmod.c, er__row_put_with) give the report that the same sets put element by element
 * (EXACTREF_FAST=0) give, field for field and in JSON, and so do the baseline and AVX2 builds of the rows' loops
 * (EXACTREF_SIMD=0 and 1: the scores, the weights' bounds, the sums over the keys): random problems and kernels in
 * fp16, bf16 and fp32 (a third of them fp32 rows of up to 1024 keys, whose roundings double leaves open: sets without
 * their exact result), fp8 attention with O in e4m3 or bf16, O with LSE and O alone, integer scores (equal weights:
 * tied widest sets), a row whose q holds an infinity (sets of every value), outputs moved up a value, by 1%, NaN and
 * infinities. */
START_TEST(same_report_in_runs) {
    er_test_reseed(1613);
    int trials = (int)(60 * er_test_multiplier());
    int64_t cls[ER_CLASS_COUNT] = {0}, unbounded = 0, nan_rows = 0;
    for (int tr = 0; tr < trials; tr++) {
        if (tr % 5 == 4) fp8_problem();
        else random_problem();
        if (tr % 3 == 2 && !fp8) { /* fp32 rows of many keys */
            IF = ER_FP32;
            H = Hkv = 1;
            Sq = (int)er_rand_int(1, 8);
            Sk = (int)er_rand_int(200, MAXS);
            causal = window = 0;
        }
        kcfg c = random_kernel();
        if (fp8) c.mathpath = c.qkin = 0;
        int kind = tr % 4 == 1;
        gen(kind, 1.0);
        if (tr % 7 == 3) { /* a row that claims nothing */
            qd[(int)er_rand_int(0, H * Sq - 1) * D] = INFINITY;
            store_inputs();
        }
        char opts[64] = "";
        if (c.block < 16) snprintf(opts, sizeof opts, "kv_block=%d", c.block);
        if (c.qkin) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "%sqk_scale=input", *opts ? " " : "");
        er_report reps[4][4];
        ER_REQUIRE(run_and_check(&c, opts, reps[0]) == ER_OK, "trial %d: %s", tr, er_last_error());
        for (int o = 0; o < (fp8 ? 4 : 2); o++) er_report_clear(&reps[0][o]);
        for (int e = 0; e < H * Sq * Dv; e++) {
            if (e % 37 == 5) put_output(e, of[e] * 1.01);
            if (e % 41 == 7) output_up(e);
            if (e % 53 == 11) put_output(e, NAN);
            if (e % 59 == 13) put_output(e, e % 2 ? INFINITY : -INFINITY);
        }
        int alone = tr % 2; /* O alone: LSE not asked for */
        for (int way = 0; way < 4; way++) { /* element by element; in runs; the baseline build; AVX2 */
            if (way == 0) setenv("EXACTREF_FAST", "0", 1);
            if (way >= 2) setenv("EXACTREF_SIMD", way == 2 ? "0" : "1", 1);
            lse_unchecked = alone;
            er_status st = check_outputs(opts, reps[way]);
            lse_unchecked = 0;
            unsetenv("EXACTREF_FAST");
            unsetenv("EXACTREF_SIMD");
            ER_REQUIRE(st == ER_OK, "trial %d: %s", tr, er_last_error());
        }
        char what[96];
        snprintf(what, sizeof what, "trial %d (%s%s, Sq %d, Sk %d, D %d; O%s)", tr, er_format_name(IF), fp8 ? " fp8" : "",
                 Sq, Sk, D, alone ? " alone" : " with LSE");
        for (int way = 0; way < 4; way++) {
            if (way == 1) continue;
            char w2[160];
            snprintf(w2, sizeof w2, "%s, %s", what,
                     way == 0 ? "element by element" : way == 2 ? "EXACTREF_SIMD=0" : "EXACTREF_SIMD=1");
            for (int o = 0; o < (fp8 ? 4 : 2); o++) er_require_same_tally(&reps[way][o], &reps[1][o], w2);
        }
        for (int k = 0; k < ER_CLASS_COUNT; k++) cls[k] += reps[1][0].counts[k];
        unbounded += reps[1][0].n_unbounded;
        for (int w = 0; w < 4; w++)
            for (int o = 0; o < (fp8 ? 4 : 2); o++) er_report_clear(&reps[w][o]);
        if (IF == ER_FP32 && !fp8 && tr % 7 != 3) {
            /* every output NaN: unexpected in each row with keys, whether its roundings were decided or left open
             * (an open element's set holds its candidates, not NaN) */
            int64_t keyed = 0;
            for (int e = 0; e < H * Sq * Dv; e++) put_output(e, NAN);
            for (int i = 0; i < Sq; i++) {
                int j0, j1;
                keys_of(i, &j0, &j1, 0);
                keyed += j1 >= j0 ? (int64_t)H * Dv : 0;
            }
            ER_REQUIRE(check_outputs(opts, reps[1]) == ER_OK, "trial %d: %s", tr, er_last_error());
            ER_REQUIRE(reps[1][0].counts[ER_CLASS_NAN_UNEXPECTED] == keyed, "%s, every output NaN: %lld of %lld unexpected",
                       what, (long long)reps[1][0].counts[ER_CLASS_NAN_UNEXPECTED], (long long)keyed);
            nan_rows += keyed;
            for (int o = 0; o < 2; o++) er_report_clear(&reps[1][o]);
        }
        fp8 = 0;
    }
    printf("attention in runs: %d checks, the same reports element by element and in each build (O: exact %lld, "
           "covered %lld, outside %lld, unbounded %lld); fp32 outputs all NaN: %lld unexpected\n", trials,
           (long long)cls[ER_CLASS_EXACT], (long long)cls[ER_CLASS_COVERED], (long long)cls[ER_CLASS_OUTSIDE],
           (long long)unbounded, (long long)nan_rows);
    ER_REQUIRE(cls[ER_CLASS_EXACT] > 0 && cls[ER_CLASS_COVERED] > 0 && cls[ER_CLASS_OUTSIDE] > 0 && unbounded > 0,
               "every class and unbounded sets seen");
}
END_TEST

/* O at the top of its format: q = 0 (equal weights) and every v the format's largest value, so O is that value,
 * exactly, and an output of it is exact. In fp32 the kernel's bounds reach past fp32's range (its set clamped there:
 * +inf is an infinity no kernel of the standard gives, inf_unexpected); in fp16 O's bounds reach the rounding to
 * +inf (a kernel's overflow: +inf classed overflow). */
START_TEST(outputs_at_the_formats_largest_value) {
    static const er_format fmts[2] = {ER_FP32, ER_FP16};
    for (int fi = 0; fi < 2; fi++) {
        problem(fmts[fi], 1, 1, 4, 8, 16, 16);
        double top = fmts[fi] == ER_FP32 ? 0x1.fffffep127 : 65504.0;
        for (int x = 0; x < D * Sq; x++) qd[x] = 0;
        for (int x = 0; x < D * Sk; x++) kd[x] = er_rand_normal();
        for (int x = 0; x < Dv * Sk; x++) vd[x] = top;
        store_inputs();
        for (int inf = 0; inf < 2; inf++) {
            for (int x = 0; x < Sq * Dv; x++) put_output(x, inf ? INFINITY : top);
            for (int i = 0; i < Sq; i++) outl[i] = (float)log((double)Sk);
            er_report reps[2];
            ck_assert_int_eq(check_outputs(NULL, reps), ER_OK);
            int cls = !inf ? ER_CLASS_EXACT : fi == 0 ? ER_CLASS_INF_UNEXPECTED : ER_CLASS_OVERFLOW;
            ER_REQUIRE(reps[0].counts[cls] == Sq * Dv,
                       "%s, output %s: exact %lld, inf_unexpected %lld, overflow %lld of %d", er_format_name(IF),
                       inf ? "inf" : "top", (long long)reps[0].counts[ER_CLASS_EXACT],
                       (long long)reps[0].counts[ER_CLASS_INF_UNEXPECTED], (long long)reps[0].counts[ER_CLASS_OVERFLOW],
                       Sq * Dv);
            for (int o = 0; o < 2; o++) er_report_clear(&reps[o]);
        }
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, flash_kernels_are_covered);
    tcase_add_test(tc, planted_bugs_are_caught);
    tcase_add_test(tc, exact_ties_round_to_even);
    tcase_add_test(tc, fully_masked_rows);
    tcase_add_test(tc, rescale_chain_at_the_edge);
    tcase_add_test(tc, mpfr_oracle_is_exact);
    tcase_add_test(tc, long_row_near_a_midpoint_is_exact);
    tcase_add_test(tc, long_rows_near_midpoints_are_exact);
    tcase_add_test(tc, long_row_whose_sum_rounds_one_way_is_exact);
    tcase_add_test(tc, qk_scale_input);
    tcase_add_test(tc, b_from_the_heads_sums_is_the_rows);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, fp8_kernels_are_covered);
    tcase_add_test(tc, fp8_bugs_are_caught);
    tcase_add_test(tc, rows_that_claim_nothing_are_counted);
    tcase_add_test(tc, same_report_in_runs);
    tcase_add_test(tc, outputs_at_the_formats_largest_value);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}

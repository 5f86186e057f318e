/* t-attn-bwd.c: attention's backward pass (docs/algorithms/attention-backward.md). Backward kernels in the kernel's
 * own arithmetic (fp32 floats) from the saved o and lse: P recomputed as exp(s sc - lse), FlashAttention's
 * exp2(fma(S, sc log2 e, -lse log2 e)), Triton's tutorial (k pre-scaled by fl(sc / ln 2) and rounded to its format,
 * exp2 of the base-2 LSE, dq times ln 2 at the end) or torch's math path (softmax recomputed, D = sum P dP, no saved
 * lse); every exp at either edge of its 2-ulp budget or at a random edge; D = rowsum(dO o) forward or reversed; P
 * and dS rounded to the inputs' format or not, dS from the rounded P or not; dQ summed over key blocks of 1 to 64 and dK, dV over query blocks
 * (across GQA's heads) in forward, reverse or shuffled order (atomics); the scale on dS or on the sums; fma or not.
 * Causal masks in both alignments, windows, GQA, fully masked rows. None may fall outside; planted bugs are caught;
 * the exact results are the MPFR oracle's; bad calls are refused. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "../common/er_test.h"
#include "../common/attn_kernel.h"

enum { MAXH = 4, MAXS = 96, MAXD = 32 };
static int H, Hkv, Sq, Sk, D, Dv, causal, bottom_right, window, wl, wr;
static er_format IF;
static double user_scale;
static double qd[MAXH * MAXS * MAXD], kd[MAXH * MAXS * MAXD], vd[MAXH * MAXS * MAXD], gd[MAXH * MAXS * MAXD];
static double od[MAXH * MAXS * MAXD], Ou[MAXH * MAXS * MAXD], lsed[MAXH * MAXS];
static unsigned char qb[4 * MAXH * MAXS * MAXD], kb[4 * MAXH * MAXS * MAXD], vb[4 * MAXH * MAXS * MAXD],
    gb[4 * MAXH * MAXS * MAXD], ob[4 * MAXH * MAXS * MAXD], lb[4 * MAXH * MAXS];
static unsigned char dqb[4 * MAXH * MAXS * MAXD], dkb[4 * MAXH * MAXS * MAXD], dvb[4 * MAXH * MAXS * MAXD];
static float Pk[MAXH][MAXS][MAXS], dSk[MAXH][MAXS][MAXS];

typedef struct bcfg {
    int mode;    /* 0 exp(fl(S sc) - lse); 1 FlashAttention's exp2(fma(S, sc log2 e, -fl(lse log2 e))); 2 Triton's
                    tutorial (qk_scale=input); 3 torch's math path (no saved lse) */
    int edge;    /* each exp: 0 nearest, 1 two ulps up, -1 two down, 2 either at random */
    int pround;  /* P rounded to the inputs' format before dV */
    int dsround; /* dS rounded to it before dQ and dK */
    int preuse;  /* with pround: dS computed from the rounded P (what torch's efficient backend's bf16 outputs need) */
    int block;   /* keys per dQ partial sum, rows per dK and dV partial sum */
    int order;   /* the partial sums' order: 0 forward, 1 reverse, 2 shuffled */
    int drev;    /* D summed in reverse */
    int scale_ds; /* the scale applied to dS (else to the sums) */
    int fma;
    int headround; /* GQA: each query head's dK and dV rounded to the output format before the group's sum (torch's
                      SDPA), which then runs in fp32 (1) or in the output format (2) */
    int bug;     /* 1 dK without its scale; 2 D from the unrounded O; 3 one key block's dQ lost; 4 causal off by one;
                    5 GQA's dK and dV from the first query head only; 6 P without the LSE's rounding to fp32 undone:
                    exp(s - lse) with lse in base 2 */
} bcfg;

static double rnd(er_format f, double v) {
    double r;
    er_round_double(&r, f, v, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    return r;
}

/* exp or exp2 of x two ulps from its correctly rounded value in direction dir (2: at random). */
static float fexp(double x, int base2, int dir) { return er_test_fexp(x, base2, dir, 2); }

static float fmad(const bcfg *c, float acc, float a, float b) { return c->fma ? fmaf(a, b, acc) : acc + a * b; }

static void keys_of(int i, int *j0, int *j1, int off) {
    er_test_keys_of(i, Sq, Sk, causal, bottom_right, window, wl, wr, off, j0, j1);
}

static double scale_of(void) { return user_scale != 0 ? user_scale : 1.0 / sqrt((double)D); }

/* The forward in double: the exact o rounded to IF (od; unrounded in Ou) and the LSE rounded to fp32. */
static void forward(void) {
    double sc = scale_of();
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            int g = h / (H / Hkv), j0, j1;
            keys_of(i, &j0, &j1, 0);
            double s[MAXS], m = -INFINITY, l = 0, acc[MAXD] = {0};
            for (int j = j0; j <= j1; j++) {
                double x = 0;
                for (int d = 0; d < D; d++) x += qd[(h * Sq + i) * D + d] * kd[(g * Sk + j) * D + d];
                s[j] = x * sc;
                if (s[j] > m) m = s[j];
            }
            for (int j = j0; j <= j1; j++) {
                double p = exp(s[j] - m);
                l += p;
                for (int d = 0; d < Dv; d++) acc[d] += p * vd[(g * Sk + j) * Dv + d];
            }
            for (int d = 0; d < Dv; d++) {
                Ou[(h * Sq + i) * Dv + d] = j1 >= j0 ? acc[d] / l : 0;
                od[(h * Sq + i) * Dv + d] = rnd(IF, Ou[(h * Sq + i) * Dv + d]);
            }
            lsed[h * Sq + i] = j1 >= j0 ? (double)(float)(m + log(l)) : INFINITY;
        }
}

/* P and dS of every row (Pk, dSk) as kernel c computes them. */
static void kernel_p_ds(const bcfg *c) {
    float sc = (float)scale_of(), l2e = (float)1.4426950408889634, sl2 = (float)(scale_of() * 1.4426950408889634);
    er_format PF = IF;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            int g = h / (H / Hkv), j0, j1;
            keys_of(i, &j0, &j1, c->bug == 4);
            float lse = (float)lsed[h * Sq + i], M = lse * l2e, s[MAXS], m = -INFINITY, l = 0;
            const double *q = qd + (h * Sq + i) * D, *gg = gd + (h * Sq + i) * Dv;
            for (int j = j0; j <= j1; j++) {
                float S = 0;
                const double *k = kd + (g * Sk + j) * D;
                if (c->mode == 2) { /* k pre-scaled by fl(sc / ln 2) and rounded to its format */
                    for (int d = 0; d < D; d++) S = fmad(c, S, (float)q[d], (float)rnd(IF, (float)k[d] * sl2));
                } else {
                    for (int d = 0; d < D; d++) S = fmad(c, S, (float)q[d], (float)k[d]);
                }
                s[j] = S;
                if (c->mode == 3 && S * sc > m) m = S * sc;
            }
            for (int j = j0; j <= j1; j++) {
                float p;
                if (c->mode == 0) p = fexp((double)(s[j] * sc - (c->bug == 6 ? M : lse)), 0, c->edge);
                else if (c->mode == 1) p = fexp((double)fmaf(s[j], sl2, -M), 1, c->edge);
                else if (c->mode == 2) p = fexp((double)(s[j] - M), 1, c->edge);
                else p = fexp((double)(s[j] * sc - m), 0, c->edge);
                Pk[h][i][j] = p;
                l += p;
            }
            if (c->mode == 3)
                for (int j = j0; j <= j1; j++) Pk[h][i][j] /= l;
            float Dd = 0;
            if (c->mode == 3) {
                for (int j = j0; j <= j1; j++) {
                    float dp = 0;
                    for (int d = 0; d < Dv; d++) dp = fmad(c, dp, (float)gg[d], (float)vd[(g * Sk + j) * Dv + d]);
                    Dd = fmad(c, Dd, Pk[h][i][j], dp);
                }
            } else {
                for (int x = 0; x < Dv; x++) {
                    int d = c->drev ? Dv - 1 - x : x;
                    double o = c->bug == 2 ? Ou[(h * Sq + i) * Dv + d] : od[(h * Sq + i) * Dv + d];
                    Dd = fmad(c, Dd, (float)gg[d], (float)o);
                }
            }
            for (int j = j0; j <= j1; j++) {
                float dp = 0;
                for (int d = 0; d < Dv; d++) dp = fmad(c, dp, (float)gg[d], (float)vd[(g * Sk + j) * Dv + d]);
                if (c->pround && c->preuse) Pk[h][i][j] = (float)rnd(PF, Pk[h][i][j]);
                float ds = Pk[h][i][j] * (dp - Dd);
                if (c->scale_ds && c->mode != 2) ds *= sc;
                dSk[h][i][j] = c->dsround ? (float)rnd(PF, ds) : ds;
                if (c->pround) Pk[h][i][j] = (float)rnd(PF, Pk[h][i][j]);
            }
        }
}

static void shuffle(int *ord, int n, int how) {
    for (int b = 0; b < n; b++) ord[b] = how == 1 ? n - 1 - b : b;
    if (how == 2)
        for (int b = n - 1; b > 0; b--) {
            int r = (int)er_rand_int(0, b), t = ord[b];
            ord[b] = ord[r];
            ord[r] = t;
        }
}

/* Runs kernel c and stores dq, dk, dv in format OF. */
static void kernel(const bcfg *c, er_format OF) {
    kernel_p_ds(c);
    float sc = (float)scale_of(), ln2 = (float)0.6931471805599453;
    float post = c->mode == 2 ? ln2 : c->scale_ds ? 1.0f : sc, postk = c->mode == 2 ? sc : c->scale_ds ? 1.0f : sc;
    if (c->bug == 1) postk = c->scale_ds && c->mode != 2 ? 1.0f / sc : 1.0f;
    int ord[MAXS * MAXH];
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            int g = h / (H / Hkv), j0, j1;
            keys_of(i, &j0, &j1, c->bug == 4);
            int nb = j1 >= j0 ? (j1 - j0) / c->block + 1 : 0;
            shuffle(ord, nb, c->order);
            for (int d = 0; d < D; d++) {
                float acc = 0;
                for (int bi = 0; bi < nb; bi++) {
                    if (c->bug == 3 && ord[bi] == nb - 1 && nb > 1) continue;
                    int b0 = j0 + ord[bi] * c->block, b1 = b0 + c->block - 1 < j1 ? b0 + c->block - 1 : j1;
                    float part = 0;
                    for (int j = b0; j <= b1; j++) {
                        float k = c->mode == 2 ? (float)rnd(IF, (float)kd[(g * Sk + j) * D + d] *
                                                                    (float)(scale_of() * 1.4426950408889634))
                                               : (float)kd[(g * Sk + j) * D + d];
                        part = fmad(c, part, dSk[h][i][j], k);
                    }
                    acc += part;
                }
                er_store(dqb, OF, (h * Sq + i) * D + d, rnd(OF, acc * post));
            }
        }
    int grp = H / Hkv;
    for (int g = 0; g < Hkv; g++)
        for (int j = 0; j < Sk; j++) {
            /* the (head, query block) pairs of key j's sums */
            int nqb = (Sq + c->block - 1) / c->block, np = (c->bug == 5 ? 1 : grp) * nqb;
            shuffle(ord, np, c->order);
            for (int which = 0; which < 2; which++)
                for (int d = 0; d < (which ? Dv : D); d++) {
                    float acc = 0, hacc[MAXH] = {0};
                    for (int pi = 0; pi < np; pi++) {
                        int h = g * grp + ord[pi] / nqb, i0 = (ord[pi] % nqb) * c->block;
                        float part = 0;
                        for (int i = i0; i < i0 + c->block && i < Sq; i++) {
                            int j0, j1;
                            keys_of(i, &j0, &j1, c->bug == 4);
                            if (j < j0 || j > j1) continue;
                            if (which == 0) part = fmad(c, part, dSk[h][i][j], (float)qd[(h * Sq + i) * D + d]);
                            else part = fmad(c, part, Pk[h][i][j], (float)gd[(h * Sq + i) * Dv + d]);
                        }
                        acc += part;
                        hacc[h - g * grp] += part;
                    }
                    float pk = which == 0 ? postk : 1.0f;
                    if (c->headround && grp > 1) { /* the heads' partials rounded to OF, then their sum */
                        acc = 0;
                        for (int hh = 0; hh < grp; hh++) {
                            acc += (float)rnd(OF, hacc[hh] * pk);
                            if (c->headround == 2) acc = (float)rnd(OF, acc);
                        }
                        pk = 1.0f;
                    }
                    if (which == 0) er_store(dkb, OF, (g * Sk + j) * D + d, rnd(OF, acc * pk));
                    else er_store(dvb, OF, (g * Sk + j) * Dv + d, rnd(OF, acc));
                }
        }
}

/* Stores the inputs (rounded to IF; lse in fp32). */
static void store_inputs(void) {
    for (int x = 0; x < H * Sq * D; x++) er_store(qb, IF, x, qd[x] = rnd(IF, qd[x]));
    for (int x = 0; x < Hkv * Sk * D; x++) er_store(kb, IF, x, kd[x] = rnd(IF, kd[x]));
    for (int x = 0; x < Hkv * Sk * Dv; x++) er_store(vb, IF, x, vd[x] = rnd(IF, vd[x]));
    for (int x = 0; x < H * Sq * Dv; x++) er_store(gb, IF, x, gd[x] = rnd(IF, gd[x]));
    forward();
    for (int x = 0; x < H * Sq * Dv; x++) er_store(ob, IF, x, od[x]);
    for (int x = 0; x < H * Sq; x++) er_store(lb, ER_FP32, x, lsed[x]);
}

/* Inputs of magnitude mag, by family: 0 normal; 1 every value row near one common row c (v_j = c + 2^-9 noise, c of
 * size 16), so that dP_j and D nearly cancel in dP - D and the dots' roundings are most of what is left; 2 q = 0
 * (every score 0: equal weights, exact ties); 3 dO of size 2^-20 (subnormal products and dS in fp16 and bf16's
 * spacing, the flushes' terms); 4 q and k of size 8 (scores in the tens to hundreds, most P underflowing). */
static void gen_family(double mag, int family) {
    double c[MAXD];
    if (family == 4) mag = 8;
    for (int d = 0; d < Dv; d++) c[d] = 16 * er_rand_normal();
    for (int x = 0; x < H * Sq * D; x++) qd[x] = family == 2 ? 0.0 : mag * er_rand_normal();
    for (int x = 0; x < Hkv * Sk * D; x++) kd[x] = mag * er_rand_normal();
    for (int x = 0; x < Hkv * Sk * Dv; x++)
        vd[x] = family == 1 ? c[x % Dv] + 0x1p-9 * er_rand_normal() : er_rand_normal();
    for (int x = 0; x < H * Sq * Dv; x++) gd[x] = (family == 3 ? 0x1p-20 : 1.0) * er_rand_normal();
    store_inputs();
}

static void gen(double mag) { gen_family(mag, 0); }

/* The reference of the stored inputs (with_lse: the saved lse given). */
static er_status make_ref(er_ref **ref, int with_lse, er_tensor t[6]) {
    er_tensor_view(&t[0], IF, 3, (int64_t[]){H, Sq, D}, NULL, qb);
    er_tensor_view(&t[1], IF, 3, (int64_t[]){Hkv, Sk, D}, NULL, kb);
    er_tensor_view(&t[2], IF, 3, (int64_t[]){Hkv, Sk, Dv}, NULL, vb);
    er_tensor_view(&t[3], IF, 3, (int64_t[]){H, Sq, Dv}, NULL, ob);
    er_tensor_view(&t[4], ER_FP32, 2, (int64_t[]){H, Sq}, NULL, lb);
    er_tensor_view(&t[5], IF, 3, (int64_t[]){H, Sq, Dv}, NULL, gb);
    er_attention_opts ao = {user_scale, causal, bottom_right, window, wl, wr, H != Hkv};
    return er_attention_backward(ref, &t[0], &t[1], &t[2], &t[3], with_lse ? &t[4] : NULL, &t[5], &ao);
}

/* Checks the stored dq, dk, dv (format OF) under any_order with opts; reps must be cleared. */
static er_status check_outputs(int with_lse, er_format OF, const char *opts, er_report reps[3]) {
    er_tensor t[6], to[3];
    er_ref *ref = NULL;
    er_status st = make_ref(&ref, with_lse, t);
    if (st != ER_OK) return st;
    er_tensor_view(&to[0], OF, 3, (int64_t[]){H, Sq, D}, NULL, dqb);
    er_tensor_view(&to[1], OF, 3, (int64_t[]){Hkv, Sk, D}, NULL, dkb);
    er_tensor_view(&to[2], OF, 3, (int64_t[]){Hkv, Sk, Dv}, NULL, dvb);
    er_standard std;
    st = er_standard_parse(&std, "any_order", opts);
    const er_tensor *outs[3] = {&to[0], &to[1], &to[2]};
    if (st == ER_OK) st = er_covers_outputs(reps, ref, outs, 3, &std);
    er_ref_free(ref);
    return st;
}

static void problem(er_format f, int h, int hkv, int sq, int sk, int d, int dv) {
    IF = f;
    H = h;
    Hkv = hkv;
    Sq = sq;
    Sk = sk;
    D = d;
    Dv = dv;
    causal = bottom_right = window = 0;
    user_scale = 0;
}

static bcfg random_kernel(void) {
    static const int blocks[5] = {1, 4, 16, 32, 64};
    bcfg c = {0};
    c.mode = (int)er_rand_int(0, 3);
    c.edge = (int)er_rand_int(-1, 2);
    c.pround = (int)er_rand_int(0, 1);
    c.dsround = (int)er_rand_int(0, 1);
    c.preuse = (int)er_rand_int(0, 1);
    c.block = blocks[er_rand_int(0, 4)];
    c.order = (int)er_rand_int(0, 2);
    c.drev = (int)er_rand_int(0, 1);
    c.scale_ds = (int)er_rand_int(0, 1);
    c.fma = (int)er_rand_int(0, 1);
    c.headround = (int)er_rand_int(0, 2);
    return c;
}

/* Runs kernel c on the stored inputs: the outputs in IF (and, where it rounds neither P nor dS, in fp32 under
 * products=compute too); returns the elements outside. */
static int64_t run_case(const bcfg *c, const char *extra) {
    char opts[128];
    int64_t bad = 0;
    for (int v = 0; v < 2; v++) {
        if (v == 1 && (c->pround || c->dsround)) break;
        er_format OF = v ? ER_FP32 : IF;
        snprintf(opts, sizeof opts, "%s%s%s", c->mode == 2 ? "qk_scale=input" : "",
                 v ? (c->mode == 2 ? ",products=compute" : "products=compute") : "", extra);
        kernel(c, OF);
        er_report reps[3] = {0};
        er_status st = check_outputs(c->mode != 3, OF, opts, reps);
        ER_REQUIRE(st == ER_OK, "check: %s", er_last_error());
        for (int o = 0; o < 3; o++) {
            if (!er_report_all(&reps[o])) {
                fprintf(stderr, "mode %d edge %d pround %d dsround %d block %d order %d output %d in %s:\n", c->mode,
                        c->edge, c->pround, c->dsround, c->block, c->order, o, er_format_name(OF));
                er_report_fprint(stderr, &reps[o]);
            }
            bad += er_report_all(&reps[o]) ? 0 : 1;
            er_report_clear(&reps[o]);
        }
    }
    return bad;
}

START_TEST(backward_kernels_are_covered) {
    er_test_reseed(71);
    static const er_format fmts[3] = {ER_FP16, ER_BF16, ER_FP32};
    int n = (int)(40 * er_test_multiplier());
    int64_t bad = 0, runs = 0;
    for (int t = 0; t < n; t++) {
        IF = fmts[er_rand_int(0, 2)];
        problem(IF, (int)er_rand_int(1, MAXH), 1, (int)er_rand_int(1, 40), (int)er_rand_int(1, MAXS), 8 *
                (int)er_rand_int(1, MAXD / 8), 8 * (int)er_rand_int(1, 2));
        Hkv = H % 2 == 0 && er_rand_int(0, 1) ? H / 2 : H;
        causal = (int)er_rand_int(0, 1);
        bottom_right = (int)er_rand_int(0, 1);
        window = er_rand_int(0, 3) == 0;
        wl = (int)er_rand_int(0, 30);
        wr = (int)er_rand_int(0, 30);
        if (er_rand_int(0, 3) == 0) user_scale = 0.5 + er_rand_unit();
        gen_family(er_rand_int(0, 2) == 0 ? 3.0 : 1.0, (int)er_rand_int(0, 4));
        for (int k = 0; k < 4; k++) {
            bcfg c = random_kernel();
            bad += run_case(&c, "");
            runs++;
        }
    }
    ER_REQUIRE(bad == 0, "%lld of %lld outputs outside, " ER_SEED_MSG_FMT, (long long)bad, (long long)runs,
               ER_SEED_ARGS);
}
END_TEST

/* The baseline, AVX2 and AVX-512 builds of the rows' loops (EXACTREF_SIMD=0, 1 and the processor's level: the scores,
 * P's bounds, dQ's sums, dK's and dV's sums over a tile of rows) give the same reports, field for field and in JSON:
 * random problems (GQA, causal masks, windows, with and without the saved lse) with correct kernels and kernels with a
 * planted bug (failing elements in the reports). */
START_TEST(same_report_in_each_build) {
    er_test_reseed(77);
    static const er_format fmts[3] = {ER_FP16, ER_BF16, ER_FP32};
    int n = (int)(24 * er_test_multiplier());
    int64_t failed = 0, exact = 0;
    for (int t = 0; t < n; t++) {
        IF = fmts[t % 3];
        problem(IF, (int)er_rand_int(1, MAXH), 1, (int)er_rand_int(1, 40), (int)er_rand_int(1, MAXS),
                8 * (int)er_rand_int(1, MAXD / 8), 8 * (int)er_rand_int(1, 2));
        Hkv = H % 2 == 0 && er_rand_int(0, 1) ? H / 2 : H;
        causal = (int)er_rand_int(0, 1);
        window = er_rand_int(0, 3) == 0;
        wl = (int)er_rand_int(0, 30);
        wr = (int)er_rand_int(0, 30);
        gen_family(1.0, (int)er_rand_int(0, 4));
        bcfg c = random_kernel();
        c.bug = t % 4 == 3 ? (int)er_rand_int(1, 6) : 0;
        kernel(&c, IF);
        er_report reps[3][3];
        for (int lv = 0; lv < 3; lv++) { /* the processor's level, then the baseline and AVX2 */
            if (lv) setenv("EXACTREF_SIMD", lv == 1 ? "0" : "1", 1);
            er_status st = check_outputs(c.mode != 3, IF, c.mode == 2 ? "qk_scale=input" : "", reps[lv]);
            unsetenv("EXACTREF_SIMD");
            ER_REQUIRE(st == ER_OK, "trial %d: %s", t, er_last_error());
        }
        for (int lv = 1; lv < 3; lv++)
            for (int o = 0; o < 3; o++) {
                char what[96];
                snprintf(what, sizeof what, "trial %d (%s, H %d/%d, Sq %d, Sk %d, D %d), output %d, EXACTREF_SIMD=%d",
                         t, er_format_name(IF), H, Hkv, Sq, Sk, D, o, lv - 1);
                er_require_same_tally(&reps[lv][o], &reps[0][o], what);
            }
        for (int o = 0; o < 3; o++) {
            failed += er_report_failed(&reps[0][o]);
            exact += reps[0][o].counts[ER_CLASS_EXACT];
        }
        for (int lv = 0; lv < 3; lv++)
            for (int o = 0; o < 3; o++) er_report_clear(&reps[lv][o]);
    }
    printf("attention_backward: %d checks, the same reports in each build (exact %lld, failed %lld)\n", n,
           (long long)exact, (long long)failed);
    ER_REQUIRE(failed > 0 && exact > 0, "failing and exact elements seen");
}
END_TEST

START_TEST(planted_bugs_are_caught) {
    er_test_reseed(72);
    static const char *names[7] = {"", "dK without its scale", "D from the unrounded O", "a key block's dQ lost",
                                   "causal off by one", "GQA's first head only", "exp of a base-2 LSE"};
    for (int bug = 1; bug <= 6; bug++) {
        problem(ER_FP16, 4, 2, 24, 80, 32, 32);
        causal = 1;
        gen(1.0);
        bcfg c = {0};
        c.block = 16;
        c.bug = bug;
        /* the D bug moves dS by about 2^-11 of D's terms: visible where neither P nor dS is rounded (fp32 outputs) */
        int compute = bug == 2;
        c.pround = c.dsround = !compute;
        kernel(&c, compute ? ER_FP32 : IF);
        er_report reps[3] = {0};
        ER_REQUIRE(check_outputs(1, compute ? ER_FP32 : IF, compute ? "products=compute" : "", reps) == ER_OK, "%s",
                   er_last_error());
        int caught = !er_report_all(&reps[0]) || !er_report_all(&reps[1]) || !er_report_all(&reps[2]);
        for (int o = 0; o < 3; o++) er_report_clear(&reps[o]);
        ER_REQUIRE(caught, "bug '%s' not caught", names[bug]);
        /* and the same kernel without the bug passes */
        c.bug = 0;
        kernel(&c, compute ? ER_FP32 : IF);
        ER_REQUIRE(check_outputs(1, compute ? ER_FP32 : IF, compute ? "products=compute" : "", reps) == ER_OK, "%s",
                   er_last_error());
        for (int o = 0; o < 3; o++) {
            ER_REQUIRE(er_report_all(&reps[o]), "bug %d's correct kernel, output %d: %lld outside", bug, o, (long long)er_report_failed(&reps[o]));
            er_report_clear(&reps[o]);
        }
    }
}
END_TEST

/* The exact gradients at 300 bits with MPFR from the definitions (P = exp(scale q.k - lse), D = do.o), rounded to
 * the output format: every element is classed exact, with the double enclosure and with MPFR alone. */
static double oracle(int which, int a, int d) {
    mpfr_t s, x, p, acc, sc, t;
    mpfr_inits2(300, s, x, p, acc, sc, t, (mpfr_ptr)0);
    if (user_scale != 0) mpfr_set_d(sc, user_scale, MPFR_RNDN);
    else { mpfr_set_si(sc, D, MPFR_RNDN); mpfr_rec_sqrt(sc, sc, MPFR_RNDN); }
    mpfr_set_zero(acc, 1);
    int grp = H / Hkv;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < Sq; i++) {
            int g = h / grp, j0, j1;
            if (which == 0 && h * Sq + i != a / 1) continue;
            keys_of(i, &j0, &j1, 0);
            for (int j = j0; j <= j1; j++) {
                if (which != 0 && (g * Sk + j) != a) continue;
                mpfr_set_zero(s, 1);
                for (int e = 0; e < D; e++) {
                    mpfr_set_d(t, qd[(h * Sq + i) * D + e] * kd[(g * Sk + j) * D + e], MPFR_RNDN);
                    mpfr_add(s, s, t, MPFR_RNDN);
                }
                mpfr_mul(s, s, sc, MPFR_RNDN);
                mpfr_sub_d(s, s, lsed[h * Sq + i], MPFR_RNDN);
                mpfr_exp(p, s, MPFR_RNDN);
                if (which == 2) {
                    mpfr_mul_d(p, p, gd[(h * Sq + i) * Dv + d], MPFR_RNDN);
                    mpfr_add(acc, acc, p, MPFR_RNDN);
                    continue;
                }
                mpfr_set_zero(x, 1);
                for (int e = 0; e < Dv; e++) {
                    mpfr_set_d(t, gd[(h * Sq + i) * Dv + e] * vd[(g * Sk + j) * Dv + e], MPFR_RNDN); /* exact */
                    mpfr_add(x, x, t, MPFR_RNDN);
                    mpfr_set_d(t, gd[(h * Sq + i) * Dv + e] * od[(h * Sq + i) * Dv + e], MPFR_RNDN);
                    mpfr_sub(x, x, t, MPFR_RNDN);
                }
                mpfr_mul(p, p, x, MPFR_RNDN);
                mpfr_mul_d(p, p, which == 0 ? kd[(g * Sk + j) * D + d] : qd[(h * Sq + i) * D + d], MPFR_RNDN);
                mpfr_add(acc, acc, p, MPFR_RNDN);
            }
        }
    if (which != 2) mpfr_mul(acc, acc, sc, MPFR_RNDN);
    double r = er_oracle_round(IF, acc, MPFR_RNDN, ER_OVERFLOW_IEEE);
    mpfr_clears(s, x, p, acc, sc, t, (mpfr_ptr)0);
    return r;
}

START_TEST(mpfr_oracle_is_exact) {
    er_test_reseed(73);
    for (int trial = 0; trial < 4; trial++) {
        problem(trial % 2 ? ER_BF16 : ER_FP16, 2, trial < 2 ? 2 : 1, 12, 20, 16, 8);
        causal = trial % 2;
        user_scale = trial == 3 ? 0.75 : 0;
        gen(1.0);
        /* the oracle's values, stored as the outputs */
        for (int x = 0; x < H * Sq * D; x++) er_store(dqb, IF, x, oracle(0, x / D, x % D));
        for (int x = 0; x < Hkv * Sk * D; x++) er_store(dkb, IF, x, oracle(1, x / D, x % D));
        for (int x = 0; x < Hkv * Sk * Dv; x++) er_store(dvb, IF, x, oracle(2, x / Dv, x % Dv));
        for (int mp = 0; mp < 2; mp++) {
            if (mp) setenv("EXACTREF_FAST", "0", 1);
            er_report reps[3] = {0};
            er_status st = check_outputs(1, IF, "", reps);
            unsetenv("EXACTREF_FAST");
            ER_REQUIRE(st == ER_OK, "%s", er_last_error());
            for (int o = 0; o < 3; o++) {
                ER_REQUIRE(er_report_count(&reps[o], ER_CLASS_EXACT) == er_report_numel(&reps[o]), "trial %d mpfr %d output %d: %lld of %lld exact: %s", trial,
                           mp, o, (long long)er_report_count(&reps[o], ER_CLASS_EXACT),
                           (long long)er_report_numel(&reps[o]), er_report_message(&reps[o]));
                er_report_clear(&reps[o]);
            }
        }
    }
}
END_TEST

/* Rows whose scores are all equal (q = 0) with no saved LSE: P = 1/n exactly, so dV = (1/n) sum_i dO_i is rational
 * and may be an exact midpoint of bf16 (here 1 + 3 2^-8, between 1 + 2^-7 and 1 + 2^-6, which ties to even round up).
 * With n = 4 keys the exact result is decided (1 + 2^-6 exact, 1 + 2^-7 covered); with n = 3, 1/n has no finite
 * binary expansion and no enclosure decides the tie: no output is called exact, both neighbours are covered. */
START_TEST(uniform_rows_ties) {
    for (int n = 3; n <= 4; n++) {
        problem(ER_BF16, 1, 1, 2, n, 16, 8);
        er_test_reseed(75);
        gen_family(1.0, 2);
        for (int d = 0; d < Dv; d++) {
            gd[d] = n; /* (n + 3 2^-8 n) / n = 1 + 3 2^-8 */
            gd[Dv + d] = 3 * 0x1p-8 * n;
        }
        store_inputs();
        for (int x = 0; x < H * Sq * D; x++) er_store(dqb, IF, x, 0.0);
        for (int x = 0; x < Hkv * Sk * D; x++) er_store(dkb, IF, x, 0.0);
        for (int x = 0; x < Hkv * Sk * Dv; x++) er_store(dvb, IF, x, x % 2 ? 1 + 0x1p-7 : 1 + 0x1p-6);
        for (int mp = 0; mp < 2; mp++) {
            if (mp) setenv("EXACTREF_FAST", "0", 1);
            er_report reps[3] = {0};
            er_status st = check_outputs(0, IF, "", reps);
            unsetenv("EXACTREF_FAST");
            ER_REQUIRE(st == ER_OK, "%s", er_last_error());
            int64_t ex = er_report_count(&reps[2], ER_CLASS_EXACT), cov = er_report_count(&reps[2], ER_CLASS_COVERED);
            ER_REQUIRE(er_report_all(&reps[2]), "n = %d: dV's tie neighbours covered: %s", n, er_report_message(&reps[2]));
            if (n == 4)
                ER_REQUIRE(ex == Sk * Dv / 2 && cov == Sk * Dv / 2, "n = 4 (mpfr %d): %lld exact, %lld covered, want %d each",
                           mp, (long long)ex, (long long)cov, Sk * Dv / 2);
            else ER_REQUIRE(ex == 0, "n = 3 (mpfr %d): %lld elements called exact where the tie is undecided", mp, (long long)ex);
            ER_REQUIRE(er_report_count(&reps[1], ER_CLASS_EXACT) == Sk * D, "dK = 0 exactly (q = 0)");
            for (int o = 0; o < 3; o++) er_report_clear(&reps[o]);
        }
    }
}
END_TEST

/* A saved LSE 30 below the scores' (a forward that lost a block): P reaches e^30 and dS ~ 10^13, which rounded to
 * fp16 overflows; a kernel in the standard's form (dS rounded to the inputs' format for dQ and dK) then sums
 * infinities of both signs into NaN. Those rows claim nothing (an earlier version allowed +-inf there but not NaN,
 * as an H200 capture of the Triton tutorial's backward on a broken LSE showed). */
START_TEST(ds_overflowing_the_inputs_format) {
    er_test_reseed(76);
    problem(ER_FP16, 2, 2, 16, 16, 16, 16);
    gen(1.0);
    for (int x = 0; x < H * Sq; x++) {
        lsed[x] = (double)(float)(lsed[x] - 30);
        er_store(lb, ER_FP32, x, lsed[x]);
    }
    bcfg c = {0};
    c.block = 4;
    c.pround = c.dsround = 1;
    kernel(&c, IF);
    int nonfinite = 0;
    for (int x = 0; x < H * Sq * D; x++) nonfinite += !isfinite(er_load(dqb, IF, x));
    ER_REQUIRE(nonfinite > 0, "the kernel's dQ overflows (%d elements not finite)", nonfinite);
    er_report reps[3] = {0};
    ER_REQUIRE(check_outputs(1, IF, "", reps) == ER_OK, "%s", er_last_error());
    for (int o = 0; o < 3; o++) {
        ER_REQUIRE(er_report_all(&reps[o]), "output %d (%d of dQ not finite): %s", o, nonfinite,
                   er_report_message(&reps[o]));
        er_report_clear(&reps[o]);
    }
}
END_TEST

START_TEST(fully_masked_rows) {
    er_test_reseed(74);
    problem(ER_FP16, 2, 2, 16, 8, 16, 16);
    causal = 1;
    bottom_right = 1; /* Sq > Sk: the first 8 rows see no key */
    gen(1.0);
    bcfg c = {0};
    c.block = 4;
    c.pround = c.dsround = 1;
    kernel(&c, IF);
    for (int i = 0; i < 8; i++) ER_REQUIRE(er_load(dqb, IF, i * D) == 0, "a masked row's dq is 0");
    er_report reps[3] = {0};
    ER_REQUIRE(check_outputs(1, IF, "", reps) == ER_OK, "%s", er_last_error());
    for (int o = 0; o < 3; o++) {
        ER_REQUIRE(er_report_all(&reps[o]), "output %d: %lld outside", o, (long long)er_report_failed(&reps[o]));
        er_report_clear(&reps[o]);
    }
    /* a masked row's dq of 1 is caught */
    er_store(dqb, IF, 3, 1.0);
    ER_REQUIRE(check_outputs(1, IF, "", reps) == ER_OK, "%s", er_last_error());
    ER_REQUIRE(!er_report_all(&reps[0]), "a masked row's nonzero dq is caught");
    for (int o = 0; o < 3; o++) er_report_clear(&reps[o]);
}
END_TEST

START_TEST(refusals) {
    problem(ER_FP16, 2, 2, 8, 8, 16, 16);
    gen(1.0);
    er_tensor t[6];
    er_ref *ref = NULL;
    ER_REQUIRE(make_ref(&ref, 1, t) == ER_OK, "%s", er_last_error());
    er_ref_free(ref);
    er_attention_opts ao = {0};
    er_tensor bad;
    /* o of the wrong shape */
    er_tensor_view(&bad, IF, 3, (int64_t[]){H, Sq, Dv + 1}, NULL, ob);
    ref = NULL;
    ER_REQUIRE(er_attention_backward(&ref, &t[0], &t[1], &t[2], &bad, &t[4], &t[5], &ao) == ER_ERR_SHAPE && !ref,
               "o's shape refused");
    ER_REQUIRE(er_attention_backward(&ref, &t[0], &t[1], &t[2], &t[3], &t[4], &bad, &ao) == ER_ERR_SHAPE && !ref,
               "dout's shape refused");
    /* lse of the wrong shape */
    er_tensor_view(&bad, ER_FP32, 2, (int64_t[]){H, Sq + 1}, NULL, lb);
    ER_REQUIRE(er_attention_backward(&ref, &t[0], &t[1], &t[2], &t[3], &bad, &t[5], &ao) == ER_ERR_SHAPE && !ref,
               "lse's shape refused");
    /* o in fp64 */
    static double o64[MAXH * MAXS * MAXD];
    er_tensor_view(&bad, ER_FP64, 3, (int64_t[]){H, Sq, Dv}, NULL, o64);
    ER_REQUIRE(er_attention_backward(&ref, &t[0], &t[1], &t[2], &bad, &t[4], &t[5], &ao) == ER_ERR_UNSUPPORTED && !ref,
               "fp64 o refused");
    ER_REQUIRE(er_attention_backward(&ref, &t[0], &t[1], &t[2], &t[3], &t[4], NULL, &ao) == ER_ERR_NULL && !ref,
               "NULL dout refused");
    ER_REQUIRE(er_attention_backward(NULL, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &ao) == ER_ERR_NULL,
               "NULL out refused");
    /* standards it does not take */
    er_report reps[3] = {0};
    bcfg c = {0};
    c.block = 4;
    kernel(&c, IF);
    ER_REQUIRE(check_outputs(1, IF, "depth=4", reps) == ER_ERR_STANDARD, "depth= refused: %s", er_last_error());
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_backward");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, backward_kernels_are_covered);
    tcase_add_test(tc, planted_bugs_are_caught);
    tcase_add_test(tc, mpfr_oracle_is_exact);
    tcase_add_test(tc, fully_masked_rows);
    tcase_add_test(tc, uniform_rows_ties);
    tcase_add_test(tc, ds_overflowing_the_inputs_format);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, same_report_in_each_build);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}

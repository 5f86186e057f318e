/* er_impl.h: correct implementations of a random standard, run in the test's own emulator (er_gen.h): the
 * trials of the order fuzzers (t-orders, t-reduce). */
#ifndef ER_IMPL_H
#define ER_IMPL_H

#include "er_gen.h"

static const er_format computes[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64, ER_TF32};
static const er_format partials[] = {ER_FP16, ER_BF16, ER_FP32};

static inline double pw(emu *e, const double *p, int n);

typedef struct trial {
    er_standard std;
    er_format acc;      /* accumulator format (fp32 for tf32) */
    int fma_mode;       /* 0 never, 1 always, 2 either */
} trial;

/* The test's own implementation of the standard on a, b (already converted for tf32). */
static inline double implement(const trial *t, emu *e, emu *ep, const double *a, const double *b, int K) {
    const er_standard *s = &t->std;
    if (s->order == ER_ORDER_ANY) return emu_dot_random(e, a, b, K, t->fma_mode);
    if (s->order == ER_ORDER_SEQUENTIAL) {
        double acc = 0.0;
        for (int k = 0; k < K; k++) acc = emu_step(e, acc, a[k], b[k], t->fma_mode);
        return acc;
    }
    if (s->order == ER_ORDER_PAIRWISE) {
        double *p = malloc(sizeof(double) * (size_t)(K ? K : 1));
        for (int k = 0; k < K; k++) p[k] = emu_mul(e, a[k], b[k]);
        double r = pw(e, p, K); /* numpy's pairwise sum, written from its description */
        free(p);
        return r;
    }
    int64_t chunk = s->order == ER_ORDER_BLOCKED ? s->block : (K + s->split - 1) / s->split;
    if (chunk < 1) chunk = 1;
    if (s->carry_fused) { /* the running total is one more term of each block's sum */
        double acc = 0.0;
        for (int k0 = 0; k0 < K; k0 += (int)chunk) {
            int n = (int)(K - k0 < chunk ? K - k0 : chunk);
            if (s->inner == ER_SUB_ANY) acc = emu_dot_random_init(e, a + k0, b + k0, n, t->fma_mode, 1, acc);
            else for (int k = 0; k < n; k++) acc = emu_step(e, acc, a[k0 + k], b[k0 + k], t->fma_mode);
        }
        return acc;
    }
    int nparts = K ? (int)((K + chunk - 1) / chunk) : 0;
    double *parts = malloc(sizeof(double) * (size_t)(nparts ? nparts : 1));
    for (int j = 0; j < nparts; j++) {
        int k0 = (int)(j * chunk), n = (int)(K - k0 < chunk ? K - k0 : chunk);
        if (s->inner == ER_SUB_ANY) parts[j] = emu_dot_random(e, a + k0, b + k0, n, t->fma_mode);
        else {
            double acc = 0.0;
            for (int k = 0; k < n; k++) acc = emu_step(e, acc, a[k0 + k], b[k0 + k], t->fma_mode);
            parts[j] = acc;
        }
        if (s->order == ER_ORDER_SPLIT && s->partial != ER_FORMAT_INVALID && s->partial != t->acc) {
            mpfr_set_d(ep->t, parts[j], MPFR_RNDN);
            parts[j] = isnan(parts[j]) ? NAN : emu_round(ep, ep->t);
        }
    }
    emu *g = s->order == ER_ORDER_SPLIT ? ep : e; /* partials are combined in their own format */
    double r;
    if (s->outer == ER_SUB_ANY) r = emu_sum_random(g, parts, nparts);
    else {
        r = 0.0;
        for (int j = 0; j < nparts; j++) r = emu_add(g, r, parts[j]);
    }
    free(parts);
    return r;
}

static inline double pw(emu *e, const double *p, int n) {
    if (n < 8) {
        double res = 0.0;
        for (int i = 0; i < n; i++) res = emu_add(e, res, p[i]);
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = p[j];
        int i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] = emu_add(e, r[j], p[i + j]);
        double res = emu_add(e, emu_add(e, emu_add(e, r[0], r[1]), emu_add(e, r[2], r[3])),
                             emu_add(e, emu_add(e, r[4], r[5]), emu_add(e, r[6], r[7])));
        for (; i < n; i++) res = emu_add(e, res, p[i]);
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    double x = pw(e, p, n2);
    double y = pw(e, p + n2, n - n2);
    return emu_add(e, x, y);
}

static inline void draw(trial *t, int allow_tf32) {
    er_standard *s = &t->std;
    er_standard_init(s);
    int kind = (int)(er_rand64() % 5);
    s->order = kind == 0 ? ER_ORDER_SEQUENTIAL : kind == 1 ? ER_ORDER_BLOCKED : kind == 2 ? ER_ORDER_SPLIT
             : kind == 3 ? ER_ORDER_PAIRWISE : ER_ORDER_ANY;
    s->compute = computes[er_rand64() % (allow_tf32 ? 5 : 4)];
    if (s->compute == ER_TF32) s->tf32 = (er_tf32_conv)(er_rand64() % 4); /* truncate, rna, rne, nearest */
    t->acc = s->compute == ER_TF32 ? ER_FP32 : s->compute;
    t->fma_mode = (int)(er_rand64() % 3);
    if (s->order == ER_ORDER_PAIRWISE && t->fma_mode == 1) t->fma_mode = 0;
    s->fma = t->fma_mode == 0 ? ER_FMA_NEVER : t->fma_mode == 1 ? ER_FMA_ALWAYS : ER_FMA_EITHER;
    if (s->order == ER_ORDER_PAIRWISE) t->fma_mode = 0; /* pairwise adds finished products */
    s->rounding = er_rand64() % 4 == 0 ? ER_RND_FAITHFUL : ER_RND_NEAREST;
    if (s->order == ER_ORDER_BLOCKED) s->block = er_rand_int(1, 40);
    if (s->order == ER_ORDER_SPLIT) {
        s->split = er_rand_int(1, 9);
        if (er_rand64() % 3 == 0) s->partial = partials[er_rand64() % 3];
    }
    if (s->order == ER_ORDER_BLOCKED || s->order == ER_ORDER_SPLIT) {
        s->inner = (er_suborder)(er_rand64() % 3 == 0);
        s->outer = (er_suborder)(er_rand64() % 3 == 0);
    }
    if (s->order == ER_ORDER_BLOCKED && er_rand64() % 3 == 0) {
        s->carry_fused = 1;
        s->outer = ER_SUB_SEQUENTIAL;
        if (er_rand64() & 1) s->inner = ER_SUB_ANY;
    }
}


#endif

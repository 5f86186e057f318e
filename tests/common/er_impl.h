/* er_impl.h: correct implementations of a random standard, run in the test's own emulator (er_gen.h): the
 * trials of the order fuzzers (t-orders, t-reduce). */
#ifndef ER_IMPL_H
#define ER_IMPL_H

#include "er_gen.h"

static const er_format computes[] = {ER_FP32, ER_FP16, ER_BF16, ER_FP64, ER_TF32};
static const er_format partials[] = {ER_FP16, ER_BF16, ER_FP32};

static inline double pw(emu *e, const double *p, int n);

typedef struct { int l, r; } tnode; /* node ids: 0 .. K - 1 the elements, K + j the j-th addition */

/* A tree over the elements perm[lo .. hi): shape 0 random splits, 1 a chain, 2 a chain from the far end, 3 balanced;
 * each addition's operands in a random order. Returns its root's id. */
static inline int tree_build(tnode *nd, int *nn, int K, const int *perm, int lo, int hi, int shape) {
    if (hi - lo == 1) return perm[lo];
    int k = shape == 1 ? hi - 1 : shape == 2 ? lo + 1 : shape == 3 ? lo + (hi - lo) / 2 : (int)er_rand_int(lo + 1, hi - 1);
    int a = tree_build(nd, nn, K, perm, lo, k, shape), b = tree_build(nd, nn, K, perm, k, hi, shape);
    int j = (*nn)++;
    if (er_rand64() & 1) { nd[j].l = a; nd[j].r = b; } else { nd[j].l = b; nd[j].r = a; }
    return K + j;
}

static inline void tree_text(const tnode *nd, int K, int v, char *buf, size_t *len) {
    if (v < K) { *len += (size_t)sprintf(buf + *len, "%d", v); return; }
    buf[(*len)++] = '(';
    tree_text(nd, K, nd[v - K].l, buf, len);
    buf[(*len)++] = (er_rand64() & 1) ? ' ' : ',';
    tree_text(nd, K, nd[v - K].r, buf, len);
    buf[(*len)++] = ')';
    buf[*len] = '\0';
}

enum { ER_IMPL_TREE_MAX = 400 };

typedef struct trial {
    er_standard std;
    er_format acc;      /* accumulator format (fp32 for tf32) */
    int fma_mode;       /* 0 never, 1 always, 2 either */
    tnode tree[ER_IMPL_TREE_MAX]; /* tree: its additions (draw_tree), std.tree its text */
    int troot;
    char ttext[16 * ER_IMPL_TREE_MAX + 16];
} trial;

/* A tree: trial's value in the emulator: the rule of orders.md (an addition of a product and a subtree fuses the
 * product or not as fma_mode says; of two products, the lower element's rounded and the other added or fused, or
 * under fma=either, either one fused or neither, drawn at random). */
static inline double emu_tree(const trial *t, emu *e, const double *a, const double *b, int K, int v) {
    if (v < K) return emu_mul(e, a[v], b[v]);
    int l = t->tree[v - K].l, r = t->tree[v - K].r;
    if (l < K && r < K) {
        int lo = l < r ? l : r, hi = l < r ? r : l, how = t->fma_mode == 2 ? (int)(er_rand64() % 3) : t->fma_mode;
        if (how == 2) { int w = lo; lo = hi; hi = w; how = 1; } /* either: the lower one fused */
        return how ? emu_fma(e, a[hi], b[hi], emu_mul(e, a[lo], b[lo])) : emu_add(e, emu_mul(e, a[lo], b[lo]),
                                                                                   emu_mul(e, a[hi], b[hi]));
    }
    if (l < K || r < K) {
        int x = l < K ? l : r;
        return emu_step(e, emu_tree(t, e, a, b, K, l < K ? r : l), a[x], b[x], t->fma_mode);
    }
    return emu_add(e, emu_tree(t, e, a, b, K, l), emu_tree(t, e, a, b, K, r));
}

/* The test's own implementation of the standard on a, b (already converted for tf32). */
static inline double implement(const trial *t, emu *e, emu *ep, const double *a, const double *b, int K) {
    const er_standard *s = &t->std;
    if (s->order == ER_ORDER_ANY) return emu_dot_random(e, a, b, K, t->fma_mode);
    if (s->order == ER_ORDER_TREE) return emu_tree(t, e, a, b, K, t->troot);
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
    int kind = (int)(er_rand64() % 6);
    s->order = kind == 0 ? ER_ORDER_SEQUENTIAL : kind == 1 ? ER_ORDER_BLOCKED : kind == 2 ? ER_ORDER_SPLIT
             : kind == 3 ? ER_ORDER_PAIRWISE : kind == 4 ? ER_ORDER_TREE : ER_ORDER_ANY;
    if (s->order == ER_ORDER_TREE) { strcpy(t->ttext, "0"); s->tree = t->ttext; } /* draw_tree gives the real one */
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


/* A tree: trial's tree over K elements (random splits, chains both ways or balanced, elements permuted), once K is
 * known; nothing for other orders. */
static inline void draw_tree(trial *t, int K) {
    if (t->std.order != ER_ORDER_TREE) return;
    int perm[ER_IMPL_TREE_MAX], nn = 0;
    for (int i = 0; i < K; i++) perm[i] = i;
    if (er_rand64() % 3)
        for (int i = K - 1; i > 0; i--) { int j = (int)er_rand_int(0, i), w = perm[i]; perm[i] = perm[j]; perm[j] = w; }
    t->troot = tree_build(t->tree, &nn, K, perm, 0, K, (int)(er_rand64() % 4));
    size_t len = 0;
    t->ttext[0] = '\0';
    tree_text(t->tree, K, t->troot, t->ttext, &len);
    t->std.tree = t->ttext;
}

#endif

/* tree.c: the tree: order (docs/reference/standard.md, "Trees"). Its text is parsed into a postfix program and
 * checked to name every element once; a tree renders back in one canonical, compact text.
 *
 * The text: a node is an element's index or a list "(x y z ...)" of two or more items, the chain ((x + y) + z) + ...;
 * items are separated by spaces or commas; an item X*C+S (or X*C-S) stands for C items, X with its indices shifted by
 * 0, S, ..., (C - 1) S. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "standard/tree.h"

typedef struct er_ibuf {
    int32_t *v;
    int64_t n, cap;
} er_ibuf;

static er_status er_ibuf_reserve(er_ibuf *b, int64_t need) {
    if (need <= b->cap) return ER_OK;
    int64_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    int32_t *p = realloc(b->v, sizeof *p * (size_t)cap);
    if (!p) return er__fail(ER_ERR_NOMEM, "cannot allocate a tree of %lld nodes", (long long)need);
    b->v = p;
    b->cap = cap;
    return ER_OK;
}

/* A decimal integer of at most max into *v, *pp past it: 1; no digit: 0; above max: -1. */
static int er_read_int(const char **pp, int64_t max, int64_t *v) {
    const char *p = *pp;
    if (!isdigit((unsigned char)*p)) return 0;
    int64_t x = 0;
    while (isdigit((unsigned char)*p)) {
        x = 10 * x + (*p - '0');
        if (x > max) return -1;
        p++;
    }
    *v = x;
    *pp = p;
    return 1;
}

static int er_is_sep(char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r'; }

typedef struct er_frame {
    int64_t start, items; /* the list's first postfix entry; its items so far */
} er_frame;

/* A refusal naming the place: the character offset after "tree:" and the text there. */
static er_status er_tree_fail(const char *text, const char *p, const char *why) {
    return er__fail(ER_ERR_STANDARD, "tree: at character %lld ('%.12s'): %s", (long long)(p - text), p, why);
}

/* The postfix program of the text's first node into b (leaves counted in *nleaves), *end after it. */
static er_status er_tree_scan(const char *text, er_ibuf *b, int64_t *nleaves, const char **end) {
    er_frame *fr = NULL;
    int64_t nfr = 0, capfr = 0;
    const char *p = text;
    er_status st = ER_OK;
    const int64_t max = ER_TREE_MAX_LEAVES;
#define ER_TREE_FAIL(at, why) do { st = er_tree_fail(text, (at), (why)); goto done; } while (0)
    for (;;) {
        if (nfr) while (er_is_sep(*p)) p++;
        int64_t item_start, v;
        if (*p == '(') {
            if (nfr == capfr) {
                int64_t c = capfr ? 2 * capfr : 16;
                er_frame *q = realloc(fr, sizeof *q * (size_t)c);
                if (!q) { st = er__fail(ER_ERR_NOMEM, "cannot allocate a tree's nesting"); goto done; }
                fr = q;
                capfr = c;
            }
            fr[nfr].start = b->n;
            fr[nfr++].items = 0;
            p++;
            continue;
        }
        const char *at = p;
        int r = er_read_int(&p, max - 1, &v);
        if (r < 0) ER_TREE_FAIL(at, "an element's index is at most 2^18 - 1");
        if (r > 0) {
            if ((st = er_ibuf_reserve(b, b->n + 1)) != ER_OK) goto done;
            item_start = b->n;
            b->v[b->n++] = (int32_t)v;
            (*nleaves)++;
        } else if (*p == ')' && nfr) {
            if (fr[nfr - 1].items < 2) ER_TREE_FAIL(p, "a list holds two items or more");
            item_start = fr[--nfr].start;
            p++;
        } else {
            ER_TREE_FAIL(p, nfr ? "expected an element's index, '(' or ')'" : "expected an element's index or '('");
        }
        int64_t count = 1, stride = 0;
        if (*p == '*') {
            at = p++;
            if (er_read_int(&p, max, &count) != 1 || count < 1)
                ER_TREE_FAIL(at, "a repetition is X*C+S or X*C-S, C a count from 1 to 2^18");
            int sign = *p == '+' ? 1 : *p == '-' ? -1 : 0;
            if (!sign) ER_TREE_FAIL(at, "a repetition is X*C+S or X*C-S: the stride's sign is missing");
            p++;
            if (er_read_int(&p, max, &stride) != 1)
                ER_TREE_FAIL(at, "a repetition is X*C+S or X*C-S, S a stride from 0 to 2^18");
            stride *= sign;
            if (!nfr) ER_TREE_FAIL(at, "a repetition X*C+S stands for items of a list: write it inside ( )");
        }
        int64_t seg0 = item_start, seg1 = b->n, segleaves = (seg1 - seg0 + 1) / 2;
        if ((double)segleaves * (double)(count - 1) + (double)*nleaves > (double)max)
            ER_TREE_FAIL(at, "the tree has more than 2^18 elements");
        for (int64_t k = 0; k < count; k++) {
            if (k) {
                if ((st = er_ibuf_reserve(b, b->n + (seg1 - seg0) + 1)) != ER_OK) goto done;
                for (int64_t i = seg0; i < seg1; i++) {
                    int64_t x = b->v[i];
                    if (x >= 0) {
                        x += k * stride;
                        if (x < 0 || x >= max)
                            ER_TREE_FAIL(at, "a repetition shifts an element's index out of 0 .. 2^18 - 1");
                    }
                    b->v[b->n++] = (int32_t)x;
                }
                *nleaves += segleaves;
            }
            if ((st = er_ibuf_reserve(b, b->n + 1)) != ER_OK) goto done;
            if (nfr && fr[nfr - 1].items++ >= 1) b->v[b->n++] = ER_TREE_ADD;
        }
        if (!nfr) break;
    }
#undef ER_TREE_FAIL
done:
    free(fr);
    if (end) *end = p;
    return st;
}

er_status er__tree_parse(const char *text, er_tree *t, const char **end) {
    er_ibuf b = {0};
    int64_t n = 0;
    const char *e = text;
    er_status st = er_tree_scan(text, &b, &n, &e);
    uint8_t *seen = NULL;
    if (st == ER_OK) {
        seen = calloc((size_t)n, 1);
        if (!seen) st = er__fail(ER_ERR_NOMEM, "cannot allocate a tree's check");
    }
    for (int64_t i = 0; st == ER_OK && i < b.n; i++) {
        int64_t x = b.v[i];
        if (x < 0) continue;
        if (x >= n)
            st = er__fail(ER_ERR_STANDARD, "tree: element %lld named, but the tree has %lld elements (0 to %lld)",
                          (long long)x, (long long)n, (long long)n - 1);
        else if (seen[x]++)
            st = er__fail(ER_ERR_STANDARD, "tree: element %lld is named twice", (long long)x);
    }
    free(seen);
    if (st != ER_OK) {
        free(b.v);
        return st;
    }
    if (end) *end = e;
    if (t) {
        t->post = b.v;
        t->npost = b.n;
        t->leaves = n;
    } else {
        free(b.v);
    }
    return ER_OK;
}

void er__tree_free(er_tree *t) {
    if (!t) return;
    free(t->post);
    memset(t, 0, sizeof *t);
}

int64_t er__tree_depth(const er_tree *t) {
    int64_t *h = malloc(sizeof *h * (size_t)(t->leaves + 1)), top = 0, best = 0;
    if (!h) return -1;
    for (int64_t i = 0; i < t->npost; i++) {
        if (t->post[i] >= 0) { h[top++] = 0; continue; }
        int64_t a = h[--top], b = h[--top];
        h[top++] = 1 + (a > b ? a : b);
    }
    best = top ? h[0] : 0;
    free(h);
    return best;
}

/* ---- the canonical text ---- */

/* Node ids: 0 .. n - 1 the elements, n + j the j-th addition of the postfix program. Each addition's operands are
 * ordered heavy first (more elements; the lower first element where as many), so the chain along first operands
 * halves at each nested list and the nesting stays below log2 n + 2 levels. Two subtrees are one shifted by S when
 * their shapes agree and every element of the second is the first's plus S: hashes find candidates (shape, and the
 * elements relative to the subtree's first one, by a polynomial modulo 2^61 - 1), a walk decides. */
typedef struct er_canon {
    int64_t n;
    int32_t *lc, *rc;  /* operands of addition j (n-based ids) */
    int32_t *sz, *f0;  /* elements below a node; its first element in canonical order */
    uint64_t *sh, *rh; /* shape hash; relative elements' hash */
    int32_t *items, top; /* a stack of list items for the render's recursion */
    int32_t *walk;     /* the decision walk's stack */
    char *out;
    size_t len, cap;
    er_status st;
} er_canon;

#define ER_P61 ((UINT64_C(1) << 61) - 1)

static uint64_t er_mulmod(uint64_t a, uint64_t b) {
    unsigned __int128 x = (unsigned __int128)a * b;
    uint64_t lo = (uint64_t)(x & ER_P61), hi = (uint64_t)(x >> 61);
    uint64_t s = lo + hi;
    return s >= ER_P61 ? s - ER_P61 : s;
}
static uint64_t er_addmod(uint64_t a, uint64_t b) {
    uint64_t s = a + b;
    return s >= ER_P61 ? s - ER_P61 : s;
}
static uint64_t er_mix(uint64_t x) {
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static int er_is_leaf(const er_canon *c, int32_t v) { return v < c->n; }

/* 1 when b is a shifted by *s (the walk decides what the hashes propose). */
static int er_shifted(er_canon *c, int32_t a, int32_t b, int64_t *s) {
    if (c->sz[a] != c->sz[b] || c->sh[a] != c->sh[b] || c->rh[a] != c->rh[b]) return 0;
    int64_t d = (int64_t)c->f0[b] - c->f0[a];
    int64_t top = 0;
    c->walk[top++] = a;
    c->walk[top++] = b;
    while (top) {
        int32_t y = c->walk[--top], x = c->walk[--top];
        if (er_is_leaf(c, x) != er_is_leaf(c, y)) return 0;
        if (er_is_leaf(c, x)) {
            if ((int64_t)y - x != d) return 0;
            continue;
        }
        int64_t jx = x - c->n, jy = y - c->n;
        c->walk[top++] = c->lc[jx];
        c->walk[top++] = c->lc[jy];
        c->walk[top++] = c->rc[jx];
        c->walk[top++] = c->rc[jy];
    }
    *s = d;
    return 1;
}

static void er_put(er_canon *c, const char *fmt, long long a, long long b) {
    if (c->st != ER_OK) return;
    char tmp[64];
    int w = snprintf(tmp, sizeof tmp, fmt, a, b);
    if (c->len + (size_t)w + 1 > c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        while (cap < c->len + (size_t)w + 1) cap *= 2;
        char *q = realloc(c->out, cap);
        if (!q) { c->st = er__fail(ER_ERR_NOMEM, "cannot allocate a tree's text"); return; }
        c->out = q;
        c->cap = cap;
    }
    memcpy(c->out + c->len, tmp, (size_t)w + 1);
    c->len += (size_t)w;
}

static void er_render_node(er_canon *c, int32_t v) {
    if (er_is_leaf(c, v)) { er_put(c, "%lld", v, 0); return; }
    /* the chain along first operands, down to an element or an addition of a subtree and its shift */
    int32_t base = c->top, u = v;
    int64_t s;
    while (!er_is_leaf(c, u) && !er_shifted(c, c->lc[u - c->n], c->rc[u - c->n], &s)) {
        c->items[c->top++] = c->rc[u - c->n];
        u = c->lc[u - c->n];
    }
    int32_t tail = c->top;
    if (er_is_leaf(c, u)) c->items[c->top++] = u;
    else { c->items[c->top++] = c->lc[u - c->n]; c->items[c->top++] = c->rc[u - c->n]; }
    /* items: [tail, top) the chain's first items, then [base, tail) read backwards */
    int32_t nit = c->top - base;
    int32_t *it = c->items + base, *list = c->items + c->top;
    for (int32_t k = 0; k < c->top - tail; k++) list[k] = c->items[tail + k];
    for (int32_t k = tail - 1, m = c->top - tail; k >= base; k--, m++) list[m] = c->items[k];
    memmove(it, list, sizeof *it * (size_t)nit);
    c->top = base + nit;
    er_put(c, "(", 0, 0);
    for (int32_t k = 0; k < nit && c->st == ER_OK;) {
        int64_t stride = 0, d;
        int32_t run = 1;
        if (k + 1 < nit && er_shifted(c, it[k], it[k + 1], &stride))
            while (k + run < nit && er_shifted(c, it[k + run - 1], it[k + run], &d) && d == stride) run++;
        if (run == 2 && er_is_leaf(c, it[k])) run = 1; /* "6,60" is shorter than "6*2+54" */
        if (k) er_put(c, ",", 0, 0);
        er_render_node(c, it[k]);
        if (run > 1) er_put(c, stride < 0 ? "*%lld-%lld" : "*%lld+%lld", run, stride < 0 ? -stride : stride);
        k += run;
    }
    er_put(c, ")", 0, 0);
    c->top = base;
}

er_status er__tree_render(const er_tree *t, char **text, size_t *len) {
    int64_t n = t->leaves, m = n - 1, nodes = 2 * n - 1;
    er_canon c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.lc = malloc(sizeof *c.lc * (size_t)(m ? m : 1));
    c.rc = malloc(sizeof *c.rc * (size_t)(m ? m : 1));
    c.sz = malloc(sizeof *c.sz * (size_t)nodes);
    c.f0 = malloc(sizeof *c.f0 * (size_t)nodes);
    c.sh = malloc(sizeof *c.sh * (size_t)nodes);
    c.rh = malloc(sizeof *c.rh * (size_t)nodes);
    c.items = malloc(sizeof *c.items * (size_t)(4 * n + 8));
    c.walk = malloc(sizeof *c.walk * (size_t)(2 * nodes + 4));
    uint64_t *pw = malloc(sizeof *pw * (size_t)(n + 1)), *ps = malloc(sizeof *ps * (size_t)(n + 1));
    int32_t *stack = malloc(sizeof *stack * (size_t)(n + 1));
    if (!c.lc || !c.rc || !c.sz || !c.f0 || !c.sh || !c.rh || !c.items || !c.walk || !pw || !ps || !stack) {
        c.st = er__fail(ER_ERR_NOMEM, "cannot allocate a tree of %lld elements for its text", (long long)n);
        goto done;
    }
    /* r^k and r^0 + ... + r^(k-1) modulo 2^61 - 1 */
    const uint64_t r = UINT64_C(0x1d8e4e27c47d124f) % ER_P61;
    pw[0] = 1;
    ps[0] = 0;
    for (int64_t k = 1; k <= n; k++) { pw[k] = er_mulmod(pw[k - 1], r); ps[k] = er_addmod(ps[k - 1], pw[k - 1]); }
    for (int64_t i = 0; i < n; i++) { c.sz[i] = 1; c.f0[i] = (int32_t)i; c.sh[i] = 1; c.rh[i] = 0; }
    int64_t top = 0, j = 0;
    for (int64_t i = 0; i < t->npost; i++) {
        if (t->post[i] >= 0) { stack[top++] = t->post[i]; continue; }
        int32_t y = stack[--top], x = stack[--top], id = (int32_t)(n + j);
        /* heavy first; the lower first element first where both are as heavy */
        if (c.sz[y] > c.sz[x] || (c.sz[y] == c.sz[x] && c.f0[y] < c.f0[x])) { int32_t w = x; x = y; y = w; }
        c.lc[j] = x;
        c.rc[j] = y;
        c.sz[id] = c.sz[x] + c.sz[y];
        c.f0[id] = c.f0[x];
        c.sh[id] = er_mix(er_mix(c.sh[x]) ^ (c.sh[y] * UINT64_C(0x2545f4914f6cdd1d)) ^ (uint64_t)c.sz[x]);
        uint64_t dy = (uint64_t)((int64_t)c.f0[y] - c.f0[x] + ER_TREE_MAX_LEAVES) % ER_P61,
                 off = er_mulmod(ER_P61 - (uint64_t)ER_TREE_MAX_LEAVES % ER_P61, ps[c.sz[y]]);
        /* rh(v) = rh(x) + r^|x| (rh(y) + (f0(y) - f0(x)) S(|y|)), the difference shifted to stay positive */
        uint64_t inner = er_addmod(c.rh[y], er_addmod(er_mulmod(dy, ps[c.sz[y]]), off));
        c.rh[id] = er_addmod(c.rh[x], er_mulmod(pw[c.sz[x]], inner));
        stack[top++] = id;
        j++;
    }
    er_render_node(&c, stack[0]);
done:
    free(c.lc);
    free(c.rc);
    free(c.sz);
    free(c.f0);
    free(c.sh);
    free(c.rh);
    free(c.items);
    free(c.walk);
    free(pw);
    free(ps);
    free(stack);
    if (c.st != ER_OK) {
        free(c.out);
        return c.st;
    }
    *text = c.out;
    *len = c.len;
    return ER_OK;
}

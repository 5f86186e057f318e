/* nbwdmod.c: the op modules of layer_norm's and rmsnorm's backward passes (src/ops/module.h): from the incoming
 * gradient dy, the forward input x, the forward pass's saved mean (layer_norm) and rstd per row and the weight,
 * the outputs dx (x's shape), dweight and, for layer_norm, dbias (the normalised shape). The sets are
 * src/enclose/norm_bwd.c's (docs/algorithms/norm-backward.md). Share t of the work takes a run of rows for dx and a
 * run of columns for the column sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"
#include "enclose/norm_bwd.h"
#include "enclose/rmsnorm.h"
#include "exact/accum.h"
#include "enclose/compsum.h"

/* The views (not copies), the normalised dimensions' count and size n, and the rows. */
typedef struct er_nbwd_state {
    er_tensor dy, x, mean, rstd, weight;
    int has_weight, centered, nnorm;
    int own;    /* rmsnorm without a saved rstd: the kernel's own, any value of the forward model's set */
    double eps; /* its eps */
    int64_t n, rows;
} er_nbwd_state;
static er_nbwd_state *er__nbwd(const er_ref *r) { return (er_nbwd_state *)r->priv; }

static int er_nbwd_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    er_nbwd_state *s = er__nbwd(r);
    const er_tensor *t[5] = { &s->dy, &s->x, s->centered ? &s->mean : NULL, s->own ? NULL : &s->rstd,
                              s->has_weight ? &s->weight : NULL };
    static const char *const nm[5] = { "dy", "x", "mean", "rstd", "weight" };
    int k = 0;
    for (int i = 0; i < 5; i++) {
        if (!t[i]) continue;
        if (k < cap) {
            views[k] = t[i];
            names[k] = nm[i];
        }
        k++;
    }
    return k;
}

/* A per-row statistic (mean, rstd): one value per row, its shape x's leading dimensions up to dimensions of size 1
 * (torch keeps the normalised ones as 1). */
static er_status er_nbwd_stat_check(const er_tensor *t, const char *name, const er_tensor *x, int lead) {
    ER_RETURN_IF_ERROR(er__tensor_check(t, name));
    int i = 0, k = 0;
    while (i < t->ndim || k < lead) {
        if (i < t->ndim && t->shape[i] == 1) {
            i++;
            continue;
        }
        if (k < lead && x->shape[k] == 1) {
            k++;
            continue;
        }
        if (i >= t->ndim || k >= lead || t->shape[i] != x->shape[k])
            return er__fail(ER_ERR_SHAPE,
                            "%s must hold one value per row: x's leading %d dimension%s (size-1 "
                            "dimensions aside)",
                            name, lead, lead == 1 ? "" : "s");
        i++;
        k++;
    }
    return ER_OK;
}

static er_status er_nbwd_make(er_ref **out, const er_tensor *dy, const er_tensor *x, int nnorm, const er_tensor *mean,
                              const er_tensor *rstd, const er_tensor *weight, double eps, const er_op_module *m) {
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(dy, "dy");
    ER_CHECK_NULL(x, "x");
    if (m == &er__layer_norm_backward_module) {
        ER_CHECK_NULL(mean, "mean");
        ER_CHECK_NULL(rstd, "rstd");
    }
    if (!(eps >= 0) || isinf(eps)) return er__fail(ER_ERR_INVALID, "eps must be finite and nonnegative (got %g)", eps);
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    ER_RETURN_IF_ERROR(er__tensor_check(dy, "dy"));
    int nd = x->ndim;
    if (nnorm < 1 || nnorm > nd)
        return er__fail(ER_ERR_SHAPE, "normalized_ndim must be between 1 and x's %d dimensions (got %d)", nd, nnorm);
    int same = dy->ndim == nd;
    for (int i = 0; same && i < nd; i++) same = dy->shape[i] == x->shape[i];
    if (!same) return er__fail(ER_ERR_SHAPE, "dy and x must have the same shape");
    int64_t n = 1, numel = 1;
    for (int i = 0; i < nd; i++) {
        numel *= x->shape[i];
        if (i >= nd - nnorm) n *= x->shape[i];
    }
    if (n == 0) return er__fail(ER_ERR_SHAPE, "%s over an empty normalised shape has no rows to normalise", m->name);
    if (mean) ER_RETURN_IF_ERROR(er_nbwd_stat_check(mean, "mean", x, nd - nnorm));
    if (rstd) ER_RETURN_IF_ERROR(er_nbwd_stat_check(rstd, "rstd", x, nd - nnorm));
    if (weight) {
        ER_RETURN_IF_ERROR(er__tensor_check(weight, "weight"));
        same = weight->ndim == nnorm;
        for (int i = 0; same && i < nnorm; i++) same = weight->shape[i] == x->shape[nd - nnorm + i];
        if (!same)
            return er__fail(ER_ERR_SHAPE, "weight must have the normalised shape (x's last %d dimension%s)", nnorm,
                            nnorm == 1 ? "" : "s");
    }
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, m));
    er_nbwd_state *s = er__nbwd(r);
    s->dy = *dy;
    s->x = *x;
    if (mean) s->mean = *mean;
    if (rstd) s->rstd = *rstd;
    s->own = rstd == NULL;
    s->eps = eps;
    if (weight) s->weight = *weight;
    s->has_weight = weight != NULL;
    s->centered = m == &er__layer_norm_backward_module;
    s->nnorm = nnorm;
    s->n = n;
    s->rows = numel / n;
    r->ndim = nd;
    r->n = numel;
    for (int i = 0; i < nd; i++) r->shape[i] = x->shape[i];
    *out = r;
    return ER_OK;
}

er_status er_layer_norm_backward(er_ref **out, const er_tensor *dy, const er_tensor *x, int normalized_ndim,
                                 const er_tensor *mean, const er_tensor *rstd, const er_tensor *weight) {
    er__ok();
    return er_nbwd_make(out, dy, x, normalized_ndim, mean, rstd, weight, 0.0, &er__layer_norm_backward_module);
}

er_status er_rmsnorm_backward(er_ref **out, const er_tensor *dy, const er_tensor *x, const er_tensor *rstd,
                              const er_tensor *weight, double eps) {
    er__ok();
    return er_nbwd_make(out, dy, x, 1, NULL, rstd, weight, eps, &er__rmsnorm_backward_module);
}

/* dx has x's shape; dweight and dbias the normalised shape. */
static er_status er_nbwd_out_shape(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape) {
    if (o == 0) return er__out_shape_same(ref, o, out, ndim, shape);
    const er_nbwd_state *s = er__nbwd(ref);
    *ndim = s->nnorm;
    for (int i = 0; i < s->nnorm; i++) shape[i] = ref->shape[ref->ndim - s->nnorm + i];
    return er__out_shape_fits(ref, o, out, *ndim, shape);
}

/* any_order in a compute format holding every input's values, rounding to nearest; depth= bounds the sums. */
static er_status er_nbwd_check(const er_ref *ref, const er_standard *std) {
    ER_RETURN_IF_ERROR(er__standard_backward(ref, std, "its sums"));
    const er_nbwd_state *s = er__nbwd(ref);
    if (!s->own && (std->rsqrt_ulps || std->mean || std->variance || std->fast_math == 2))
        return er__fail(ER_ERR_STANDARD,
                        "rsqrt_ulps=, mean=, variance= and math=triton describe the kernel's own "
                        "rstd: they apply to %s without a saved rstd (rstd NULL), not with one",
                        er__op_name(ref));
    if (s->own && er__fmt(std->compute)->p > 26)
        return er__fail(ER_ERR_UNSUPPORTED,
                        "%s without a saved rstd takes a compute format of at most 26 bits (fp32, "
                        "fp16, bf16) in this version",
                        er__op_name(ref));
    return ER_OK;
}

/* The column sums' partial sums over fixed chunks of rows (their count depends on the rows alone, so that the
 * sets do not depend on the thread count): per chunk and column, dweight's compensated sum of terms (the main terms'
 * two-sum cascade and the sum of its errors and the terms' companions: Lemma N6), sum of magnitudes and largest
 * |x - m|, and dbias's compensated sum of dy, sum of magnitudes and largest |dy|. */
#define ER_NBWD_CHUNKS 32
enum { ER_PW_SUM, ER_PW_ERR, ER_PW_ABS, ER_PW_DMAX, ER_PB_SUM, ER_PB_ERR, ER_PB_ABS, ER_PB_YMAX, ER_P_N };
static int64_t er_nbwd_chunks(int64_t rows) { return rows < ER_NBWD_CHUNKS ? rows : ER_NBWD_CHUNKS; }

/* One share: the row chunks [k0, k1) of dx and of the column sums' partials, then columns [c0, c1) of dweight and
 * dbias. m, rs: every row's mean and rstd; w: the weight (NULL: none), decoded. */
typedef struct er_nbwd_job {
    const er_ref *ref;
    er_sink *sk[3];
    er_nbwd_plan pl[3];
    const double *m, *rlo, *rhi, *w; /* rstd in [rlo, rhi] per row (the saved value: equal) */
    double *part;                    /* the partials (NULL: the column sums read their columns themselves) */
    int64_t nc, k0, k1, c0, c1;
    int t;    /* the share's number: 0 runs in the calling thread */
    int simd; /* the vectorised loops' level (er__simd) */
    er_status st;
} er_nbwd_job;

/* Adds row r's terms to its chunk's partials P (ER_P_N runs of n): t = (dy r) (x - m) and dy, the columns' sums in
 * row order, each a cascade of two-sums (Lemma N6; its main terms' sum is the plain sum in double of Lemma N4, which
 * takes any order). t's companion (er__csum_add_prod's: x - m = d + dl exactly, (dy r) d = t + fma's error exactly,
 * (dy r) dl rounded once) is exact in its parts only for a compute format of at most 26 bits; the column sums use the
 * companions only then. Vectorised over the columns (core/internal.h). */
ER_ALWAYS_INLINE void er_nbwd_part_body(double *restrict sw, double *restrict ew, double *restrict aw,
                                        double *restrict dm, double *restrict sb, double *restrict eb,
                                        double *restrict ab, double *restrict ym, int64_t n,
                                        const double *restrict dy, const double *restrict x, double m, double r) {
    for (int64_t q = 0; q < n; q++) {
        double d, dl, e, f, s1, s2, g = dy[q] * r; /* the sums through locals: GCC does not vectorise otherwise */
        er__two_sum(x[q], -m, &d, &dl);
        double t = g * d, small = fma(g, d, -t) + g * dl, ad = fabs(d), ay = fabs(dy[q]);
        er__two_sum(sw[q], t, &s1, &e);
        sw[q] = s1;
        ew[q] += e + small;
        aw[q] += fabs(t);
        dm[q] = ad > dm[q] ? ad : dm[q];
        er__two_sum(sb[q], dy[q], &s2, &f);
        sb[q] = s2;
        eb[q] += f;
        ab[q] += ay;
        ym[q] = ay > ym[q] ? ay : ym[q];
    }
}
ER_ALWAYS_INLINE void er_nbwd_part_any(double *P, int64_t n, const double *dy, const double *x, double m, double r) {
    er_nbwd_part_body(P, P + n, P + 2 * n, P + 3 * n, P + 4 * n, P + 5 * n, P + 6 * n, P + 7 * n, n, dy, x, m, r);
}
ER_SIMD_BUILDS(er_nbwd_part_row, (double *P, int64_t n, const double *dy, const double *x, double m, double r),
               (P, n, dy, x, m, r), er_nbwd_part_any)

/* The widest-set screen of a row whose fp32 pass did not write it (er_nbwd_marks, norm_bwd.h), and the count of its
 * decided elements (class 0 or 1) into c[0], c[1], in runs of at most 2^20 so that the counts vectorise
 * (core/internal.h). */
ER_ALWAYS_INLINE void er_nbwd_mark_body(int64_t n, const double *restrict lo, const double *restrict hi,
                                        const double *restrict rd, double vrel, double vabs, double wide,
                                        uint8_t *restrict mark) {
    for (int64_t q = 0; q < n; q++) mark[q] = er__nbwd_wider(lo[q], hi[q], rd[q], vrel, vabs, wide);
}
ER_ALWAYS_INLINE void er_nbwd_count_body(int64_t n, const uint8_t *restrict cls, int64_t *c) {
    for (int64_t i0 = 0; i0 < n; i0 += INT64_C(1) << 20) {
        int32_t c0 = 0, c1 = 0;
        int64_t i1 = n - i0 < (INT64_C(1) << 20) ? n : i0 + (INT64_C(1) << 20);
        for (int64_t q = i0; q < i1; q++) {
            c0 += cls[q] == 0;
            c1 += cls[q] == 1;
        }
        c[0] += c0;
        c[1] += c1;
    }
}
#define ER_NBWD_MARK_ARGS                                                                                             \
    int64_t n, const double *restrict lo, const double *restrict hi, const double *restrict rd, double vrel,          \
        double vabs, double wide, uint8_t *restrict mark
ER_SIMD_BUILDS(er_nbwd_mark, (ER_NBWD_MARK_ARGS), (n, lo, hi, rd, vrel, vabs, wide, mark), er_nbwd_mark_body)
ER_SIMD_BUILDS(er_nbwd_count, (int64_t n, const uint8_t *cls, int64_t *c), (n, cls, c), er_nbwd_count_body)

_Static_assert((ER_NBWD_PENDING & 0x80) && !(0 & 0x80) && !(1 & 0x80), "the rows' loop skips on the high bits");

/* The rows of chunks [k0, k1): dx where its sink is open, and the column sums' partials where they are kept. Where
 * the module decides dx's classes (the engine reads the output, no sets are asked for and the rows' sets decide
 * them: er__nbwd_decides), a decided element is counted and offered as the widest set here, the others put. */
static er_status er_nbwd_rows(er_nbwd_job *j, double *buf, er_cval *cv, uint8_t *mark) {
    const er_nbwd_state *s = er__nbwd(j->ref);
    er_sink *sk = j->sk[0];
    int64_t n = s->n, counts[2] = { 0, 0 };
    double *dy = buf, *x = buf + n, *ex = buf + 2 * n, *rd = buf + 3 * n, *y = buf + 4 * n, *lo = buf + 5 * n,
           *hi = buf + 6 * n, *code = buf + 7 * n, wide = -1;
    int fast = sk && er__sink_reads_output(sk) && !sk->set_lo && er__nbwd_decides(&j->pl[0]);
    uint8_t *classes = fast ? er__sink_classes(sk) : NULL;
    /* the output set's ends move from [lo, hi] by less than 2^(2 - p) |end| + 2 eta of O (its values of F rounded into
     * O: O's values are F's, F's spacing at most O's) */
    double vrel = sk ? ldexp(1.0, 2 - sk->O->p) : 0, vabs = sk ? 2.0 * sk->O->min_sub : 0;
    for (int64_t k = j->k0; k < j->k1; k++)
        for (int64_t r = s->rows * k / j->nc; r < s->rows * (k + 1) / j->nc; r++) {
            if (er__cancelled()) return ER_ERR_CANCELLED;
            er__progress_step(1);
            er__load_run(j->simd, &s->dy, r * n, n, dy);
            er__load_run(j->simd, &s->x, r * n, n, x);
            if (j->part)
                er_nbwd_part_row(j->simd, j->part + k * ER_P_N * n, n, dy, x, s->centered ? j->m[r] : 0.0, j->rlo[r]);
            if (!sk) continue;
            /* where the module decides the classes, the row's go straight into the report's */
            uint8_t *cls = fast ? classes + r * n : NULL;
            er_nbwd_marks mk = { vrel, vabs, wide, mark, code, 0 };
            if (fast) er__load_run(j->simd, sk->out, r * n, n, y);
            ER_RETURN_IF_ERROR(er__nbwd_row(&j->pl[0], dy, x, j->w, s->centered ? j->m[r] : 0.0, j->rlo[r], j->rhi[r],
                                            n, fast ? y : NULL, cls, cv, ex, rd, lo, hi, fast ? &mk : NULL));
            if (fast) { /* the decided elements counted; the pending ones and the widest set's candidates below */
                if (!mk.done) er_nbwd_mark(j->simd, n, lo, hi, rd, vrel, vabs, wide, mark);
                er_nbwd_count(j->simd, n, cls, counts);
            }
            for (int64_t q = 0; q < n; q++) {
                er_cset c;
                if (fast && q + 8 <= n) { /* eight at a time: none marked, none pending (classes 0 and 1 have the
                                             * high bit of ER_NBWD_PENDING clear) */
                    uint64_t w8, c8;
                    memcpy(&w8, mark + q, 8);
                    memcpy(&c8, cls + q, 8);
                    if ((w8 | (c8 & UINT64_C(0x8080808080808080))) == 0) {
                        q += 7;
                        continue;
                    }
                }
                if (fast && !mark[q] && cls[q] != ER_NBWD_PENDING) continue;
                if (fast && cls[q] != ER_NBWD_PENDING) {
                    /* a candidate for the widest set, tried in order against the widest as it grows: the output
                     * set's own ends (the set's own where O is F) */
                    er__nbwd_set(&cv[q], j->pl[0].F, lo[q], hi[q]);
                    double ol = cv[q].lo < rd[q] ? cv[q].lo : rd[q], oh = cv[q].hi > rd[q] ? cv[q].hi : rd[q];
                    if (sk->O != j->pl[0].F) {
                        er__cset_build(&c, sk->O, sk->ov, 1, &cv[q], ex[q], rd[q]);
                        ol = c.lo;
                        oh = c.hi;
                    }
                    double rel = er_set_rel(ol, oh);
                    if (rel > wide) {
                        er__cset_build(&c, sk->O, sk->ov, 1, &cv[q], ex[q], rd[q]);
                        er__sink_widest(sk, r * n + q, &c, y[q]);
                        wide = rel;
                    }
                    continue;
                }
                er__cset_build(&c, sk->O, sk->ov, 1, &cv[q], ex[q], rd[q]);
                er__sink_put(sk, r * n + q, &c);
            }
        }
    if (fast) {
        er__sink_count(sk, ER_CLASS_EXACT, counts[0]);
        er__sink_count(sk, ER_CLASS_COVERED, counts[1]);
    }
    return ER_OK;
}

/* Column c of a (dy or x) over every row, decoded into v. */
static void er_nbwd_column(const er_tensor *a, int64_t n, int64_t rows, int64_t c, double *v) {
    for (int64_t r = 0; r < rows; r++) v[r] = er__load(a, er__offset(a, r * n + c));
}

/* dweight's and dbias's columns [c0, c1) from the chunks' partials, added in chunk order; a column they leave open
 * (its exact value undecided, or a sum not finite) reads its column and is summed again there. */
static er_status er_nbwd_colsums(er_nbwd_job *j, double *buf) {
    const er_nbwd_state *s = er__nbwd(j->ref);
    int64_t n = s->n, R = s->rows;
    double rm = 1.0; /* the largest max(1, |r|) */
    for (int64_t r = 0; r < R; r++) rm = fabs(j->rlo[r]) > rm ? fabs(j->rlo[r]) : rm;
    er_status st = ER_OK;
    for (int64_t c = j->c0; c < j->c1 && st == ER_OK; c++)
        for (int o = 1; o < 3 && st == ER_OK; o++) {
            if (!j->sk[o]) continue;
            int bias = o == 2, a0 = bias ? ER_PB_SUM : ER_PW_SUM;
            /* the chunks in order, their cascades joined by two-sums (Lemma N6's tree; its companions count where
             * they are exact); dweight's mul: max(1,|dy|) max(1,|d|) max(1,|r|)^2 over the rows, bounded by the
             * product of the maxima */
            er_csum S = { 0, 0 };
            double sa = 0, dm = 1.0, ym = 1.0, mul = 1.0;
            for (int64_t k = 0; k < j->nc; k++) {
                const double *P = j->part + k * ER_P_N * n;
                er__csum_add(&S, P[a0 * n + c], P[(a0 + 1) * n + c]);
                sa += P[(a0 + 2) * n + c];
                dm = P[ER_PW_DMAX * n + c] > dm ? P[ER_PW_DMAX * n + c] : dm;
                ym = P[ER_PB_YMAX * n + c] > ym ? P[ER_PB_YMAX * n + c] : ym;
            }
            if (!bias) mul = er__mul_up(er__mul_up(ym, dm), er__mul_up(rm, rm));
            er_cval cv;
            double ex, rd;
            int64_t joins = er__nbwd_compensated(j->pl[o].F) ? j->nc : -1;
            int done = er__nbwd_col_sums(&j->pl[o], bias, S.s, S.b, joins, sa, mul, R, &cv, &ex, &rd);
            if (done < 2) {
                double *dy = buf, *x = buf + R;
                er_nbwd_column(&s->dy, n, R, c, dy);
                er_nbwd_column(&s->x, n, R, c, x);
                st = done ? er__nbwd_col_exact(&j->pl[o], bias, dy, x, s->centered ? j->m : NULL, j->rlo, R, &ex, &rd)
                          : er__nbwd_col(&j->pl[o], bias, dy, x, s->centered ? j->m : NULL, j->rlo, j->rhi, R, &cv, &ex,
                                         &rd);
                if (st != ER_OK) break;
            }
            er_cset cs;
            er__cset_build(&cs, j->pl[o].O, j->pl[o].ov, 1, &cv, ex, rd);
            er__sink_put(j->sk[o], c, &cs);
        }
    return st;
}

/* The column sums of columns [c0, c1): blocks of up to 32 columns read row by row (contiguous in a row-major input),
 * at most 2^20 values of each input a block. */
static er_status er_nbwd_cols(er_nbwd_job *j) {
    const er_nbwd_state *s = er__nbwd(j->ref);
    int64_t n = s->n, R = s->rows, nb = R ? (INT64_C(1) << 20) / R : 32;
    nb = nb < 1 ? 1 : nb > 32 ? 32 : nb;
    double *blk = malloc(sizeof(double) * 2 * (size_t)nb * (size_t)(R ? R : 1)), seg[2][32];
    if (!blk)
        return er__fail(ER_ERR_NOMEM, "cannot allocate %s's column block of %lld rows", er__op_name(j->ref),
                        (long long)R);
    er_status st = ER_OK;
    for (int64_t c0 = j->c0; c0 < j->c1 && st == ER_OK; c0 += nb) {
        int64_t k = j->c1 - c0 < nb ? j->c1 - c0 : nb;
        for (int64_t r = 0; r < R; r++) {
            er__load_run(j->simd, &s->dy, r * n + c0, k, seg[0]);
            er__load_run(j->simd, &s->x, r * n + c0, k, seg[1]);
            for (int64_t q = 0; q < k; q++) {
                blk[q * R + r] = seg[0][q];
                blk[(nb + q) * R + r] = seg[1][q];
            }
        }
        for (int64_t q = 0; q < k && st == ER_OK; q++)
            for (int o = 1; o < 3 && st == ER_OK; o++) {
                if (!j->sk[o]) continue;
                er_cval cv;
                double ex, rd;
                st = er__nbwd_col(&j->pl[o], o == 2, blk + q * R, blk + (nb + q) * R, s->centered ? j->m : NULL, j->rlo,
                                  j->rhi, R, &cv, &ex, &rd);
                if (st != ER_OK) break;
                er_cset cs;
                er__cset_build(&cs, j->pl[o].O, j->pl[o].ov, 1, &cv, ex, rd);
                er__sink_put(j->sk[o], c0 + q, &cs);
            }
    }
    free(blk);
    return st;
}

/* The first pass of a share: its rows (dx and the partials); without partials (rmsnorm's own rstd), its columns. */
static void *er_nbwd_run_rows(void *arg) {
    er_nbwd_job *j = arg;
    const er_nbwd_state *s = er__nbwd(j->ref);
    int64_t len = s->n;
    size_t k1 = (size_t)(len ? len : 1);
    double *buf = malloc(sizeof(double) * 8 * k1); /* seven rows of values and the fp32 pass's codes */
    er_cval *cv = malloc(sizeof *cv * k1);
    uint8_t *mark = malloc(k1);
    j->st = buf && cv && mark ? ER_OK
                              : er__fail(ER_ERR_NOMEM, "cannot allocate %s's working rows of %lld", er__op_name(j->ref),
                                         (long long)len);
    if (j->st == ER_OK && (j->sk[0] || j->part)) j->st = er_nbwd_rows(j, buf, cv, mark);
    if (j->st == ER_OK && !j->part && (j->sk[1] || j->sk[2])) j->st = er_nbwd_cols(j);
    free(buf);
    free(cv);
    free(mark);
    if (j->t > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a worker thread */
    return NULL;
}

/* The second pass of a share: its columns from every chunk's partials. */
static void *er_nbwd_run_cols(void *arg) {
    er_nbwd_job *j = arg;
    const er_nbwd_state *s = er__nbwd(j->ref);
    double *buf = malloc(sizeof(double) * 2 * (size_t)(s->rows ? s->rows : 1));
    j->st =
        buf ? er_nbwd_colsums(j, buf)
            : er__fail(ER_ERR_NOMEM, "cannot allocate %s's columns of %lld", er__op_name(j->ref), (long long)s->rows);
    free(buf);
    if (j->t > 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    return NULL;
}

/* rmsnorm without a saved rstd: each row's rstd set under the standard (the forward model's, rmsnorm.md) into
 * [rlo, rhi], its exact sum of squares (Sx) and exact rstd's enclosure [rxl, rxh]. */
static er_status er_nbwd_own_rows(const er_ref *ref, const er_standard *std, double *rlo, double *rhi, double *rxl,
                                  double *rxh, mpfr_t *Sx) {
    const er_nbwd_state *s = er__nbwd(ref);
    er_rmsnorm_plan pl;
    er_dot_env env;
    er_acc acc;
    ER_RETURN_IF_ERROR(er__rmsnorm_setup(&pl, &acc, &env, std, er__fmt(s->x.format), s->eps, s->n));
    double *x = malloc(sizeof(double) * (size_t)(s->n ? s->n : 1));
    er_status st = x ? ER_OK : er__fail(ER_ERR_NOMEM, "cannot allocate a row of %lld", (long long)s->n);
    for (int64_t r = 0; r < s->rows && st == ER_OK; r++) {
        env.special = 0;
        for (int64_t k = 0; k < s->n; k++) {
            x[k] = er__load(&s->x, er__offset(&s->x, r * s->n + k));
            env.special |= !isfinite(x[k]);
        }
        er_dotsum sm;
        int qs;
        st = er__rmsnorm_rstd_set(&pl, &acc, &env, x, s->n, &sm, &qs, &rlo[r], &rhi[r]);
        er_status s2 = er__nbwd_own_rstd(x, s->n, pl.eps, Sx[r], &rxl[r], &rxh[r]);
        if (st == ER_OK) st = s2;
        if (env.special) rhi[r] = INFINITY; /* no claim for the row (its dx and dweight's sets: everything) */
    }
    free(x);
    er__acc_free(&acc);
    return st;
}

static er_status er_nbwd_covers(const er_ref *ref, const er_standard *std, er_sinks *sk) {
    const er_nbwd_state *s = er__nbwd(ref);
    int64_t most = s->rows > s->n ? s->rows : s->n;
    int nt = er__num_threads(ref->n * 64);
    if (nt > most) nt = most > 0 ? (int)most : 1;
    /* the column sums from the rows' pass (partials) unless the rows' rstd is a set (own) */
    int cols = er__sinks_checks(sk, 1) || er__sinks_checks(sk, 2);
    int64_t nc = cols && !s->own ? er_nbwd_chunks(s->rows) : 0;
    /* per share: a row's values, sets, classes and exact terms (up to 192 bytes an element with the exact
     * fallback's), and a column block (own: 2 values of at most 32 columns, up to 2^20 values unless one column is
     * longer; else 2 columns); own rstd: four values and an exact sum of squares (up to 1200 bytes) a row; the
     * partials: ER_P_N values a column and chunk */
    double blk = s->own ? 32.0 * (double)s->rows : 2.0 * (double)s->rows;
    blk = blk < 1048576.0 || !s->own ? blk : (double)s->rows > 1048576.0 ? (double)s->rows : 1048576.0;
    ER_RETURN_IF_ERROR(er__mem_check(
        (double)sizeof(double) * (double)(2 * s->rows + s->n) + (s->own ? 1232.0 * (double)s->rows : 0.0) +
            8.0 * ER_P_N * (double)nc * (double)s->n + (192.0 * (double)s->n + 16.0 * blk) * nt,
        "the rows' statistics and working rows"));
    ER_RETURN_IF_ERROR(er__sinks_open(sk, nt));
    size_t nr = (size_t)(s->rows ? s->rows : 1);
    double *m = malloc(sizeof(double) * nr), *rlo = malloc(sizeof(double) * nr),
           *rhi = s->own ? malloc(sizeof(double) * nr) : rlo, *rxl = s->own ? malloc(sizeof(double) * nr) : NULL,
           *rxh = s->own ? malloc(sizeof(double) * nr) : NULL,
           *w = s->has_weight ? malloc(sizeof(double) * (size_t)s->n) : NULL,
           *part = nc ? calloc((size_t)(ER_P_N * nc * s->n), sizeof(double)) : NULL;
    mpfr_t *Sx = s->own ? calloc(nr, sizeof(mpfr_t)) : NULL;
    er_status st = m && rlo && rhi && (w || !s->has_weight) && (!s->own || (rxl && rxh && Sx)) && (part || !nc)
                       ? ER_OK
                       : er__fail(ER_ERR_NOMEM, "cannot allocate the statistics of %lld rows", (long long)s->rows);
    int64_t nsx = 0; /* the exact sums initialised */
    if (st == ER_OK && s->own) {
        for (; nsx < s->rows; nsx++) mpfr_init2(Sx[nsx], 2);
        st = er_nbwd_own_rows(ref, std, rlo, rhi, rxl, rxh, Sx);
    }
    if (st == ER_OK) {
        if (s->centered) er__decode_rowmajor(&s->mean, m);
        if (!s->own) er__decode_rowmajor(&s->rstd, rlo);
        if (w) er__decode_rowmajor(&s->weight, w);
        er_nbwd_job jobs[ER_MAX_THREADS];
        int simd = er__simd();
        int64_t nk = nc ? nc : s->rows; /* the rows' pass goes by chunks (without partials: a chunk a row) */
        for (int t = 0; t < nt; t++) {
            er_nbwd_job *j = &jobs[t];
            *j = (er_nbwd_job){ .ref = ref,
                                .m = m,
                                .rlo = rlo,
                                .rhi = rhi,
                                .w = w,
                                .part = part,
                                .nc = nk,
                                .k0 = nk * t / nt,
                                .k1 = nk * (t + 1) / nt,
                                .c0 = s->n * t / nt,
                                .c1 = s->n * (t + 1) / nt,
                                .t = t,
                                .simd = simd,
                                .st = ER_OK };
            for (int o = 0; o < ref->mod->nout; o++) {
                j->sk[o] = er__sinks_at(sk, t, o);
                if (!j->sk[o]) continue;
                const er_fmt_info *F = er__fmt(std->compute);
                j->pl[o] = (er_nbwd_plan){ F,
                                           j->sk[o]->O,
                                           j->sk[o]->ov,
                                           std->depth,
                                           s->centered,
                                           s->own,
                                           er__round_double(F, s->eps, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE),
                                           s->n,
                                           rxl,
                                           rxh,
                                           (const mpfr_t *)Sx,
                                           simd };
            }
        }
        er__run_jobs_progress(jobs, sizeof jobs[0], nt, er_nbwd_run_rows, s->rows);
        for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
        if (st == ER_OK && part) {
            er__run_jobs(jobs, sizeof jobs[0], nt, er_nbwd_run_cols);
            for (int t = 0; t < nt && st == ER_OK; t++) st = jobs[t].st;
        }
    }
    for (int64_t r = 0; r < nsx; r++) mpfr_clear(Sx[r]);
    free(Sx);
    free(m);
    if (rhi != rlo) free(rhi);
    free(rlo);
    free(rxl);
    free(rxh);
    free(w);
    free(part);
    return st;
}

static const char *const er_nbwd_names[3] = { "dx", "dweight", "dbias" };

#define ER_NBWD_MODULE(op, k, t)                                                                                   \
    {                                                                                                              \
        .name = op, .nout = k, .out_names = er_nbwd_names, .priv_size = sizeof(er_nbwd_state), .takes = t,         \
        .inputs = er_nbwd_inputs, .out_shape = er_nbwd_out_shape, .check = er_nbwd_check, .covers = er_nbwd_covers \
    }
const er_op_module er__layer_norm_backward_module = ER_NBWD_MODULE("layer_norm_backward", 3, ER_TAKES_DEPTH),
                   er__rmsnorm_backward_module = ER_NBWD_MODULE("rmsnorm_backward", 2,
                                                                ER_TAKES_DEPTH | ER_TAKES_RSQRT | ER_TAKES_MEAN |
                                                                    ER_TAKES_VARIANCE | ER_TAKES_TRITON);

/* tensormod.c: the op module of a tensor's own values (er_tensor_ref; src/ops/module.h): each element's set is its
 * value rounded to nearest into the output format, the base of elementwise chains (docs/algorithms/chains.md). */
#include <float.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "tensor/tensor_internal.h"

/* A tensor's view and whether it is row-major contiguous (then element idx is at offset idx). */
typedef struct er_tensor_state {
    er_tensor A;
    int a_row_major;
} er_tensor_state;
static er_tensor_state *er__tensor(const er_ref *r) { return (er_tensor_state *)r->priv; }

static int er_tensor_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap) {
    (void)cap;
    names[0] = "the input x";
    views[0] = &er__tensor(r)->A;
    return 1;
}

er_status er_tensor_ref(er_ref **out, const er_tensor *x) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(x, "x");
    ER_RETURN_IF_ERROR(er__tensor_check(x, "x"));
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, &er__tensor_module));
    er__tensor(r)->A = *x;
    er__tensor(r)->a_row_major = er__row_major(x);
    r->ndim = x->ndim;
    r->n = 1;
    for (int i = 0; i < x->ndim; i++) { r->shape[i] = x->shape[i]; r->n *= x->shape[i]; }
    *out = r;
    return ER_OK;
}

static double er_tensor_value(const er_ref *ref, int64_t idx) {
    return er__load(&er__tensor(ref)->A, er__tensor(ref)->a_row_major ? idx : er__offset(&er__tensor(ref)->A, idx));
}

/* No reduction: only standards that say nothing of one's order apply (any_order, its options for the output). */
static er_status er_tensor_check(const er_ref *ref, const er_standard *std) {
    if (std->order != ER_ORDER_ANY)
        return er__fail(ER_ERR_STANDARD,
                        "a tensor's values are exact: give any_order (its compute format is the elementwise "
                        "stages' when it starts a chain)");
    return er__standard_takes(ref, std);
}

/* Element idx's set in format O (overflow rule ov): its value rounded to nearest. */
static void er_tensor_set(const er_ref *ref, int64_t idx, const er_fmt_info *O, er_overflow ov, er_cset *c) {
    double x = er_tensor_value(ref, idx);
    er_cval v;
    memset(&v, 0, sizeof v);
    v.lo = INFINITY;
    v.hi = -INFINITY;
    if (isnan(x)) v.nan = v.nan_req = 1;
    else if (isinf(x)) { if (x > 0) v.pinf = 1; else v.ninf = 1; }
    else v.lo = v.hi = x;
    er__cset_build(c, O, ov, 0, &v, x, er__round_double(O, x, ER_ROUND_NEAREST, ov));
}

static er_status er_tensor_covers(const er_ref *ref, const er_standard *std, er_sinks *sks) {
    (void)std;
    ER_RETURN_IF_ERROR(er__sinks_open(sks, 1));
    er_sink *sk = er__sinks_at(sks, 0, 0);
    for (int64_t idx = 0; idx < ref->n; idx++) {
        er_cset c;
        er_tensor_set(ref, idx, sk->O, sk->ov, &c);
        er__sink_put(sk, idx, &c);
    }
    return ER_OK;
}

/* The cursor of single elements' sets (module.h): each set is one value, its own inner pair. */
typedef struct er_tensor_cursor { const er_ref *ref; const er_fmt_info *E; er_overflow ov; } er_tensor_cursor;

static void *er_tensor_cursor_open(const er_ref *ref, const er_standard *std, const er_fmt_info *E) {
    er_tensor_cursor *c = malloc(sizeof *c);
    if (c) *c = (er_tensor_cursor){ref, E, er__overflow_rule(E, std->out_overflow)};
    return c;
}

static int er_tensor_cursor_inner(void *p, int64_t idx, int effort, double *lo, double *hi, double *blo, double *bhi) {
    er_tensor_cursor *c = p;
    if (effort > 0) return 0; /* no tighter pair */
    double x = er_tensor_value(c->ref, idx);
    if (!(fabs(x) <= c->E->max)) return 0; /* a special value, or one that may overflow: the set itself */
    *lo = *hi = er__round_double(c->E, x, ER_ROUND_NEAREST, c->ov);
    *blo = *bhi = x; /* exact */
    return isfinite(*lo);
}

/* er_tensor_cursor_inner at effort 0 over a run: the values read in one pass, then (E fp32, the chains' compute
 * format) rounded in a loop without a call; another E element by element. */
static void er_tensor_cursor_inner_run(void *p, int64_t begin, int64_t m, double *lo, double *hi, double *blo,
                                       double *bhi, uint8_t *ok) {
    er_tensor_cursor *c = p;
    if (c->E->id != ER_FP32) {
        for (int64_t i = 0; i < m; i++)
            ok[i] = (uint8_t)er_tensor_cursor_inner(p, begin + i, 0, &lo[i], &hi[i], &blo[i], &bhi[i]);
        return;
    }
    er__load_run(er__simd(), &er__tensor(c->ref)->A, begin, m, blo);
    for (int64_t i = 0; i < m; i++) {
        double x = blo[i];
        int in = fabs(x) <= FLT_MAX; /* a special value, or one that may overflow: the set itself */
        lo[i] = hi[i] = (double)(float)(in ? x : 0.0);
        bhi[i] = x;
        ok[i] = (uint8_t)in;
    }
}

static er_status er_tensor_cursor_set(void *p, int64_t idx, er_cset *out) {
    er_tensor_cursor *c = p;
    er_tensor_set(c->ref, idx, c->E, c->ov, out);
    out->exact = out->rounded = NAN;
    return ER_OK;
}

static er_status er_tensor_exact(const er_ref *ref, int64_t idx, const er_fmt_info *f, double *exact, double *rounded) {
    double x = er_tensor_value(ref, idx);
    if (exact) *exact = x;
    if (rounded) *rounded = er__round_double(f, x, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT);
    return ER_OK;
}

/* The exact value itself: a point. */
static er_status er_tensor_bracket(const er_ref *ref, int64_t idx, double *mid, double *lo, double *hi) {
    *mid = *lo = *hi = er_tensor_value(ref, idx);
    if (!isfinite(*mid)) *lo = *hi = NAN;
    return ER_OK;
}

static er_status er_tensor_exact_mpfr(const er_ref *ref, int64_t idx, mpfr_ptr out) {
    mpfr_set_prec(out, 64);
    mpfr_set_d(out, er_tensor_value(ref, idx), MPFR_RNDN); /* exact */
    return ER_OK;
}

static const char *const er_tensor_names[1] = {"out"};

const er_op_module er__tensor_module = { .name = "tensor",
                                         .takes = ER_TAKES_DEPTH,
                                         .nout = 1,
                                         .out_names = er_tensor_names,
                                         .out_shape = er__out_shape_same,
                                         .priv_size = sizeof(er_tensor_state),
                                         .inputs = er_tensor_inputs,
                                         .check = er_tensor_check,
                                         .covers = er_tensor_covers,
                                         .exact = er_tensor_exact,
                                         .exact_mpfr = er_tensor_exact_mpfr,
                                         .bracket = er_tensor_bracket,
                                         .cursor_open = er_tensor_cursor_open,
                                         .cursor_inner = er_tensor_cursor_inner,
                                         .cursor_inner_run = er_tensor_cursor_inner_run,
                                         .cursor_set = er_tensor_cursor_set,
                                         .cursor_close = free };

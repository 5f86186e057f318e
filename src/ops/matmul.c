/* matmul.c: the exact reference of C = A . B (2-D and batched with broadcasting).
 *
 * Skeleton (docs/design.md): validate; decode both operands once into doubles (every format's values are
 * doubles); per output element, add the K products exactly into a long accumulator, keep the top 64 bits
 * of the exact sum with a sticky bit (enough to round correctly to any supported format), and upper bounds
 * of the sums of positive and negative products for the any-order bound. Rows and columns holding a NaN or
 * an infinity take a slower path that records the special terms (src/exact/dot.c). The walk over the output
 * elements (batch broadcasting, decoded operand vectors) is shared with the fixed-order standards. */
#include <math.h>
#include <stdlib.h>
#include <gmp.h>
#include <mpfr.h>
#include "format/format.h"
#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "enclose/dotorder.h"
#include "tensor/tensor_internal.h"

/* Floor of log2|x| for finite nonzero x (subnormals included). */
static int er_ilog2(double x) {
    int ex;
    frexp(x, &ex);
    return ex - 1;
}

static er_status er_mm_shapes(er_mm_plan *pl, const er_tensor *A, const er_tensor *B) {
    if (A->ndim < 2 || B->ndim < 2)
        return er__fail(ER_ERR_SHAPE, "matmul operands need at least 2 dimensions (A has %d, B has %d); "
                        "view a vector of length K as [1, K] or [K, 1]", A->ndim, B->ndim);
    pl->M = A->shape[A->ndim - 2];
    pl->K = A->shape[A->ndim - 1];
    pl->N = B->shape[B->ndim - 1];
    if (B->shape[B->ndim - 2] != pl->K)
        return er__fail(
            ER_ERR_SHAPE,
            "A is [..., %lld, %lld] and B is [..., %lld, %lld]: A's columns (%lld) must equal B's rows (%lld)",
            (long long)pl->M, (long long)pl->K, (long long)B->shape[B->ndim - 2], (long long)pl->N, (long long)pl->K,
            (long long)B->shape[B->ndim - 2]);
    int ba = A->ndim - 2, bb = B->ndim - 2;
    pl->nb = ba > bb ? ba : bb;
    pl->nbatch = 1;
    for (int i = 0; i < pl->nb; i++) {
        int ia = i - (pl->nb - ba), ib = i - (pl->nb - bb);
        int64_t da = ia >= 0 ? A->shape[ia] : 1, db = ib >= 0 ? B->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return er__fail(ER_ERR_SHAPE, "batch dimension %d does not broadcast: A has %lld, B has %lld", i,
                            (long long)da, (long long)db);
        pl->bshape[i] = da == 1 ? db : da;
        if (!er__mul_ok(pl->nbatch, pl->bshape[i], &pl->nbatch))
            return er__fail(ER_ERR_SIZE, "the batch of the output has more elements than an int64 can count");
    }
    int64_t n;
    if (!er__mul_ok(pl->nbatch, pl->M, &n) || !er__mul_ok(n, pl->N, &n))
        return er__fail(ER_ERR_SIZE, "the output has more elements than an int64 can count");
    if (pl->nb + 2 > ER_MAX_DIMS)
        return er__fail(ER_ERR_SIZE, "the output would have more than %d dimensions", ER_MAX_DIMS);
    if (pl->K > (INT64_C(1) << 52))
        return er__fail(ER_ERR_SIZE, "reduction length K = %lld exceeds 2^52", (long long)pl->K);
    pl->a_batches = 1;
    for (int i = 0; i < ba; i++) pl->a_batches *= A->shape[i];
    pl->b_batches = 1;
    for (int i = 0; i < bb; i++) pl->b_batches *= B->shape[i];
    return ER_OK;
}

/* Decodes the operand into a dense array: A as [batches][M][K], B transposed as [batches][N][K], so both
 * walk K contiguously. Also finds the exponent range of the nonzero finite values and flags the rows
 * (vectors along K) holding a NaN or an infinity. */
typedef struct er_dense {
    double *v;
    uint8_t *special;  /* per vector along K */
    er_dense_stats st;
} er_dense;

static er_status er_densify(er_dense *d, const er_tensor *t, int64_t rows_dim, int64_t k_dim,
                            int64_t batches, int64_t R, int64_t K, int conv) {
    const er_fmt_info *tf = er__fmt(ER_TF32);
    int convert = er__operand_format(t->format, conv) != t->format;
    er_round cmode = conv == ER_TF32_RNA   ? ER_ROUND_NEAREST_AWAY
                     : conv == ER_TF32_RNE ? ER_ROUND_NEAREST
                                           : ER_ROUND_ZERO;
    int64_t total;
    if (!er__mul_ok(batches, R, &total) || !er__mul_ok(total, K, &total) || total > (INT64_C(1) << 40))
        return er__fail(ER_ERR_NOMEM, "an operand of %lld x %lld x %lld elements is too large", (long long)batches,
                        (long long)R, (long long)K);
    ER_RETURN_IF_ERROR(er__mem_check(9.0 * (double)total, "decoding an operand"));
    d->v = malloc((size_t)(total ? total : 1) * sizeof(double));
    d->special = calloc((size_t)(batches * R > 0 ? batches * R : 1), 1);
    if (!d->v || !d->special) {
        free(d->v);
        free(d->special);
        return er__fail(ER_ERR_NOMEM, "cannot allocate %lld decoded operand values", (long long)total);
    }
    er__dense_stats_init(&d->st);
    int prec = er__fmt(er__operand_format(t->format, conv))->p;
    int nbd = t->ndim - 2;
    int64_t coord[ER_MAX_DIMS] = {0};
    /* 8- and 16-bit formats decode through a table of every pattern */
    const er_fmt_info *fi = er__fmt(t->format);
    double *lut = NULL;
    if (fi->bits <= 16 && (size_t)total > ((size_t)1 << fi->bits) / 4) {
        lut = malloc(sizeof(double) << fi->bits);
        if (lut) for (size_t i = 0; i < ((size_t)1 << fi->bits); i++) lut[i] = er__decode(fi, i);
    }
    for (int64_t b = 0; b < batches && total > 0; b++) { /* no element: no offset computed (strides may be huge) */
        int64_t rem = b, base = 0;
        for (int i = nbd - 1; i >= 0; i--) {
            coord[i] = rem % t->shape[i];
            rem /= t->shape[i];
            base += coord[i] * t->strides[i];
        }
        for (int64_t r = 0; r < R; r++) {
            double *row = d->v + (b * R + r) * K;
            int64_t off = base + r * t->strides[rows_dim];
            uint8_t sp = 0;
            for (int64_t k = 0; k < K; k++, off += t->strides[k_dim]) {
                double x =
                    !lut ? er__load(t, off) : lut[er__load_bits(t, off)]; /* memcpy loads: data may be unaligned */
                if (convert) x = er__round_double(tf, x, cmode, ER_OVERFLOW_IEEE);
                row[k] = x;
                if (!isfinite(x)) { sp = 1; continue; }
                er__dense_stats_add(&d->st, x, prec);
            }
            d->special[b * R + r] = sp;
        }
    }
    free(lut);
    return ER_OK;
}

static void er_dense_free(er_dense *d) {
    free(d->v);
    free(d->special);
}

static int er_bitlen(int64_t k) { return k ? 64 - __builtin_clzll((uint64_t)k) : 0; }

er_format er__operand_format(er_format f, int conv) {
    return conv >= 0 && er__fmt(f)->p > er__fmt(ER_TF32)->p ? ER_TF32 : f;
}

void er__matmul_batch_of(const er_ref *r, int64_t bi, int64_t *ia, int64_t *ib) {
    const er_mm_plan *pl = &er__dot(r)->plan;
    const er_tensor *A = &er__dot(r)->A, *B = &er__dot(r)->B;
    int nbd_a = A->ndim - 2, nbd_b = B->ndim - 2;
    int64_t rem = bi, sa = 1, sb = 1;
    *ia = *ib = 0;
    for (int d = pl->nb - 1; d >= 0; d--) {
        int64_t c = rem % pl->bshape[d];
        rem /= pl->bshape[d];
        int ja = d - (pl->nb - nbd_a), jb = d - (pl->nb - nbd_b);
        if (ja >= 0) { if (A->shape[ja] != 1) *ia += c * sa; sa *= A->shape[ja]; }
        if (jb >= 0) { if (B->shape[jb] != 1) *ib += c * sb; sb *= B->shape[jb]; }
    }
}

/* One thread's share of the walk: output elements [begin, end) in row-major order. */
typedef struct er_walk {
    const er_ref *r;
    const er_dense *da, *db;
    const er_dot_env *env;
    er_elem_fn fn;
    void *ctx;
    int64_t begin, end;
    er_status st;
} er_walk;

static void *er_walk_run(void *arg) {
    er_walk *w = arg;
    const er_mm_plan *pl = &er__dot(w->r)->plan;
    int64_t MN = pl->M * pl->N, cur_bi = -1, ia = 0, ib = 0;
    w->st = ER_OK;
    for (int64_t idx = w->begin; idx < w->end && w->st == ER_OK; idx++) {
        if (er__cancelled()) { /* an element is O(K): polled every one */
            w->st = ER_ERR_CANCELLED;
            break;
        }
        if ((idx & 63) == 63) er__progress_step(64);
        int64_t bi = idx / MN, i = (idx % MN) / pl->N, j = idx % pl->N;
        if (bi != cur_bi) {
            er__matmul_batch_of(w->r, bi, &ia, &ib);
            cur_bi = bi;
        }
        const double *arow = w->da->v + (ia * pl->M + i) * pl->K, *bcol = w->db->v + (ib * pl->N + j) * pl->K;
        w->st = w->fn(w->ctx, w->env, idx, arow, bcol, pl->K,
                      w->da->special[ia * pl->M + i] | w->db->special[ib * pl->N + j]);
    }
    return NULL;
}

void er__matmul_env(const er_ref *r, int conv, const er_dense_stats *da, const er_dense_stats *db, er_dot_env *env) {
    const er_tensor *A = &er__dot(r)->A, *B = &er__dot(r)->B;
    memset(env, 0, sizeof *env);
    env->wide = er__operand_format(A->format, conv) == ER_FP64 || er__operand_format(B->format, conv) == ER_FP64;
    env->base = 0;
    env->top = 64;
    if (da->any_nonzero && db->any_nonzero) {
        /* Non-wide: a product is an exact double whose ulp exponent is >= emin_a + emin_b - 52.
         * Wide: the 106-bit product's last bit is at >= lsb_a + lsb_b. */
        env->base = env->wide ? (int64_t)da->emin_lsb + db->emin_lsb : (int64_t)da->emin + db->emin - 52;
        env->top = (int64_t)da->emax + db->emax + 2 + er_bitlen(er__dot(r)->plan.K) + 1;
    }
    env->ipath = er__dot_ipath(er__fmt(er__operand_format(A->format, conv)),
                               er__dot(r)->b_is_one ? er__fmt_one() : er__fmt(er__operand_format(B->format, conv)),
                               er__dot(r)->plan.K, &env->qa, &env->qb);
    /* the same 128-bit path when the data (not only the format) allows it: every value an integer times 2^qmin below
     * 2^40, so products are below 2^80 and K <= 2^47 of them sum exactly (bf16 and fp32 data of narrow range) */
    if (!env->ipath && !env->wide && !er__dot(r)->b_is_one && da->any_nonzero && db->any_nonzero &&
        er__dot(r)->plan.K <= (INT64_C(1) << 47) && (int64_t)da->emax + 1 - da->qmin <= 40 &&
        (int64_t)db->emax + 1 - db->qmin <= 40) {
        env->ipath = 1;
        env->qa = da->qmin;
        env->qb = db->qmin;
    }
}

er_status er__matmul_foreach_n(const er_ref *r, int conv, er_elem_fn fn, void *const *ctxs, int nthreads) {
    const er_mm_plan *pl = &er__dot(r)->plan;
    const er_tensor *A = &er__dot(r)->A, *B = &er__dot(r)->B;
    er_dense da, db;
    ER_RETURN_IF_ERROR(er_densify(&da, A, A->ndim - 2, A->ndim - 1, pl->a_batches, pl->M, pl->K, conv));
    er_status st = er_densify(&db, B, B->ndim - 1, B->ndim - 2, pl->b_batches, pl->N, pl->K, conv);
    if (st != ER_OK) { er_dense_free(&da); return st; }
    er_dot_env env;
    er__matmul_env(r, conv, &da.st, &db.st, &env);
    int64_t n = pl->nbatch * pl->M * pl->N;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > n) nthreads = n > 0 ? (int)n : 1;
    er_walk w[ER_MAX_THREADS];
    for (int t = 0; t < nthreads; t++)
        w[t] = (er_walk){ r, &da, &db, &env, fn, ctxs[t], n * t / nthreads, n * (t + 1) / nthreads, ER_OK };
    er__progress_begin(n);
    er__run_jobs(w, sizeof w[0], nthreads, er_walk_run);
    er__progress_end();
    for (int t = 0; t < nthreads && st == ER_OK; t++) st = w[t].st;
    if (st == ER_ERR_CANCELLED) ER_CANCELLED();
    er_dense_free(&da);
    er_dense_free(&db);
    return st;
}

/* One thread's share of the tile walk: units [u0, u1) of (output batch, 16 columns). */
typedef struct er_tile_walk {
    const er_ref *r;
    const float *af;       /* A as floats, [a_batches][M][K] */
    const er_dense *db;    /* B transposed, [b_batches][N][K] doubles */
    int64_t block;
    int outer;
    er_tile_fn fn;
    void *ctx;
    int64_t u0, u1;
    er_status st;
} er_tile_walk;

static void *er_tile_run(void *arg) {
    er_tile_walk *w = arg;
    const er_mm_plan *pl = &er__dot(w->r)->plan;
    int64_t K = pl->K, MN = pl->M * pl->N, ntile = (pl->N + 15) / 16;
    float *tile = malloc(sizeof(float) * (size_t)(16 * K)), vals[16];
    if (!tile) { w->st = er__fail(ER_ERR_NOMEM, "cannot allocate a tile of %lld x 16", (long long)K); return NULL; }
    w->st = ER_OK;
    for (int64_t u = w->u0; u < w->u1 && w->st == ER_OK; u++) {
        int64_t bi = u / ntile, j0 = (u % ntile) * 16, ia, ib;
        int T = pl->N - j0 < 16 ? (int)(pl->N - j0) : 16;
        er__matmul_batch_of(w->r, bi, &ia, &ib);
        for (int t = 0; t < T; t++) {
            const double *bc = w->db->v + (ib * pl->N + j0 + t) * K;
            for (int64_t k = 0; k < K; k++) tile[k * T + t] = (float)bc[k]; /* exact: at most 24 bits */
        }
        for (int64_t i = 0; i < pl->M && w->st == ER_OK; i++) {
            if (er__cancelled()) {
                w->st = ER_ERR_CANCELLED;
                break;
            }
            er__progress_step(T);
            er__dot_order_tile(w->block, w->outer, w->af + (ia * pl->M + i) * K, tile, K, T, vals);
            w->st = w->fn(w->ctx, bi * MN + i * pl->N + j0, vals, T);
        }
    }
    free(tile);
    return NULL;
}

er_status er__matmul_foreach_tile(const er_ref *r, int conv, int64_t block, int outer, er_tile_fn fn, void *const *ctxs,
                                  int nthreads) {
    const er_mm_plan *pl = &er__dot(r)->plan;
    er_dense da, db;
    ER_RETURN_IF_ERROR(er_densify(&da, &er__dot(r)->A, er__dot(r)->A.ndim - 2, er__dot(r)->A.ndim - 1, pl->a_batches,
                                  pl->M, pl->K, conv));
    er_status st = er_densify(&db, &er__dot(r)->B, er__dot(r)->B.ndim - 1, er__dot(r)->B.ndim - 2, pl->b_batches, pl->N,
                              pl->K, conv);
    if (st != ER_OK) { er_dense_free(&da); return st; }
    int64_t na = pl->a_batches * pl->M * pl->K;
    float *af = malloc(sizeof(float) * (size_t)(na ? na : 1));
    if (!af) st = er__fail(ER_ERR_NOMEM, "cannot allocate %lld operand values", (long long)na);
    for (int64_t x = 0; st == ER_OK && x < na; x++) af[x] = (float)da.v[x];
    er_dense_free(&da);
    int64_t units = pl->nbatch * ((pl->N + 15) / 16);
    if (nthreads < 1) nthreads = 1;
    if (nthreads > units) nthreads = units > 0 ? (int)units : 1;
    if (st == ER_OK) {
        er_tile_walk w[ER_MAX_THREADS];
        for (int t = 0; t < nthreads; t++)
            w[t] = (er_tile_walk){
                r, af, &db, block, outer, fn, ctxs[t], units * t / nthreads, units * (t + 1) / nthreads, ER_OK
            };
        er__progress_begin(pl->nbatch * pl->M * pl->N);
        er__run_jobs(w, sizeof w[0], nthreads, er_tile_run);
        er__progress_end();
        for (int t = 0; t < nthreads && st == ER_OK; t++) st = w[t].st;
        if (st == ER_ERR_CANCELLED) ER_CANCELLED();
    }
    free(af);
    er_dense_free(&db);
    return st;
}

er_status er__matmul_foreach(const er_ref *r, int conv, er_elem_fn fn, void *ctx) {
    return er__matmul_foreach_n(r, conv, fn, &ctx, 1);
}

/* er__matmul_foreach callback of er_matmul: the exact summaries. */
typedef struct er_sum_ctx { er_dotsum *sums; er_acc acc; int have_acc; } er_sum_ctx;

static er_status er_sum_cb(void *vctx, const er_dot_env *env, int64_t idx, const double *a, const double *b,
                           int64_t K, int special) {
    er_sum_ctx *cx = vctx;
    if (!cx->have_acc) {
        ER_RETURN_IF_ERROR(er__acc_init(&cx->acc, env->base, env->top));
        cx->have_acc = 1;
    }
    er__dot_summary(&cx->sums[idx], &cx->acc, a, b, K, env, special);
    return ER_OK;
}

static er_status er_matmul_make(er_ref **out, const er_tensor *A, const er_tensor *B, int fast,
                                const er_fast_gemm *g);

er_status er__matmul_args(er_ref **out, const er_tensor *A, const er_tensor *B) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(A, "A");
    ER_CHECK_NULL(B, "B");
    ER_RETURN_IF_ERROR(er__tensor_check(A, "A"));
    return er__tensor_check(B, "B");
}

er_status er_matmul(er_ref **out, const er_tensor *A, const er_tensor *B) {
    ER_RETURN_IF_ERROR(er__matmul_args(out, A, B));
    return er_matmul_make(out, A, B, 1, NULL);
}

er_status er_scaled_matmul(er_ref **out, const er_tensor *A, const er_tensor *B, double scale_a, double scale_b) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    if (!isfinite(scale_a) || !isfinite(scale_b))
        return er__fail(ER_ERR_INVALID, "the scales must be finite (got %g and %g)", scale_a, scale_b);
    if ((double)(float)scale_a != scale_a || (double)(float)scale_b != scale_b)
        return er__fail(ER_ERR_INVALID, "the scales are per-tensor fp32 values: %.17g or %.17g is not a value of fp32",
                        scale_a, scale_b);
    er_ref *r;
    ER_RETURN_IF_ERROR(er_matmul(&r, A, B));
    er__dot(r)->scaled = 1;
    er__dot(r)->sa = scale_a;
    er__dot(r)->sb = scale_b;
    *out = r;
    return ER_OK;
}

/* A rowwise scale tensor's values (fp32 values of n elements, finite) into a new array. For matrices: [n], [n, 1]
 * or [1, n]; for a batched operand X (batch dims b...): [b..., n], or [b..., n, 1] for A's rows and [b..., 1, n]
 * for B's columns, in row-major order (batch, then row or column). */
static er_status er_scale_vector(const er_tensor *s, const char *name, const er_tensor *X, int64_t n, double **out) {
    ER_RETURN_IF_ERROR(er__tensor_check(s, name));
    int isa = name[6] == 'a', nb = X->ndim - 2, ok;
    if (nb == 0) ok = er_tensor_numel(s) == n && s->ndim <= 2 && (s->ndim < 2 || s->shape[0] == 1 || s->shape[1] == 1);
    else {
        ok = s->ndim == nb + 1 || s->ndim == nb + 2;
        for (int i = 0; i < nb && ok; i++) ok = s->shape[i] == X->shape[i];
        if (ok && s->ndim == nb + 1) ok = s->shape[nb] == n;
        if (ok && s->ndim == nb + 2) ok = isa ? s->shape[nb] == n && s->shape[nb + 1] == 1
                                             : s->shape[nb] == 1 && s->shape[nb + 1] == n;
        n = er_tensor_numel(s);
    }
    if (!ok && !nb)
        return er__fail(ER_ERR_SHAPE, "%s holds %lld scales; it needs %lld, one per %s", name,
                        (long long)er_tensor_numel(s), (long long)n, isa ? "row of A" : "column of B");
    if (!ok)
        return er__fail(ER_ERR_SHAPE, "%s has %d dimensions and %lld scales; it needs one per %s: %s", name, s->ndim,
                        (long long)er_tensor_numel(s), isa ? "row of A" : "column of B",
                        isa ? "A's batch shape, then [M] or [M, 1]" : "B's batch shape, then [N] or [1, N]");
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld scales", (long long)n);
    for (int64_t i = 0; i < n; i++) { /* [n], [n, 1], [1, n]: element i is row-major element i */
        double x = er__load(s, er__offset(s, i));
        if (!isfinite(x) || (double)(float)x != x) {
            free(v);
            return er__fail(ER_ERR_INVALID, "%s[%lld] = %.17g: the scales are finite fp32 values", name, (long long)i,
                            x);
        }
        v[i] = x;
    }
    *out = v;
    return ER_OK;
}

er_status er_scaled_matmul_rowwise(er_ref **out, const er_tensor *A, const er_tensor *B, const er_tensor *scale_a,
                                   const er_tensor *scale_b) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(A, "A");
    ER_CHECK_NULL(B, "B");
    ER_CHECK_NULL(scale_a, "scale_a");
    ER_CHECK_NULL(scale_b, "scale_b");
    ER_RETURN_IF_ERROR(er__tensor_check(A, "A"));
    ER_RETURN_IF_ERROR(er__tensor_check(B, "B"));
    if (A->ndim < 2 || B->ndim < 2)
        return er__fail(ER_ERR_SHAPE, "rowwise scales take matrices or batches of them (%d and %d dimensions given)",
                        A->ndim, B->ndim);
    double *sav = NULL, *sbv = NULL;
    ER_RETURN_IF_ERROR(er_scale_vector(scale_a, "scale_a", A, A->shape[A->ndim - 2], &sav));
    er_status st = er_scale_vector(scale_b, "scale_b", B, B->shape[B->ndim - 1], &sbv);
    er_ref *r = NULL;
    if (st == ER_OK) st = er_matmul(&r, A, B);
    if (st != ER_OK) {
        free(sav);
        free(sbv);
        return st;
    }
    er__dot(r)->scaled = 1;
    er__dot(r)->sa = er__dot(r)->sb = 1;
    er__dot(r)->sav = sav;
    er__dot(r)->sbv = sbv;
    *out = r;
    return ER_OK;
}

er_status er__matmul_elem_summary(const er_ref *r, int64_t idx, er_dotsum *sm) {
    int64_t K = er__dot(r)->K, offa, offb;
    er__matmul_offsets(r, idx, &offa, &offb);
    double *a = malloc(sizeof(double) * (size_t)(K ? 2 * K : 2)), *b = a ? a + (K ? K : 1) : NULL;
    if (!a) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld operand values", (long long)K);
    const er_tensor *A = &er__dot(r)->A, *B = &er__dot(r)->B;
    int special = 0, any = 0, emin = INT32_MAX, emax = INT32_MIN, lmin = INT32_MAX;
    for (int pass = 0; pass < 2; pass++) {
        double *v = pass ? b : a;
        int emn = INT32_MAX, emx = INT32_MIN, lsb = INT32_MAX, nz = 0;
        for (int64_t k = 0; k < K; k++) {
            double x = pass ? er__load(B, offb + k * B->strides[B->ndim - 2])
                            : er__load(A, offa + k * A->strides[A->ndim - 1]);
            v[k] = x;
            if (!isfinite(x)) { special = 1; continue; }
            if (x == 0) continue;
            nz = 1;
            int e = er_ilog2(x), l = e - 52 < -1074 ? -1074 : e - 52;
            if (e < emn) emn = e;
            if (e > emx) emx = e;
            if (l < lsb) lsb = l;
        }
        if (!nz) { any = 0; break; }
        any = 1;
        if (pass == 0) { emin = emn; emax = emx; lmin = lsb; }
        else { emin += emn; emax += emx; lmin += lsb; }
    }
    er_dot_env env;
    memset(&env, 0, sizeof env);
    env.wide = A->format == ER_FP64 || B->format == ER_FP64;
    env.base = any ? (env.wide ? (int64_t)lmin : (int64_t)emin - 52) : 0;
    env.top = any ? (int64_t)emax + 2 + er_bitlen(K) + 1 : 64;
    env.ipath = er__dot_ipath(er__fmt(A->format), er__fmt(B->format), K, &env.qa, &env.qb);
    er_acc acc;
    er_status st = er__acc_init(&acc, env.base, env.top);
    if (st == ER_OK) {
        er__dot_summary(sm, &acc, a, b, K, &env, special);
        er__acc_free(&acc);
    }
    free(a);
    return st;
}

/* The reference of A B; with `fast`, the BLAS fast path when it applies (er_matmul), else the exact summaries. */
/* fast: 1 the BLAS fast path when it applies (its GEMM by g; NULL: the CBLAS), 0 the exact summaries, -1 neither
 * (shapes only). */
static er_status er_matmul_make(er_ref **out, const er_tensor *A, const er_tensor *B, int fast,
                                const er_fast_gemm *g) {
    er_mm_plan pl;
    memset(&pl, 0, sizeof pl);
    ER_RETURN_IF_ERROR(er_mm_shapes(&pl, A, B));
    int64_t n = pl.nbatch * pl.M * pl.N;
    if (n > (INT64_C(1) << 36))
        return er__fail(ER_ERR_NOMEM, "an output of %lld elements is too large for one reference", (long long)n);
    /* the peak of a build: 32 bytes per output element (the summaries; the fast path's GEMM output and kept floats
     * are less) and the operands decoded, 12 bytes per input element at most */
    double inputs =
        (double)pl.a_batches * (double)pl.M * (double)pl.K + (double)pl.b_batches * (double)pl.K * (double)pl.N;
    if (fast >= 0) ER_RETURN_IF_ERROR(er__mem_check(32.0 * (double)n + 12.0 * inputs, "the matmul reference"));
    er_ref *r;
    ER_RETURN_IF_ERROR(er__ref_alloc(&r, &er__matmul_module));
    er__dot(r)->A = *A;
    er__dot(r)->B = *B;
    r->ndim = pl.nb + 2;
    for (int i = 0; i < pl.nb; i++) r->shape[i] = pl.bshape[i];
    r->shape[pl.nb] = pl.M;
    r->shape[pl.nb + 1] = pl.N;
    r->n = n;
    er__dot(r)->K = pl.K;
    er__dot(r)->plan = pl;
    if (fast < 0) { *out = r; return ER_OK; }
    if (fast) {
        er_status st = er__fast_build(r, g);
        if (st != ER_OK) { er_ref_free(r); return st; }
        if (er__dot(r)->fast) { *out = r; return ER_OK; }
    }
    er_status st = er__matmul_all_sums(r, &er__dot(r)->sums);
    if (st != ER_OK) { er_ref_free(r); return st; }
    *out = r;
    return ER_OK;
}

er_status er__matmul_build(er_ref **out, const er_tensor *A, const er_tensor *B) {
    return er_matmul_make(out, A, B, 0, NULL);
}

er_status er__matmul_shape_ref(er_ref **out, const er_tensor *A, const er_tensor *B) {
    return er_matmul_make(out, A, B, -1, NULL);
}

er_status er__matmul_make_with(er_ref **out, const er_tensor *A, const er_tensor *B, const er_fast_gemm *g) {
    return er_matmul_make(out, A, B, 1, g);
}

er_status er__matmul_all_sums(const er_ref *r, er_dotsum **out) {
    int64_t n = r->n;
    er_dotsum *sums = malloc((size_t)(n ? n : 1) * sizeof *sums);
    if (!sums) return er__fail(ER_ERR_NOMEM, "cannot allocate the summaries of %lld elements", (long long)n);
    /* the summaries are independent per element: threads share them out, and no result depends on how */
    int nt = er__num_threads(n * (er__dot(r)->K ? er__dot(r)->K : 1));
    er_sum_ctx cx[ER_MAX_THREADS];
    void *ctxs[ER_MAX_THREADS] = {0};
    for (int t = 0; t < nt; t++) { cx[t] = (er_sum_ctx){sums, {0}, 0}; ctxs[t] = &cx[t]; }
    er_status st = er__matmul_foreach_n(r, -1, er_sum_cb, ctxs, nt);
    for (int t = 0; t < nt; t++) if (cx[t].have_acc) er__acc_free(&cx[t].acc);
    if (st != ER_OK) { free(sums); return st; }
    *out = sums;
    return ER_OK;
}

int er__dot_fast(const er_ref *r) { return er__dot(r)->fast; }

void er__dot_destroy(er_ref *r) {
    er_dot_state *d = er__dot(r);
    free(d->sums);
    free(d->fs);
    free(d->af);
    free(d->bt);
    free(d->an);
    free(d->bn);
    free(d->P);
    if (d->fast) pthread_mutex_destroy(&d->pmu);
    free(d->sav);
    free(d->sbv);
    free(d->owned[0]);
    free(d->owned[1]);
    if (d->dev_free) d->dev_free(d->dev, d->dev_id);
}

void er__matmul_offsets(const er_ref *r, int64_t idx, int64_t *offa_out, int64_t *offb_out) {
    const er_tensor *A = &er__dot(r)->A, *B = &er__dot(r)->B;
    const er_mm_plan *pl = &er__dot(r)->plan;
    if (pl->K == 0) {
        *offa_out = *offb_out = 0;
        return;
    } /* no product: nothing read, and empty operands' strides unchecked */
    int64_t M = pl->M, N = pl->N;
    int64_t j = idx % N, i = (idx / N) % M, bi = idx / (M * N);
    int nb = pl->nb, nbd_a = A->ndim - 2, nbd_b = B->ndim - 2;
    int64_t offa = i * A->strides[A->ndim - 2], offb = j * B->strides[B->ndim - 1];
    for (int d = nb - 1; d >= 0; d--) {
        int64_t c = bi % pl->bshape[d];
        bi /= pl->bshape[d];
        int ja = d - (nb - nbd_a), jb = d - (nb - nbd_b);
        if (ja >= 0 && A->shape[ja] != 1) offa += c * A->strides[ja];
        if (jb >= 0 && B->shape[jb] != 1) offb += c * B->strides[jb];
    }
    *offa_out = offa;
    *offb_out = offb;
}

/* x (106 bits, its significand at mem, as mpfr_custom_init left it) set to the finite double p, which is 0 or at
 * least 2^-900 in magnitude: MPFR's custom interface with the significand written from p's bits (a normal double's
 * 53 bits at the top of the high limb), where limbs are 64 bits; mpfr_set_d elsewhere. */
static void er_mpfr_of_double(mpfr_ptr x, double p, void *mem) {
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
    uint64_t b = er__bits(p);
    int sign = b >> 63 ? -1 : 1;
    if (p == 0) {
        mpfr_custom_init_set(x, sign * MPFR_ZERO_KIND, 0, 106, mem);
        return;
    }
    mp_limb_t *d = mem; /* two limbs, the least significant first */
    d[0] = 0;
    d[1] = ((b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52)) << 11;
    /* p = 1.f 2^u, u = its biased exponent less 1023 = 0.1f 2^(u + 1) */
    mpfr_custom_init_set(x, sign * MPFR_REGULAR_KIND, (mpfr_exp_t)((b >> 52) & 0x7ff) - 1022, 106, mem);
#else
    mpfr_custom_init_set(x, MPFR_NAN_KIND, 0, 106, mem);
    mpfr_set_d(x, p, MPFR_RNDN);
#endif
}

/* Recomputes one element exactly with MPFR alone (an independent path from the accumulator): every product
 * of two doubles is exact at 106 bits, and mpfr_sum rounds the exact sum correctly; at a precision of the
 * whole span of the terms that rounding is exact. A product that double holds exactly (finite, zero only from a
 * zero factor, at least 2^-900 otherwise, so that fma's residual a b - p is itself exact and zero; for operands of
 * at most 26 bits within those bounds every product is) is written into its term from the double's bits; the terms
 * share one block of limbs (MPFR's custom interface) instead of an allocation each. The operands come from the
 * fast path's floats where it kept them (a row of A and a column of B, each contiguous; B's column in its view is
 * strided), else from the views. */
er_status er__matmul_exact_mpfr(const er_ref *r, int64_t idx, void *mpfr_out) {
    mpfr_ptr out = mpfr_out;
    const er_tensor *A = &er__dot(r)->A, *B = &er__dot(r)->B;
    int64_t K = er__dot(r)->K, offa, offb;
    const float *arow = NULL, *bcol = NULL; /* the fast path's floats, else the views */
    if (er__dot(r)->fast && K > 0) er__dot_float_rows(r, idx, &arow, &bcol);
    /* operands of at most 26 bits whose products stay within 2^-900 .. 2^1000 (or are 0): every product p is a b */
    const er_fmt_info *fa = er__fmt(A->format), *fb = er__fmt(B->format);
    int exact = fa->p <= 26 && fb->p <= 26 && fa->min_sub * fb->min_sub >= 0x1p-900 && fa->max * fb->max <= 0x1p1000;
    er__matmul_offsets(r, idx, &offa, &offb);
    size_t tb = mpfr_custom_get_size(106), n = (size_t)(K ? K : 1);
    mpfr_t *terms = malloc(n * sizeof *terms);
    mpfr_ptr *ptrs = malloc(n * sizeof *ptrs);
    void *limbs = malloc(n * tb);
    if (!terms || !ptrs || !limbs) {
        free(terms);
        free(ptrs);
        free(limbs);
        return er__fail(ER_ERR_NOMEM, "cannot allocate %lld terms", (long long)K);
    }
    mpfr_exp_t emax = MPFR_EMIN_MIN, emin = MPFR_EMAX_MAX;
    int nan = 0, pinf = 0, ninf = 0;
    for (int64_t k = 0; k < K; k++) {
        double a = arow ? arow[k] : er__load(A, offa + k * A->strides[A->ndim - 1]);
        double b = bcol ? bcol[k] : er__load(B, offb + k * B->strides[B->ndim - 2]), p = a * b;
        void *mem = (char *)limbs + (size_t)k * tb;
        mpfr_custom_init(mem, 106);
        if (isfinite(p) && (p != 0 ? fabs(p) >= 0x1p-900 : (a == 0 || b == 0)) && (exact || fma(a, b, -p) == 0)) {
            er_mpfr_of_double(terms[k], p, mem); /* exact: p is a b */
        } else {
            mpfr_custom_init_set(terms[k], MPFR_NAN_KIND, 0, 106, mem);
            mpfr_set_d(terms[k], a, MPFR_RNDN);
            mpfr_mul_d(terms[k], terms[k], b, MPFR_RNDN); /* exact at 106 bits */
        }
        if (mpfr_nan_p(terms[k])) nan = 1;
        else if (mpfr_inf_p(terms[k])) { if (mpfr_sgn(terms[k]) > 0) pinf = 1; else ninf = 1; }
        else if (!mpfr_zero_p(terms[k])) {
            mpfr_exp_t e = mpfr_get_exp(terms[k]);
            if (e > emax) emax = e;
            if (e - 106 < emin) emin = e - 106;
        }
        ptrs[k] = terms[k];
    }
    if (nan || (pinf && ninf)) mpfr_set_nan(out);
    else if (pinf) mpfr_set_inf(out, 1);
    else if (ninf) mpfr_set_inf(out, -1);
    else {
        mpfr_prec_t prec = emax >= emin ? (mpfr_prec_t)(emax - emin) + er_bitlen(K) + 2 : 2;
        mpfr_set_prec(out, prec);
        mpfr_sum(out, ptrs, (unsigned long)K, MPFR_RNDN);
    }
    free(terms);
    free(ptrs);
    free(limbs);
    return ER_OK;
}

static er_status er_matmul_covers_run(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                                      const char *standard, const char *options) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(C, "C");
    er_standard std;
    ER_RETURN_IF_ERROR(er_standard_parse(&std, standard ? standard : "any_order", options));
    er_ref *ref;
    ER_RETURN_IF_ERROR(er_matmul(&ref, A, B));
    er_status st = er__covers_run(rep, ref, C, &std);
    er_ref_free(ref);
    return st;
}

er_status er_matmul_covers(er_report *rep, const er_tensor *A, const er_tensor *B, const er_tensor *C,
                           const char *standard, const char *options) {
    er_status st = er_matmul_covers_run(rep, A, B, C, standard, options);
    er__report_finish(rep, st);
    return st;
}

/* modkit.h: what the op modules share (src/ops/modules.c): the output set through the output conversion, the
 * options each op takes, the output shape of one-output ops. For modules only; the engine does not include it. */
#ifndef ER_MODKIT_H
#define ER_MODKIT_H

#include "format/format.h"
#include "ops/module.h"
#include "enclose/anyorder.h" /* er_cval */

/* The output set from a compute-format set v through the output conversion (O, ov), with the exact result; with
 * any = 1 (an any-order set) the correctly rounded exact result joins it. */
ER_INTERNAL void er__cset_build(er_cset *c, const er_fmt_info *O, er_overflow ov, int any, const er_cval *v,
                                double exact, double rounded);
/* The options of the standard beyond the order and the formats that only some ops take, for a module's `takes`:
 * er__standard_takes refuses every one set in the standard that the reference's module does not take
 * (ER_ERR_STANDARD or ER_ERR_UNSUPPORTED), the message naming the ops of the table that take it. */
#define ER_TAKES_MMA 0x001u      /* mma:<arch> orders */
#define ER_TAKES_TF32 0x002u     /* compute=tf32 */
#define ER_TAKES_RSQRT 0x004u    /* rsqrt_ulps= */
#define ER_TAKES_VARIANCE 0x008u /* variance=, combine_depth= */
#define ER_TAKES_EXP 0x010u      /* exp_ulps= */
#define ER_TAKES_FAST 0x020u     /* exp_ulps=fast, math=fast */
#define ER_TAKES_TRITON 0x040u   /* math=triton */
#define ER_TAKES_FLUSH 0x080u    /* subnormals=flush */
#define ER_TAKES_DIV_ULPS 0x100u /* div_ulps= */
#define ER_TAKES_ONLINE 0x200u   /* max=, online= */
#define ER_TAKES_DEPTH 0x400u    /* depth= */
#define ER_TAKES_MEAN 0x800u     /* mean= */
#define ER_TAKES_ATTN 0x1000u    /* attention's kv_block=, p_sum=, qk_scale= */
#define ER_TAKES_LOG 0x2000u     /* log_ulps= */
#define ER_TAKES_DIV 0x4000u     /* div= */
#define ER_TAKES_PRODUCTS 0x8000u /* products= */
#define ER_TAKES_AMAX_FLOOR 0x10000u /* amax_floor= */
ER_INTERNAL er_status er__standard_takes(const er_ref *ref, const er_standard *std);
/* The standard of a backward pass: the options its module takes, order any_order (else ER_ERR_UNSUPPORTED naming
 * `sums`, "its sum"), rounding to nearest in a compute format other than tf32 that holds every input's values (the
 * module's inputs, by name). */
ER_INTERNAL er_status er__standard_backward(const er_ref *ref, const er_standard *std, const char *sums);
/* A set as an enclosure's lo, hi (NaN: no finite part) and flags (ER_ENCLOSURE_*) give it. */
ER_INTERNAL void er__cval_of_enclosure(er_cval *v, double lo, double hi, uint8_t flags);
/* The output shape of an op with one output of the reference's shape (out NULL: the shape alone). */
ER_INTERNAL er_status er__out_shape_same(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape);

/* The index of row-major element idx in the reference's output shape. */
ER_INTERNAL void er__index_of(const er_ref *ref, int64_t idx, int64_t *index);
/* ER_OK when the view out (NULL: no view, the shape asked for alone) has the shape shape[0 .. nd) of output o,
 * allowing trailing dimensions of size 1 (as torch keeps them); else ER_ERR_OUTPUT naming both shapes. */
ER_INTERNAL er_status er__out_shape_fits(const er_ref *ref, int o, const er_tensor *out, int nd, const int64_t *shape);

/* A bracket of element idx's exact result (the module's bracket, or its exact double and the doubles next to it;
 * NaN, and ER_OK, where an op gives no finite one). */
ER_INTERNAL er_status er__ref_bracket(const er_ref *r, int64_t idx, double *mid, double *lo, double *hi);

/* The module's cursor_inner_run for elements begin .. begin + m - 1 of r (its cursor cur), or its cursor_inner at
 * effort 0 element by element where it gives no run. */
ER_INTERNAL void er__cursor_inner_run(const er_op_module *mod, void *cur, int64_t begin, int64_t m, double *lo,
                                      double *hi, double *blo, double *bhi, uint8_t *ok);

/* The modules of the table (er__modules, src/ops/modules.c); a module is named here only where another module's code
 * asks which op a reference is. */
extern const er_op_module er__tensor_module, er__quantize_module, er__chain_module, er__matmul_module, er__sum_module,
    er__mean_module, er__max_module, er__softmax_module, er__log_softmax_module, er__rmsnorm_module,
    er__layernorm_module, er__attention_module, er__attention_fp8_module, er__softmax_backward_module,
    er__log_softmax_backward_module, er__layer_norm_backward_module, er__rmsnorm_backward_module,
    er__cross_entropy_module, er__attention_backward_module;
/* The table itself, ending in NULL. */
extern const er_op_module *const er__modules[];

/* A share's record of the elements whose sets hold their outputs, kept as the engine keeps it (er_sink_record) but
 * as a tally (er__sink_tally) and the widest such set's element (er__sink_widest), given to the sink at the share's
 * end; every other element is put as it comes. on = 0: every element put (the sets wanted, the output not read,
 * elements not in increasing order, or EXACTREF_FAST=0). */
typedef struct er_row_rec {
    int on;
    er_sink_tally t;
    double wrel, wy;
    int64_t widx;
    er_cset wc;
    int simd;       /* er__simd() */
    double *buf;    /* a row's scratch for its runs (cap elements), freed by er__row_rec_end */
    int64_t cap;
    const double *ys; /* the outputs of the elements put (from the first), read by the caller (NULL: the sink's) */
} er_row_rec;

/* A share's record at its start (in_order: its elements come in increasing order) and at its end (its scratch freed;
 * where st is ER_OK, the tally and the widest recorded set given to the sink). */
ER_INTERNAL void er__row_rec_begin(er_row_rec *rec, const er_sink *sk, int in_order);
ER_INTERNAL void er__row_rec_end(er_row_rec *rec, er_sink *sk, er_status st);
/* A row's sets from the compute-format sets cv (with the exact and correctly rounded results) into the sink, through
 * the record: elements idx[0 .. n) (idx NULL: base .. base + n), in increasing order where the record is on. */
ER_INTERNAL void er__row_put(er_sink *sk, er_row_rec *rec, const int64_t *idx, int64_t base, int64_t n,
                             const er_cval *cv, const double *ex, const double *rd);
/* A row decided in runs by its module: er__row_scratch gives the record's scratch for a row of n elements (4 n
 * doubles, the first 2 n the sets' ends lo and hi for the module to fill) or NULL where the row cannot be decided so
 * (the record off, the output's format, no memory); the module writes each element's output set where it is a finite
 * interval of O with the correctly rounded result in it (what er__cset_build with any = 1 gives), lo[q] NaN
 * elsewhere, and the exact and correctly rounded results ex and rd; er__row_put_sets then records the row (elements
 * base .. base + n - 1, in increasing order), asking set() for the whole set of each element whose lo is NaN or whose
 * output lies outside its set. */
typedef void (*er_row_set_fn)(const void *ctx, int64_t q, er_cset *c);
ER_INTERNAL double *er__row_scratch(er_sink *sk, er_row_rec *rec, int64_t n);
ER_INTERNAL void er__row_put_sets(er_sink *sk, er_row_rec *rec, int64_t base, int64_t n, const double *ex,
                                  const double *rd, er_row_set_fn set, const void *ctx);
/* er__row_put_sets for a row whose sets are intervals [flo, fhi] of F (er__cval_from_ival), after er__row_scratch. */
ER_INTERNAL void er__row_put_ivals(er_sink *sk, er_row_rec *rec, int64_t base, int64_t n, const er_fmt_info *F,
                                   const double *flo, const double *fhi, const double *ex, const double *rd);
/* er__row_put with each element's whole set from set(ctx, k, c) (k: its place in the row), for an op whose sets are not
 * all er__cset_build's with any = 1: set must give that set wherever rd[k] is a finite value of the sink's format (the
 * runs decide those elements from cv and rd alone) and may give any other elsewhere. */
ER_INTERNAL void er__row_put_with(er_sink *sk, er_row_rec *rec, const int64_t *idx, int64_t base, int64_t n,
                                  const er_cval *cv, const double *ex, const double *rd, er_row_set_fn set,
                                  const void *ctx);
/* Row `row`'s sets (n elements, outputs ys read by the caller) into sk, through the share's record rec (begun with
 * the rows in increasing order; NULL or off: element by element), or the one element `only` (>= 0) given to sk as the
 * widest set's candidate. */
ER_INTERNAL void er__row_put_out(er_sink *sk, er_row_rec *rec, int64_t row, int64_t n, const er_cval *cv,
                                 const double *ex, const double *rd, const double *ys, int64_t only);

#endif

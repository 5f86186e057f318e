/* module.h: the interface between the covers engine (src/covers/) and the op modules (src/ops/); docs/design.md.
 *
 * An op module knows its op: the shapes of its outputs, which standards apply to it, and the set of every output
 * element under a standard. It hands each set to a sink and never classifies an output or writes a report. The
 * engine owns the sinks: it reads the kernel's output, classifies each element against its set, records the
 * report (counts, first failing elements, worst element, widest set) and the sets when they are asked for, and
 * merges the sinks of a module's threads in element order. The engine reaches an op only through its module's
 * table; a module reaches src/enclose/, src/exact/, src/format/, src/core/ and the functions of this header. */
#ifndef ER_MODULE_H
#define ER_MODULE_H

#include "core/internal.h"
#include "enclose/anyorder.h" /* er_cval */

/* The covering set of one output element (docs/reference/classes.md). */
typedef struct er_cset {
    double lo, hi;      /* finite part, values of the output format; empty when lo > hi */
    uint8_t nan_ok, nan_req, pinf_ok, ninf_ok;
    double rounded;     /* the exact result correctly rounded to the output format */
    double exact;       /* the exact result rounded to double */
} er_cset;

/* Where a module puts the sets of one output for one share of the work (the engine's). A module reads `out`, `O`
 * and `ov`; the rest is the engine's. */
typedef struct er_sink {
    const er_tensor *out;           /* the kernel's output view */
    const er_fmt_info *O;           /* its format */
    er_overflow ov;                 /* the standard's overflow rule for it */
    /* the engine's */
    int out_contig;
    er_report *rep;                 /* this share's partial report */
    double worst_dist;
    double *set_lo, *set_hi, *set_slack;
} er_sink;

/* Element idx's set (row-major index in the output); the engine reads the output there. The elements of one sink
 * come in increasing order. */
ER_INTERNAL void er__sink_put(er_sink *s, int64_t idx, const er_cset *c);

/* The sinks of one check: a module runs its work in nt shares (er__sinks_open), share t putting its elements into
 * er__sinks_at(sk, t, o) for each output o; shares cover increasing runs of elements, so that the engine merges them
 * in element order. */
typedef struct er_sinks er_sinks;
ER_INTERNAL er_status er__sinks_open(er_sinks *sk, int nt);
/* Share t's sink of output o; NULL when output o is not checked (the module need not compute its sets). */
ER_INTERNAL er_sink *er__sinks_at(er_sinks *sk, int t, int o);

/* An op module. */
typedef struct er_op_module {
    const char *name;
    int nout;                              /* its outputs */
    const char *const *out_names;          /* their names ("out" for one) */
    /* Output o's shape for the view out (which it may accept with extra unit dimensions); ER_ERR_OUTPUT with a
     * message when the view does not fit. */
    er_status (*out_shape)(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape);
    /* Whether the standard applies to the op (ER_ERR_STANDARD or ER_ERR_UNSUPPORTED with a message if not). */
    er_status (*check)(const er_ref *ref, const er_standard *std);
    /* The sets of every checked output's elements, into the sinks. */
    er_status (*covers)(const er_ref *ref, const er_standard *std, er_sinks *sk);
} er_op_module;

/* The module of a reference's op, or NULL for the ops still in the engine (matmul, sum, mean, max). */
ER_INTERNAL const er_op_module *er__module_of(const er_ref *ref);

/* ---- for modules ---- */

/* The output set from a compute-format set v through the output conversion (O, ov), with the exact result; with
 * any = 1 (an any-order set) the correctly rounded exact result joins it. */
ER_INTERNAL void er__cset_build(er_cset *c, const er_fmt_info *O, er_overflow ov, int any, const er_cval *v, double exact,
                                double rounded);
/* Whether the standard applies to the op: the options each op takes (shared by the modules and the engine's ops). */
ER_INTERNAL er_status er__standard_applies(const er_ref *ref, const er_standard *std);
/* The output shape of an op with one output of the reference's shape. */
ER_INTERNAL er_status er__out_shape_same(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape);

extern const er_op_module er__softmax_module, er__log_softmax_module, er__rmsnorm_module, er__layernorm_module;

#endif

/* module.h: the interface between the covers engine (src/covers/) and the op modules (src/ops/); docs/design.md.
 *
 * An op module knows its op: the shapes of its outputs, which standards apply to it, and the set of every output
 * element under a standard. It hands each set to a sink and never classifies an output or writes a report. The
 * engine owns the sinks: it reads the kernel's output, classifies each element against its set, records the
 * report (counts, first failing elements, worst element, widest set) and the sets when they are asked for, and
 * merges the sinks of a module's threads in element order. The engine reaches an op only through its module's
 * table; a module reaches src/enclose/, src/exact/, src/format/, src/core/, src/tensor/, the helpers of
 * ops/modkit.h and the functions of this header, never src/covers/. */
#ifndef ER_MODULE_H
#define ER_MODULE_H

#include <stdint.h> /* before mpfr.h: the intmax_t functions */
#include <mpfr.h>
#include "core/internal.h"
#include "format/format.h"
#include "core/setwidth.h"

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
    int enclose;                    /* er_ref_enclosure: no output to read; the sets only */
    double bug;                     /* the op's classic bug's relative move in this output (0: none) */
    uint8_t *set_flags;             /* er_ref_enclosure: each element's special values */
    int out_contig;
    er_report *rep;                 /* this share's partial report */
    double worst_dist;
    double *set_lo, *set_hi, *set_slack;
} er_sink;

/* The special values of set c as er_ref_enclosure's flags give them (ER_ENCLOSURE_*; NaN required: NaN alone). */
static inline uint8_t er__cset_flags(const er_cset *c) {
    return (uint8_t)((c->nan_ok || c->nan_req ? ER_ENCLOSURE_NAN : 0) | (c->nan_req ? ER_ENCLOSURE_NAN_ONLY : 0) |
                     (c->pinf_ok && !c->nan_req ? ER_ENCLOSURE_PINF : 0) |
                     (c->ninf_ok && !c->nan_req ? ER_ENCLOSURE_NINF : 0));
}

/* Element idx's set (row-major index in the output); the engine reads the output there. The elements of one sink
 * come in increasing order. */
ER_INTERNAL void er__sink_put(er_sink *s, int64_t idx, const er_cset *c);

/* Whether the engine reads an output at the elements put: 0 for er_ref_enclosure, which wants the sets alone (a
 * fast path that needs the output's values must not run then; every element goes through er__sink_put). */
ER_INTERNAL int er__sink_reads_output(const er_sink *s);

/* For a fast path, which decides elements' classes without computing each set: the share's classes array (the
 * output's elements, row-major), where it writes ER_CLASS_EXACT or ER_CLASS_COVERED for the elements it decides
 * (adding their numbers with er__sink_count) and ER_PENDING for those it puts later. It may write ER_CLASS_OUTSIDE
 * (counted the same way, as failing) for a finite output it proves outside its set, where it puts the report's
 * candidates among those elements: the first ER_REPORT_FIRST of them and every one whose distance may be the
 * largest. It writes no other class. */
#ifndef ER_PENDING
#define ER_PENDING 0xFF
#endif
ER_INTERNAL uint8_t *er__sink_classes(er_sink *s);
ER_INTERNAL void er__sink_count(er_sink *s, int cls, int64_t n);
/* A fast path's outputs found outside their sets without the sets' records (the matmul's, fast-path.md Lemma F3; a
 * chain's, chains.md): it marks each ER_FAST_OUT in the classes array and records it here with bounds dlo <= dhi of
 * the distance er_classify would give it; one record per share, zeroed first. Kept: their number, the largest dlo met,
 * and the candidates for the report's worst (those whose dhi reached the largest dlo met before them, pruned as it
 * grows). er__outs_mark returns 0, recording nothing, where the candidates' list cannot grow: the element is then
 * the engine's. */
#ifndef ER_FAST_OUT
#define ER_FAST_OUT 0xFC
#endif
typedef struct er_out_far { int64_t idx; double dhi; } er_out_far;
typedef struct er_outs { int64_t n; double dmax; er_out_far *far; int64_t nfar, cap; } er_outs;
ER_INTERNAL int er__outs_mark(er_outs *o, int64_t idx, double dlo, double dhi);
/* After the pass, over the shares' records: the report's candidates among the marked elements become ER_PENDING, for
 * the module to put: the first ER_REPORT_FIRST in element order (the report's first failures are among them and the
 * elements it puts) and each whose dhi reaches the largest dlo of all (the worst is among them and those it puts);
 * the others become ER_CLASS_OUTSIDE, counted into sk as decided without their sets. Frees the records' lists. */
ER_INTERNAL void er__outs_finish(er_outs *const *o, int nt, uint8_t *classes, int64_t n, er_sink *sk);
/* Of nout elements marked ER_FAST_OUT: the first ER_REPORT_FIRST in element order become ER_PENDING (their indices
 * into first[], when first is not NULL), the others ER_CLASS_OUTSIDE. Returns how many became pending. */
ER_INTERNAL int64_t er__outs_relabel(uint8_t *classes, int64_t n, int64_t nout, int64_t *first);
/* A decided element's finite set ends, written where er_covers_sets asks for the sets (s->set_lo not NULL). */
ER_INTERNAL void er__sink_set(er_sink *s, int64_t idx, double lo, double hi, double y);
/* A decided element's whole set (its exact values included) as a candidate for the report's widest set: its class
 * the classes array's, an OUTSIDE element's distance from c. */
ER_INTERNAL void er__sink_widest(er_sink *s, int64_t idx, const er_cset *c, double y);
/* What a fast path records of the elements it decided, where it computed their sets as the module would (the GPU's
 * softmax rows): their classes' counts and the record er__sink_put would have kept of them (the widest set apart, given
 * through er__sink_widest). Unlike er__sink_count, the elements count as seen: the report's resolution and classic-bug
 * notes stand for them. coarsest and finest are read where n_away > 0. */
typedef struct er_sink_tally {
    int64_t exact, covered, n_away, n_bug_tried, n_bug_seen, n_unbounded;
    double coarsest, finest;
} er_sink_tally;
ER_INTERNAL void er__sink_tally(er_sink *s, const er_sink_tally *t);
/* er__sink_put_value for a share that keeps a tally: an output y inside set c is classified (its class written) and
 * recorded in *t as er__sink_put would record it, *rel its set's width relative to its size (the widest set's rule;
 * -1: not counted), returning 1; any other element is put (returning 0). The share gives *t to er__sink_tally and its
 * widest recorded set to er__sink_widest at its end. */
ER_INTERNAL int er__sink_tally_put(er_sink *s, er_sink_tally *t, int64_t idx, const er_cset *c, double y, double *rel);
/* Whether er__sink_tally_run takes this sink's elements: the output read (no sets kept) and an fp32, fp16 or bf16
 * output viewed in its own format. */
ER_INTERNAL int er__sink_tally_runs(const er_sink *s);
/* er__sink_tally_put over the n elements idx0 .. idx0 + n - 1 (a sink er__sink_tally_runs takes), each set the finite
 * interval [lo[q], hi[q]] of O (its correctly rounded result rd[q] within it, its exact result ex[q]; lo[q] NaN: a set
 * of another form), y[q] the output: an output inside its set, whose classic-bug test needs no overflow rule and whose
 * set is not every finite value of O is classified, its class written and tallied into *t and rel[q] set as
 * er__sink_tally_put would; every other element's class is ER_PENDING and rel[q] -1, for the caller to put. Loops
 * that vectorise (simd: er__simd()'s level). Returns the number pending. */
ER_INTERNAL int64_t er__sink_tally_run(er_sink *s, er_sink_tally *t, int64_t idx0, int64_t n, const double *lo,
                                       const double *hi, const double *ex, const double *rd, const double *y,
                                       double *rel, int simd);
/* A chain's failing element idx, put already: the most leading stages whose set holds its output (er_element's
 * stage), recorded where the report keeps the element. */
ER_INTERNAL void er__sink_stage(er_sink *s, int64_t idx, int stage);
/* er__sink_put with the element's output value y already read (from a copy of the output). */
ER_INTERNAL void er__sink_put_value(er_sink *s, int64_t idx, const er_cset *c, double y);

/* The sinks of one check: a module runs its work in nt shares (er__sinks_open), share t putting its elements into
 * er__sinks_at(sk, t, o) for each output o; shares cover increasing runs of elements, so that the engine merges them
 * in element order. */
typedef struct er_sinks er_sinks;
ER_INTERNAL er_status er__sinks_open(er_sinks *sk, int nt);
/* Share t's sink of output o; NULL when output o is not checked (the module need not compute its sets). */
ER_INTERNAL er_sink *er__sinks_at(er_sinks *sk, int t, int o);
/* Whether output o is checked (before the sinks are open too). */
ER_INTERNAL int er__sinks_checks(const er_sinks *sk, int o);
/* The argument given to er__covers_module (NULL for the modules of the table). */
ER_INTERNAL void *er__sinks_arg(er_sinks *sk);
/* Output o's classes array in its report (one byte per element; NULL when output o is not checked), before the sinks
 * are open too: the GPU path registers it with CUDA while the GPU works. */
ER_INTERNAL uint8_t *er__sinks_classes(er_sinks *sk, int o);
/* A module run through er__covers_module declines the check (the GPU path, for what it does not take): it puts no
 * element, and its caller checks another way. A module of the table may not decline: the call is then refused with
 * ER_ERR_INTERNAL, as for any element it does not put. */
ER_INTERNAL void er__sinks_decline(er_sinks *sk);

/* An op module. */
typedef struct er_op_module {
    const char *name;
    int nout;                              /* its outputs */
    const char *const *out_names;          /* their names ("out" for one) */
    size_t priv_size;                      /* its state's bytes (er_ref.priv, zeroed when the reference is made) */
    /* Releases what the state holds (not the state itself, which er_ref_free frees with the reference); NULL: the
     * state holds nothing of its own. Called on partly built references too (their fields zero where not set). */
    void (*destroy)(er_ref *ref);
    unsigned takes;                        /* the options only some ops take that it takes (ER_TAKES_* of modkit.h) */
    /* Output o's shape for the view out (which it may accept with extra unit dimensions); ER_ERR_OUTPUT with a
     * message naming both shapes when the view does not fit. out NULL: the shape alone (er_ref_output_shape). */
    er_status (*out_shape)(const er_ref *ref, int o, const er_tensor *out, int *ndim, int64_t *shape);
    /* Whether the standard applies to the op (ER_ERR_STANDARD or ER_ERR_UNSUPPORTED with a message if not). */
    er_status (*check)(const er_ref *ref, const er_standard *std);
    /* The sets of every checked output's elements, into the sinks. */
    er_status (*covers)(const er_ref *ref, const er_standard *std, er_sinks *sk);
    /* er_emulate: the one value of each element under a fully fixed standard, into out (checked against the op and
     * the standard, its elements distinct). NULL: the op's results are never fixed. */
    er_status (*emulate)(const er_ref *ref, er_tensor *out, const er_standard *std);
    /* er_ref_exact: element idx's exact result rounded to double, and correctly rounded to f. NULL: not given. */
    er_status (*exact)(const er_ref *ref, int64_t idx, const er_fmt_info *f, double *exact, double *rounded);
    /* Nonzero where the sets' exact values are near ones (a chain's: the stages at a double within a few ulps of the
     * base's exact result): the engine then takes the exact values of the report's elements (first failures, worst,
     * widest) from exact once the check is done, so that a report holds the exact result rounded to double. */
    int report_exact;
    /* er_ref_rounded: every element correctly rounded into out (checked). NULL: element by element through exact. */
    er_status (*rounded)(const er_ref *ref, er_tensor *out);
    /* er_ref_exact_mpfr: element idx's exact result into out. NULL: not given. */
    er_status (*exact_mpfr)(const er_ref *ref, int64_t idx, mpfr_ptr out);
    /* A bracket of element idx's exact result, cheaper than exact: doubles lo <= exact <= hi and mid in [lo, hi]
     * (a module whose sets are built on another reference's values asks for it: er__ref_bracket in modkit.h). NULL:
     * exact's double and its neighbours. */
    er_status (*bracket)(const er_ref *ref, int64_t idx, double *mid, double *lo, double *hi);
    /* Single elements' sets of the op's first output in format E under std, for a module whose sets are built on
     * this reference's values without wanting them all (the chain's fast decision, docs/algorithms/chains.md). open:
     * a cursor (NULL where it gives none for this standard, or without memory: the caller then computes the whole
     * enclosure); close frees it. NULL: never given. */
    void *(*cursor_open)(const er_ref *ref, const er_standard *std, const er_fmt_info *E);
    /* Two values lo <= hi of E that element idx's set holds (so it holds every value between them), at effort 0
     * (cheap) or 1 (tighter, costlier), and doubles blo <= bhi bracketing its exact result (as the module's bracket
     * would); 0 where it gives none. */
    int (*cursor_inner)(void *cur, int64_t idx, int effort, double *lo, double *hi, double *blo, double *bhi);
    /* cursor_inner at effort 0 for elements begin .. begin + m - 1 at once: ok[i] its return value for element
     * begin + i, and where it is 1 the four values it gives (elsewhere they mean nothing). NULL: element by element
     * (er__cursor_inner_run in modkit.h). */
    void (*cursor_inner_run)(void *cur, int64_t begin, int64_t m, double *lo, double *hi, double *blo, double *bhi,
                             uint8_t *ok);
    /* Element idx's set, the one er_ref_enclosure gives (its exact and rounded values left NaN). */
    er_status (*cursor_set)(void *cur, int64_t idx, er_cset *c);
    void (*cursor_close)(void *cur);
    /* The reference's input views and their names, at most cap (er__ref_inputs): every view it reads. */
    int (*inputs)(const er_ref *ref, const er_tensor **views, const char **names, int cap);
    /* er_ref_fast: whether the reference decides its elements on a fast path. NULL: never. */
    int (*fast)(const er_ref *ref);
    /* The relative move of the op's classic bug in output o (its effect on every element of a row: each output
     * becomes its value times 1 + the move, so positive where the bug enlarges the outputs), with what the bug is in
     * *what (static text); 0 where it names none. The engine gives each element's set that output too, and notes
     * in the report that such a bug may pass where every set of the output is at least that wide or holds it at
     * every element (er_report's blind_rel, n_bug_seen). NULL: none. */
    double (*classic_bug)(const er_ref *ref, int o, const char **what);
} er_op_module;

/* The module of a reference's op (every op has one). */
ER_INTERNAL const er_op_module *er__module_of(const er_ref *ref);
/* covers of one output (the op's first) through a module that is not the reference's own (the GPU matmul path's),
 * with an argument for its covers (er__sinks_arg). */
ER_INTERNAL er_status er__covers_module(er_report *rep, const er_op_module *m, const er_ref *ref, const er_tensor *out,
                                        const er_standard *std, void *arg);

/* The checks er__covers_module makes of output o's view out and std before any work (the standard, the view, its
 * shape, the op's check of the standard), for a device path that copies its tensors before it runs the module. */
ER_INTERNAL er_status er__covers_precheck(const er_op_module *m, const er_ref *ref, int o, const er_tensor *out,
                                          const er_standard *std);
/* er_covers_outputs through module m (not the reference's own, as er__covers_module; m->nout outputs, outs[o] NULL
 * where output o is not checked), with an argument for its covers. */
ER_INTERNAL er_status er__covers_module_outputs(er_report *reps, const er_op_module *m, const er_ref *ref,
                                                const er_tensor *const *outs, const er_standard *std, void *arg);
/* The engine's services to the calls built on it (src/covers/). A report after its call: refused (zeroed, failing,
 * with the status and the last error's message) when st is an
 * error, else marked filled. Every public call that fills a report ends with it (report.c). */
ER_INTERNAL void er__report_finish(er_report *rep, er_status st);
/* The guard of a report whose classes the library allocated, in host memory (classes) or device memory (dev; NULL
 * where none): er_report_clear frees only such arrays. */
ER_INTERNAL uint64_t er__report_guard(const uint8_t *classes, const void *dev);
/* Frees a report's classes kept in device memory (src/cuda/device.c; built with the CUDA toolkit only). */
ER_INTERNAL void er__dev_classes_free(void *dev);
/* er_covers without er__report_finish, for the calls built on it (covers.c). */
ER_INTERNAL er_status er__covers_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std);

/* What the engine reads of a reference: its op's name, its number of elements, and the row-major position of an
 * index (ER_ERR_INDEX where it is out of range). */
ER_INTERNAL const char *er__op_name(const er_ref *r);
ER_INTERNAL int64_t er__ref_numel(const er_ref *r);
ER_INTERNAL er_status er__ref_index(const er_ref *r, const int64_t *index, int64_t *idx);
/* The reference's input views (x or A, then B or the weight, then the bias; a chain's base's, then its stages'), at
 * most cap of them, and their names; their number. */
ER_INTERNAL int er__ref_inputs(const er_ref *r, const er_tensor **views, const char **names, int cap);

#endif

/* devrec.h: what the row paths on the GPU (softmax, rmsnorm) share on both sides: a block's tally of the elements it
 * decided (the engine's record of them, er_sink_record), and its sum into a sink on the host. */
#ifndef ER_DEVREC_H
#define ER_DEVREC_H

#include <stdint.h>

/* One block's tally of the rows it decided. */
typedef struct er_dev_part {
    unsigned long long exact, covered, n_away, bug_tried, bug_seen, unbounded;
    double coarsest, finest;   /* over the n_away elements whose sets lie away from 0 */
    double widest_rel;         /* the widest set's relative width (-1: none) and its element */
    long long widest_idx;
} er_dev_part;

/* An element a path decided, decided again by its one-element kernel for the report's widest set: its set [lo, hi] in
 * the output format (the correctly rounded result joined), its correctly rounded and exact results, its output; ok 0
 * where the kernel did not decide it. */
typedef struct er_dev_cset { double lo, hi, rounded, exact, y; int ok; } er_dev_cset;

#ifdef __cplusplus
extern "C" {
#endif
/* The blocks that keep the GPU busy on rows rows (8 per multiprocessor, at most one per row). */
int er__dev_blocks(int64_t rows);
/* The np rows listed in rows[] of x (format x_fmt: 0 fp32, 1 fp16, 2 bf16) and out (out_fmt), rows of n contiguous
 * elements, as doubles: xs[np n], ys[np n]; 0 or a cudaError_t value, the work queued on `stream`. */
int er__dev_gather(const int64_t *rows, int64_t np, const void *x, int x_fmt, const void *out, int out_fmt, int64_t n,
                   double *xs, double *ys, void *stream);
#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include "ops/module.h"

/* The blocks' tallies into sink sk; the widest decided set's element (the first of the widest; -1: none). */
static inline int64_t er_dev_tally(const er_dev_part *parts, int blocks, er_sink *sk) {
    er_sink_tally t = {0, 0, 0, 0, 0, 0, 0, 0};
    double wrel = -1;
    int64_t widx = -1;
    for (int b = 0; b < blocks; b++) {
        const er_dev_part *p = &parts[b];
        t.exact += (int64_t)p->exact;
        t.covered += (int64_t)p->covered;
        if (p->n_away) {
            if (!t.n_away || p->coarsest > t.coarsest) t.coarsest = p->coarsest;
            if (!t.n_away || p->finest < t.finest) t.finest = p->finest;
            t.n_away += (int64_t)p->n_away;
        }
        t.n_bug_tried += (int64_t)p->bug_tried;
        t.n_bug_seen += (int64_t)p->bug_seen;
        t.n_unbounded += (int64_t)p->unbounded;
        if (p->widest_rel >= 0 && (p->widest_rel > wrel || (p->widest_rel == wrel && p->widest_idx < widx))) {
            wrel = p->widest_rel;
            widx = p->widest_idx;
        }
    }
    er__sink_tally(sk, &t);
    return widx;
}
#endif

#endif

/* xent_internal.h: cross_entropy's module (src/ops/xentmod.c) as its GPU path (src/cuda/devxent.c) runs it: the plan
 * of a standard, and a reference's rows on a device. */
#ifndef ER_XENT_INTERNAL_H
#define ER_XENT_INTERNAL_H

#include "ops/modkit.h"
#include "ops/ref_internal.h"
#include "enclose/xent.h"

/* A cross_entropy reference whose logits and outputs lie on a device (their views' data device pointers, which the
 * module never reads): how a row comes to the host, and the rows a pass on the GPU gave whole. */
typedef struct er_xent_dev er_xent_dev;
struct er_xent_dev {
    /* Row r's logits (C doubles) into x and, where y is not NULL, its dlogits outputs into y. */
    er_status (*load)(const er_xent_dev *d, int64_t r, double *x, double *y);
    /* Per row: 1 where the GPU gave the row whole: its gradient's classes (where dlogits is checked) are in the
     * report's array, counted in counts, and, for a row not ignored, its sums are sums[r]; 0 where the host takes the
     * row. */
    const uint8_t *whole;
    const er_xent_rowsum *sums;
    int64_t counts[2]; /* the exact and covered classes of those rows */
    void *ctx;         /* load's */
};
/* Attaches d to ref (a cross_entropy reference): its covers then takes the rows as d says. */
ER_INTERNAL void er__xent_attach_dev(er_ref *ref, const er_xent_dev *d);
/* The plan of ref's rows under std (checked) for a gradient of output format G (NULL: not checked) with overflow rule
 * gov, the loss checked or not. */
ER_INTERNAL void er__xent_plan_of(const er_ref *ref, const er_standard *std, const er_fmt_info *G, er_overflow gov,
                                  int want_loss, er_xent_plan *pl);

#endif

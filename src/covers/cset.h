/* cset.h: the covering set of one output element (docs/reference/classes.md). */
#ifndef ER_CSET_H
#define ER_CSET_H

#include "core/internal.h"

typedef struct er_cset {
    double lo, hi;      /* finite part, values of the output format; empty when lo > hi */
    uint8_t nan_ok, nan_req, pinf_ok, ninf_ok;
    double rounded;     /* the exact result correctly rounded to the output format */
    double exact;       /* the exact result rounded to double */
} er_cset;

#endif

/* standard.h: the standard's internals other modules read (src/standard/standard.c). */
#ifndef ER_STANDARD_H
#define ER_STANDARD_H

#include "format/format.h"

/* er_standard_is_fixed on format descriptors (which may be er__fmt_one()). */
ER_INTERNAL int er__standard_is_fixed_info(const er_standard *s, const er_fmt_info *a, const er_fmt_info *b);

#endif

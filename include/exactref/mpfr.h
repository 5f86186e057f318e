/* exactref/mpfr.h: the MPFR side of the API (include <mpfr.h> first is not needed; this header does). */
#ifndef EXACTREF_MPFR_H
#define EXACTREF_MPFR_H

#include <stdint.h> /* before mpfr.h: enables its intmax_t functions */
#include <mpfr.h>
#include <exactref/exactref.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x correctly rounded to f in direction `mode` with gradual underflow and overflow rule `ov`, whatever x's
 * precision and exponent. */
ER_API er_status er_round_mpfr(double *out, er_format f, mpfr_srcptr x, er_round mode, er_overflow ov);
/* The exact result of the reference at `index`, as an MPFR value; `out`'s precision is raised as needed so
 * the value is exact. NaN or +-inf for special results. */
ER_API er_status er_ref_exact_mpfr(mpfr_ptr out, const er_ref *ref, const int64_t *index);

#ifdef __cplusplus
}
#endif
#endif

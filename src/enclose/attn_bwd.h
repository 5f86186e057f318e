/* attn_bwd.h: the sets of attention's backward pass, dQ, dK and dV from the saved O and LSE
 * (docs/algorithms/attention-backward.md). */
#ifndef ER_ATTN_BWD_H
#define ER_ATTN_BWD_H

#include <mpfr.h>
#include "enclose/attention.h"

typedef struct er_abwd_plan {
    er_attn_plan fwd;      /* the scores (Lemma A1, Theorem A2's delta) and, without a saved LSE, the forward's LSE */
    int has_lse;           /* the kernel's own LSE is given (else it is any of Theorem A3's set) */
    double u, uin;         /* the compute format's unit roundoff (fp32); tf32 operands' (2^-11) or 0 */
    double up, etap;       /* P and dS rounded to the inputs' format: its unit roundoff and least subnormal */
    double pmax;           /* and its largest value (+inf where they stay in the compute format) */
    double uqs, uks;       /* qk_scale=input: q and k pre-scaled and rounded to their formats (unit roundoffs) or 0 */
    double etaqs, etaks;   /* and their least subnormals (0 without qk_scale=input) */
    double gP;             /* a dot of Dv products in the compute format errs by at most gP times their magnitudes */
    double gS, gV;         /* dQ's and dK's sums (gS, per term, with the scale's roundings) and dV's (gV) */
    double gd;             /* a double sum of the centres errs by at most gd times its terms' magnitudes */
    int64_t nq, nk;        /* the most terms of a dQ element's sum (Sk) and of a dK or dV element's (H / Hkv Sq) */
} er_abwd_plan;

/* One query row: q (D values), the saved o and the gradient g = dO (Dv values each), the saved LSE (has_lse), and
 * its unmasked keys j0 .. j0 + n - 1. */
typedef struct er_abwd_row {
    const double *q, *o, *g;
    double lse;
    int64_t j0, n;
} er_abwd_row;

/* A row's values per key t = 0 .. n - 1 (arrays of at least Sk): pm, P's centre; wv, dV's weight (times |g_d|);
 * ds, dS's centre; w, dQ's and dK's weight (times |k_jd| or |q_d|); dsa, a bound of |dS| (qk_scale=input's
 * absolute part); ex and exv, the exact enclosure's weights of dQ and dK, and of dV. */
typedef struct er_abwd_keys {
    double *pm, *wv, *ds, *w, *dsa, *ex, *exv, *pa; /* pa: a bound of |P| as the kernel multiplies dO by it */
} er_abwd_keys;

/* Theorem B1 for one row: the centres and weights of its keys into out; 0 where the row claims nothing (a value not
 * finite, or bounds whose premises fail). vn: upper bounds of the keys' ||v_j||_2. */
ER_INTERNAL int er__abwd_row(const er_abwd_plan *pl, const er_attn_kv *kv, const double *vn, const er_abwd_row *row,
                             er_attn_work *w, er_abwd_keys *out);

/* A kv head's rows for the MPFR enclosures. */
typedef struct er_abwd_head {
    const er_abwd_row *rows;
    int64_t nrows;
    const er_attn_kv *kv;
} er_abwd_head;

/* The terms of the last sum enclosed at each precision (a dQ row's dS_j, a key's dS_ij or P_ij over its rows), kept
 * for the next column of the same row or key: every column's sum has the same terms, only their coefficients
 * differ. Zeroed before the first use; er__abwd_mcache_forget when the head's rows change; er__abwd_mcache_free. */
typedef struct er_abwd_mcache {
    struct er_abwd_mslot *slot[3];
} er_abwd_mcache;
ER_INTERNAL void er__abwd_mcache_forget(er_abwd_mcache *mc);
ER_INTERNAL void er__abwd_mcache_free(er_abwd_mcache *mc);

/* The exact dQ of row a, column d (which 0), dK (1) or dV (2) of key a, column d, between lo and hi, enclosed at
 * precision p (lo and hi initialised by the caller); mc: the terms of the last call at p, or NULL. */
ER_INTERNAL void er__abwd_exact_mpfr(const er_abwd_plan *pl, const er_abwd_head *hd, er_abwd_mcache *mc, int which,
                                     int64_t a, int64_t d, mpfr_prec_t p, mpfr_t lo, mpfr_t hi);

#endif

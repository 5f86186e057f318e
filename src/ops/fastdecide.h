/* fastdecide.h: the matmul fast path's decision (docs/algorithms/fast-path.md), one copy for the host (dotmod.c) and
 * the GPU (cuda/devmm.cu). Plain double arithmetic in which every operation rounds to nearest once: the host build
 * has -ffp-contract=off, the GPU build -fmad=false. Every quantity is an upper (or lower) bound of what the proof
 * names: each constant is inflated (or deflated) by 2^-40, far more than the few roundings to nearest applied to it
 * (each at most 2^-53 relative; no overflow or underflow below lim). */
#ifndef ER_FASTDECIDE_H
#define ER_FASTDECIDE_H

#include <math.h>
#include "core/setwidth.h"

#ifdef __CUDACC__
#define ER_HD __host__ __device__
#else
#define ER_HD
#endif

/* An element neither stage decides: the exact engine's. The decided classes are 0 (exact) and 1 (covered), and
 * ER_FAST_OUT for an output found outside its set (Lemma F3), until the report's candidates among those are sent to
 * the engine and the others become ER_CLASS_OUTSIDE. */
#define ER_PENDING 0xFF
#define ER_FAST_OUT 0xFC
#define ER_FAST_UP (1.0 + 0x1p-40)
#define ER_FAST_DN (1.0 - 0x1p-40)

/* The constants of the decision for an element count K and the standard's bound (er__dot_fast_consts in dotmod.c),
 * and the formats: out_fmt 0 for an fp32 compute format and fp32 output, 1 fp32 and fp16, 2 fp32 and bf16, -1 any
 * other pair (the host's general rounding). */
typedef struct er_fast_consts { double gK, c1lo, c1hi, c2lo, c2hi, g, lim, eps, eta; int out_fmt; } er_fast_consts;

/* Stage 1's bracket of P = sum |a_k b_k| for the output S_hat = Sh and the rows' norm bounds an, bn: at most an bn
 * (Cauchy-Schwarz), at least |Sh| less Sh's error bound. */
ER_HD static inline void er_fast_stage1(const er_fast_consts *fc, double Sh, double an, double bn, double *Plo,
                                        double *Phi) {
    double hi = an * bn * ER_FAST_UP, lo = (fabs(Sh) - fc->gK * hi * ER_FAST_UP) * ER_FAST_DN;
    *Phi = hi;
    *Plo = lo > 0 ? lo : 0.0;
}

/* For P in [Plo, Phi]: S lies in [slo, shi], and the engine's set edges RN_O(RU_F(S - B)), RN_O(RD_F(S + B)) are at
 * most RN_O(RU_F(tlo)) and at least RN_O(RD_F(thi)), and at least RN_O(RU_F(ulo)) and at most RN_O(RD_F(uhi)),
 * whatever S and bound B the exact engine holds. 0 when overflow is possible (the element is then pending, and the
 * fields mean nothing). */
typedef struct er_fast_bracket { double slo, shi, tlo, thi, ulo, uhi, blo, bhi; } er_fast_bracket;

ER_HD static inline int er_fast_bracket_of(const er_fast_consts *fc, double Sh, double Plo, double Phi,
                                           er_fast_bracket *b) {
    double d = fc->gK * Phi;
    d = (d + 0x1p-61 * (fabs(Sh) + d)) * ER_FAST_UP; /* with the engine's 64-bit bracket of S */
    double Blo = fc->c1lo * Plo + fc->c2lo, Bhi = (fc->c1hi * Phi + fc->c2hi) * ER_FAST_UP;
    /* every field is written either way, without a branch, so that a loop of this vectorises */
    int ok = (((fc->g * Phi + fc->c2hi) * ER_FAST_UP >= fc->lim) | ((fabs(Sh) + d + Bhi) * ER_FAST_UP >= fc->lim)) ^ 1;
    /* each sum below is one rounding to nearest: x + |x| 2^-50 + 2^-1070 bounds it above */
    double shi = Sh + d, slo = Sh - d;
    shi += fabs(shi) * 0x1p-50 + 0x1p-1070;
    slo -= fabs(slo) * 0x1p-50 + 0x1p-1070;
    double tlo = shi - Blo, thi = slo + Blo, ulo = slo - Bhi, uhi = shi + Bhi;
    b->slo = slo;
    b->shi = shi;
    b->blo = Blo;
    b->bhi = Bhi;
    b->tlo = tlo + (fabs(tlo) * 0x1p-50 + 0x1p-1070);
    b->thi = thi - (fabs(thi) * 0x1p-50 + 0x1p-1070);
    b->ulo = ulo - (fabs(ulo) * 0x1p-50 + 0x1p-1070);
    b->uhi = uhi + (fabs(uhi) * 0x1p-50 + 0x1p-1070);
    return ok;
}

/* The class of output y from the set's edge bounds elo = RN_O(RU_F(tlo)), ehi = RN_O(RD_F(thi)) and the rounded ends
 * r1 = RN_O(slo), r2 = RN_O(shi). For an fp32 compute format and output, elo = tlo and ehi = thi serve (a float y is
 * at least RU_F(tlo) exactly when it is at least tlo). The correctly rounded S lies in [r1, r2] (rounding is
 * monotone): y outside it is not the exact result. */
ER_HD static inline int er_fast_class(double y, double elo, double ehi, double r1, double r2) {
    if (!(y >= elo && y <= ehi)) return ER_PENDING;
    if (r1 == r2) return y == r1 ? 0 : 1;
    return y < r1 || y > r2 ? 1 : ER_PENDING;
}

/* An upper bound of er_set_rel(lo, hi) for every lo in [L1, L2] and hi in [H1, H2]: (H2 - L1) / d, d the least
 * max(|lo|, |hi|) can be, and 2 (a set on both sides of 0 has hi - lo <= 2 max(|lo|, |hi|)). Rounding is monotone:
 * fl(fl(hi - lo) / max(|lo|, |hi|)) is at most fl(fl(H2 - L1) / d), so an element whose bound is below a width w has
 * a width below w as the report computes it. */
ER_HD static inline double er_fast_rel_ub(double L1, double L2, double H1, double H2) {
    double mlo = L1 > 0 ? L1 : L2 < 0 ? -L2 : 0, mhi = H1 > 0 ? H1 : H2 < 0 ? -H2 : 0, d = mlo > mhi ? mlo : mhi;
    double q = d > 0 ? (H2 - L1) / d : 2.0;
    return q < 2.0 ? q : 2.0;
}

/* An upper bound of the engine's er_set_rel for the element whose bracket is b, from the one bound B both edges
 * share (fast-path.md, Lemma F1): with m the least |S| over [slo, shi] and w = shi - slo, the set's rel is at most
 * f(B) = (2 B + w + 2 dl) / (m + B - dl), dl = eps Z + eta for every magnitude Z of the set's values, and f is
 * monotone in B, so at most the larger of f(blo) and f(bhi) (and 2). Every sum and product below rounds to nearest
 * once and is moved by 2^-40 (the numerators up, the denominators down); the denominator's difference is taken
 * from a smaller minuend and a larger subtrahend, so its rounding cannot lift it above m + B - dl. */
ER_HD static inline double er_fast_rel_ub_shared(const er_fast_consts *fc, const er_fast_bracket *b) {
    double m = b->slo > 0 ? b->slo : b->shi < 0 ? -b->shi : 0.0;
    double as = fabs(b->slo) > fabs(b->shi) ? fabs(b->slo) : fabs(b->shi);
    double dl = (fc->eps * ((as + b->bhi) * ER_FAST_UP) + fc->eta) * ER_FAST_UP;
    double w2 = ((b->shi - b->slo) + 2.0 * dl) * ER_FAST_UP;
    double dlo = ((m + b->blo) * ER_FAST_DN - dl) * ER_FAST_DN, dhi = ((m + b->bhi) * ER_FAST_DN - dl) * ER_FAST_DN;
    if (!(dlo > 0)) return 2.0;
    double qlo = (2.0 * b->blo + w2) * ER_FAST_UP / dlo, qhi = (2.0 * b->bhi + w2) * ER_FAST_UP / dhi;
    double q = qlo > qhi ? qlo : qhi;
    return q < 2.0 ? q : 2.0;
}

/* Lemma F3 (fast-path.md): with the set's ends lo in [L1, L2] and hi in [H1, H2], a finite output y below L1 or
 * above H2 lies outside it; then the nearer end lies between *near and *far (ordered by distance from y), and
 * [*mlo, *mhi] holds the magnitudes of that range (*mlo 0 where it holds 0), for the distance's bounds
 * fl(|y - near|) / ulp(mhi) <= distance <= fl(|y - far|) / ulp(mlo). */
ER_HD static inline int er_fast_out_ends(double y, double L1, double L2, double H1, double H2, double *near,
                                         double *far, double *mlo, double *mhi) {
    if (y >= L1 && y <= H2) return 0;
    *near = y > H2 ? H2 : L1;
    *far = y > H2 ? H1 : L2;
    double a1 = fabs(*near), a2 = fabs(*far);
    *mhi = a1 > a2 ? a1 : a2;
    *mlo = (*near > 0 && *far > 0) || (*near < 0 && *far < 0) ? (a1 < a2 ? a1 : a2) : 0.0;
    return 1;
}

/* The engine's set from the bracket where the bracket decides it (fast-path.md, The sets): l = RN_O(RU_F(ulo)) and
 * h = RN_O(RD_F(uhi)), `same` when RN_O(RU_F(tlo)) = l and RN_O(RD_F(thi)) = h, joined with the correctly rounded
 * result, which lies in [r1, r2] = [RN_O(slo), RN_O(shi)]. 0 when an end is not decided (or the edges alone hold no
 * value). */
ER_HD static inline int er_fast_join(int same, double l, double h, double r1, double r2, double *lo, double *hi) {
    if (!same || l > h) return 0;
    if (l > r1) { if (r1 != r2) return 0; l = r1; }
    if (h < r2) { if (r1 != r2) return 0; h = r2; }
    *lo = l;
    *hi = h;
    return 1;
}

#endif

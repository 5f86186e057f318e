/* approx.c: the ends of an approximate function's results over an interval of exact values (ulp-slack.md).
 *
 * g(x) = x - U ulp(x) is increasing on each binade and on the negative axis, and drops at every positive power of
 * two (the spacing doubles there); so its least value over [a, b] is at a or at the least power of two in (a, b]
 * (Lemma U1). The upper end is the mirror image: x + U ulp(x) = -g(-x). */
#include <math.h>
#include "format/format.h"
#include "enclose/approx.h"
#include "enclose/ival.h"

/* ulp(x): the spacing of F upward from the power of two at or below |x| (the least subnormal below 2 min_normal). */
static double er_spacing(const er_fmt_info *F, double x) {
    double z = fabs(x);
    if (z < 2.0 * F->min_normal) return F->min_sub;
    int ex;
    frexp(z, &ex);
    return ldexp(1.0, ex - F->p);
}

/* A lower bound of x - U ulp(x): x less an upper bound of U ulp(x), rounded down (Lemma D13). */
static double er_g(const er_fmt_info *F, double U, double x) {
    return er__sum_dir(x, -er__mul_up(U, er_spacing(F, x)), 0);
}

/* A lower bound of min g over [a, b] (a <= b finite). */
static double er_g_min(const er_fmt_info *F, double U, double a, double b) {
    double m = er_g(F, U, a);
    if (a > 0) {
        int ex;
        frexp(a, &ex);
        double P = ldexp(1.0, ex); /* the least power of two above a */
        if (P <= b) {
            double gp = er_g(F, U, P);
            if (gp < m) m = gp;
        }
    }
    return m;
}

/* The lower end over exact values in [a, b] and correctly rounded values in [RN(a), RN(b)] (both readings). */
static double er_low(const er_fmt_info *F, double U, double a, double b) {
    if (a == -INFINITY) return -INFINITY;
    if (b == INFINITY) b = DBL_MAX;
    double ca = er__round_double(F, a, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    double cb = er__round_double(F, b, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE);
    if (cb == INFINITY) cb = F->max;
    double m = er_g_min(F, U, a, b);
    if (ca == INFINITY) return m;
    if (ca == -INFINITY) return -INFINITY;
    double mr = er_g_min(F, U, ca, cb);
    return mr < m ? mr : m;
}

void er__approx_ends_general(const er_fmt_info *F, double U, double a, double b, double *lo, double *hi) {
    double L = er_low(F, U, a, b), H = -er_low(F, U, -b, -a);
    *lo = L == -INFINITY ? -INFINITY : er__round_double(F, L, ER_ROUND_UP, ER_OVERFLOW_IEEE);
    *hi = H == INFINITY ? INFINITY : er__round_double(F, H, ER_ROUND_DOWN, ER_OVERFLOW_IEEE);
}

/* families.c: seeded input families (include/exactref/families.h; docs/reference/testing.md). Every value comes
 * from a counter-based hash of (seed, family, element, draw) and IEEE 754 operations that round once (sums,
 * products, ldexp), no libm function: the same bits on every machine. The normal draws are Irwin-Hall sums of 12
 * uniforms less 6 (mean 0, variance 1, within +-6). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/internal.h"
#include "format/format.h"
#include "tensor/tensor_internal.h"

static const char *const er_family_names[ER_FAMILY_COUNT] = {"normal", "positive", "cancellation", "wide", "near_max",
                                                             "subnormal", "ties", "specials", "offset", "integers",
                                                             "masked"};

const char *er_family_name(er_family family) {
    return (unsigned)family < ER_FAMILY_COUNT ? er_family_names[family] : NULL;
}

er_status er_family_parse(er_family *family, const char *name) {
    er__ok();
    ER_CHECK_NULL(family, "family");
    ER_CHECK_NULL(name, "name");
    for (int f = 0; f < ER_FAMILY_COUNT; f++)
        if (!strcmp(name, er_family_names[f])) { *family = (er_family)f; return ER_OK; }
    return er__fail(ER_ERR_INVALID,
                    "unknown family '%s': expected normal, positive, cancellation, wide, near_max, subnormal, "
                    "ties, specials, offset, integers or masked",
                    name);
}

/* splitmix64's finaliser. */
static uint64_t er_mix(uint64_t x) {
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Draw k of element i: a uniform double in [0, 1) (53 random bits). */
typedef struct er_draws { uint64_t key; } er_draws;

static double er_unit(const er_draws *d, int64_t i, int k) {
    return (double)(er_mix(er_mix(d->key ^ (uint64_t)i) ^ (uint64_t)k) >> 11) * 0x1p-53;
}

/* An integer uniform in [0, m). */
static int64_t er_below(const er_draws *d, int64_t i, int k, int64_t m) {
    int64_t v = (int64_t)(er_unit(d, i, k) * (double)m);
    return v < m ? v : m - 1;
}

static double er_normal(const er_draws *d, int64_t i) {
    double s = 0;
    for (int k = 0; k < 12; k++) s += er_unit(d, i, 16 + k);
    return s - 6.0;
}

static double er_sign(const er_draws *d, int64_t i) { return er_unit(d, i, 1) < 0.5 ? -1.0 : 1.0; }

/* Element i's value (row-major position i; n elements a row). */
static double er_family_value(const er_fmt_info *F, er_family fam, const er_draws *d, int64_t i, int64_t n) {
    int half = (F->p + 1) / 2;
    switch (fam) {
    case ER_FAMILY_NORMAL: return er_normal(d, i);
    case ER_FAMILY_POSITIVE: return fabs(er_normal(d, i)) + 0.0625;
    case ER_FAMILY_CANCEL: {
        int64_t j = i % n, first = i - j % 2;
        if (j % 2 == 0 && j + 1 == n) return er_normal(d, i); /* the last of an odd row: alone */
        double a = er_normal(d, first);
        if (j % 2 == 0) return a;
        return -(a + a * (2.0 * er_unit(d, i, 2) - 1.0) * ldexp(1.0, -half));
    }
    case ER_FAMILY_WIDE: {
        int E = F->emax / 4 < 60 ? F->emax / 4 : 60;
        return er_sign(d, i) * ldexp(1.0 + er_unit(d, i, 2), (int)er_below(d, i, 3, 2 * E + 1) - E);
    }
    case ER_FAMILY_NEAR_MAX: return er_sign(d, i) * (F->max / 4 + er_unit(d, i, 2) * (F->max - F->max / 4));
    case ER_FAMILY_SUBNORMAL:
        if (er_unit(d, i, 2) < 0.125) /* a subnormal of the format: k times its least value */
            return er_sign(d, i) * (double)(1 + er_below(d, i, 3, ((int64_t)1 << (F->p - 1)) - 1)) * F->min_sub;
        return er_sign(d, i) * ldexp(1.0 + er_unit(d, i, 3), F->emin / 2 + (int)er_below(d, i, 4, 5) - 2);
    case ER_FAMILY_TIES: return er_sign(d, i) * ldexp(1.0, (int)er_below(d, i, 2, F->p + 4) - (F->p + 1));
    case ER_FAMILY_SPECIALS: {
        double r = er_unit(d, i, 2);
        if (r < 3.0 / 48) return r < 1.0 / 48 && F->has_inf ? INFINITY : r < 2.0 / 48 && F->has_inf ? -INFINITY : NAN;
        return er_normal(d, i);
    }
    case ER_FAMILY_OFFSET: return ldexp(1.0, half) + er_normal(d, i);
    case ER_FAMILY_INTEGERS: return er_unit(d, i, 2) < 0.6 ? 0.0 : er_sign(d, i) * (double)(1 + er_below(d, i, 3, 4));
    default: { /* masked: the row's first masked lane m, 0 (all) in one row of 8, n (none) in three of 8 */
        int64_t row = i / n, j = i % n, m;
        double r = er_unit(d, -1 - row, 2);
        m = r < 0.125 ? 0 : r < 0.5 ? n : 1 + er_below(d, -1 - row, 3, n > 1 ? n - 1 : 1);
        return j >= m ? -INFINITY : er_normal(d, i);
    }
    }
}

er_status er_fill(const er_tensor *t, er_family family, uint64_t seed) {
    er__ok();
    ER_CHECK_NULL(t, "t");
    ER_RETURN_IF_ERROR(er__tensor_check(t, "t"));
    if ((unsigned)family >= ER_FAMILY_COUNT)
        return er__fail(ER_ERR_INVALID, "family %d: expected 0 to %d (er_family)", (int)family, ER_FAMILY_COUNT - 1);
    const er_fmt_info *F = er__fmt(t->format);
    if (family == ER_FAMILY_MASKED && !F->has_inf)
        return er__fail(ER_ERR_FORMAT, "masked rows need -inf, which %s does not have", F->name);
    if (family == ER_FAMILY_SPECIALS && F->no_nan)
        return er__fail(ER_ERR_FORMAT, "specials need NaN, which %s does not have", F->name);
    if (F->e8m0)
        return er__fail(ER_ERR_FORMAT, "%s holds scales (positive powers of two), not a family's values: write them "
                        "with er_encode", F->name);
    ER_RETURN_IF_ERROR(er__check_distinct(t));
    int64_t count = er_tensor_numel(t), n = t->shape[t->ndim - 1];
    er_draws d = {er_mix(seed ^ ((uint64_t)family << 56))};
    for (int64_t i = 0; i < count; i++) {
        double v = er_family_value(F, family, &d, i, n > 0 ? n : 1);
        er__store_value(t, i, v, isfinite(v) ? ER_OVERFLOW_SATURATE : ER_OVERFLOW_IEEE);
    }
    return ER_OK;
}

/* t-families.c: the seeded input families (er_fill; docs/reference/testing.md). The values are pinned bit for bit
 * (a checksum per family of a fixed fill: any change of the generator, or a machine computing another bit, fails);
 * a strided or transposed view gets the same values at the same logical positions; each family has the property
 * it is named for, in every format it is filled in; bad calls are refused and write nothing. */
#include <math.h>
#include <string.h>
#include "../common/er_test.h"

enum { R = 24, C = 33 };

/* FNV-1a over bytes. */
static uint64_t fnv(const void *p, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) { h ^= ((const uint8_t *)p)[i]; h *= UINT64_C(0x100000001b3); }
    return h;
}

static void fill32(float *x, er_family f, uint64_t seed) {
    er_tensor t;
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){R, C}, NULL, x), ER_OK);
    ER_REQUIRE(er_fill(&t, f, seed) == ER_OK, "%s: %s", er_family_name(f), er_last_error());
}

/* The bits of a fixed fill of each family: the same on every machine (no libm, one rounding per operation). */
START_TEST(values_are_pinned) {
    static const uint64_t want[ER_FAMILY_COUNT] = {
#include "families_pinned.inc"
    };
    static float x[R * C];
    for (int f = 0; f < ER_FAMILY_COUNT; f++) {
        fill32(x, (er_family)f, 12345);
        uint64_t h = fnv(x, sizeof x);
        ER_REQUIRE(h == want[f], "%s: checksum 0x%016llx, pinned 0x%016llx", er_family_name((er_family)f), (unsigned long long)h,
                   (unsigned long long)want[f]);
    }
}
END_TEST

/* A transposed view (column-major memory) holds the same values at the same logical positions; another seed gives
 * other values. */
START_TEST(layout_does_not_change_values) {
    static float a[R * C], b[R * C], c[R * C];
    for (int f = 0; f < ER_FAMILY_COUNT; f++) {
        fill32(a, (er_family)f, 7);
        er_tensor t;
        ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){R, C}, (int64_t[]){1, R}, b), ER_OK);
        ck_assert_int_eq(er_fill(&t, (er_family)f, 7), ER_OK);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++)
                ER_REQUIRE(memcmp(&a[i * C + j], &b[j * R + i], 4) == 0, "%s: [%d, %d] differs in a transposed view", er_family_name((er_family)f), i, j);
        fill32(c, (er_family)f, 8);
        ER_REQUIRE(memcmp(a, c, sizeof a) != 0, "%s: seeds 7 and 8 give the same values", er_family_name((er_family)f));
    }
}
END_TEST

/* Each family's property, in every format. */
START_TEST(families_have_their_properties) {
    static const er_format fmts[] = {ER_FP64, ER_FP32, ER_BF16, ER_FP16, ER_FP8_E4M3FN, ER_FP8_E5M2};
    static uint8_t buf[R * C * 8];
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        er_format fm = fmts[k];
        int p = er_format_precision(fm), half = (p + 1) / 2;
        double mx = er_format_max(fm);
        for (int f = 0; f < ER_FAMILY_COUNT; f++) {
            er_tensor t;
            ck_assert_int_eq(er_tensor_view(&t, fm, 2, (int64_t[]){R, C}, NULL, buf), ER_OK);
            er_status st = er_fill(&t, (er_family)f, 99);
            if (f == ER_FAMILY_MASKED && fm == ER_FP8_E4M3FN) { ck_assert_int_eq(st, ER_ERR_FORMAT); continue; }
            ER_REQUIRE(st == ER_OK, "%s in %s: %s", er_family_name((er_family)f), er_format_name(fm), er_last_error());
            int n_inf = 0, n_ninf = 0, n_nan = 0, n_sub = 0, full = 0, none = 0;
            for (int i = 0; i < R * C; i++) {
                double v = er_load(buf, fm, i);
                const char *fn = er_family_name((er_family)f);
                n_inf += v == INFINITY;
                n_ninf += v == -INFINITY;
                n_nan += isnan(v);
                n_sub += v != 0 && fabs(v) < er_format_min_normal(fm);
                switch (f) {
                case ER_FAMILY_POSITIVE: ER_REQUIRE(v > 0, "%s %s: %g", fn, er_format_name(fm), v); break;
                case ER_FAMILY_INTEGERS: ER_REQUIRE(v == floor(v) && fabs(v) <= 4, "%s %s: %g", fn, er_format_name(fm), v); break;
                case ER_FAMILY_NEAR_MAX: ER_REQUIRE(fabs(v) >= mx / 4 && fabs(v) <= mx, "%s %s: %g", fn, er_format_name(fm), v); break;
                case ER_FAMILY_TIES: { int e; double m = frexp(fabs(v), &e); ER_REQUIRE(m == 0.5, "%s %s: %g", fn, er_format_name(fm), v); break; }
                case ER_FAMILY_CANCEL:
                    if (i % C % 2 == 1) { /* with its pair: a small residue */
                        double a = er_load(buf, fm, i - 1);
                        ER_REQUIRE(fabs(a + v) <= fabs(a) * ldexp(1.0, -half) * 1.01 + 2 * er_format_ulp(fm, a),
                                   "%s %s: %g and %g", fn, er_format_name(fm), a, v);
                    }
                    break;
                case ER_FAMILY_OFFSET: ER_REQUIRE(fabs(v - ldexp(1.0, half)) <= 6.0 + er_format_ulp(fm, ldexp(1.0, half)), "%s: %g", fn, v); break;
                default: break;
                }
            }
            for (int r = 0; r < R && f == ER_FAMILY_MASKED; r++) { /* each row: finite values, then -inf to its end */
                int j = 0;
                while (j < C && isfinite(er_load(buf, fm, r * C + j))) j++;
                full += j == 0;
                none += j == C;
                for (int k2 = j; k2 < C; k2++) ER_REQUIRE(er_load(buf, fm, r * C + k2) == -INFINITY, "masked row %d lane %d", r, k2);
            }
            if (f == ER_FAMILY_MASKED) ER_REQUIRE(full > 0 && none > 0 && full + none < R, "masked %s: %d full, %d none", er_format_name(fm), full, none);
            if (f == ER_FAMILY_SPECIALS) {
                int has_inf = fm != ER_FP8_E4M3FN;
                ER_REQUIRE(n_nan > 0 && (has_inf ? n_inf > 0 && n_ninf > 0 : n_inf + n_ninf == 0), "specials %s: %d inf, %d -inf, %d NaN",
                           er_format_name(fm), n_inf, n_ninf, n_nan);
            } else if (f != ER_FAMILY_MASKED) {
                ER_REQUIRE(n_inf + n_ninf + n_nan == 0, "%s %s: a special value", er_family_name((er_family)f), er_format_name(fm));
            }
            if (f == ER_FAMILY_SUBNORMAL) ER_REQUIRE(n_sub > 0, "subnormal %s: none", er_format_name(fm));
            if (f == ER_FAMILY_NEAR_MAX || (f == ER_FAMILY_TIES && fm != ER_FP64)) { /* an fp64 pair's sum is not exact in double */
                /* near_max: in some row two values of one sign overflow when added first, and values of both signs
                 * (an order that alternates does not); ties: some pair's exact sum is a midpoint of the format */
                int over = 0, both = 0, mid = 0;
                for (int r = 0; r < R; r++)
                    for (int a = 0; a < C; a++)
                        for (int b = a + 1; b < C; b++) {
                            double x = er_load(buf, fm, r * C + a), y = er_load(buf, fm, r * C + b), sum = x + y; /* exact here */
                            over |= (x > 0) == (y > 0) && fabs(sum) > mx;
                            both |= (x > 0) != (y > 0);
                            double dn, up;
                            er_round_double(&dn, fm, sum, ER_ROUND_DOWN, ER_OVERFLOW_SATURATE);
                            er_round_double(&up, fm, sum, ER_ROUND_UP, ER_OVERFLOW_SATURATE);
                            mid |= dn != up && sum - dn == up - sum;
                        }
                if (f == ER_FAMILY_NEAR_MAX) ER_REQUIRE(over && both, "near_max %s: an overflowing pair %d, both signs %d", er_format_name(fm), over, both);
                else ER_REQUIRE(mid, "ties %s: no pair sums to a midpoint", er_format_name(fm));
            }
        }
    }
}
END_TEST

START_TEST(bad_calls_write_nothing) {
    static float x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = 7.0f;
    er_tensor t, rep, e4;
    ck_assert_int_eq(er_tensor_view(&t, ER_FP32, 2, (int64_t[]){R, C}, NULL, x), ER_OK);
    ck_assert_int_eq(er_fill(&t, ER_FAMILY_COUNT, 1), ER_ERR_INVALID);
    ck_assert_int_eq(er_fill(&t, (er_family)-1, 1), ER_ERR_INVALID);
    ck_assert_int_eq(er_fill(NULL, ER_FAMILY_NORMAL, 1), ER_ERR_NULL);
    ck_assert_int_eq(er_tensor_view(&rep, ER_FP32, 2, (int64_t[]){R, C}, (int64_t[]){0, 1}, x), ER_OK);
    ck_assert_int_eq(er_fill(&rep, ER_FAMILY_NORMAL, 1), ER_ERR_OUTPUT);
    ck_assert_int_eq(er_tensor_view(&e4, ER_FP8_E4M3FN, 2, (int64_t[]){R, C}, NULL, x), ER_OK);
    ck_assert_int_eq(er_fill(&e4, ER_FAMILY_MASKED, 1), ER_ERR_FORMAT);
    ck_assert_msg(strstr(er_last_error(), "masked rows need -inf"), "%s", er_last_error());
    for (int i = 0; i < R * C; i++) ck_assert(x[i] == 7.0f);
    er_family f;
    ck_assert_int_eq(er_family_parse(&f, "cancellation"), ER_OK);
    ck_assert_int_eq(f, ER_FAMILY_CANCEL);
    ck_assert_int_eq(er_family_parse(&f, "gaussian"), ER_ERR_INVALID);
    ck_assert_msg(strstr(er_last_error(), "unknown family 'gaussian'"), "%s", er_last_error());
    for (int k = 0; k < ER_FAMILY_COUNT; k++) {
        ck_assert_int_eq(er_family_parse(&f, er_family_name((er_family)k)), ER_OK);
        ck_assert_int_eq(f, k);
    }
    ck_assert(er_family_name(ER_FAMILY_COUNT) == NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("families");
    TCase *tc = tcase_create("families");
    tcase_add_test(tc, values_are_pinned);
    tcase_add_test(tc, layout_does_not_change_values);
    tcase_add_test(tc, families_have_their_properties);
    tcase_add_test(tc, bad_calls_write_nothing);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}

/* t-format.c: formats against MPFR: every 8- and 16-bit pattern (and every tf32 pattern) decoded and
 * re-encoded; rounding of every neighbourhood of every value (the values, the midpoints, just off the
 * midpoints, beyond the largest finite) in all five rounding modes and all overflow rules; fp32 and fp64 at
 * random and at their edges. */
#include "../common/er_test.h"

static const er_format small_formats[] = {ER_FP16, ER_BF16, ER_FP8_E4M3FN, ER_FP8_E5M2, ER_TF32};
static const er_overflow rules[] = {ER_OVERFLOW_DEFAULT, ER_OVERFLOW_IEEE, ER_OVERFLOW_SATURATE, ER_OVERFLOW_NAN};

/* The layout facts an independent decoder needs: exponent and fraction widths, and tf32's container. */
static void layout(er_format f, int *ebits, int *mbits, int *bias, int *shift, int *npat_bits) {
    *shift = 0;
    switch (f) {
    case ER_FP16: *ebits = 5; *mbits = 10; *bias = 15; *npat_bits = 16; break;
    case ER_BF16: *ebits = 8; *mbits = 7; *bias = 127; *npat_bits = 16; break;
    case ER_FP8_E4M3FN: *ebits = 4; *mbits = 3; *bias = 7; *npat_bits = 8; break;
    case ER_FP8_E5M2: *ebits = 5; *mbits = 2; *bias = 15; *npat_bits = 8; break;
    case ER_TF32: *ebits = 8; *mbits = 10; *bias = 127; *shift = 13; *npat_bits = 19; break;
    default: *ebits = 11; *mbits = 52; *bias = 1023; *npat_bits = 64; break;
    }
}

/* Decodes a pattern with MPFR, field by field. Returns 0 for NaN, 1 otherwise (value in v, +-inf allowed). */
static int oracle_decode(er_format f, uint32_t pat, mpfr_t v) {
    int eb, mb, bias, shift, nb;
    layout(f, &eb, &mb, &bias, &shift, &nb);
    uint32_t s = (pat >> (eb + mb)) & 1, E = (pat >> mb) & ((1u << eb) - 1), M = pat & ((1u << mb) - 1);
    uint32_t Eall = (1u << eb) - 1;
    if (f == ER_FP8_E4M3FN) {
        if (E == Eall && M == (1u << mb) - 1) return 0;
    } else if (E == Eall) {
        if (M) return 0;
        mpfr_set_inf(v, s ? -1 : 1);
        return 1;
    }
    if (E == 0) mpfr_set_ui_2exp(v, M, 1 - bias - mb, MPFR_RNDN);
    else mpfr_set_ui_2exp(v, (1u << mb) | M, (long)E - bias - mb, MPFR_RNDN);
    if (s) mpfr_neg(v, v, MPFR_RNDN);
    return 1;
}

START_TEST(decode_every_pattern) {
    er_format f = small_formats[_i];
    int eb, mb, bias, shift, nb;
    layout(f, &eb, &mb, &bias, &shift, &nb);
    mpfr_t v;
    mpfr_init2(v, 64);
    for (uint32_t pat = 0; pat < (1u << nb); pat++) {
        uint64_t stored = (uint64_t)pat << shift;
        double d;
        ER_REQUIRE(er_decode(&d, f, stored) == ER_OK, "decode");
        if (!oracle_decode(f, pat, v)) {
            ER_REQUIRE(isnan(d), "%s pattern 0x%x must decode to NaN", er_format_name(f), pat);
            continue;
        }
        ER_REQUIRE(mpfr_cmp_d(v, d) == 0 && (mpfr_signbit(v) != 0) == (signbit(d) != 0),
                      "%s pattern 0x%x decodes to %a", er_format_name(f), pat, d);
        /* Encoding the decoded value gives the pattern back. */
        uint64_t back;
        ER_REQUIRE(er_encode(&back, f, d, ER_ROUND_NEAREST, er_format_has_inf(f) ? ER_OVERFLOW_IEEE : ER_OVERFLOW_SATURATE) == ER_OK, "encode");
        ER_REQUIRE(back == stored, "%s: 0x%x encodes back as 0x%llx", er_format_name(f), pat, (unsigned long long)back);
    }
    /* tf32 ignores the 13 low bits of its container. */
    if (f == ER_TF32) {
        double a, b;
        er_decode(&a, f, 0x3F801FFFu);
        er_decode(&b, f, 0x3F800000u);
        ck_assert(a == b && a == 1.0);
    }
    mpfr_clear(v);
}
END_TEST

/* Rounds x with exactref and with the oracle in every mode and rule, and compares. */
static void check_round_all(er_format f, mpfr_srcptr x) {
    for (int m = 0; m < 5; m++)
        for (int r = 0; r < 4; r++) {
            if (rules[r] == ER_OVERFLOW_IEEE && !er_format_has_inf(f)) continue;
            double got;
            ER_REQUIRE(er_round_mpfr(&got, f, x, (er_round)m, rules[r]) == ER_OK, "round_mpfr");
            double want = er_oracle_round(f, x, er_mpfr_rnd((er_round)m), rules[r]);
            if (!er_same(got, want))
                ck_abort_msg("%s mode %d rule %d: %a (prec %ld) rounds to %a, oracle %a; " ER_SEED_MSG_FMT, er_format_name(f), m, (int)rules[r],
                             mpfr_get_d(x, MPFR_RNDN), (long)mpfr_get_prec(x), got, want, ER_SEED_ARGS);
            /* When x is a double, the double path must agree too. */
            if (mpfr_get_prec(x) <= 53 || mpfr_zero_p(x)) {
                double xd = mpfr_get_d(x, MPFR_RNDN);
                if (mpfr_cmp_d(x, xd) == 0) {
                    double g2;
                    ER_REQUIRE(er_round_double(&g2, f, xd, (er_round)m, rules[r]) == ER_OK, "round_double");
                    ER_REQUIRE(er_same(g2, want), "%s: er_round_double(%a) = %a, oracle %a", er_format_name(f), xd, g2, want);
                }
            }
        }
}

START_TEST(round_every_neighbourhood) {
    er_format f = small_formats[_i];
    int eb, mb, bias, shift, nb;
    layout(f, &eb, &mb, &bias, &shift, &nb);
    mpfr_t a, b, x, t;
    mpfr_inits2(200, a, b, x, t, (mpfr_ptr)0);
    /* Walk the nonnegative finite values in increasing order (patterns 0.. up to the first non-finite);
     * the negative side is the mirror image and is covered by negating x. */
    uint32_t npos = 1u << (nb - 1);
    for (uint32_t pat = 0; pat < npos; pat++) {
        if (!oracle_decode(f, pat, a) || mpfr_inf_p(a)) break;
        int have_next = pat + 1 < npos && oracle_decode(f, pat + 1, b) && !mpfr_inf_p(b);
        if (!have_next) { /* beyond the largest finite: its would-be successor one ulp up */
            mpfr_set_d(t, er_format_ulp(f, mpfr_get_d(a, MPFR_RNDN)), MPFR_RNDN);
            mpfr_add(b, a, t, MPFR_RNDN);
        }
        for (int sgn = 0; sgn < 2; sgn++) {
            /* a, the midpoint, and the midpoint moved by a tiny amount either way; a quarter of the gap */
            mpfr_set(x, a, MPFR_RNDN); if (sgn) mpfr_neg(x, x, MPFR_RNDN); check_round_all(f, x);
            mpfr_add(x, a, b, MPFR_RNDN); mpfr_div_2ui(x, x, 1, MPFR_RNDN);
            if (sgn) mpfr_neg(x, x, MPFR_RNDN);
            check_round_all(f, x);
            mpfr_nextabove(x); check_round_all(f, x);
            mpfr_nextbelow(x); mpfr_nextbelow(x); check_round_all(f, x);
            mpfr_sub(t, b, a, MPFR_RNDN); mpfr_div_2ui(t, t, 2, MPFR_RNDN); mpfr_add(x, a, t, MPFR_RNDN);
            if (sgn) mpfr_neg(x, x, MPFR_RNDN);
            check_round_all(f, x);
        }
        if (!have_next) { /* far beyond: twice the largest, and a huge MPFR exponent */
            mpfr_mul_2ui(x, a, 1, MPFR_RNDN); check_round_all(f, x);
            mpfr_mul_2ui(x, a, 5000, MPFR_RNDN); check_round_all(f, x);
            mpfr_neg(x, x, MPFR_RNDN); check_round_all(f, x);
            break;
        }
    }
    /* Far below the smallest subnormal, and exactly half of it. */
    mpfr_set_d(x, er_format_min_subnormal(f), MPFR_RNDN);
    mpfr_div_2ui(x, x, 1, MPFR_RNDN); check_round_all(f, x);
    mpfr_div_2ui(x, x, 3000, MPFR_RNDN); check_round_all(f, x);
    mpfr_neg(x, x, MPFR_RNDN); check_round_all(f, x);
    /* Infinities and NaN. */
    mpfr_set_inf(x, 1); check_round_all(f, x);
    mpfr_set_inf(x, -1); check_round_all(f, x);
    mpfr_clears(a, b, x, t, (mpfr_ptr)0);
}
END_TEST

/* A random value with a random exponent in [lo, hi] and `bits` random significant bits. */
static void random_mpfr(mpfr_t x, int bits, long elo, long ehi) {
    mpfr_set_ui(x, 0, MPFR_RNDN);
    mpfr_t t;
    mpfr_init2(t, 64);
    for (int i = 0; i < bits; i += 32) {
        mpfr_mul_2ui(x, x, 32, MPFR_RNDN);
        mpfr_set_ui(t, (unsigned long)(er_rand64() & 0xffffffffu), MPFR_RNDN);
        mpfr_add(x, x, t, MPFR_RNDN);
    }
    mpfr_clear(t);
    if (mpfr_zero_p(x)) mpfr_set_ui(x, 1, MPFR_RNDN);
    mpfr_set_exp(x, (mpfr_exp_t)er_rand_int(elo, ehi));
    if (er_rand64() & 1) mpfr_neg(x, x, MPFR_RNDN);
}

START_TEST(round_random_wide) {
    static const er_format all[] = {ER_FP64, ER_FP32, ER_TF32, ER_BF16, ER_FP16, ER_FP8_E4M3FN, ER_FP8_E5M2};
    er_test_reseed(11);
    mpfr_t x;
    mpfr_init2(x, 160);
    long n = (long)(20000 * er_test_multiplier());
    for (int fi = 0; fi < 7; fi++) {
        er_format f = all[fi];
        int emin = er_format_emin(f), emax = er_format_emax(f), p = er_format_precision(f);
        for (long i = 0; i < n; i++) {
            int bits = (int)er_rand_int(1, 160);
            if (i % 3 == 0) bits = p + 2; /* short significands hit ties and near-ties */
            mpfr_set_prec(x, bits < 2 ? 2 : bits);
            random_mpfr(x, bits, emin - p - 3, emax + 3);
            check_round_all(f, x);
        }
    }
    mpfr_clear(x);
}
END_TEST

START_TEST(round_random_doubles) {
    er_test_reseed(12);
    static const er_format all[] = {ER_FP64, ER_FP32, ER_TF32, ER_BF16, ER_FP16, ER_FP8_E4M3FN, ER_FP8_E5M2};
    mpfr_t x;
    mpfr_init2(x, 53);
    long n = (long)(100000 * er_test_multiplier());
    for (long i = 0; i < n; i++) {
        double d = er__from_bits_test(er_rand64());
        if (isnan(d)) continue;
        mpfr_set_d(x, d, MPFR_RNDN);
        check_round_all(all[i % 7], x);
    }
    mpfr_clear(x);
}
END_TEST

START_TEST(edges_fp32_fp64) {
    static const double edges[] = {0x1p-149, 0x1p-150, 0x1.8p-150, 0x1p-126, 0x1.fffffep-127, 0x1.fffffep+127,
                                   0x1.ffffffp+127, 0x1.fffffe8p+127, 0x1p+128, 0x1.000001p0, 0x1.0000018p0,
                                   0x1.0000008p0, 0x1p-1074, 0x1p-1022, 0x1.fffffffffffffp+1023, 0.1, 1.0 / 3.0, -0.0, 0.0};
    mpfr_t x;
    mpfr_init2(x, 53);
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int s = 0; s < 2; s++) {
            mpfr_set_d(x, s ? -edges[i] : edges[i], MPFR_RNDN);
            check_round_all(ER_FP32, x);
            check_round_all(ER_FP64, x);
            check_round_all(ER_BF16, x);
        }
    mpfr_clear(x);
}
END_TEST

START_TEST(descriptors_and_names) {
    ck_assert_int_eq(er_format_precision(ER_FP32), 24);
    ck_assert(er_format_max(ER_FP8_E4M3FN) == 448.0);
    ck_assert(er_format_max(ER_FP8_E5M2) == 57344.0);
    ck_assert(er_format_max(ER_FP16) == 65504.0);
    ck_assert(er_format_min_subnormal(ER_BF16) == 0x1p-133);
    ck_assert(er_format_min_subnormal(ER_TF32) == 0x1p-136);
    ck_assert(er_format_unit_roundoff(ER_FP16) == 0x1p-11);
    ck_assert_int_eq(er_format_storage_bits(ER_TF32), 32);
    ck_assert(!er_format_has_inf(ER_FP8_E4M3FN));
    er_format f = ER_FORMAT_INVALID;
    ck_assert_int_eq(er_format_from_name(&f, "bfloat16"), ER_OK);
    ck_assert_int_eq(f, ER_BF16);
    ck_assert_int_eq(er_format_from_name(&f, "torch.float8_e4m3fn"), ER_OK);
    ck_assert_int_eq(f, ER_FP8_E4M3FN);
    ck_assert_int_eq(er_format_from_name(&f, "fp12"), ER_ERR_FORMAT);
    ck_assert_int_eq(f, ER_FP8_E4M3FN); /* untouched on refusal */
    ck_assert(strstr(er_last_error(), "fp12") != NULL);
    ck_assert_ptr_null(er_format_name((er_format)42));
    ck_assert(isnan(er_format_max((er_format)0)));
    double d = 7;
    ck_assert_int_eq(er_decode(&d, ER_FP8_E5M2, 0x100), ER_ERR_INVALID);
    ck_assert(d == 7);
    ck_assert_int_eq(er_round_double(&d, ER_FP8_E4M3FN, 1.0, ER_ROUND_NEAREST, ER_OVERFLOW_IEEE), ER_ERR_INVALID);
    ck_assert_int_eq(er_round_double(&d, ER_FP16, 1.0, (er_round)9, ER_OVERFLOW_IEEE), ER_ERR_INVALID);
    ck_assert(d == 7);
    /* The overflow rules on e4m3fn: 464 is a tie that goes to 448, 465 overflows. */
    ck_assert_int_eq(er_round_double(&d, ER_FP8_E4M3FN, 464.0, ER_ROUND_NEAREST, ER_OVERFLOW_NAN), ER_OK);
    ck_assert(d == 448.0);
    ck_assert_int_eq(er_round_double(&d, ER_FP8_E4M3FN, 465.0, ER_ROUND_NEAREST, ER_OVERFLOW_NAN), ER_OK);
    ck_assert(isnan(d));
    ck_assert_int_eq(er_round_double(&d, ER_FP8_E4M3FN, 465.0, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT), ER_OK);
    ck_assert(d == 448.0);
    uint64_t bits;
    ck_assert_int_eq(er_encode(&bits, ER_FP8_E4M3FN, NAN, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT), ER_OK);
    ck_assert_uint_eq(bits, 0x7F);
    ck_assert(er_format_ulp(ER_FP16, 1.0) == 0x1p-10);
    ck_assert(er_format_ulp(ER_FP16, 0x1p-20) == 0x1p-24);
}
END_TEST

int main(void) {
    Suite *s = suite_create("format");
    TCase *tc = tcase_create("format");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, decode_every_pattern, 0, 5);
    tcase_add_loop_test(tc, round_every_neighbourhood, 0, 5);
    tcase_add_test(tc, round_random_wide);
    tcase_add_test(tc, round_random_doubles);
    tcase_add_test(tc, edges_fp32_fp64);
    tcase_add_test(tc, descriptors_and_names);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}

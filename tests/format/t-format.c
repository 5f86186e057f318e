/* t-format.c: formats against MPFR: every 4-, 6-, 8- and 16-bit pattern (and every tf32 pattern) decoded and
 * re-encoded; rounding of every neighbourhood of every value (the values, the midpoints, just off the
 * midpoints, beyond the largest finite) in all five rounding modes and all overflow rules; fp32 and fp64 at
 * random and at their edges; the e8m0 scale format against its own rules. */
#include "../common/er_test.h"

static const er_format small_formats[] = {ER_FP16,       ER_BF16,       ER_FP8_E4M3FN, ER_FP8_E5M2,
                                          ER_TF32,       ER_FP4_E2M1FN, ER_FP6_E2M3FN, ER_FP6_E3M2FN};
#define N_SMALL ((int)(sizeof small_formats / sizeof small_formats[0]))
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
    case ER_FP4_E2M1FN: *ebits = 2; *mbits = 1; *bias = 1; *npat_bits = 4; break;
    case ER_FP6_E2M3FN: *ebits = 2; *mbits = 3; *bias = 1; *npat_bits = 6; break;
    case ER_FP6_E3M2FN: *ebits = 3; *mbits = 2; *bias = 3; *npat_bits = 6; break;
    default: *ebits = 11; *mbits = 52; *bias = 1023; *npat_bits = 64; break;
    }
}

/* The OCP MX element formats: every pattern a finite value (no infinity, no NaN). */
static int finite_only(er_format f) { return f == ER_FP4_E2M1FN || f == ER_FP6_E2M3FN || f == ER_FP6_E3M2FN; }

/* Decodes a pattern with MPFR, field by field. Returns 0 for NaN, 1 otherwise (value in v, +-inf allowed). */
static int oracle_decode(er_format f, uint32_t pat, mpfr_t v) {
    int eb, mb, bias, shift, nb;
    layout(f, &eb, &mb, &bias, &shift, &nb);
    uint32_t s = (pat >> (eb + mb)) & 1, E = (pat >> mb) & ((1u << eb) - 1), M = pat & ((1u << mb) - 1);
    uint32_t Eall = (1u << eb) - 1;
    if (f == ER_FP8_E4M3FN) {
        if (E == Eall && M == (1u << mb) - 1) return 0;
    } else if (E == Eall && !finite_only(f)) {
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
    if (f == ER_FP16) { /* a tensor's loads (er__load's own fp16 path) give every finite pattern's value too */
        static uint16_t all[65536];
        for (uint32_t pat = 0; pat < 65536; pat++) all[pat] = (uint16_t)pat;
        er_tensor tv;
        er_ref *ref;
        ck_assert_int_eq(er_tensor_view(&tv, ER_FP16, 1, (int64_t[]){65536}, NULL, all), ER_OK);
        ck_assert_int_eq(er_tensor_ref(&ref, &tv), ER_OK);
        for (uint32_t pat = 0; pat < 65536; pat++) {
            if (!oracle_decode(f, pat, v)) continue;
            double ex, dd;
            er_decode(&dd, f, pat);
            if (!isfinite(dd)) continue;
            ER_REQUIRE(er_ref_exact(ref, (int64_t[]){pat}, ER_FP64, &ex, NULL) == ER_OK, "exact: %s", er_last_error());
            ER_REQUIRE(mpfr_cmp_d(v, ex) == 0 && (signbit(ex) != 0) == (signbit(dd) != 0),
                       "fp16 pattern 0x%x loads as %a, not %a", pat, ex, dd);
        }
        er_ref_free(ref);
    }
    /* a pattern with a bit above the value bits is refused, whatever the format's storage */
    double d = 7;
    ck_assert_int_eq(er_decode(&d, f, (uint64_t)1 << (nb + shift)), ER_ERR_INVALID);
    ck_assert_int_eq(er_format_value_bits(f), f == ER_TF32 ? 32 : nb);
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
            if (rules[r] == ER_OVERFLOW_NAN && finite_only(f)) { /* no NaN to overflow to: refused */
                ER_REQUIRE(er_round_mpfr(&got, f, x, (er_round)m, rules[r]) == ER_ERR_INVALID, "nan rule on %s",
                           er_format_name(f));
                continue;
            }
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
     * the negative side is the mirror image and is covered by negating x. A sanitizer run (er_test_stride) takes
     * every stride-th pattern and every binade's first and last. */
    uint32_t npos = 1u << (nb - 1), mmask = (1u << mb) - 1, stride = (uint32_t)er_test_stride();
    for (uint32_t pat = 0; pat < npos; pat++) {
        if (!oracle_decode(f, pat, a) || mpfr_inf_p(a)) break;
        int have_next = pat + 1 < npos && oracle_decode(f, pat + 1, b) && !mpfr_inf_p(b);
        if (have_next && pat % stride && (pat & mmask) != 0 && (pat & mmask) != mmask) continue;
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

static const er_format all[] = {ER_FP64,       ER_FP32,       ER_TF32,       ER_BF16,      ER_FP16,
                                ER_FP8_E4M3FN, ER_FP8_E5M2,   ER_FP4_E2M1FN, ER_FP6_E2M3FN, ER_FP6_E3M2FN};
#define N_ALL ((int)(sizeof all / sizeof all[0]))

START_TEST(round_random_wide) {
    er_test_reseed(11);
    mpfr_t x;
    mpfr_init2(x, 160);
    long n = (long)(20000 * er_test_multiplier());
    for (int fi = 0; fi < N_ALL; fi++) {
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
    mpfr_t x;
    mpfr_init2(x, 53);
    long n = (long)(100000 * er_test_multiplier());
    for (long i = 0; i < n; i++) {
        double d = er__from_bits_test(er_rand64());
        if (isnan(d)) continue;
        mpfr_set_d(x, d, MPFR_RNDN);
        check_round_all(all[i % N_ALL], x);
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
    /* the MX formats: names, one byte each, no NaN in fp4 or fp6 */
    ck_assert_int_eq(er_format_from_name(&f, "float4_e2m1fn"), ER_OK);
    ck_assert_int_eq(f, ER_FP4_E2M1FN);
    ck_assert_int_eq(er_format_from_name(&f, "torch.float8_e8m0fnu"), ER_OK);
    ck_assert_int_eq(f, ER_FP8_E8M0FNU);
    ck_assert_int_eq(er_format_from_name(&f, "e3m2"), ER_OK);
    ck_assert_int_eq(f, ER_FP6_E3M2FN);
    ck_assert(er_format_max(ER_FP4_E2M1FN) == 6.0 && er_format_max(ER_FP6_E2M3FN) == 7.5 &&
              er_format_max(ER_FP6_E3M2FN) == 28.0 && er_format_max(ER_FP8_E8M0FNU) == 0x1p127);
    ck_assert_int_eq(er_format_storage_bits(ER_FP4_E2M1FN), 8);
    ck_assert_int_eq(er_format_value_bits(ER_FP6_E2M3FN), 6);
    bits = 5;
    ck_assert_int_eq(er_encode(&bits, ER_FP4_E2M1FN, NAN, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT), ER_ERR_INVALID);
    ck_assert_uint_eq(bits, 5);
    ck_assert(strstr(er_last_error(), "no NaN") != NULL);
    ck_assert_int_eq(er_round_double(&d, ER_FP4_E2M1FN, 100.0, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT), ER_OK);
    ck_assert(d == 6.0); /* saturates by default */
}
END_TEST

/* e8m0 (the MX scale) by its own rules: pattern E is 2^(E - 127), 0xFF NaN; a positive x rounds as a 1-bit
 * significand does (MPFR at precision 1: ties to the greater power), a value below 2^-127 gives 2^-127 in every
 * mode (no zero), zero, a negative value and NaN give NaN, and overflow gives NaN (the default) or 2^127. */
static double e8m0_oracle(mpfr_srcptr x, er_round m, er_overflow ov) {
    if (mpfr_nan_p(x) || mpfr_sgn(x) <= 0) return NAN;
    if (mpfr_inf_p(x)) return ov == ER_OVERFLOW_SATURATE ? 0x1p127 : NAN;
    mpfr_t y;
    mpfr_init2(y, 1);
    /* MPFR's exponent range holds every x tried; x > 0, so ties away from zero are MPFR's ties at precision 1 */
    mpfr_set(y, x, m == ER_ROUND_NEAREST_AWAY ? MPFR_RNDN : er_mpfr_rnd(m));
    double r = mpfr_get_d(y, MPFR_RNDN);
    mpfr_clear(y);
    if (r < 0x1p-127) r = 0x1p-127;
    if (r > 0x1p127) r = ov == ER_OVERFLOW_SATURATE ? 0x1p127 : NAN;
    return r;
}

START_TEST(e8m0_every_pattern_and_rounding) {
    const er_format f = ER_FP8_E8M0FNU;
    mpfr_t x;
    mpfr_init2(x, 64);
    for (uint32_t pat = 0; pat < 256; pat++) {
        double d;
        ER_REQUIRE(er_decode(&d, f, pat) == ER_OK, "decode");
        if (pat == 0xFF) { ck_assert(isnan(d)); continue; }
        ER_REQUIRE(d == ldexp(1.0, (int)pat - 127), "e8m0 0x%x decodes to %a", pat, d);
        uint64_t back;
        ER_REQUIRE(er_encode(&back, f, d, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT) == ER_OK && back == pat,
                   "e8m0 0x%x encodes back as 0x%llx", pat, (unsigned long long)back);
        /* the value, the midpoint to the next power and just off it, a quarter and three quarters of the way */
        static const double at[] = {1.0, 1.5, 1.25, 1.75};
        for (int k = 0; k < 4; k++)
            for (int off = -1; off <= 1; off++) {
                mpfr_set_d(x, ldexp(at[k], (int)pat - 127), MPFR_RNDN);
                if (off < 0) mpfr_nextbelow(x);
                if (off > 0) mpfr_nextabove(x);
                for (int m = 0; m < 5; m++)
                    for (int r = 0; r < 4; r++) {
                        double got = 7;
                        er_status st = er_round_mpfr(&got, f, x, (er_round)m, rules[r]);
                        if (rules[r] == ER_OVERFLOW_IEEE) { ER_REQUIRE(st == ER_ERR_INVALID, "ieee on e8m0"); continue; }
                        ER_REQUIRE(st == ER_OK, "round");
                        double want = e8m0_oracle(x, (er_round)m, rules[r]);
                        ER_REQUIRE(er_same(got, want), "e8m0 mode %d rule %d: %a rounds to %a, oracle %a", m, r,
                                   mpfr_get_d(x, MPFR_RNDN), got, want);
                    }
            }
    }
    static const double special[] = {0.0, -0.0, -1.0, 0x1p-200, 0x1p-128, 0x1.8p-128, 0x1p128, 0x1.7p127, 0x1.8p127,
                                     INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        mpfr_set_d(x, special[i], MPFR_RNDN);
        for (int m = 0; m < 5; m++)
            for (int r = 0; r < 4; r++) {
                if (rules[r] == ER_OVERFLOW_IEEE) continue;
                double got, g2;
                ER_REQUIRE(er_round_mpfr(&got, f, x, (er_round)m, rules[r]) == ER_OK, "round");
                ER_REQUIRE(er_round_double(&g2, f, special[i], (er_round)m, rules[r]) == ER_OK, "round");
                double want = e8m0_oracle(x, (er_round)m, rules[r]);
                ER_REQUIRE(er_same(got, want) && er_same(g2, want), "e8m0 mode %d rule %d: %a rounds to %a / %a, oracle %a",
                           m, r, special[i], got, g2, want);
            }
    }
    /* NaN encodes as 0xFF; a pattern above 8 bits is refused */
    uint64_t bits = 0;
    ck_assert_int_eq(er_encode(&bits, f, -2.0, ER_ROUND_NEAREST, ER_OVERFLOW_DEFAULT), ER_OK);
    ck_assert_uint_eq(bits, 0xFF);
    double d;
    ck_assert_int_eq(er_decode(&d, f, 0x100), ER_ERR_INVALID);
    mpfr_clear(x);
}
END_TEST

int main(void) {
    Suite *s = suite_create("format");
    TCase *tc = tcase_create("format");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, decode_every_pattern, 0, N_SMALL);
    tcase_add_loop_test(tc, round_every_neighbourhood, 0, N_SMALL);
    tcase_add_test(tc, e8m0_every_pattern_and_rounding);
    tcase_add_test(tc, round_random_wide);
    tcase_add_test(tc, round_random_doubles);
    tcase_add_test(tc, edges_fp32_fp64);
    tcase_add_test(tc, descriptors_and_names);
    suite_add_tcase(s, tc);
    return er_run_suite(s);
}

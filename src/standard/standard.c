/* standard.c: the standard value: defaults, parsing from strings, validation and rendering. */
#include <ctype.h>
#include <stdio.h>
#include <strings.h>
#include "core/internal.h"

er_status er_standard_init(er_standard *s) {
    er__ok();
    ER_CHECK_NULL(s, "s");
    memset(s, 0, sizeof *s);
    s->order = ER_ORDER_ANY;
    s->compute = ER_FP32;
    s->fma = ER_FMA_EITHER;
    s->rounding = ER_RND_NEAREST;
    s->subnormals = ER_SUBNORMALS_GRADUAL;
    s->out_overflow = ER_OVERFLOW_DEFAULT;
    return ER_OK;
}

er_status er_standard_validate(const er_standard *s) {
    ER_CHECK_NULL(s, "standard");
    if (s->order != ER_ORDER_ANY) return er__fail(ER_ERR_STANDARD, "unknown order value %d", (int)s->order);
    const er_fmt_info *fi = er__fmt(s->compute);
    if (!fi) return er__fail(ER_ERR_STANDARD, "invalid compute format value %d", (int)s->compute);
    if (s->compute != ER_FP32 && s->compute != ER_FP16 && s->compute != ER_BF16 && s->compute != ER_FP64)
        return er__fail(ER_ERR_STANDARD, "compute=%s is not an accumulator format of any_order (use fp64, fp32, fp16 or bf16)", fi->name);
    if ((int)s->fma < 0 || (int)s->fma > 2) return er__fail(ER_ERR_STANDARD, "invalid fma value %d", (int)s->fma);
    if (s->rounding != ER_RND_NEAREST) return er__fail(ER_ERR_STANDARD, "invalid rounding value %d", (int)s->rounding);
    if (s->subnormals != ER_SUBNORMALS_GRADUAL) return er__fail(ER_ERR_STANDARD, "invalid subnormals value %d", (int)s->subnormals);
    if ((int)s->out_overflow < 0 || (int)s->out_overflow > 3)
        return er__fail(ER_ERR_STANDARD, "invalid output overflow rule %d", (int)s->out_overflow);
    return ER_OK;
}

/* Copies the next token of `p` (up to ',' or whitespace) into buf; returns the position after it. */
static const char *er_next_token(const char *p, char *buf, size_t cap, int *too_long) {
    size_t n = 0;
    *too_long = 0;
    while (*p && *p != ',' && !isspace((unsigned char)*p)) {
        if (n + 1 < cap) buf[n++] = *p; else *too_long = 1;
        p++;
    }
    buf[n] = '\0';
    return p;
}

er_status er_standard_parse(er_standard *out, const char *order, const char *options) {
    er__ok();
    ER_CHECK_NULL(out, "standard");
    ER_CHECK_NULL(order, "order");
    er_standard s;
    er_standard_init(&s);
    if (strcasecmp(order, "any_order") != 0 && strcasecmp(order, "any") != 0)
        return er__fail(ER_ERR_STANDARD, "unknown order '%s' (this version knows: any_order)", order);
    unsigned seen = 0;
    const char *p = options ? options : "";
    char tok[128];
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        int too_long;
        p = er_next_token(p, tok, sizeof tok, &too_long);
        if (too_long) return er__fail(ER_ERR_STANDARD, "option '%.40s...' is too long", tok);
        char *eq = strchr(tok, '=');
        if (!eq) return er__fail(ER_ERR_STANDARD, "option '%s' is not of the form key=value", tok);
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        unsigned bit;
        if (strcmp(key, "compute") == 0) {
            bit = 1;
            er_format f;
            if (er_format_from_name(&f, val) != ER_OK)
                return er__fail(ER_ERR_STANDARD, "compute=%s: unknown format", val);
            s.compute = f;
        } else if (strcmp(key, "fma") == 0) {
            bit = 2;
            if (strcmp(val, "either") == 0) s.fma = ER_FMA_EITHER;
            else if (strcmp(val, "never") == 0 || strcmp(val, "false") == 0 || strcmp(val, "no") == 0) s.fma = ER_FMA_NEVER;
            else if (strcmp(val, "always") == 0 || strcmp(val, "true") == 0 || strcmp(val, "yes") == 0) s.fma = ER_FMA_ALWAYS;
            else return er__fail(ER_ERR_STANDARD, "fma=%s: expected either, never or always", val);
        } else if (strcmp(key, "rounding") == 0) {
            bit = 4;
            if (strcmp(val, "nearest") != 0)
                return er__fail(ER_ERR_STANDARD, "rounding=%s is not supported by this version (nearest only)", val);
        } else if (strcmp(key, "subnormals") == 0) {
            bit = 8;
            if (strcmp(val, "gradual") != 0)
                return er__fail(ER_ERR_STANDARD, "subnormals=%s is not supported by this version (gradual only)", val);
        } else if (strcmp(key, "overflow") == 0) {
            bit = 16;
            if (strcmp(val, "default") == 0) s.out_overflow = ER_OVERFLOW_DEFAULT;
            else if (strcmp(val, "ieee") == 0 || strcmp(val, "inf") == 0) s.out_overflow = ER_OVERFLOW_IEEE;
            else if (strcmp(val, "saturate") == 0) s.out_overflow = ER_OVERFLOW_SATURATE;
            else if (strcmp(val, "nan") == 0) s.out_overflow = ER_OVERFLOW_NAN;
            else return er__fail(ER_ERR_STANDARD, "overflow=%s: expected default, ieee, saturate or nan", val);
        } else {
            return er__fail(ER_ERR_STANDARD, "unknown option '%s' (known: compute, fma, rounding, subnormals, overflow)", key);
        }
        if (seen & bit) return er__fail(ER_ERR_STANDARD, "option '%s' is given twice", key);
        seen |= bit;
    }
    ER_RETURN_IF_ERROR(er_standard_validate(&s));
    *out = s;
    return ER_OK;
}

static const char *er_fma_name(er_fma f) {
    return f == ER_FMA_NEVER ? "never" : f == ER_FMA_ALWAYS ? "always" : "either";
}
static const char *er_ov_name(er_overflow o) {
    return o == ER_OVERFLOW_IEEE ? "ieee" : o == ER_OVERFLOW_SATURATE ? "saturate" : o == ER_OVERFLOW_NAN ? "nan" : "default";
}

er_status er_standard_format(const er_standard *s, char *buf, size_t cap, size_t *needed) {
    er__ok();
    ER_CHECK_NULL(s, "standard");
    if (!buf && cap) return er__fail(ER_ERR_NULL, "buf is NULL but cap is %zu", cap);
    ER_RETURN_IF_ERROR(er_standard_validate(s));
    char tmp[256];
    int n = snprintf(tmp, sizeof tmp, "any_order compute=%s fma=%s%s%s", er_format_name(s->compute),
                     er_fma_name(s->fma), s->out_overflow != ER_OVERFLOW_DEFAULT ? " overflow=" : "",
                     s->out_overflow != ER_OVERFLOW_DEFAULT ? er_ov_name(s->out_overflow) : "");
    if (needed) *needed = (size_t)n;
    if (cap) snprintf(buf, cap, "%s", tmp);
    if ((size_t)n + 1 > cap) return er__fail(ER_ERR_BUFFER, "standard needs %d bytes, buffer has %zu", n + 1, cap);
    return ER_OK;
}

size_t er_standard_sizeof(void) { return sizeof(er_standard); }

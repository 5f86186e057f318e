/* report.c: the report's lifetime and its text and JSON renderings. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/internal.h"
#include "ops/module.h"

void er_report_init(er_report *rep) {
    if (rep) memset(rep, 0, sizeof *rep);
}

uint64_t er__report_guard(const uint8_t *classes, const void *dev) {
    return ((uint64_t)(uintptr_t)classes ^ UINT64_C(0x6578616374726566)) + 3 * (uint64_t)(uintptr_t)dev;
}

void er_report_clear(er_report *rep) {
    if (!rep) return;
    /* a report the library filled carries its classes' pointers under the guard; one holding stray bytes does not
     * (but with odds of 2^-64) */
    if ((rep->classes || rep->device_classes) && rep->guard == er__report_guard(rep->classes, rep->device_classes)) {
        free(rep->classes);
#ifdef ER_HAVE_CUDA
        er__dev_classes_free(rep->device_classes);
#endif
    }
    memset(rep, 0, sizeof *rep);
}

int er_report_all(const er_report *rep) { return rep && rep->filled && rep->status == ER_OK && rep->n_failed == 0; }
er_status er_report_status(const er_report *rep) { return rep ? rep->status : ER_ERR_NULL; }
const char *er_report_message(const er_report *rep) { return rep ? rep->message : ""; }

void er__report_finish(er_report *rep, er_status st) {
    if (!rep) return;
    if (st == ER_OK) { rep->filled = 1; return; }
    memset(rep, 0, sizeof *rep);
    rep->status = st;
    snprintf(rep->message, sizeof rep->message, "%s", er_last_error());
}

size_t er_report_sizeof(void) { return sizeof(er_report); }
int64_t er_report_numel(const er_report *rep) { return rep ? rep->n : 0; }
int64_t er_report_count(const er_report *rep, er_class c) {
    if (!rep || (int)c < 0 || (int)c >= ER_CLASS_COUNT) return -1;
    return rep->counts[c];
}
int64_t er_report_failed(const er_report *rep) { return rep ? rep->n_failed : 0; }

double er_report_resolution(const er_report *rep) {
    if (!rep || !rep->filled || rep->status != ER_OK || !rep->n_away || rep->n_unseen) return NAN;
    return rep->coarsest_rel / (1 - rep->coarsest_rel);
}
const uint8_t *er_report_classes(const er_report *rep) { return rep ? rep->classes : NULL; }
size_t er_element_sizeof(void) { return sizeof(er_element); }

/* A growable string; on allocation failure it remembers the failure and ignores further appends. */
typedef struct er_sb { char *s; size_t len, cap; int failed; } er_sb;

__attribute__((format(printf, 2, 3))) static void er_sb_printf(er_sb *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { b->failed = 1; return; }
        if (b->s && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) { b->failed = 1; return; }
        b->s = s;
        b->cap = cap;
    }
}

/* Significant decimal digits that identify a value of the format: ceil(p log10 2) + 1. */
static int er_digits(er_format f) {
    int p = er_format_precision(f);
    return p ? (int)ceil(p * 0.30103) + 1 : 17;
}

static void er_sb_num(er_sb *b, double x, int digits, int json) {
    if (isnan(x)) er_sb_printf(b, json ? "\"nan\"" : "nan");
    else if (isinf(x)) er_sb_printf(b, json ? (x > 0 ? "\"inf\"" : "\"-inf\"") : (x > 0 ? "inf" : "-inf"));
    else er_sb_printf(b, "%.*g", digits, x);
}

static void er_sb_coord(er_sb *b, const er_report *r, const er_element *e) {
    er_sb_printf(b, "[");
    for (int i = 0; i < r->ndim; i++) er_sb_printf(b, "%s%lld", i ? ", " : "", (long long)e->coord[i]);
    er_sb_printf(b, "]");
}

static void er_sb_set(er_sb *b, const er_element *e, int d) {
    int any = 0;
    if (e->lo <= e->hi) {
        er_sb_printf(b, "[");
        er_sb_num(b, e->lo, d, 0);
        er_sb_printf(b, ", ");
        er_sb_num(b, e->hi, d, 0);
        er_sb_printf(b, "]");
        any = 1;
    }
    if (e->pinf_allowed) { er_sb_printf(b, "%s+inf", any ? " or " : ""); any = 1; }
    if (e->ninf_allowed) { er_sb_printf(b, "%s-inf", any ? " or " : ""); any = 1; }
    if (e->nan_allowed) { er_sb_printf(b, "%snan", any ? " or " : ""); any = 1; }
    if (!any) er_sb_printf(b, "{}");
}

static void er_sb_element_text(er_sb *b, const er_report *r, const er_element *e) {
    int d = er_digits(r->out_format);
    er_sb_coord(b, r, e);
    er_sb_printf(b, " = ");
    er_sb_num(b, e->value, d, 0);
    er_sb_printf(b, " is %s: allowed ", er_class_name(e->cls));
    er_sb_set(b, e, d);
    if (e->cls == ER_CLASS_OUTSIDE) er_sb_printf(b, ", %.3g ulp beyond the edge", e->distance_ulps);
    er_sb_printf(b, "; exact ");
    er_sb_num(b, e->exact, 17, 0);
    er_sb_printf(b, ", correctly rounded ");
    er_sb_num(b, e->rounded, d, 0);
    if (e->stage >= 0) {
        /* the chain's name up to that stage: its first stage + 1 parts of "base+stage+stage..." */
        const char *op = r->op, *end = op;
        for (int k = 0; k <= e->stage && *end; k++) { if (k) end++; while (*end && *end != '+') end++; }
        er_sb_printf(b, "; the output lies in the set after %.*s (stage %d)", (int)(end - op), op, e->stage);
    }
}

static er_status er_sb_finish(er_sb *b, char *buf, size_t cap, size_t *needed) {
    if (b->failed) { free(b->s); return er__fail(ER_ERR_NOMEM, "cannot allocate the report text"); }
    size_t n = b->len;
    if (needed) *needed = n;
    if (buf && cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, b->s ? b->s : "", k);
        buf[k] = '\0';
    }
    free(b->s);
    if (n + 1 > cap) return er__fail(ER_ERR_BUFFER, "the report needs %zu bytes, the buffer has %zu", n + 1, cap);
    return ER_OK;
}

static void er_sb_shape(er_sb *b, const er_report *r) {
    er_sb_printf(b, "[");
    for (int i = 0; i < r->ndim; i++) er_sb_printf(b, "%s%lld", i ? ", " : "", (long long)r->shape[i]);
    er_sb_printf(b, "]");
}

static void er_report_render_text(er_sb *b, const er_report *r) {
    if (r->status != ER_OK) {
        /* the message is er_last_error's, which opens with the status's name: said once, in the parentheses */
        const char *name = er_status_name(r->status), *msg = r->message;
        size_t nl = strlen(name);
        if (strncmp(msg, name, nl) == 0 && msg[nl] == ':' && msg[nl + 1] == ' ') msg += nl + 2;
        er_sb_printf(b, "refused (%s): %s: FAIL\n", name, msg);
        return;
    }
    if (!r->filled) {
        er_sb_printf(b, "empty report: no call has filled it: FAIL\n");
        return;
    }
    er_sb_printf(b, "%s under %s, output %s ", r->op[0] ? r->op : "(empty report)", r->standard,
                 r->out_format ? er_format_name(r->out_format) : "-");
    er_sb_shape(b, r);
    er_sb_printf(b, ": %s\n", er_report_all(r) ? "PASS" : "FAIL");
    er_sb_printf(b, "  %lld elements:", (long long)r->n);
    int first = 1;
    for (int c = 0; c < ER_CLASS_COUNT; c++) {
        if (!r->counts[c] && c > ER_CLASS_COVERED) continue;
        er_sb_printf(b, "%s %s %lld", first ? "" : ",", er_class_name((er_class)c), (long long)r->counts[c]);
        first = 0;
    }
    er_sb_printf(b, "\n");
    if (r->has_widest) {
        er_sb_printf(b, "  widest set: ");
        er_sb_coord(b, r, &r->widest);
        er_sb_printf(b, " allows ");
        er_sb_set(b, &r->widest, er_digits(r->out_format));
        er_sb_printf(b, ", %.3g of its size\n", r->widest_rel);
    }
    double res = er_report_resolution(r);
    if (res == res) {
        er_sb_printf(b, "  resolution %.3g: an output off by more than that, relative to any value its set allows, "
                        "fails (", res);
        if (r->n_away == r->n) er_sb_printf(b, "every set lies away from 0)\n");
        else er_sb_printf(b, "at the %lld of %lld elements whose sets lie away from 0)\n", (long long)r->n_away,
                          (long long)r->n);
    }
    if (r->n_unbounded)
        er_sb_printf(b, "  note: %lld of %lld elements' sets hold every value of the output's format (the op's bounds "
                        "claim nothing there): they pass whatever the kernel wrote\n",
                     (long long)r->n_unbounded, (long long)r->n);
    if (r->blind_rel > 0 && r->n_away && r->finest_rel >= r->blind_rel)
        er_sb_printf(b, "  note: every set is at least %.3g of its size, more than the %.3g %s moves an element by: "
                        "such a bug may pass; a stated order (depth=, a fixed tree) narrows the sets\n",
                     r->finest_rel, r->blind_rel, r->blind_bug);
    else if (r->blind_rel > 0)
        er_sb_printf(b, "  note: every element's set holds its exact value moved by the %.3g %s moves it by, rounded "
                        "to the output's format: such a bug may pass; a stated order (depth=, a fixed tree) narrows "
                        "the sets\n",
                     r->blind_rel, r->blind_bug);
    if (r->n_failed) {
        er_sb_printf(b, "  %lld failing; worst: ", (long long)r->n_failed);
        er_sb_element_text(b, r, &r->worst);
        er_sb_printf(b, "\n  first failing:");
        for (int i = 0; i < r->n_first; i++) {
            er_sb_printf(b, " ");
            er_sb_coord(b, r, &r->first[i]);
        }
        if (r->n_failed > r->n_first) er_sb_printf(b, " ...");
        er_sb_printf(b, "\n");
    }
}

er_status er_report_text(const er_report *rep, char *buf, size_t cap, size_t *needed) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    if (!buf && cap) return er__fail(ER_ERR_NULL, "buf is NULL but cap is %zu", cap);
    er_sb b = {0};
    er_report_render_text(&b, rep);
    return er_sb_finish(&b, buf, cap, needed);
}

er_status er_report_fprint(FILE *stream, const er_report *rep) {
    er__ok();
    ER_CHECK_NULL(stream, "stream");
    ER_CHECK_NULL(rep, "report");
    er_sb b = {0};
    er_report_render_text(&b, rep);
    if (b.failed) { free(b.s); return er__fail(ER_ERR_NOMEM, "cannot allocate the report text"); }
    size_t w = b.len ? fwrite(b.s, 1, b.len, stream) : 0;
    free(b.s);
    if (w != b.len) return er__fail(ER_ERR_INVALID, "writing the report to the stream failed");
    return ER_OK;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void er_sb_json_string(er_sb *b, const char *s) {
    er_sb_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') er_sb_printf(b, "\\%c", c);
        else if (c < 0x20) er_sb_printf(b, "\\u%04x", c);
        else er_sb_printf(b, "%c", c);
    }
    er_sb_printf(b, "\"");
}

static void er_sb_element_json(er_sb *b, const er_report *r, const er_element *e) {
    er_sb_printf(b, "{\"index\": %lld, \"coord\": ", (long long)e->index);
    er_sb_coord(b, r, e);
    er_sb_printf(b, ", \"class\": \"%s\", \"value\": ", er_class_name(e->cls));
    er_sb_num(b, e->value, 17, 1);
    if (e->lo <= e->hi) {
        er_sb_printf(b, ", \"lo\": ");
        er_sb_num(b, e->lo, 17, 1);
        er_sb_printf(b, ", \"hi\": ");
        er_sb_num(b, e->hi, 17, 1);
    } else {
        er_sb_printf(b, ", \"lo\": null, \"hi\": null");
    }
    er_sb_printf(b, ", \"nan_allowed\": %s, \"pinf_allowed\": %s, \"ninf_allowed\": %s, \"exact\": ",
                 e->nan_allowed ? "true" : "false", e->pinf_allowed ? "true" : "false",
                 e->ninf_allowed ? "true" : "false");
    er_sb_num(b, e->exact, 17, 1);
    er_sb_printf(b, ", \"rounded\": ");
    er_sb_num(b, e->rounded, 17, 1);
    er_sb_printf(b, ", \"distance_ulps\": ");
    er_sb_num(b, e->distance_ulps, 17, 1);
    if (e->stage >= 0) er_sb_printf(b, ", \"stage\": %d", e->stage);
    else er_sb_printf(b, ", \"stage\": null");
    er_sb_printf(b, "}");
}

er_status er_report_json(const er_report *rep, char *buf, size_t cap, size_t *needed) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    if (!buf && cap) return er__fail(ER_ERR_NULL, "buf is NULL but cap is %zu", cap);
    const er_report *r = rep;
    er_sb b = {0};
    er_sb_printf(&b, "{\"op\": \"%s\", \"standard\": \"%s\", \"out_format\": \"%s\", \"shape\": ", r->op, r->standard,
                 r->out_format ? er_format_name(r->out_format) : "");
    er_sb_shape(&b, r);
    er_sb_printf(&b, ", \"n\": %lld, \"pass\": %s, \"n_failed\": %lld, \"refused\": ", (long long)r->n,
                 er_report_all(r) ? "true" : "false", (long long)r->n_failed);
    if (r->status != ER_OK) {
        er_sb_printf(&b, "{\"status\": \"%s\", \"message\": ", er_status_name(r->status));
        er_sb_json_string(&b, r->message);
        er_sb_printf(&b, "}");
    } else {
        er_sb_printf(&b, "null");
    }
    er_sb_printf(&b, ", \"filled\": %s, \"widest\": ", r->filled ? "true" : "false");
    if (r->has_widest) {
        er_sb_printf(&b, "{\"relative_width\": ");
        er_sb_num(&b, r->widest_rel, 17, 1);
        er_sb_printf(&b, ", \"element\": ");
        er_sb_element_json(&b, r, &r->widest);
        er_sb_printf(&b, "}");
    } else {
        er_sb_printf(&b, "null");
    }
    double res = er_report_resolution(r);
    er_sb_printf(&b, ", \"resolution\": ");
    if (res == res) er_sb_num(&b, res, 17, 1); else er_sb_printf(&b, "null");
    er_sb_printf(&b, ", \"sets_away_from_0\": ");
    if (r->n_unseen) er_sb_printf(&b, "null"); else er_sb_printf(&b, "%lld", (long long)r->n_away);
    er_sb_printf(&b, ", \"finest\": ");
    if (r->n_away && !r->n_unseen) er_sb_num(&b, r->finest_rel, 17, 1); else er_sb_printf(&b, "null");
    er_sb_printf(&b, ", \"unbounded\": %lld", (long long)r->n_unbounded);
    er_sb_printf(&b, ", \"may_pass\": ");
    if (r->blind_rel > 0) {
        er_sb_printf(&b, "{\"bug\": ");
        er_sb_json_string(&b, r->blind_bug);
        er_sb_printf(&b, ", \"relative_error\": ");
        er_sb_num(&b, r->blind_rel, 17, 1);
        er_sb_printf(&b, "}");
    } else {
        er_sb_printf(&b, "null");
    }
    er_sb_printf(&b, ", \"counts\": {");
    for (int c = 0; c < ER_CLASS_COUNT; c++)
        er_sb_printf(&b, "%s\"%s\": %lld", c ? ", " : "", er_class_name((er_class)c), (long long)r->counts[c]);
    er_sb_printf(&b, "}, \"worst\": ");
    if (r->has_worst) er_sb_element_json(&b, r, &r->worst); else er_sb_printf(&b, "null");
    er_sb_printf(&b, ", \"first_failing\": [");
    for (int i = 0; i < r->n_first; i++) {
        if (i) er_sb_printf(&b, ", ");
        er_sb_element_json(&b, r, &r->first[i]);
    }
    er_sb_printf(&b, "]}\n");
    return er_sb_finish(&b, buf, cap, needed);
}

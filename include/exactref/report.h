/* exactref/report.h: classification of a kernel's output against a covering set, and the report.
 *
 * Each element of the output gets one class. EXACT, COVERED and OVERFLOW pass; every other class fails.
 * The rules for NaN, infinities and signed zero are in docs/reference/classes.md. */
#ifndef EXACTREF_REPORT_H
#define EXACTREF_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/format.h>
#include <exactref/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum er_class {
    ER_CLASS_EXACT = 0,          /* equals the correctly rounded exact result (NaN where NaN is required) */
    ER_CLASS_COVERED = 1,        /* a finite value inside the covering set, not the exact one */
    ER_CLASS_OVERFLOW = 2,       /* an infinity or NaN that some allowed order produces by overflowing */
    ER_CLASS_OUTSIDE = 3,        /* a finite value outside the covering set */
    ER_CLASS_NAN_UNEXPECTED = 4, /* NaN where no allowed order produces NaN */
    ER_CLASS_NAN_MISSING = 5,    /* a number where NaN is the only value allowed */
    ER_CLASS_INF_UNEXPECTED = 6, /* an infinity no allowed order produces */
    ER_CLASS_INF_MISSING = 7     /* a finite value where no finite value is allowed and an infinity is */
} er_class;
#define ER_CLASS_COUNT 8

/* "exact", "covered", "overflow", "outside", "nan_unexpected", ... ; "unknown" otherwise. */
ER_API const char *er_class_name(er_class c);
/* 1 for EXACT, COVERED and OVERFLOW. */
ER_API int er_class_passes(er_class c);

/* One element of the output with its verdict. */
typedef struct er_element {
    int64_t index;                 /* row-major position in the output */
    int64_t coord[ER_MAX_DIMS];    /* the same as coordinates */
    er_class cls;
    double value;                  /* the kernel's output */
    double lo, hi;                 /* finite part of the covering set (lo > hi: no finite value allowed) */
    int nan_allowed, pinf_allowed, ninf_allowed;
    double exact;                  /* the exact result rounded to double (NaN/inf for special results) */
    double rounded;                /* the exact result correctly rounded to the output format */
    double distance_ulps;          /* for OUTSIDE: distance beyond the nearest edge, in output ulps; else 0 */
    int stage;                     /* a chain's failing element: the most leading stages whose set (rounded to the
                                    * output format) holds the value, 0 for the base's alone; -1: none does, or not a
                                    * chain (docs/algorithms/chains.md) */
} er_element;

#define ER_REPORT_FIRST 8

typedef struct er_report {
    char op[32];                   /* "matmul" */
    char standard[128];            /* the standard as er_standard_format renders it */
    er_format out_format;
    int ndim;
    int64_t shape[ER_MAX_DIMS];
    int64_t n;                     /* number of elements */
    int64_t counts[ER_CLASS_COUNT];
    int64_t n_failed;
    uint8_t *classes;              /* n entries (er_class values), row-major; owned by the report; NULL where a device
                                    * call left them on the GPU (er_report_keep_on_device, exactref/cuda.h) until
                                    * er_report_fetch_classes brings them here */
    int has_worst;
    er_element worst;              /* the worst OUTSIDE element, else the first failing one */
    int n_first;
    er_element first[ER_REPORT_FIRST]; /* the first failing elements in row-major order */
    int filled;                    /* 1 once a call has classified into it; 0 when zeroed or refused */
    int has_widest;                /* whether widest is set: some element's set was computed, finite and away from 0 */
    double widest_rel;             /* its relative width (hi - lo) / max(|lo|, |hi|): how loose the check is */
    er_element widest;             /* the element whose set is widest relative to its size (the earliest of equals) */
    /* The resolution (docs/reference/classes.md): over the computed sets that lie away from 0 (finite, of one sign),
     * the largest and the least relative width; n_unseen counts the elements a fast path decided without their
     * sets (er_report_resolution is then not known). */
    int64_t n_away;
    double coarsest_rel, finest_rel;
    int64_t n_unseen;
    /* An op with a classic bug of a known relative size (the row ops: a variance or mean square divided by n - 1, a
     * softmax denominator missing a term) that may pass here: every set is at least that wide, or the output the bug
     * gives (each element's exact value moved by that factor, rounded to the output format) lies in every set. The
     * bug's size and what it is (the text's note that such a bug may pass); 0 and "" otherwise. */
    double blind_rel;
    char blind_bug[96];
    /* For such an op: the elements whose set and exact value were computed (n_bug_tried), and those among them where
     * the bug's output would lie outside the set (n_bug_seen: the elements that would catch it). 0 otherwise. */
    int64_t n_bug_tried, n_bug_seen;
    /* The elements whose set holds every finite value of the output's format (where an op's bounds claim nothing: an
     * attention row whose scores pass its theorem's premises, inputs that are not finite): they pass whatever the
     * kernel wrote, and the text says how many. */
    int64_t n_unbounded;
    er_status status;              /* ER_OK, or the status of the call that refused */
    char message[256];             /* the refusal's message ("" otherwise) */
    void *device_classes; /* the library's: the classes in device memory (er_report_keep_on_device), else NULL */
    uint32_t keep;        /* the library's: er_report_keep_on_device's mark for the next device call */
    uint64_t guard; /* the library's: er_report_clear frees classes only where this says it allocated them */
} er_report;

/* Zeroes *rep: an unfilled report, which fails (er_report_all is 0) until a call fills it (`er_report rep = {0};`
 * is the same state). */
ER_API void er_report_init(er_report *rep);
/* Frees what *rep owns and zeroes it. Accepts NULL, a zeroed report, and a report no call has filled whatever its
 * bytes: the classes array is freed only where the report's guard shows the library allocated it. */
ER_API void er_report_clear(er_report *rep);
/* 1 when a call filled the report and every element passes; 0 for a failing element, a refusal, a report no call
 * has filled, or NULL. A refusing call leaves its report in this failing state: a test cannot pass by a refusal. */
ER_API int er_report_all(const er_report *rep);
/* The status of the call that refused (ER_OK for a filled or unfilled report) and its message ("" if none). */
ER_API er_status er_report_status(const er_report *rep);
ER_API const char *er_report_message(const er_report *rep);
/* Renders the report as text or JSON into buf. *needed (if not NULL) gets the full length without the NUL;
 * ER_ERR_BUFFER when cap is smaller than that plus one (buf then holds a truncated, NUL-terminated prefix). */
ER_API er_status er_report_text(const er_report *rep, char *buf, size_t cap, size_t *needed);
ER_API er_status er_report_json(const er_report *rep, char *buf, size_t cap, size_t *needed);
/* Writes the text rendering to `stream`; called by the user, never by the library on its own. */
ER_API er_status er_report_fprint(FILE *stream, const er_report *rep);
/* FFI helpers: getters, so bindings never read the struct layout (the worst and first elements are in the JSON). */
ER_API int64_t er_report_numel(const er_report *rep);
ER_API int64_t er_report_count(const er_report *rep, er_class c);   /* -1 for an invalid class */
ER_API int64_t er_report_failed(const er_report *rep);
/* The resolution: r = c / (1 - c) for the largest relative width c among the sets away from 0, so that an output
 * farther than r |v| from any value v its set allows fails at every such element; NaN where no set lies away from 0,
 * where a fast path decided elements without their sets, for a refused or unfilled report, and for NULL. */
ER_API double er_report_resolution(const er_report *rep);
/* NULL for an empty report, and for one whose classes a device call left on the GPU (er_report_fetch_classes) */
ER_API const uint8_t *er_report_classes(const er_report *rep);
ER_API size_t er_report_sizeof(void);
ER_API size_t er_element_sizeof(void);

#ifdef __cplusplus
}
#endif
#endif

/* er_refuse.h: what tests of refusals share: a sentinel-filled report, as an uninitialised one may be, and the
 * check that a refused call left a report that records the refusal and fails (no test passes by a refusal). */
#ifndef ER_REFUSE_H
#define ER_REFUSE_H

#include <string.h>
#include <exactref/exactref.h>

static inline er_report sentinel_report(void) {
    er_report r;
    memset(&r, 0xAB, sizeof r);
    return r;
}
static inline int refused_report(const er_report *r, er_status want) {
    char text[512];
    int same = strcmp(er_report_message(r), er_last_error()) == 0; /* before er_report_text resets the last error */
    er_report_text(r, text, sizeof text, NULL);
    return same && !er_report_all(r) && er_report_status(r) == want && r->classes == NULL && strstr(text, "refused") != NULL;
}

#endif

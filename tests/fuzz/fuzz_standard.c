/* fuzz_standard.c: any bytes as a standard's order and options (split at the first NUL byte, or the first '|').
 * A parse either refuses with ER_ERR_STANDARD (or ER_ERR_UNSUPPORTED) and leaves the standard untouched, or
 * accepts a standard that validates, renders, and parses back from its rendering to the same rendering. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "harness.h"

static const char *const kinds[] = {"parse"};
REACH_TARGET(kinds)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reach_input();
    char *buf = malloc(size + 2);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    buf[size + 1] = '\0';
    char *split = memchr(buf, '|', size);
    const char *order = buf, *options = NULL;
    size_t olen = strlen(buf);
    if (olen < size) options = buf + olen + 1;        /* NUL: order, then options */
    else if (split) { *split = '\0'; options = split + 1; }
    er_standard s, keep;
    memset(&s, 0x5c, sizeof s);
    keep = s;
    reach_call(0);
    er_status st = er_standard_parse(&s, order, options);
    if (st == ER_OK) reach_accept(0);
    if (st != ER_OK) {
        if (st != ER_ERR_STANDARD && st != ER_ERR_UNSUPPORTED) abort();
        if (memcmp(&s, &keep, sizeof s) != 0) abort(); /* a refusal writes nothing */
        free(buf);
        return 0;
    }
    if (er_standard_validate(&s) != ER_OK) abort();
    char r1[512], r2[512];
    size_t need;
    if (er_standard_format(&s, r1, sizeof r1, &need) != ER_OK) abort();
    /* the rendering is order then options: it parses back to the same standard */
    char *sp = strchr(r1, ' ');
    er_standard t;
    if (sp) { *sp = '\0'; st = er_standard_parse(&t, r1, sp + 1); *sp = ' '; }
    else st = er_standard_parse(&t, r1, NULL);
    if (st != ER_OK) abort();
    if (er_standard_format(&t, r2, sizeof r2, NULL) != ER_OK || strcmp(r1, r2) != 0) abort();
    /* the one-string form the docs write parses the same */
    er_standard u;
    if (er_standard_parse(&u, r1, NULL) != ER_OK) abort();
    if (er_standard_format(&u, r2, sizeof r2, NULL) != ER_OK || strcmp(r1, r2) != 0) abort();
    /* every buffer size: ER_ERR_BUFFER with a NUL-terminated prefix below need + 1 */
    for (size_t cap = 0; cap <= need + 1; cap++) {
        char small[512];
        memset(small, 'x', sizeof small);
        st = er_standard_format(&s, cap ? small : NULL, cap, NULL);
        if (cap < need + 1 ? st != ER_ERR_BUFFER : st != ER_OK) abort();
        if (cap && (strlen(small) != (cap - 1 < need ? cap - 1 : need) || strncmp(small, r1, strlen(small)) != 0)) abort();
    }
    for (int fa = 0; fa < 9; fa++) (void)er_standard_is_fixed(&s, (er_format)fa, (er_format)((fa * 5) % 9));
    free(buf);
    return 0;
}

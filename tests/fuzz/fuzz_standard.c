/* fuzz_standard.c: any bytes as a standard's order and options (split at the first NUL byte, or the first '|').
 * A parse either refuses with ER_ERR_STANDARD (or ER_ERR_UNSUPPORTED) and leaves the standard untouched, or
 * accepts a standard that validates, renders, and parses back from its rendering to the same rendering (a tree: in
 * its canonical text, which therefore renders as itself). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "harness.h"

static const char *const kinds[] = {"parse", "tree"};
REACH_TARGET(kinds)

/* The elements of a tree's canonical text at *p (nodes, lists and X*C+S items), *p moved past it. */
static long long tree_elements(const char **p) {
    if (**p != '(') { strtoll(*p, (char **)p, 10); return 1; }
    long long n = 0;
    (*p)++;
    while (**p && **p != ')') {
        if (**p == ',') { (*p)++; continue; }
        long long k = tree_elements(p);
        if (**p == '*') { (*p)++; k *= strtoll(*p, (char **)p, 10); (*p)++; strtoll(*p, (char **)p, 10); }
        n += k;
    }
    if (**p) (*p)++;
    return n;
}

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
    int tree = strncmp(order, "tree:", 5) == 0;
    reach_call(tree);
    er_status st = er_standard_parse(&s, order, options);
    if (st == ER_OK) reach_accept(tree);
    if (st != ER_OK) {
        if (st != ER_ERR_STANDARD && st != ER_ERR_UNSUPPORTED) abort();
        if (memcmp(&s, &keep, sizeof s) != 0) abort(); /* a refusal writes nothing */
        free(buf);
        return 0;
    }
    if (er_standard_validate(&s) != ER_OK) abort();
    size_t need;
    if (er_standard_format(&s, NULL, 0, &need) != ER_ERR_BUFFER) abort();
    char *r1 = malloc(need + 1), *r2 = malloc(need + 1), *small = malloc(need + 2);
    if (!r1 || !r2 || !small) abort();
    if (er_standard_format(&s, r1, need + 1, NULL) != ER_OK) abort();
    /* the rendering is order then options (a tree's canonical text has no space): it parses back to the same
     * standard */
    char *sp = strchr(r1, ' ');
    er_standard t;
    if (sp) { *sp = '\0'; st = er_standard_parse(&t, r1, sp + 1); *sp = ' '; }
    else st = er_standard_parse(&t, r1, NULL);
    if (st != ER_OK) abort();
    if (er_standard_format(&t, r2, need + 1, NULL) != ER_OK || strcmp(r1, r2) != 0) abort();
    /* the one-string form the docs write parses the same */
    er_standard u;
    if (er_standard_parse(&u, r1, NULL) != ER_OK) abort();
    if (er_standard_format(&u, r2, need + 1, NULL) != ER_OK || strcmp(r1, r2) != 0) abort();
    /* buffer sizes: ER_ERR_BUFFER with a NUL-terminated prefix below need + 1 (every size up to 64, then those
     * around need; a long tree's text takes a few sizes, each a full rendering) */
    const char *tp = r1 + 5;
    long long elements = strncmp(r1, "tree:", 5) == 0 ? tree_elements(&tp) : 0;
    size_t upto = need < 4096 && elements < 4096 ? 64 : 3;
    for (size_t cap = 0; cap <= need + 1; cap = cap < upto ? cap + 1 : cap < need - 1 ? need - 1 : cap + 1) {
        memset(small, 'x', need + 2);
        st = er_standard_format(&s, cap ? small : NULL, cap, NULL);
        if (cap < need + 1 ? st != ER_ERR_BUFFER : st != ER_OK) abort();
        if (cap && (strlen(small) != (cap - 1 < need ? cap - 1 : need) || strncmp(small, r1, strlen(small)) != 0)) abort();
    }
    free(r1);
    free(r2);
    free(small);
    for (int fa = 0; fa < (elements < 4096 ? 9 : 1); fa++)
        (void)er_standard_is_fixed(&s, (er_format)fa, (er_format)((fa * 5) % 9));
    free(buf);
    return 0;
}

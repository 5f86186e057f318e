#define _POSIX_C_SOURCE 200809L /* sysconf */
/* mem.c: the memory cap (docs/conventions.md, Memory): a request whose planned allocations exceed it is refused
 * with ER_ERR_NOMEM before anything is allocated, so that a large request fails one call instead of sending the
 * process into the kernel's out-of-memory killer or GMP's abort. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "core/internal.h"

/* EXACTREF_MAX_BYTES: a number of bytes, with an optional suffix K, M, G or T (powers of 1024); unset or empty:
 * half the machine's physical memory (no cap where the system does not say). 0 when the value is malformed. */
static int er_mem_cap(double *cap, const char **bad) {
    const char *e = getenv("EXACTREF_MAX_BYTES");
    *bad = NULL;
    if (!e || !*e) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
        *cap = pages > 0 && size > 0 ? 0.5 * (double)pages * (double)size : 1e300;
        return 1;
    }
    errno = 0;
    char *end;
    double v = strtod(e, &end);
    double scale = 1;
    switch (*end) {
    case 'K': case 'k': scale = 1024.0; end++; break;
    case 'M': case 'm': scale = 1024.0 * 1024; end++; break;
    case 'G': case 'g': scale = 1024.0 * 1024 * 1024; end++; break;
    case 'T': case 't': scale = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (end == e || *end || errno || !(v >= 0) || v * scale > 1e30) { *bad = e; return 0; }
    *cap = v * scale;
    return 1;
}

int er__mem_fits(double bytes) {
    double cap;
    const char *bad;
    return er_mem_cap(&cap, &bad) && bytes <= cap;
}

er_status er__mem_check(double bytes, const char *what) {
    double cap;
    const char *bad;
    if (!er_mem_cap(&cap, &bad))
        return er__fail(ER_ERR_INVALID,
                        "EXACTREF_MAX_BYTES='%.40s': expected a number of bytes, with an optional K, M, G or T", bad);
    if (bytes <= cap) return ER_OK;
    return er__fail(ER_ERR_NOMEM, "%s needs about %.3g bytes, more than the cap of %.3g bytes (EXACTREF_MAX_BYTES; by "
                    "default half the machine's memory)", what, bytes, cap);
}

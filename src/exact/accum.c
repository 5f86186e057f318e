/* accum.c: the long accumulator's allocation, carry pass and exact summary (see accum.h). */
#include <stdlib.h>
#include "exact/accum.h"

/* The digits needed to cover [base, top) with room for the carries of 2^31 full additions and the 5-digit
 * reach of a 106-bit term shifted by up to 31 bits. */
er_status er__acc_init(er_acc *a, int64_t base, int64_t top) {
    if (top < base) top = base;
    int64_t span = top - base;
    if (span > (INT64_C(1) << 20))
        return er__fail(ER_ERR_NOMEM, "exact accumulator span of %lld bits is too large", (long long)span);
    int nd = (int)(span / 32) + 8;
    int64_t *d = calloc(2 * (size_t)nd, sizeof *d);
    if (!d) return er__fail(ER_ERR_NOMEM, "cannot allocate an exact accumulator of %d digits", nd);
    a->d = d;
    a->d2 = d + nd;
    a->nd = nd;
    a->base = base;
    a->pending = 0;
    return ER_OK;
}

void er__acc_free(er_acc *a) {
    if (!a) return;
    free(a->d);
    a->d = a->d2 = NULL;
    a->nd = 0;
}

void er__acc_reset(er_acc *a) {
    memset(a->d, 0, 2 * (size_t)a->nd * sizeof *a->d);
    a->pending = 0;
}

static void er_carry_bank(int64_t *d, int nd) {
    for (int i = 0; i < nd - 1; i++) {
        int64_t c = d[i] >> 32; /* arithmetic shift: floor division by 2^32 */
        d[i] -= c * (INT64_C(1) << 32);
        d[i + 1] += c;
    }
}

void er__acc_carry(er_acc *a) {
    er_carry_bank(a->d, a->nd);
    er_carry_bank(a->d2, a->nd);
    a->pending = 0;
}

void er__acc_add_u128(er_acc *a, int neg, unsigned __int128 m, int64_t e) {
    int64_t off = e - a->base;
    int64_t i = off >> 5;
    int s = (int)(off & 31);
    unsigned __int128 lo = m << s;
    uint64_t hi = s ? (uint64_t)(m >> (128 - s)) : 0;
    int64_t c[5] = {(int64_t)(uint32_t)lo, (int64_t)(uint32_t)(lo >> 32), (int64_t)(uint32_t)(lo >> 64),
                    (int64_t)(uint32_t)(lo >> 96), (int64_t)hi};
    int64_t *d = a->d + i;
    for (int k = 0; k < 5; k++) d[k] += neg ? -c[k] : c[k];
    if (++a->pending >= ER_ACC_PASS_EVERY) er__acc_carry(a);
}

void er__acc_summary128(er_acc *a, int *neg, unsigned __int128 *m, int64_t *e, int *sticky) {
    int64_t *d = a->d;
    er__acc_carry(a);
    /* Fold the second bank in: after a carry pass every digit is below 2^32 in magnitude (the top one holds
     * a small signed value), so the sums cannot overflow. */
    for (int i = 0; i < a->nd; i++) { d[i] += a->d2[i]; a->d2[i] = 0; }
    er__acc_carry(a);
    *neg = d[a->nd - 1] < 0;
    if (*neg) {
        for (int i = 0; i < a->nd; i++) d[i] = -d[i];
        er__acc_carry(a);
    }
    int h = a->nd - 1;
    while (h >= 0 && d[h] == 0) h--;
    if (h < 0) { *m = 0; *e = 0; *sticky = 0; return; }
    /* The top four digits (each below 2^32 now: the headroom keeps the top digit's carries out of it), shifted up
     * until the leading bit is set, the fifth filling in from below; everything further down only matters as a
     * sticky bit. Digits below the least are zeros. */
    unsigned __int128 w = 0;
    for (int k = 0; k < 4; k++) w = (w << 32) | (uint64_t)(h - k >= 0 ? d[h - k] : 0);
    uint64_t below = h >= 4 ? (uint64_t)d[h - 4] : 0;
    int st = 0;
    for (int i = 0; i < h - 4; i++) st |= d[i] != 0;
    int lz = __builtin_clzll((uint64_t)d[h]) - 32;
    if (lz) {
        w = (w << lz) | (below >> (32 - lz));
        below = (below << lz) & UINT64_C(0xffffffff);
    }
    *m = w;
    *e = a->base + 32 * (int64_t)(h - 3) - lz;
    *sticky = st | (below != 0);
}

void er__acc_summary(er_acc *a, int *neg, uint64_t *m, int64_t *e, int *sticky) {
    unsigned __int128 w;
    int64_t ew;
    int st;
    er__acc_summary128(a, neg, &w, &ew, &st);
    *m = (uint64_t)(w >> 64);
    *e = w ? ew + 64 : 0;
    *sticky = st | ((uint64_t)w != 0);
}

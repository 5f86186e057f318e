/* npz.h: a small reader of .npz archives (zip, entries stored or deflated: zlib's raw inflate) of C-order .npy
 * arrays, enough for the captured GPU cases. Refuses what it does not understand instead of guessing. */
#ifndef ER_NPZ_H
#define ER_NPZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct npy_array {
    char name[128];   /* entry name without ".npy" */
    char descr[16];   /* "<f2", "<f4", "<u2", "|u1", ... */
    int ndim;
    int64_t shape[8];
    const void *data;
    int64_t nbytes;
} npy_array;

typedef struct npz_file {
    unsigned char *buf;
    size_t size;
    npy_array *arr;
    int n;
    unsigned char **owned;  /* the inflated entries (the arrays point into them) */
    int nowned;
} npz_file;

/* Inflates a raw deflate stream of csize bytes into a new buffer of exactly usize bytes; NULL on any error. */
static inline unsigned char *npz_inflate(const unsigned char *src, uint64_t csize, uint64_t usize) {
    unsigned char *out = malloc(usize ? (size_t)usize : 1);
    if (!out || csize > UINT32_MAX || usize > UINT32_MAX) { free(out); return NULL; }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -15) != Z_OK) { free(out); return NULL; }
    zs.next_in = (unsigned char *)src;
    zs.avail_in = (uInt)csize;
    zs.next_out = out;
    zs.avail_out = (uInt)usize;
    int rc = inflate(&zs, Z_FINISH);
    int ok = rc == Z_STREAM_END && zs.total_out == usize;
    inflateEnd(&zs);
    if (!ok) { free(out); return NULL; }
    return out;
}

static inline uint32_t npz_u32(const unsigned char *p) { return p[0] | (p[1] << 8) | (p[2] << 16) | ((uint32_t)p[3] << 24); }
static inline uint16_t npz_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint64_t npz_u64(const unsigned char *p) { return npz_u32(p) | ((uint64_t)npz_u32(p + 4) << 32); }

/* Parses one .npy payload. Returns 0 on success, else a static error string via *err. */
static inline int npy_parse(npy_array *a, const unsigned char *p, size_t n, const char **err) {
    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) { *err = "not an .npy payload"; return -1; }
    size_t hlen, hoff;
    if (p[6] == 1) { hlen = npz_u16(p + 8); hoff = 10; } else { hlen = npz_u32(p + 8); hoff = 12; }
    if (hoff + hlen > n) { *err = "truncated .npy header"; return -1; }
    char hdr[1024];
    if (hlen >= sizeof hdr) { *err = ".npy header too long"; return -1; }
    memcpy(hdr, p + hoff, hlen);
    hdr[hlen] = 0;
    const char *d = strstr(hdr, "'descr': '");
    if (!d || sscanf(d + 10, "%15[^']", a->descr) != 1) { *err = "no descr"; return -1; }
    if (strstr(hdr, "'fortran_order': True")) { *err = "fortran order not supported"; return -1; }
    const char *s = strstr(hdr, "'shape': (");
    if (!s) { *err = "no shape"; return -1; }
    s += 10;
    a->ndim = 0;
    while (*s && *s != ')') {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        if (a->ndim == 8) { *err = "too many dimensions"; return -1; }
        a->shape[a->ndim++] = strtoll(s, (char **)&s, 10);
    }
    int64_t numel = 1;
    for (int i = 0; i < a->ndim; i++) numel *= a->shape[i];
    int isz = atoi(a->descr + 2);
    if (isz <= 0) { *err = "bad item size"; return -1; }
    a->data = p + hoff + hlen;
    a->nbytes = numel * isz;
    if ((size_t)(hoff + hlen) + (size_t)a->nbytes > n) { *err = "truncated .npy data"; return -1; }
    return 0;
}

/* Loads every entry. Returns 0 on success; on failure *err says why. */
static inline int npz_load(npz_file *z, const char *path, const char **err) {
    memset(z, 0, sizeof *z);
    FILE *f = fopen(path, "rb");
    if (!f) { *err = "cannot open file"; return -1; }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    z->buf = malloc((size_t)sz);
    if (!z->buf || fread(z->buf, 1, (size_t)sz, f) != (size_t)sz) { fclose(f); *err = "cannot read file"; return -1; }
    fclose(f);
    z->size = (size_t)sz;
    size_t off = 0;
    int cap = 0;
    while (off + 30 <= z->size && npz_u32(z->buf + off) == 0x04034b50) {
        const unsigned char *h = z->buf + off;
        uint16_t flags = npz_u16(h + 6), method = npz_u16(h + 8), nlen = npz_u16(h + 26), xlen = npz_u16(h + 28);
        uint64_t csize = npz_u32(h + 18), usize = npz_u32(h + 22);
        if (method != 0 && method != 8) { *err = "an entry neither stored nor deflated"; return -1; }
        if (flags & 8) { *err = "entries with data descriptors are not supported"; return -1; }
        const unsigned char *x = h + 30 + nlen;
        if (csize == 0xFFFFFFFFu || usize == 0xFFFFFFFFu) { /* zip64: sizes in the extra field */
            for (const unsigned char *q = x; q + 4 <= x + xlen; q += 4 + npz_u16(q + 2))
                if (npz_u16(q) == 1) { usize = npz_u64(q + 4); csize = npz_u64(q + 4 + 8); }
        }
        if (z->n == cap) {
            cap = cap ? 2 * cap : 64;
            npy_array *na = realloc(z->arr, sizeof *na * (size_t)cap);
            if (!na) { *err = "out of memory"; return -1; }
            z->arr = na;
        }
        npy_array *a = &z->arr[z->n];
        size_t nl = nlen < sizeof a->name ? nlen : sizeof a->name - 1;
        memcpy(a->name, h + 30, nl);
        a->name[nl] = 0;
        char *dot = strstr(a->name, ".npy");
        if (dot) *dot = 0;
        const unsigned char *data = x + xlen;
        if (data + csize > z->buf + z->size) { *err = "truncated entry"; return -1; }
        const unsigned char *payload = data;
        uint64_t plen = csize;
        if (method == 8) {
            unsigned char **no = realloc(z->owned, sizeof *no * (size_t)(z->nowned + 1));
            if (!no) { *err = "out of memory"; return -1; }
            z->owned = no;
            unsigned char *u = npz_inflate(data, csize, usize);
            if (!u) { *err = "a deflated entry does not inflate to its size"; return -1; }
            z->owned[z->nowned++] = u;
            payload = u;
            plen = usize;
        }
        if (npy_parse(a, payload, (size_t)plen, err) != 0) return -1;
        z->n++;
        off = (size_t)(data + csize - z->buf);
    }
    if (z->n == 0) { *err = "no entries"; return -1; }
    return 0;
}

static inline const npy_array *npz_find(const npz_file *z, const char *name) {
    for (int i = 0; i < z->n; i++) if (strcmp(z->arr[i].name, name) == 0) return &z->arr[i];
    return NULL;
}

#ifdef EXACTREF_EXACTREF_H
/* An exactref view of an array (float16/32/64 natively; uint16 holds bfloat16 patterns). 0 if unsupported. */
static inline int npz_view(er_tensor *t, const npy_array *a) {
    er_format f;
    if (strcmp(a->descr, "<f2") == 0) f = ER_FP16;
    else if (strcmp(a->descr, "<f4") == 0) f = ER_FP32;
    else if (strcmp(a->descr, "<f8") == 0) f = ER_FP64;
    else if (strcmp(a->descr, "<u2") == 0) f = ER_BF16;
    else return 0;
    return er_tensor_view(t, f, a->ndim, a->shape, NULL, a->data) == ER_OK;
}
#endif

static inline void npz_free(npz_file *z) {
    for (int i = 0; i < z->nowned; i++) free(z->owned[i]);
    free(z->owned);
    free(z->buf);
    free(z->arr);
    memset(z, 0, sizeof *z);
}

#endif

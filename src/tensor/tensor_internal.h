/* tensor_internal.h: checked views and element loads shared by the ops. */
#ifndef ER_TENSOR_INTERNAL_H
#define ER_TENSOR_INTERNAL_H

#include "core/internal.h"
#include "format/format.h"

/* Validates a view filled by hand (the caller may bypass er_tensor_view); `name` goes into the message. */
ER_INTERNAL er_status er__tensor_check(const er_tensor *t, const char *name);

/* The raw pattern of the element at element offset `off` (fp4 and fp6: the byte's low bits, the rest ignored). */
static inline uint64_t er__load_bits(const er_tensor *t, int64_t off) {
    const er_fmt_info *fi = er__fmt(t->format);
    switch (fi->bits) {
    case 8: return ((const uint8_t *)t->data)[off] & ((1u << fi->vbits) - 1);
    case 16: { uint16_t v; memcpy(&v, (const char *)t->data + 2 * off, 2); return v; }
    case 32: { uint32_t v; memcpy(&v, (const char *)t->data + 4 * off, 4); return v; }
    default: { uint64_t v; memcpy(&v, (const char *)t->data + 8 * off, 8); return v; }
    }
}

static inline double er__load(const er_tensor *t, int64_t off) {
    if (t->format == ER_FP32) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * off, 4);
        return f;
    } /* a float is its value */
    if (t->format == ER_FP16) {
        uint16_t h;
        memcpy(&h, (const char *)t->data + 2 * off, 2);
        int e = (h >> 10) & 31;
        if (e < 31) { /* (subnormal or normal significand) 2^(e - 25): exact */
            double m = (double)((h & 1023) | (e ? 1024 : 0)) * (double)((uint64_t)1 << (e ? e - 1 : 0)) * 0x1p-24;
            return h >> 15 ? -m : m;
        }
    }
    return er__decode(er__fmt(t->format), er__load_bits(t, off));
}

/* Whether t is row-major contiguous: the element offset is the row-major index. */
static inline int er__row_major(const er_tensor *t) {
    int64_t st = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != st) return 0;
        st *= t->shape[i];
    }
    return 1;
}

/* The element offset of the row-major position idx in a strided view. */
static inline int64_t er__offset(const er_tensor *t, int64_t idx) {
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        off += (idx % t->shape[i]) * t->strides[i];
        idx /= t->shape[i];
    }
    return off;
}

/* Decodes the n elements at row-major positions idx .. idx + n - 1 into dst (a row-major view reads them in one
 * pass, fp16's in the build of er__simd()'s level simd; a strided one a run of its last dimension at a time, as
 * er__load_step does). */
ER_INTERNAL void er__load_run(int simd, const er_tensor *t, int64_t idx, int64_t n, double *dst);
/* Decodes the n elements at element offsets off, off + step, ... into dst: one run (er__load_contig) where step is 1
 * and the format has one, else element by element. */
ER_INTERNAL void er__load_step(int simd, const er_tensor *t, int64_t off, int64_t step, int64_t n, double *dst);
/* Decodes n contiguous values of format f at p (any alignment) into dst, in loops without a call (fp16's in the build
 * of er__simd()'s level simd), for fp32, fp16 and bf16: 1; 0 (nothing written) for another format. */
ER_INTERNAL int er__load_contig(int simd, er_format f, const void *p, int64_t n, double *dst);

/* The bytes a view spans, [*lo, *hi) (empty for a view of no elements). */
ER_INTERNAL void er__view_bytes(const er_tensor *t, uintptr_t *lo, uintptr_t *hi);
/* A view that is written must not share memory with a view read in the same call: ER_ERR_OUTPUT naming both when
 * their spans overlap (`bytes`: a plain array of that many bytes at p instead of a view, when t is NULL). */
ER_INTERNAL er_status er__check_disjoint(const er_tensor *w, const char *wname, const void *p, size_t bytes,
                                         const er_tensor *t, const char *tname);
/* A view that is written must not repeat elements (a zero stride over a dimension longer than 1). */
ER_INTERNAL er_status er__check_distinct(const er_tensor *out);
/* Encodes v (rounded to nearest under the overflow rule ov) into element idx (row-major) of a writable view. */
ER_INTERNAL void er__store_value(const er_tensor *t, int64_t idx, double v, er_overflow ov);

#endif

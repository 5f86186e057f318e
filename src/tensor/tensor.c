/* tensor.c: validation of tensor views and element access through strides. */
#include "core/internal.h"
#include "format/format.h"
#include "tensor/tensor_internal.h"

er_status er_tensor_view(er_tensor *t, er_format f, int ndim, const int64_t *shape, const int64_t *strides,
                         const void *data) {
    er__ok();
    ER_CHECK_NULL(t, "t");
    if (!er__fmt(f)) return er__fail(ER_ERR_FORMAT, "invalid format value %d", (int)f);
    if (ndim < 1 || ndim > ER_MAX_DIMS)
        return er__fail(ER_ERR_SIZE, "ndim is %d; it must be between 1 and %d", ndim, ER_MAX_DIMS);
    ER_CHECK_NULL(shape, "shape");
    er_tensor v;
    memset(&v, 0, sizeof v);
    v.format = f;
    v.ndim = ndim;
    v.data = data;
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    if (strides) {
        for (int i = 0; i < ndim; i++) v.strides[i] = strides[i];
    } else {
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            v.strides[i] = s;
            if (shape[i] > 0 && !er__mul_ok(s, shape[i], &s)) s = INT64_MAX; /* caught by validation below */
        }
    }
    ER_RETURN_IF_ERROR(er__tensor_check(&v, "tensor"));
    *t = v;
    return ER_OK;
}

er_status er__tensor_check(const er_tensor *t, const char *name) {
    const er_fmt_info *fi = er__fmt(t->format);
    if (!fi) return er__fail(ER_ERR_FORMAT, "%s has an invalid format value %d", name, (int)t->format);
    if (t->ndim < 1 || t->ndim > ER_MAX_DIMS)
        return er__fail(ER_ERR_SIZE, "%s has ndim %d; it must be between 1 and %d", name, t->ndim, ER_MAX_DIMS);
    int64_t numel = 1, extent = 0, bytes;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return er__fail(ER_ERR_SIZE, "%s has a negative size %lld in dimension %d", name, (long long)t->shape[i],
                            i);
        if (t->strides[i] < 0)
            return er__fail(ER_ERR_SIZE,
                            "%s has a negative stride %lld in dimension %d (negative strides are not supported)", name,
                            (long long)t->strides[i], i);
        if (!er__mul_ok(numel, t->shape[i], &numel))
            return er__fail(ER_ERR_SIZE, "%s has more elements than an int64 can count", name);
    }
    if (numel == 0) return ER_OK;
    for (int i = 0; i < t->ndim; i++) {
        int64_t reach;
        if (!er__mul_ok(t->shape[i] - 1, t->strides[i], &reach) || !er__add_ok(extent, reach, &extent))
            return er__fail(ER_ERR_SIZE, "%s: the strides reach beyond what an int64 can address (dimension %d)", name,
                            i);
    }
    int64_t count;
    if (!er__add_ok(extent, 1, &count) || !er__mul_ok(count, fi->bits / 8, &bytes))
        return er__fail(ER_ERR_SIZE, "%s spans more bytes than an int64 can count", name);
    if (!t->data)
        return er__fail(ER_ERR_NULL, "%s has %lld elements but its data pointer is NULL", name, (long long)numel);
    return ER_OK;
}

int64_t er_tensor_numel(const er_tensor *t) {
    if (!t || er__tensor_check(t, "tensor") != ER_OK) return -1;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

er_status er_tensor_get(double *out, const er_tensor *t, const int64_t *index) {
    er__ok();
    ER_CHECK_NULL(out, "out");
    ER_CHECK_NULL(t, "t");
    ER_CHECK_NULL(index, "index");
    ER_RETURN_IF_ERROR(er__tensor_check(t, "t"));
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i])
            return er__fail(ER_ERR_INVALID, "index %lld is out of range [0, %lld) in dimension %d",
                            (long long)index[i], (long long)t->shape[i], i);
        off += index[i] * t->strides[i];
    }
    *out = er__load(t, off);
    return ER_OK;
}

size_t er_tensor_sizeof(void) { return sizeof(er_tensor); }

void er__view_bytes(const er_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    int64_t mn = 0, mx = 0;
    for (int i = 0; i < t->ndim;
         i++) /* no element: no byte, whatever the strides (checked only for views with elements) */
        if (t->shape[i] == 0) { *lo = *hi = (uintptr_t)t->data; return; }
    for (int i = 0; i < t->ndim; i++) {
        int64_t reach = (t->shape[i] - 1) * t->strides[i]; /* checked not to overflow by er__tensor_check */
        if (reach < 0) mn += reach; else mx += reach;
    }
    int64_t es = er__fmt(t->format)->bits / 8;
    *lo = (uintptr_t)t->data + (uintptr_t)(mn * es);
    *hi = (uintptr_t)t->data + (uintptr_t)((mx + 1) * es);
}

er_status er__check_disjoint(const er_tensor *w, const char *wname, const void *p, size_t bytes, const er_tensor *t,
                             const char *tname) {
    uintptr_t a0, a1, b0, b1;
    if (w) er__view_bytes(w, &a0, &a1);
    else { a0 = (uintptr_t)p; a1 = a0 + bytes; }
    er__view_bytes(t, &b0, &b1);
    if (a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1)
        return er__fail(ER_ERR_OUTPUT, "%s shares memory with %s, which the call reads: give it memory of its own",
                        wname, tname);
    return ER_OK;
}

/* n fp32 values from p, widened (the source and destination do not overlap: the loop vectorises) */
static void er_f32_run(const char *restrict p, int64_t n, double *restrict dst) {
    for (int64_t k = 0; k < n; k++) {
        float f;
        memcpy(&f, p + 4 * k, 4);
        dst[k] = f;
    }
}

/* n fp16 values from p, decoded exactly without a call, a table or a branch: (1024 + m) 2^(e - 25) for an exponent
 * field e of 1 to 30, m 2^-24 for 0 (the scale's pattern built from e), infinity or a NaN for 31, then the sign. The
 * significand converts from a 32-bit integer, which vectorises without AVX-512 (a 64-bit one does not); built for
 * the baseline ISA, AVX2 and AVX-512 (er__simd). */
ER_ALWAYS_INLINE void er_f16_run_body(const char *restrict p, int64_t n, double *restrict dst) {
    for (int64_t k = 0; k < n; k++) {
        uint16_t v;
        memcpy(&v, p + 2 * k, 2);
        uint64_t e = (v >> 10) & 31, m = v & 1023, sb = ((e + (e == 0)) + 998) << 52, b;
        double scale, a;
        memcpy(&scale, &sb, 8);
        a = (double)(int32_t)(m | (uint64_t)(e != 0) << 10) * scale;
        memcpy(&b, &a, 8);
        b = e == 31 ? UINT64_C(0x7FF0000000000000) | m << 42 : b;
        b |= (uint64_t)(v >> 15) << 63;
        memcpy(&dst[k], &b, 8);
    }
}
ER_SIMD_BUILDS(er_f16_run, (const char *restrict p, int64_t n, double *restrict dst), (p, n, dst), er_f16_run_body)

/* n bf16 values from p: each the upper half of an fp32's pattern. */
static void er_bf16_run(const char *restrict p, int64_t n, double *restrict dst) {
    for (int64_t k = 0; k < n; k++) {
        uint16_t v;
        memcpy(&v, p + 2 * k, 2);
        uint32_t u = (uint32_t)v << 16;
        float f;
        memcpy(&f, &u, 4);
        dst[k] = f;
    }
}

int er__load_contig(int simd, er_format f, const void *p, int64_t n, double *dst) {
    if (f == ER_FP32) er_f32_run(p, n, dst);
    else if (f == ER_FP16) er_f16_run(simd, p, n, dst);
    else if (f == ER_BF16) er_bf16_run(p, n, dst);
    else return 0;
    return 1;
}

void er__load_step(int simd, const er_tensor *t, int64_t off, int64_t step, int64_t n, double *dst) {
    const char *p = (const char *)t->data + off * (int64_t)(er__fmt(t->format)->bits / 8);
    if (step == 1 && er__load_contig(simd, t->format, p, n, dst)) return;
    for (int64_t k = 0; k < n; k++) dst[k] = er__load(t, off + k * step);
}

void er__load_run(int simd, const er_tensor *t, int64_t idx, int64_t n, double *dst) {
    if (!er__row_major(t)) { /* along the last dimension's runs: one offset computed a run, each run contiguous where
                              * that dimension's stride is 1 (a bias broadcast over rows) */
        int64_t len = t->ndim > 0 ? t->shape[t->ndim - 1] : 1, st = t->ndim > 0 ? t->strides[t->ndim - 1] : 0;
        for (int64_t k = 0; k < n;) {
            int64_t off = er__offset(t, idx + k), r = len - (idx + k) % len;
            r = r < n - k ? r : n - k;
            er__load_step(simd, t, off, st, r, dst + k);
            k += r;
        }
        return;
    }
    const char *p = (const char *)t->data + (size_t)idx * (size_t)(er__fmt(t->format)->bits / 8);
    if (er__load_contig(simd, t->format, p, n, dst)) return;
    for (int64_t k = 0; k < n; k++) dst[k] = er__load(t, idx + k);
}

er_status er__check_distinct(const er_tensor *out) {
    for (int i = 0; i < out->ndim; i++)
        if (out->shape[i] == 0) return ER_OK; /* no element, none repeated (numpy gives empty arrays stride 0) */
    for (int i = 0; i < out->ndim; i++)
        if (out->strides[i] == 0 && out->shape[i] > 1)
            return er__fail(ER_ERR_OUTPUT, "the output view repeats elements (stride 0 in dimension %d)", i);
    return ER_OK;
}

void er__store_value(const er_tensor *t, int64_t idx, double v, er_overflow ov) {
    const er_fmt_info *fi = er__fmt(t->format);
    if (ov == ER_OVERFLOW_IEEE && !fi->has_inf) ov = ER_OVERFLOW_SATURATE;
    uint64_t bits = 0; /* a value with no pattern (NaN in fp4) writes 0; the callers store none */
    er_encode(&bits, t->format, v, ER_ROUND_NEAREST, ov);
    char *p = (char *)(uintptr_t)t->data + er__offset(t, idx) * (fi->bits / 8);
    switch (fi->bits) {
    case 8: *(uint8_t *)p = (uint8_t)bits; break;
    case 16: { uint16_t x = (uint16_t)bits; memcpy(p, &x, 2); break; }
    case 32: { uint32_t x = (uint32_t)bits; memcpy(p, &x, 4); break; }
    default: memcpy(p, &bits, 8); break;
    }
}

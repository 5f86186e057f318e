/* tensor_internal.h: checked views and element loads shared by the ops. */
#ifndef ER_TENSOR_INTERNAL_H
#define ER_TENSOR_INTERNAL_H

#include "core/internal.h"

/* Validates a view filled by hand (the caller may bypass er_tensor_view); `name` goes into the message. */
ER_INTERNAL er_status er__tensor_check(const er_tensor *t, const char *name);

/* The raw pattern of the element at element offset `off`. */
static inline uint64_t er__load_bits(const er_tensor *t, int64_t off) {
    switch (er__fmt(t->format)->bits) {
    case 8: return ((const uint8_t *)t->data)[off];
    case 16: { uint16_t v; memcpy(&v, (const char *)t->data + 2 * off, 2); return v; }
    case 32: { uint32_t v; memcpy(&v, (const char *)t->data + 4 * off, 4); return v; }
    default: { uint64_t v; memcpy(&v, (const char *)t->data + 8 * off, 8); return v; }
    }
}

static inline double er__load(const er_tensor *t, int64_t off) {
    if (t->format == ER_FP32) { float f; memcpy(&f, (const char *)t->data + 4 * off, 4); return f; } /* a float is its value */
    return er__decode(er__fmt(t->format), er__load_bits(t, off));
}

#endif

/* attn_kernel.h: what the attention tests' emulated kernels share (t-attention.c, t-attn-bwd.c). */
#ifndef ER_ATTN_KERNEL_H
#define ER_ATTN_KERNEL_H

#include <math.h>
#include "er_test.h"

/* exp (base2 = 0) or exp2 of x as a U-ulp function at the edge dir of its budget (1 up, -1 down, 2 either at
 * random, 0 none): U ulps from the correctly rounded fp32 value, as CUDA's table counts them (up to U + 1/2 ulps
 * from the exact value). */
static inline float er_test_fexp(double x, int base2, int dir, int U) {
    float f = (float)(base2 ? exp2(x) : exp(x));
    if (dir == 2) dir = (er_rand64() & 1) ? 1 : -1;
    if (dir == 0 || f == 0) return f;
    for (int k = 0; k < U; k++) f = nextafterf(f, dir > 0 ? INFINITY : 0.0f);
    return f;
}

/* The keys query i sees among Sk for Sq queries: [*j0, *j1] (empty when *j1 < *j0), under a causal mask (aligned
 * bottom-right or top-left) moved by off keys, and a window of wl keys left and wr right. */
static inline void er_test_keys_of(int i, int Sq, int Sk, int causal, int bottom_right, int window, int wl, int wr,
                                   int off, int *j0, int *j1) {
    int ii = i + (bottom_right ? Sk - Sq : 0);
    *j0 = 0;
    *j1 = Sk - 1;
    if (causal && ii + off < *j1) *j1 = ii + off;
    if (window) {
        if (ii - wl > *j0) *j0 = ii - wl;
        if (ii + wr < *j1) *j1 = ii + wr;
    }
}

#endif

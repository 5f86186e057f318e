/* devbufs.h: the device buffers of one GPU check, allocated on its stream and freed together (src/cuda/). */
#ifndef ER_DEVBUFS_H
#define ER_DEVBUFS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

enum { ER_DEVBUFS = 32 };
typedef struct er_devbufs { void *p[ER_DEVBUFS]; int n; } er_devbufs;

/* bytes on stream s, kept in b; nothing once *e holds an error (which a failure sets). */
static inline void *er_dev_alloc(er_devbufs *b, size_t bytes, cudaStream_t s, cudaError_t *e) {
    void *p = NULL;
    if (*e == cudaSuccess && b->n == ER_DEVBUFS) *e = cudaErrorMemoryAllocation; /* never: a path holds fewer */
    if (*e == cudaSuccess) *e = cudaMallocAsync(&p, bytes ? bytes : 1, s);
    if (*e == cudaSuccess) b->p[b->n++] = p;
    return p;
}
/* Frees every buffer of b on stream s. */
static inline void er_dev_free_all(er_devbufs *b, cudaStream_t s) {
    for (int i = 0; i < b->n; i++) cudaFreeAsync(b->p[i], s);
    b->n = 0;
}

#endif

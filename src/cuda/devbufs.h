/* devbufs.h: what the GPU paths of src/cuda/ share: the device buffers of one check, allocated on its stream and
 * freed together; host memory locked for a copy from the GPU; a report's classes kept on the device; the kernels'
 * code of an output format; the order of element or row numbers. */
#ifndef ER_DEVBUFS_H
#define ER_DEVBUFS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <exactref/format.h>
#include <exactref/report.h>
#include <exactref/tensor.h>

enum { ER_DEVBUFS = 32 };
typedef struct er_devbufs { void *p[ER_DEVBUFS]; int n; } er_devbufs;

/* bytes on stream s from the library's memory pool of the current device (device.c), which keeps up to a quarter of
 * the device's memory between checks for the next one's reuse: a fresh pool's allocations map new memory, about
 * 0.5 ms for each of a large check's buffers, most of them while the GPU waits. Where the pool cannot be made, the
 * device's default pool (cudaMallocAsync); where the allocation fails, what the pool keeps is returned and it is
 * tried once more. */
cudaError_t er__dev_malloc(void **p, size_t bytes, cudaStream_t s);
/* bytes on stream s (er__dev_malloc), kept in b; nothing once *e holds an error (which a failure sets). */
static inline void *er_dev_alloc(er_devbufs *b, size_t bytes, cudaStream_t s, cudaError_t *e) {
    void *p = NULL;
    if (*e == cudaSuccess && b->n == ER_DEVBUFS) *e = cudaErrorMemoryAllocation; /* never: a path holds fewer */
    if (*e == cudaSuccess) *e = er__dev_malloc(&p, bytes ? bytes : 1, s);
    if (*e == cudaSuccess) b->p[b->n++] = p;
    return p;
}
/* Takes p out of b (its caller's to free now); nothing where b does not hold it. */
static inline void er_dev_detach(er_devbufs *b, const void *p) {
    for (int i = 0; i < b->n; i++)
        if (b->p[i] == p) {
            b->p[i] = b->p[--b->n];
            return;
        }
}
/* Frees every buffer of b on stream s. */
static inline void er_dev_free_all(er_devbufs *b, cudaStream_t s) {
    for (int i = 0; i < b->n; i++) cudaFreeAsync(b->p[i], s);
    b->n = 0;
}

/* A pinned host buffer of at least `bytes` for copies from the GPU at full speed: one the library kept from an
 * earlier check where one is free and large enough, else a new one (device.c). *p NULL where CUDA refuses. */
cudaError_t er__pinned_get(void **p, size_t bytes);
/* Gives back a buffer of er__pinned_get (NULL: nothing): kept for the next check (up to 1 GiB in all, until
 * er_cuda_trim), else freed. */
void er__pinned_put(void *p);
/* A host buffer of `bytes` for copies from the GPU: pinned (er__pinned_get) where CUDA gives one, else from malloc;
 * *pinned says which, er_host_buf_put's argument. NULL where neither. The environment's EXACTREF_PINNED=0 asks for
 * malloc alone (a process that cannot lock memory; the tests of this fallback). */
static inline void *er_host_buf_get(size_t bytes, int *pinned) {
    void *p = NULL;
    const char *ev = getenv("EXACTREF_PINNED");
    *pinned = !(ev && ev[0] == '0' && !ev[1]) && er__pinned_get(&p, bytes) == cudaSuccess;
    if (*pinned) return p;
    (void)cudaGetLastError();
    return malloc(bytes ? bytes : 1);
}
static inline void er_host_buf_put(void *p, int pinned) {
    if (pinned) er__pinned_put(p);
    else free(p);
}

/* Host memory h of `bytes` made ready for a copy from the GPU at full speed, before the copy is queued: where fault,
 * its pages first touched on the library's threads (er__prefault, from 16 MiB: a single thread's faults cost several
 * times the copy; for fresh memory), then locked where CUDA agrees (page-locked copies run at the link's speed,
 * pageable ones at a fraction). Returns whether it locked them: er_dev_unlock's argument once the copy is done
 * (device.c). */
int er_dev_lock(void *h, size_t bytes, int fault);
/* Unlocks h where er_dev_lock locked it. */
static inline void er_dev_unlock(void *h, int locked) {
    if (locked) cudaHostUnregister(h);
}

/* A host view of device view dv's layout in fresh host memory (*host, *bytes of it; nothing copied yet): ER_ERR_NOMEM
 * where it cannot be had. */
er_status er__host_view_alloc(er_tensor *view, void **host, size_t *bytes, const er_tensor *dv);
/* The device's bytes at device_ptr into h, on stream s, its pages first touched on the library's threads; done when
 * it returns. */
cudaError_t er__host_copy(void *h, const void *device_ptr, size_t bytes, cudaStream_t s);

/* A report's classes kept on the device (er_report_keep_on_device): whether the report asks (want), and the device
 * array a GPU path leaves there (dcl, the path's own until er_dev_keep_end). */
typedef struct er_dev_keep { int want; uint8_t *dcl; } er_dev_keep;
/* k->dcl: n classes (at least one byte) on stream s from the library's pool (er__dev_malloc): outside the path's
 * buffers, the report's to free (er__dev_classes_free, stream-ordered, without waiting for the device). */
static inline cudaError_t er_dev_keep_alloc(er_dev_keep *k, int64_t n, cudaStream_t s) {
    return er__dev_malloc((void **)&k->dcl, (size_t)(n > 0 ? n : 1), s);
}
/* Whether rep carries er_report_keep_on_device's mark (device.c). */
int er__report_keeps(const er_report *rep);
/* Before a device call into rep: whether the report asks to keep its classes on the device. */
static inline er_dev_keep er_dev_keep_of(const er_report *rep) { return (er_dev_keep){ er__report_keeps(rep), NULL }; }
/* After the call's engine (st its status): the kept classes handed to the filled report, whose host array goes,
 * else freed (device.c). */
void er_dev_keep_end(er_dev_keep *k, er_report *rep, er_status st);

/* The kernels' code of a format they read: 0 fp32, 1 fp16, 2 bf16; -1 another. */
static inline int er_dev_fmt(er_format f) { return f == ER_FP32 ? 0 : f == ER_FP16 ? 1 : f == ER_BF16 ? 2 : -1; }

/* qsort's comparison of two int64_t. */
static inline int er_dev_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

#endif

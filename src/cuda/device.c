/* device.c: copying device tensors back to the host through the CUDA runtime (when built with it). */
#include <stdlib.h>
#include "core/internal.h"
#include "ops/module.h"
#include "tensor/tensor_internal.h"
#include <exactref/cuda.h>
#ifdef ER_HAVE_CUDA
#include <pthread.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "cuda/devbufs.h"
#include "cuda/devrows.h"
#include "cuda/devchain.h"
#endif

int er_cuda_available(void) {
#ifdef ER_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

void er_host_free(void *host) { free(host); }

#ifdef ER_HAVE_CUDA
/* The library's memory pool of each device (made on first use, kept for the process's life): it keeps up to a
 * quarter of its device's memory between checks (its release threshold), er_cuda_trim returns it. */
enum { ER_DEV_POOLS = 64 };
static cudaMemPool_t er_pools[ER_DEV_POOLS];
static pthread_mutex_t er_pools_lock = PTHREAD_MUTEX_INITIALIZER;

/* The pool of device dev, the current one; NULL where it cannot be made. */
static cudaMemPool_t er_dev_pool(int dev) {
    if (dev < 0 || dev >= ER_DEV_POOLS) return NULL;
    pthread_mutex_lock(&er_pools_lock);
    if (!er_pools[dev]) {
        struct cudaMemPoolProps pp;
        memset(&pp, 0, sizeof pp);
        pp.allocType = cudaMemAllocationTypePinned;
        pp.handleTypes = cudaMemHandleTypeNone;
        pp.location.type = cudaMemLocationTypeDevice;
        pp.location.id = dev;
        cudaMemPool_t p;
        size_t free_b, total_b;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && cudaMemPoolCreate(&p, &pp) == cudaSuccess) {
            uint64_t keep = (uint64_t)total_b / 4;
            if (cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess) er_pools[dev] = p;
            else cudaMemPoolDestroy(p);
        }
        (void)cudaGetLastError();
    }
    cudaMemPool_t p = er_pools[dev];
    pthread_mutex_unlock(&er_pools_lock);
    return p;
}

cudaError_t er__dev_malloc(void **p, size_t bytes, cudaStream_t s) {
    int dev = -1;
    cudaMemPool_t pool = cudaGetDevice(&dev) == cudaSuccess ? er_dev_pool(dev) : NULL;
    if (!pool) return cudaMallocAsync(p, bytes, s);
    cudaError_t e = cudaMallocFromPoolAsync(p, bytes, pool, s);
    if (e == cudaErrorMemoryAllocation) { /* what the pool keeps, returned; then once more */
        (void)cudaGetLastError();
        cudaMemPoolTrimTo(pool, 0);
        e = cudaMallocFromPoolAsync(p, bytes, pool, s);
    } else if (e != cudaSuccess) { /* a pool the device lost (cudaDeviceReset): the default pool's */
        (void)cudaGetLastError();
        e = cudaMallocAsync(p, bytes, s);
    }
    return e;
}
#endif

#ifdef ER_HAVE_CUDA
/* The pinned host buffers of the GPU paths' copies (cudaHostAlloc, portable: any device's check may take one), kept
 * between checks: making one costs about 0.3 ms a MiB and freeing one waits for the device. An entry is in use
 * (used) or kept for the next er__pinned_get; the entries' bytes, in use or not, stay within ER_PINNED_KEEP. */
enum { ER_PINNED_SLOTS = 16 };
#define ER_PINNED_KEEP ((size_t)1 << 30)
typedef struct er_pinned_buf { void *p; size_t bytes; int used; } er_pinned_buf;
static er_pinned_buf er_pinned[ER_PINNED_SLOTS];
static pthread_mutex_t er_pinned_lock = PTHREAD_MUTEX_INITIALIZER;

/* The kept buffers freed (those in use stay). */
static void er_pinned_trim(void) {
    void *fr[ER_PINNED_SLOTS];
    int nf = 0;
    pthread_mutex_lock(&er_pinned_lock);
    for (int i = 0; i < ER_PINNED_SLOTS; i++)
        if (er_pinned[i].p && !er_pinned[i].used) {
            fr[nf++] = er_pinned[i].p;
            er_pinned[i] = (er_pinned_buf){ NULL, 0, 0 };
        }
    pthread_mutex_unlock(&er_pinned_lock);
    for (int i = 0; i < nf; i++) cudaFreeHost(fr[i]);
}

cudaError_t er__pinned_get(void **p, size_t bytes) {
    *p = NULL;
    /* sizes rounded up to a power of two from 1 MiB, so that checks of nearby sizes reuse one another's buffers */
    size_t want = bytes;
    for (bytes = (size_t)1 << 20; bytes < want && bytes <= SIZE_MAX / 2;) bytes *= 2;
    if (bytes < want) bytes = want;
    pthread_mutex_lock(&er_pinned_lock);
    int best = -1;
    for (int i = 0; i < ER_PINNED_SLOTS; i++)
        if (er_pinned[i].p && !er_pinned[i].used && er_pinned[i].bytes >= bytes &&
            (best < 0 || er_pinned[i].bytes < er_pinned[best].bytes))
            best = i;
    if (best >= 0) {
        er_pinned[best].used = 1;
        *p = er_pinned[best].p;
    }
    pthread_mutex_unlock(&er_pinned_lock);
    if (*p) return cudaSuccess;
    cudaError_t e = cudaHostAlloc(p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) { /* the kept buffers returned; then once more */
        (void)cudaGetLastError();
        er_pinned_trim();
        e = cudaHostAlloc(p, bytes, cudaHostAllocPortable);
    }
    if (e != cudaSuccess) {
        *p = NULL;
        return e;
    }
    pthread_mutex_lock(&er_pinned_lock);
    for (int i = 0; i < ER_PINNED_SLOTS; i++)
        if (!er_pinned[i].p) {
            er_pinned[i] = (er_pinned_buf){ *p, bytes, 1 };
            break;
        }
    pthread_mutex_unlock(&er_pinned_lock); /* (no free slot: the buffer is not kept, er__pinned_put frees it) */
    return cudaSuccess;
}

void er__pinned_put(void *p) {
    if (!p) return;
    int keep = 0;
    pthread_mutex_lock(&er_pinned_lock);
    size_t total = 0;
    for (int i = 0; i < ER_PINNED_SLOTS; i++) total += er_pinned[i].bytes;
    for (int i = 0; i < ER_PINNED_SLOTS; i++)
        if (er_pinned[i].p == p) {
            keep = total <= ER_PINNED_KEEP;
            if (keep) er_pinned[i].used = 0;
            else er_pinned[i] = (er_pinned_buf){ NULL, 0, 0 };
            break;
        }
    pthread_mutex_unlock(&er_pinned_lock);
    if (!keep) cudaFreeHost(p);
}
#endif

er_status er_cuda_trim(void) {
    er__ok();
#ifdef ER_HAVE_CUDA
    pthread_mutex_lock(&er_pools_lock);
    for (int d = 0; d < ER_DEV_POOLS; d++)
        if (er_pools[d]) cudaMemPoolTrimTo(er_pools[d], 0);
    pthread_mutex_unlock(&er_pools_lock);
    er_pinned_trim();
    (void)cudaGetLastError();
#endif
    return ER_OK;
}

#ifdef ER_HAVE_CUDA
er_status er__host_view_alloc(er_tensor *view, void **host, size_t *bytes, const er_tensor *dv) {
    int64_t extent = 0, n = er_tensor_numel(dv);
    for (int i = 0; n > 0 && i < dv->ndim; i++)
        extent += (dv->shape[i] - 1) * dv->strides[i]; /* an empty view spans nothing */
    size_t b = n ? (size_t)(extent + 1) * (size_t)(er_format_storage_bits(dv->format) / 8) : 0;
    void *h = malloc(b ? b : 1);
    if (!h) return er__fail(ER_ERR_NOMEM, "cannot allocate %zu bytes for the host copy", b);
    *view = *dv;
    view->data = h;
    *host = h;
    *bytes = b;
    return ER_OK;
}

cudaError_t er__host_copy(void *h, const void *device_ptr, size_t bytes, cudaStream_t s) {
    if (!bytes) return cudaSuccess;
    er__prefault(h, bytes);
    cudaError_t e = cudaMemcpyAsync(h, device_ptr, bytes, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    return e;
}
#endif

er_status er_tensor_from_device(er_tensor *view, void **host, er_format f, int ndim, const int64_t *shape,
                                const int64_t *strides, const void *device_ptr, void *stream) {
    er__ok();
    ER_CHECK_NULL(view, "view");
    ER_CHECK_NULL(host, "host");
    er_tensor v;
    ER_RETURN_IF_ERROR(er_tensor_view(&v, f, ndim, shape, strides, device_ptr));
#ifndef ER_HAVE_CUDA
    (void)stream;
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    void *h;
    size_t bytes;
    ER_RETURN_IF_ERROR(er__host_view_alloc(&v, &h, &bytes, &v));
    cudaError_t e = er__host_copy(h, device_ptr, bytes, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        free(h);
        return er__fail(ER_ERR_DEVICE, "copying %zu bytes from the device failed: %s (%s)", bytes,
                        cudaGetErrorString(e), cudaGetErrorName(e));
    }
    *view = v;
    *host = h;
    return ER_OK;
#endif
}

static er_status er_covers_device_run(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                                     void *stream) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    ER_CHECK_NULL(out, "out");
#ifdef ER_HAVE_CUDA
    int taken; /* a chain's epilogue pass on the GPU */
    er_status dst = er__dev_chain_covers(rep, ref, out, std, stream, &taken);
    if (taken) return dst;
#endif
    er_tensor v;
    void *h;
    ER_RETURN_IF_ERROR(
        er_tensor_from_device(&v, &h, out->format, out->ndim, out->shape, out->strides, out->data, stream));
    er_status st = er__covers_run(rep, ref, &v, std);
    free(h);
    return st;
}

er_status er_covers_device(er_report *rep, const er_ref *ref, const er_tensor *out, const er_standard *std,
                           void *stream) {
    er_status st = er_covers_device_run(rep, ref, out, std, stream);
    er__report_finish(rep, st);
    return st;
}

/* er_report_keep_on_device's mark ("keep"), which a report holding stray bytes carries with odds of 2^-32. */
#define ER_KEEP_MARK UINT32_C(0x6b656570)

er_status er_report_keep_on_device(er_report *rep) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
#ifndef ER_HAVE_CUDA
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit"); /* rep untouched */
#else
    er_report_clear(rep);
    rep->keep = ER_KEEP_MARK;
    return ER_OK;
#endif
}

#ifdef ER_HAVE_CUDA
int er__report_keeps(const er_report *rep) { return rep && rep->keep == ER_KEEP_MARK; }

int er_dev_lock(void *h, size_t bytes, int fault) {
    if (fault) er__prefault(h, bytes);
    if (!h || !bytes) return 0;
    if (cudaHostRegister(h, bytes, cudaHostRegisterDefault) == cudaSuccess) return 1;
    (void)cudaGetLastError();
    return 0;
}

void er_dev_keep_end(er_dev_keep *k, er_report *rep, er_status st) {
    if (!k->dcl) return;
    if (st == ER_OK && rep->classes && rep->guard == er__report_guard(rep->classes, NULL)) {
        free(rep->classes);
        rep->classes = NULL;
        rep->device_classes = k->dcl;
        rep->guard = er__report_guard(NULL, k->dcl);
    } else {
        er__dev_classes_free(k->dcl);
    }
    k->dcl = NULL;
}

/* Kept classes come from a pool (er_dev_keep_alloc): freed on their device's default stream, whose work they wait
 * for on the device and not on the host (cudaFree would wait for the whole device, about 0.3 ms at the least). The
 * calling thread's current device is left as it was; an error is not left for the caller's next cudaGetLastError. */
void er__dev_classes_free(void *dev) {
    if (!dev) return;
    struct cudaPointerAttributes at;
    int cur = -1, own = -1;
    if (cudaPointerGetAttributes(&at, dev) == cudaSuccess && at.type == cudaMemoryTypeDevice) own = at.device;
    if (cudaGetDevice(&cur) != cudaSuccess) cur = -1;
    int moved = own >= 0 && cur >= 0 && own != cur && cudaSetDevice(own) == cudaSuccess;
    if (cudaFreeAsync(dev, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(dev);
    }
    if (moved) cudaSetDevice(cur);
    (void)cudaGetLastError(); /* (at exit, CUDA may be gone already) */
}
#endif

er_status er_report_fetch_classes(er_report *rep) {
    er__ok();
    ER_CHECK_NULL(rep, "report");
    if (rep->classes || !rep->device_classes || rep->guard != er__report_guard(NULL, rep->device_classes))
        return ER_OK;
#ifndef ER_HAVE_CUDA
    return er__fail(ER_ERR_UNSUPPORTED, "this exactref was built without the CUDA toolkit");
#else
    size_t bytes = (size_t)rep->n;
    uint8_t *h = malloc(bytes ? bytes : 1);
    if (!h) return er__fail(ER_ERR_NOMEM, "cannot allocate %lld classes", (long long)rep->n);
    int locked = er_dev_lock(h, bytes, 1);
    cudaError_t e = cudaMemcpy(h, rep->device_classes, bytes, cudaMemcpyDeviceToHost);
    er_dev_unlock(h, locked);
    if (e != cudaSuccess) {
        free(h);
        return er__fail(ER_ERR_DEVICE, "copying the report's %lld classes from the device failed: %s (%s)",
                        (long long)rep->n, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    er__dev_classes_free(rep->device_classes);
    rep->device_classes = NULL;
    rep->classes = h;
    rep->guard = er__report_guard(h, NULL);
    return ER_OK;
#endif
}

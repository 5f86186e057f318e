/* splitk.h: the host calls of examples/cuda/splitk_kernel.cu. */
#ifndef SPLITK_H
#define SPLITK_H
#include <stdint.h>
int splitk_device_count(void);
int splitk_run(const uint16_t *A, const uint16_t *B, int M, int N, int K, int S, int buggy, float **C_device, void *stream);
void splitk_free(float *C_device);
#endif

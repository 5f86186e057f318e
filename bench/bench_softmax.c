/* bench_softmax.c: er_softmax + er_covers (fp32 inputs and output, default standard) next to a float64
 * softmax of the same rows computed in the same run (max, exp, sum, divide in double).
 * Prints `name: X s vs baseline Y s = Rx`. Usage: bench_softmax [N ...] (default 1024 4096), N x N inputs. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <exactref/exactref.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 7;
static double normalish(void) {
    double s = 0;
    for (int i = 0; i < 4; i++) { rng = rng * 6364136223846793005u + 1442695040888963407u; s += (double)(rng >> 11) * 0x1p-53; }
    return (s - 2.0) * 1.7;
}

static void run(int n) {
    float *x = malloc(sizeof(float) * (size_t)n * n), *y = malloc(sizeof(float) * (size_t)n * n);
    double *d = malloc(sizeof(double) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) x[i] = (float)(3 * normalish());
    /* the kernel under test: float32 softmax */
    for (int r = 0; r < n; r++) {
        float m = -INFINITY, s = 0;
        for (int j = 0; j < n; j++) m = fmaxf(m, x[(size_t)r * n + j]);
        for (int j = 0; j < n; j++) s += expf(x[(size_t)r * n + j] - m);
        for (int j = 0; j < n; j++) y[(size_t)r * n + j] = expf(x[(size_t)r * n + j] - m) / s;
    }
    double t0 = now();
    for (int r = 0; r < n; r++) { /* the baseline: float64 softmax */
        double m = -INFINITY, s = 0;
        const float *xr = x + (size_t)r * n;
        double *dr = d + (size_t)r * n;
        for (int j = 0; j < n; j++) m = fmax(m, xr[j]);
        for (int j = 0; j < n; j++) s += (dr[j] = exp(xr[j] - m));
        for (int j = 0; j < n; j++) dr[j] /= s;
    }
    double t1 = now();
    er_tensor tx, ty;
    er_tensor_view(&tx, ER_FP32, 2, (int64_t[]){n, n}, NULL, x);
    er_tensor_view(&ty, ER_FP32, 2, (int64_t[]){n, n}, NULL, y);
    er_ref *ref;
    er_standard std;
    er_standard_init(&std);
    er_report rep;
    if (er_softmax(&ref, &tx, 1) != ER_OK || er_covers(&rep, ref, &ty, &std) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); exit(1); }
    double t2 = now();
    printf("softmax_covers_%dx%d: %.3f s vs baseline %.3f s = %.1fx  (baseline: float64 softmax of the same rows; verdict %s)\n",
           n, n, t2 - t1, t1 - t0, (t2 - t1) / (t1 - t0), er_report_all(&rep) ? "pass" : "FAIL");
    er_report_clear(&rep);
    er_ref_free(ref);
    free(x); free(y); free(d);
}

int main(int argc, char **argv) {
    if (argc > 1) for (int i = 1; i < argc; i++) run(atoi(argv[i]));
    else { run(1024); run(4096); }
    return 0;
}

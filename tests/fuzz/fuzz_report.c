/* fuzz_report.c: reports from bytes (an output of any bit patterns checked against a small matmul, or a refused
 * call), rendered as text and JSON into buffers of every size: ER_ERR_BUFFER below the needed size, with a
 * NUL-terminated prefix of the full rendering; ER_OK from the needed size up (every size near both ends, about 16
 * between). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <exactref/exactref.h>
#include "harness.h"

static const char *const kinds[] = {"covers", "refused"};
REACH_TARGET(kinds)

static void every_size(er_status (*render)(const er_report *, char *, size_t, size_t *), const er_report *rep) {
    size_t need = 0;
    if (render(rep, NULL, 0, &need) != ER_ERR_BUFFER) abort();
    char *full = malloc(need + 1), *buf = malloc(need + 2);
    if (!full || !buf) abort();
    if (render(rep, full, need + 1, NULL) != ER_OK || strlen(full) != need) abort();
    /* every size near the ends, about 16 between (each rendering costs the whole report) */
    size_t step = need / 16 > 1 ? need / 16 : 1;
    for (size_t cap = 1; cap <= need + 1; cap += cap < 24 || cap + 24 > need ? 1 : step) {
        memset(buf, 'x', need + 2);
        er_status st = render(rep, buf, cap, NULL);
        if ((cap < need + 1) != (st == ER_ERR_BUFFER)) abort();
        if (buf[cap - 1] != '\0' || strncmp(buf, full, cap - 1) != 0 || buf[cap] != 'x') abort();
    }
    free(full);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reach_input();
    if (size < 5) return 0;
    int M = 1 + data[0] % 4, K = 1 + data[1] % 5, N = 1 + data[2] % 4;
    er_format fo = (er_format)(1 + data[3] % 7);
    float a[20], b[20];
    uint64_t c[16];
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < K * N; i++) b[i] = (float)(i % 3) - 1.0f;
    for (int i = 0; i < M * N; i++) { c[i] = 0; memcpy(&c[i], data + 4 + (size_t)i % (size - 4), 1); c[i] *= UINT64_C(0x0001000100010001); }
    er_tensor A, B, C;
    er_tensor_view(&A, ER_FP32, 2, (int64_t[]){M, K}, NULL, a);
    er_tensor_view(&B, ER_FP32, 2, (int64_t[]){K, N}, NULL, b);
    er_tensor_view(&C, fo, 2, (int64_t[]){M, N}, NULL, c);
    er_report rep;
    const char *order = data[0] & 0x80 ? "mma:sm_90" : "any_order"; /* a refusal renders too */
    int refused = order[0] == 'm';
    reach_call(refused);
    if ((er_matmul_covers(&rep, &A, &B, &C, order, data[1] & 0x80 ? "overflow=saturate" : NULL) == ER_OK) != refused)
        reach_accept(refused); /* the refusal's kind counts the calls that were refused, as meant */
    every_size(er_report_text, &rep);
    every_size(er_report_json, &rep);
    er_report_clear(&rep);
    return 0;
}

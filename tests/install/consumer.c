/* consumer.c: a program outside the tree that uses an installed exactref. */
#include <stdio.h>
#include <exactref/exactref.h>

int main(void) {
    float A[2] = {1.5f, 2.0f}, B[2] = {4.0f, 0.25f}, C[1] = {6.5f};
    er_tensor tA, tB, tC;
    er_tensor_view(&tA, ER_FP32, 2, (int64_t[]){1, 2}, NULL, A);
    er_tensor_view(&tB, ER_FP32, 2, (int64_t[]){2, 1}, NULL, B);
    er_tensor_view(&tC, ER_FP32, 2, (int64_t[]){1, 1}, NULL, C);
    er_report rep;
    if (er_matmul_covers(&rep, &tA, &tB, &tC, "any_order", NULL) != ER_OK) { fprintf(stderr, "%s\n", er_last_error()); return 1; }
    int ok = er_report_all(&rep) && rep.counts[ER_CLASS_EXACT] == 1;
    er_report_clear(&rep);
    printf("exactref %s consumer: %s\n", er_version(), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

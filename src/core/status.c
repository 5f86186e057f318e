#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/* status.c: status names and messages, and the per-thread detailed message of the latest refusal. */
#include <stdarg.h>
#include <stdio.h>
#include <mpfr.h>
#include "core/internal.h"
#include <stdatomic.h>
#include <time.h>

static _Thread_local char er_last_msg[512];

er_status er__fail(er_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(er_last_msg, sizeof er_last_msg, "%s: ", er_status_name(status));
    if (n < 0) n = 0;
    if ((size_t)n < sizeof er_last_msg) vsnprintf(er_last_msg + n, sizeof er_last_msg - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

void er__ok(void) { er_last_msg[0] = '\0'; }

const char *er_last_error(void) { return er_last_msg; }

const char *er_status_name(er_status s) {
    switch (s) {
    case ER_OK: return "ER_OK";
    case ER_ERR_NULL: return "ER_ERR_NULL";
    case ER_ERR_INVALID: return "ER_ERR_INVALID";
    case ER_ERR_FORMAT: return "ER_ERR_FORMAT";
    case ER_ERR_SHAPE: return "ER_ERR_SHAPE";
    case ER_ERR_SIZE: return "ER_ERR_SIZE";
    case ER_ERR_STANDARD: return "ER_ERR_STANDARD";
    case ER_ERR_OUTPUT: return "ER_ERR_OUTPUT";
    case ER_ERR_NOMEM: return "ER_ERR_NOMEM";
    case ER_ERR_UNSUPPORTED: return "ER_ERR_UNSUPPORTED";
    case ER_ERR_BUFFER: return "ER_ERR_BUFFER";
    case ER_ERR_INTERNAL: return "ER_ERR_INTERNAL";
    case ER_ERR_DEVICE: return "ER_ERR_DEVICE";
    case ER_ERR_CANCELLED: return "ER_ERR_CANCELLED";
    }
    return "ER_UNKNOWN_STATUS";
}

const char *er_strerror(er_status s) {
    switch (s) {
    case ER_OK: return "success";
    case ER_ERR_NULL: return "a required pointer argument was NULL";
    case ER_ERR_INVALID: return "an argument has an invalid value";
    case ER_ERR_FORMAT: return "unknown or unsupported number format";
    case ER_ERR_SHAPE: return "operand shapes do not agree";
    case ER_ERR_SIZE: return "negative or overflowing size or stride, or too many dimensions";
    case ER_ERR_STANDARD: return "unknown, contradictory or inapplicable standard";
    case ER_ERR_OUTPUT: return "output tensor of the wrong shape or format";
    case ER_ERR_NOMEM: return "out of memory, or a request too large to hold";
    case ER_ERR_UNSUPPORTED: return "valid request not implemented by this version";
    case ER_ERR_BUFFER: return "caller buffer too small";
    case ER_ERR_INTERNAL: return "internal invariant broken (a bug in exactref; please report it)";
    case ER_ERR_DEVICE: return "a CUDA runtime call failed";
    case ER_ERR_CANCELLED: return "cancelled by er_cancel";
    }
    return "unknown status code";
}

const char *er_version(void) { return ER_VERSION_STRING; }

int er_mpfr_thread_safe(void) { return mpfr_buildopt_tls_p() != 0; }

/* The standing cancellation request (er_cancel), polled by the long loops (er__cancelled). */
static atomic_int er_cancel_flag;

void er_cancel(void) { atomic_store(&er_cancel_flag, 1); }
void er_cancel_on_signal(int sig) {
    (void)sig;
    atomic_store(&er_cancel_flag, 1);
}
void er_cancel_reset(void) { atomic_store(&er_cancel_flag, 0); }
int er_cancel_requested(void) { return atomic_load(&er_cancel_flag); }
int er__cancelled(void) { return atomic_load_explicit(&er_cancel_flag, memory_order_relaxed); }

/* Progress (er_set_progress): the counters of the running calls and when the callback last ran (ns). */
static er_progress_fn er_prog_fn;
static void *er_prog_user;
static atomic_llong er_prog_delay_ns, er_prog_start_ns, er_prog_last_ns, er_prog_done, er_prog_total;
static atomic_int er_prog_called;
static atomic_flag er_prog_busy = ATOMIC_FLAG_INIT; /* held while fn runs: one call at a time, each after the last */

static long long er_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void er_set_progress(er_progress_fn fn, void *user, double delay_s) {
    er_prog_user = user;
    er_prog_fn = fn;
    atomic_store(&er_prog_delay_ns, delay_s > 0 && delay_s < 1e9 ? (long long)(delay_s * 1e9) : 0);
}

void er__progress_begin(int64_t total) {
    if (!er_prog_fn) return;
    long long t = er_now_ns();
    atomic_store(&er_prog_total, (long long)total);
    atomic_store(&er_prog_done, 0);
    atomic_store(&er_prog_start_ns, t);
    atomic_store(&er_prog_last_ns, t);
    atomic_store(&er_prog_called, 0);
}

void er__progress_step(int64_t k) {
    er_progress_fn fn = er_prog_fn;
    if (!fn) return;
    long long done = atomic_fetch_add_explicit(&er_prog_done, (long long)k, memory_order_relaxed) + k;
    long long t = er_now_ns(), last = atomic_load_explicit(&er_prog_last_ns, memory_order_relaxed);
    if (t - atomic_load_explicit(&er_prog_start_ns, memory_order_relaxed) < atomic_load(&er_prog_delay_ns) ||
        t - last < 250000000LL || !atomic_compare_exchange_strong(&er_prog_last_ns, &last, t) ||
        atomic_flag_test_and_set_explicit(&er_prog_busy, memory_order_acquire))
        return;
    atomic_store(&er_prog_called, 1);
    fn((int64_t)done, (int64_t)atomic_load(&er_prog_total), er_prog_user);
    atomic_flag_clear_explicit(&er_prog_busy, memory_order_release);
}

void er__progress_end(void) {
    er_progress_fn fn = er_prog_fn;
    if (!fn || !atomic_exchange(&er_prog_called, 0)) return;
    int64_t total = (int64_t)atomic_load(&er_prog_total);
    while (atomic_flag_test_and_set_explicit(&er_prog_busy, memory_order_acquire)) {
    } /* the workers are joined: only a finished call's flag can be seen, never one held for long */
    fn(total, total, er_prog_user);
    atomic_flag_clear_explicit(&er_prog_busy, memory_order_release);
}

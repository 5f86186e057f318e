/* exactref/status.h: status codes of fallible calls, their names and messages.
 *
 * Every fallible call returns an er_status: ER_OK (0) on success, a negative code on refusal. A refused call
 * writes nothing to its outputs. er_last_error() gives the detailed message of the latest refusal in the
 * calling thread ("B has 6 rows but A has 5 columns"), er_strerror() the fixed text of a code. */
#ifndef EXACTREF_STATUS_H
#define EXACTREF_STATUS_H

#include <stdint.h>
#include <exactref/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum er_status {
    ER_OK = 0,
    ER_ERR_NULL = -1,        /* a required pointer argument was NULL */
    ER_ERR_INVALID = -2,     /* an argument has an invalid value */
    ER_ERR_FORMAT = -3,      /* unknown or unsupported number format */
    ER_ERR_SHAPE = -4,       /* operand shapes do not agree */
    ER_ERR_SIZE = -5,        /* negative or overflowing size or stride, or too many dimensions */
    ER_ERR_STANDARD = -6,    /* unknown, contradictory or inapplicable standard */
    ER_ERR_OUTPUT = -7,      /* output tensor of the wrong shape or format */
    ER_ERR_NOMEM = -8,       /* memory allocation failed or the request is too large to hold */
    ER_ERR_UNSUPPORTED = -9, /* a valid request this version does not implement */
    ER_ERR_BUFFER = -10,     /* a caller buffer is too small; the needed size was returned */
    ER_ERR_INTERNAL = -11,   /* a broken internal invariant: please report it */
    ER_ERR_DEVICE = -12,     /* a CUDA runtime call failed */
    ER_ERR_CANCELLED = -13   /* er_cancel asked the call to stop; it stopped, freeing what it held */
} er_status;

/* "ER_ERR_SHAPE" etc.; "ER_UNKNOWN_STATUS" for a value that is not a status. Never NULL. */
ER_API const char *er_status_name(er_status status);
/* A fixed sentence describing the code. Never NULL. */
ER_API const char *er_strerror(er_status status);
/* The detailed message of the most recent refusal in the calling thread, or "" if none yet. The text stays
 * valid until the next exactref call in this thread. */
ER_API const char *er_last_error(void);

/* Cancellation, for an interactive user's Ctrl-C. er_cancel() asks every running exactref call to stop: matmul's,
 * sum's, mean's and max's covers, sets and emulation poll the request at least every 4096 elements (and every
 * element whose sum is long), the row ops (softmax, layernorm, rmsnorm, attention, cross_entropy, the backward
 * passes) every row, attention_backward every kv head, quantize and chains every 1024 elements; they return
 * ER_ERR_CANCELLED, their report recording it as a refusal's does (an emulation's output may hold part of its
 * values), having freed what they hold.
 * The request stays until er_cancel_reset(): a call that starts while it stands is cancelled at its first poll.
 * er_cancel_on_signal(sig) is er_cancel for a signal handler (async-signal-safe: one atomic store).
 * er_cancel_requested() says whether a request stands. */
/* Progress of long calls, for a user watching. fn(done, total, user) is called from the loops that poll cancellation
 * (possibly from any of the call's worker threads, one at a time) once the call has run delay_s seconds, then at
 * most every quarter second, and once more with done == total at the call's end if it was called at all. done and
 * total count output elements (matmul, sum, mean, max, quantize, chains), rows (the row ops and their backward
 * passes, cross_entropy, attention) or kv heads (attention_backward). fn NULL turns it off. A process-wide setting:
 * calls running at once from several threads report on the same counters. */
typedef void (*er_progress_fn)(int64_t done, int64_t total, void *user);
ER_API void er_set_progress(er_progress_fn fn, void *user, double delay_s);

ER_API void er_cancel(void);
ER_API void er_cancel_on_signal(int sig);
ER_API void er_cancel_reset(void);
ER_API int er_cancel_requested(void);

#ifdef __cplusplus
}
#endif
#endif

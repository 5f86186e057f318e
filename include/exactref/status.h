/* exactref/status.h: status codes of fallible calls, their names and messages.
 *
 * Every fallible call returns an er_status: ER_OK (0) on success, a negative code on refusal. A refused call
 * writes nothing to its outputs. er_last_error() gives the detailed message of the latest refusal in the
 * calling thread ("B has 6 rows but A has 5 columns"), er_strerror() the fixed text of a code. */
#ifndef EXACTREF_STATUS_H
#define EXACTREF_STATUS_H

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
    ER_ERR_DEVICE = -12      /* a CUDA runtime call failed */
} er_status;

/* "ER_ERR_SHAPE" etc.; "ER_UNKNOWN_STATUS" for a value that is not a status. Never NULL. */
ER_API const char *er_status_name(er_status status);
/* A fixed sentence describing the code. Never NULL. */
ER_API const char *er_strerror(er_status status);
/* The detailed message of the most recent refusal in the calling thread, or "" if none yet. The text stays
 * valid until the next exactref call in this thread. */
ER_API const char *er_last_error(void);

#ifdef __cplusplus
}
#endif
#endif

/* exactref/exactref.h: the umbrella header of exactref.
 *
 * exactref computes, for an op and its exact inputs, the set of results any implementation following a
 * declared standard could produce, and classifies each element of a kernel's output as exact, covered or
 * not covered. Start with docs/getting-started.md. */
#ifndef EXACTREF_EXACTREF_H
#define EXACTREF_EXACTREF_H

#include <exactref/version.h>
#include <exactref/export.h>
#include <exactref/status.h>
#include <exactref/format.h>
#include <exactref/tensor.h>
#include <exactref/families.h>
#include <exactref/standard.h>
#include <exactref/report.h>
#include <exactref/ref.h>
#include <exactref/cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version string, from the build ("0.1.0"). */
ER_API const char *er_version(void);
/* 1 when the MPFR the library runs with was built thread-safe (mpfr_buildopt_tls_p); exactref's thread-safety
 * promises hold only then. */
ER_API int er_mpfr_thread_safe(void);

#ifdef __cplusplus
}
#endif
#endif

/* harness.h: what every fuzz target shares: the input read as a stream of bytes, the library's internal errors
 * taken as findings, and the reach counts.
 *
 * What a fuzz target reaches is counted so that a harness which never gets to the library cannot pass unnoticed. A target counts every input (reach_input), every input that got as far as a call of the code it is for
 * (reach_call, with the kind of call: an op, a recipe, a mask form), and every call of each kind the library accepted
 * (reach_accept). Where ER_FUZZ_REACH names a file, the counts are written there when the process exits, one line
 * each: "inputs N", "called N", then "kind NAME called N accepted N" per kind; tests/fuzz/smoke.sh reads them and
 * fails a target below its stated share. */
#ifndef ER_FUZZ_HARNESS_H
#define ER_FUZZ_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <exactref/exactref.h>

#define REACH_MAX_KINDS 32
static uint64_t reach_inputs_, reach_called_, reach_kind_called_[REACH_MAX_KINDS], reach_kind_accepted_[REACH_MAX_KINDS];
static int reach_this_input_;
static const char *const *reach_names_;
static int reach_nkinds_;

static void reach_write_(void) {
    const char *path = getenv("ER_FUZZ_REACH");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "inputs %llu\ncalled %llu\n", (unsigned long long)reach_inputs_, (unsigned long long)reach_called_);
    for (int k = 0; k < reach_nkinds_; k++)
        fprintf(f, "kind %s called %llu accepted %llu\n", reach_names_[k], (unsigned long long)reach_kind_called_[k],
                (unsigned long long)reach_kind_accepted_[k]);
    fclose(f);
}

/* Once per process, before the first input: the names of the kinds of call (at most REACH_MAX_KINDS). */
static inline void reach_init(const char *const *names, int nkinds) {
    reach_names_ = names;
    reach_nkinds_ = nkinds < REACH_MAX_KINDS ? nkinds : REACH_MAX_KINDS;
    atexit(reach_write_);
}
static inline void reach_input(void) {
    reach_inputs_++;
    reach_this_input_ = 0;
}
/* An input counts once in "called", however many calls it makes. */
static inline void reach_call(int kind) {
    if (!reach_this_input_) reach_called_++;
    reach_this_input_ = 1;
    if (kind >= 0 && kind < reach_nkinds_) reach_kind_called_[kind]++;
}
static inline void reach_accept(int kind) {
    if (kind >= 0 && kind < reach_nkinds_) reach_kind_accepted_[kind]++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a stream of bytes: 0 past its end. */
typedef struct rd { const uint8_t *p; size_t n; } rd;
static inline unsigned byte(rd *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

/* A library call's status: ER_ERR_INTERNAL is a broken invariant of the library (a bug), never a refusal. */
static inline er_status nobug(er_status st) {
    if (st == ER_ERR_INTERNAL) abort();
    return st;
}

/* The target's LLVMFuzzerInitialize: registers its kinds of call (an array of names). */
#define REACH_TARGET(kinds)                                                                                            \
    int LLVMFuzzerInitialize(int *argc, char ***argv);                                                                 \
    int LLVMFuzzerInitialize(int *argc, char ***argv) {                                                                \
        (void)argc;                                                                                                    \
        (void)argv;                                                                                                    \
        reach_init(kinds, (int)(sizeof kinds / sizeof kinds[0]));                                                      \
        return 0;                                                                                                      \
    }

#endif

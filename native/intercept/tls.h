/* CT_TLS: per-thread storage for the interposer's state, one definition for every
 * file that keeps some (intercept.c may define it first). */
#ifndef CT_TLS
#ifdef COLLTUNE_SMPI
#define CT_TLS          /* SMPI: globals are per simulated rank already */
#else
#define CT_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#endif
#endif

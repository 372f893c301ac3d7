/* Running an algorithm of the catalogue: blocking (ct_call), non-blocking
 * (ct_icall) and persistent (ct_call_init + ct_start), with the library's
 * collective as the fallback whenever the algorithm declines. */
#include <stdio.h>
#include "internal.h"

int ct_library_call(ct_coll coll, const ct_args *a)
{
    switch (coll) {  /* on the collective, not on algorithm names */
    case CT_BCAST:
        return PMPI_Bcast(a->recvbuf, a->count, a->dtype, a->root, a->comm);
    case CT_REDUCE:
        return PMPI_Reduce(a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->root, a->comm);
    case CT_ALLREDUCE:
        return PMPI_Allreduce(a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->comm);
    case CT_ALLGATHER:
        return PMPI_Allgather(a->sendbuf, a->count, a->dtype, a->recvbuf, a->count, a->dtype,
                              a->comm);
    default:
        return MPI_ERR_ARG;
    }
}

#ifdef COLLTUNE_SMPI
static int is_derived(MPI_Datatype t)
{
    int ni, na, nd, combiner;
    MPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
    return combiner != MPI_COMBINER_NAMED;
}
#endif

int ct_library_icall(ct_coll coll, const ct_args *a, MPI_Request *req)
{
#ifdef COLLTUNE_SMPI
    /* SMPI 3.32's MPI_Ireduce / MPI_Iallreduce fold contributions in arrival
     * order (wrong for non-commutative ops) and return the root's own data for
     * derived datatypes (algotest shows both). Run the blocking call there;
     * the request is complete on return. */
    if ((coll == CT_REDUCE || coll == CT_ALLREDUCE) && ct_is_commutative(a->op) &&
        is_derived(a->dtype)) {
        /* ... and SMPI's blocking MPI_Allreduce dies of SIGFPE on some derived
         * types (24 ranks, 3-byte elements): use colltune's own tree, blocking */
        *req = MPI_REQUEST_NULL;
        return ct_call(coll, coll == CT_REDUCE ? "binomial" : "recursive_doubling", NULL, a, NULL);
    }
    if ((coll == CT_REDUCE || coll == CT_ALLREDUCE) && !ct_is_commutative(a->op)) {
        *req = MPI_REQUEST_NULL;
        return ct_library_call(coll, a);
    }
#endif
    switch (coll) {
    case CT_BCAST:
        return PMPI_Ibcast(a->recvbuf, a->count, a->dtype, a->root, a->comm, req);
    case CT_REDUCE:
        return PMPI_Ireduce(a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->root, a->comm,
                            req);
    case CT_ALLREDUCE:
        return PMPI_Iallreduce(a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->comm, req);
    case CT_ALLGATHER:
        return PMPI_Iallgather(a->sendbuf, a->count, a->dtype, a->recvbuf, a->count, a->dtype,
                               a->comm, req);
    default:
        return MPI_ERR_ARG;
    }
}

/* The algorithm and its full parameter vector; NULL on an unknown name or a
 * parameter out of range. */
static const ct_algorithm *resolve(ct_coll coll, const char *name, const int *params, int *p)
{
    const ct_algorithm *alg = ct_find(coll, name);
    if (!alg) return NULL;
    for (int i = 0; i < alg->nparams; i++) {
        p[i] = params ? params[i] : alg->params[i].def;
        if (p[i] < alg->params[i].min || p[i] > alg->params[i].max) return NULL;
    }
    return alg;
}

static int build(const ct_algorithm *alg, const ct_args *a, const int *p, ct_sched **s)
{
    int rc = ct_sched_create(a->comm, s);
    if (rc == MPI_SUCCESS) rc = alg->schedule(a, p, *s);
    if (rc != MPI_SUCCESS) ct_sched_free(s);
    return rc;
}

/* An error of one of colltune's algorithms goes to the communicator's error
 * handler, as the library's own would (MPI_ERRORS_ARE_FATAL aborts). */
static void raise_error(MPI_Comm comm, int rc)
{
#ifdef COLLTUNE_SMPI
    /* SMPI 3.32's MPI_Comm_call_errhandler segfaults whatever the handler:
     * do what the predefined ones do */
    MPI_Errhandler eh;
    if (PMPI_Comm_get_errhandler(comm, &eh) == MPI_SUCCESS && eh == MPI_ERRORS_ARE_FATAL) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        fprintf(stderr, "colltune: error in a collective: %s\n", msg);
        PMPI_Abort(comm, rc);
    }
#else
    PMPI_Comm_call_errhandler(comm, rc);
#endif
}

int ct_call(ct_coll coll, const char *name, const int *params, const ct_args *a,
            const char **ran)
{
    int p[CT_MAX_PARAMS];
    const ct_algorithm *alg = resolve(coll, name, params, p);
    if (ran) *ran = NULL;
    if (!alg) return MPI_ERR_ARG;
    if (ct_check_args(coll, a) || alg->supports(a) != NULL || (!alg->run && !alg->schedule)) {
        if (ran) *ran = "library";
        return ct_library_call(coll, a);
    }
    if (ran) *ran = alg->name;
    int rc;
    if (alg->run) {
        rc = alg->run(a, p);
    } else {
        ct_sched *s;
        rc = build(alg, a, p, &s);
        if (rc == MPI_SUCCESS) rc = ct_sched_start(s);
        if (rc == MPI_SUCCESS) rc = ct_sched_wait(s);
        ct_sched_free(&s);
    }
    /* as the library would: the communicator's error handler sees the error
     * (MPI_ERRORS_ARE_FATAL aborts; MPI_ERRORS_RETURN gets the code back) */
    if (rc != MPI_SUCCESS) raise_error(a->comm, rc);
    return rc;
}

int ct_call_init(ct_coll coll, const char *name, const int *params, const ct_args *a,
                 ct_request *req, const char **ran)
{
    int p[CT_MAX_PARAMS];
    const ct_algorithm *alg = resolve(coll, name, params, p);
    *req = (ct_request){.sched = NULL, .lib = MPI_REQUEST_NULL, .coll = coll, .args = *a,
                        .persistent = 1};
    if (ran) *ran = NULL;
    if (!alg) return MPI_ERR_ARG;
    if (ct_check_args(coll, a) || alg->supports(a) != NULL || !alg->schedule) {
        if (ran) *ran = "library";
        return MPI_SUCCESS;
    }
    if (ran) *ran = alg->name;
    return build(alg, a, p, &req->sched);
}

int ct_start(ct_request *req)
{
    if (req->active) return MPI_ERR_REQUEST;
    int rc = req->sched ? ct_sched_start(req->sched)
                        : ct_library_icall(req->coll, &req->args, &req->lib);
    req->active = rc == MPI_SUCCESS;
    return rc;
}

int ct_icall(ct_coll coll, const char *name, const int *params, const ct_args *a,
             ct_request *req, const char **ran)
{
    int rc = ct_call_init(coll, name, params, a, req, ran);
    if (rc == MPI_SUCCESS) rc = ct_start(req);
    req->persistent = 0;
    if (rc != MPI_SUCCESS) ct_request_free(req);
    return rc;
}

/* completion: a one-shot request is released, a persistent one can restart */
static int completed(ct_request *req, int rc)
{
    req->active = 0;
    if (!req->persistent) ct_request_free(req);
    return rc;
}

int ct_test(ct_request *req, int *done)
{
    int rc;
    *done = 1;
    if (!req->active) return MPI_SUCCESS;
    if (req->sched) rc = ct_sched_test(req->sched, done);
    else rc = MPI_Test(&req->lib, done, MPI_STATUS_IGNORE);
    return *done ? completed(req, rc) : rc;
}

int ct_wait(ct_request *req)
{
    if (!req->active) return MPI_SUCCESS;
    int rc = req->sched ? ct_sched_wait(req->sched) : MPI_Wait(&req->lib, MPI_STATUS_IGNORE);
    return completed(req, rc);
}

void ct_request_free(ct_request *req)
{
    if (req->active) ct_wait(req);
    ct_sched_free(&req->sched);
    req->active = 0;
    req->persistent = 0;
}

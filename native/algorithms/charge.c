/* Charging of CPU work that SimGrid SMPI does not simulate by itself: reduction
 * arithmetic and memory copies (SimGrid's documentation, "Simulating
 * computation": only code between MPI calls is timed, and not at all with
 * smpi/simulate-computation:no). Under SMPI (COLLTUNE_SMPI) each call
 * advances the rank's simulated clock by bytes / rate through
 * smpi_execute_flops (which charges even with smpi/simulate-computation:no).
 * Rates in bytes/s come from COLLTUNE_REDUCE_RATE / COLLTUNE_COPY_RATE; the
 * defaults are the bundled platforms' charge_rates (4e9 and 8e9); 0 disables.
 * On a real MPI library these are no-ops: the CPU pays for itself. */
#include "colltune/algorithms.h"

/* An operator that charges its own arithmetic (colltune-bench --op charged-sum) is
 * not charged a second time by colltune's reductions; every other operator,
 * predefined or user-defined, is. One per rank (globals are privatized per
 * simulated rank). */
static MPI_Op self_charging = MPI_OP_NULL;

void ct_charge_exempt_op(MPI_Op op) { self_charging = op; }

int ct_charge_exempt(MPI_Op op) { return op != MPI_OP_NULL && op == self_charging; }

#ifdef COLLTUNE_SMPI
#include <stdlib.h>
#include <simgrid/host.h>

static double rate_from_env(const char *name, double def)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    double v = strtod(s, &end);
    return (*end == '\0' && v >= 0) ? v : def;
}

/* Globals are privatized per simulated rank, so each rank reads once. */
static double reduce_rate = -1, copy_rate = -1;

static void charge(size_t bytes, double rate)
{
    if (rate > 0 && bytes > 0)
        smpi_execute_flops((double)bytes / rate * sg_host_get_speed(sg_host_self()));
}

void ct_charge_reduce(size_t bytes)
{
    if (reduce_rate < 0) reduce_rate = rate_from_env("COLLTUNE_REDUCE_RATE", 4e9);
    charge(bytes, reduce_rate);
}

void ct_charge_copy(size_t bytes)
{
    if (copy_rate < 0) copy_rate = rate_from_env("COLLTUNE_COPY_RATE", 8e9);
    charge(bytes, copy_rate);
}
#else
void ct_charge_reduce(size_t bytes) { (void)bytes; }
void ct_charge_copy(size_t bytes) { (void)bytes; }
#endif

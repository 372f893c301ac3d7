/* The greedy LogP tree's search over lf (hier/logp_tree.c) stops at the first lf that
 * never held a holder back; this checks, over a grid of layouts (uniform and uneven
 * nodes, every third root), sizes and model costs, that it chooses the lf and the time
 * the search over every lf chooses. Not an MPI program: the tree's code is included.
 * Prints "logpsearch ok: ..." and exits 0, or names the first cases that differ.
 * `logpsearch NODES PPN BYTES` times both searches on one layout instead (the default
 * costs of bcast/logp_tree). */
#include "../hier/logp_tree.c"
#include <stdio.h>
#include <time.h>

MPI_Aint ct_extent(MPI_Datatype t)
{
    (void)t;
    return 1;
}

/* a layout's simulation state: nn nodes of ppn ranks, or (uneven) ppn, ppn - 1, ppn, ... */
static sim sim_new(int nn, int ppn, int uneven)
{
    int cap = nn * ppn, size = 0;
    int *node_of = malloc(sizeof(int) * (size_t)cap), *first = malloc(sizeof(int) * (size_t)(nn + 1));
    int *members = malloc(sizeof(int) * (size_t)cap);
    for (int v = 0; v < nn; v++) {
        int k = uneven && v % 2 && ppn > 1 ? ppn - 1 : ppn;
        first[v] = size;
        for (int j = 0; j < k; j++) members[size] = size, node_of[size++] = v;
    }
    first[nn] = size;
    sim s = {.size = size, .nnodes = nn, .node_of = node_of, .first = first, .members = members};
    s.lnext = malloc(sizeof(int) * (size_t)nn);
    s.sent = malloc(sizeof(int) * (size_t)size);
    s.from = malloc(sizeof(int) * (size_t)size);
    s.heap = malloc(sizeof(ev) * 2 * (size_t)size);
    s.port = malloc(2 * sizeof(int64_t) * (size_t)nn);
    s.mem = s.port + nn;
    if (!node_of || !first || !members || !s.lnext || !s.sent || !s.from || !s.heap || !s.port) {
        fprintf(stderr, "logpsearch: out of memory for %d nodes x %d ranks\n", nn, ppn);
        exit(2);
    }
    return s;
}

static void sim_free(sim *s)
{
    free((void *)s->node_of), free((void *)s->first), free((void *)s->members);
    free(s->lnext), free(s->sent), free(s->from), free(s->heap), free(s->port);
}

/* best_lf's choice (logp_tree.c), all lf or stopping where one never binds, and its time */
static int64_t search(sim *s, int root, const ct_logp_key *k, int ppn, int stop, int *lf, long *sims)
{
    int ignored = 0;
    *lf = best_lf(s, root, k, ppn, stop, sims);
    return simulate(s, root, k, *lf, 0, &ignored);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* both searches on one uniform layout: lf chosen, simulations, CPU seconds */
static int one(int nn, int ppn, long long nbytes)
{
    sim s = sim_new(nn, ppn, 0);
    ct_logp_key k = {.root = 0, .lf = -1, .bytes = nbytes, .cost = {250, 1300, 550, 12500, 8000, 0}};
    for (int early = 1; early >= 0; early--) {
        int lf = -1;
        long sims = 0;
        double t0 = seconds();
        int64_t t = search(&s, 0, &k, ppn, early, &lf, &sims);
        printf("%s: lf %d (%lld ns in the model), %ld simulations, %.3f s\n",
               early ? "search stopping where lf never binds" : "every lf", lf, (long long)t, sims,
               seconds() - t0);
    }
    sim_free(&s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4) return one(atoi(argv[1]), atoi(argv[2]), atoll(argv[3]));
    static const int nns[] = {1, 2, 3, 5, 16, 17, 48}, ppns[] = {1, 2, 3, 4, 12, 16, 32};
    static const long long bytes[] = {8, 2048, 65536};
    static const int costs[][3] = {{100, 1000, 300}, {200, 2000, 700}, {500, 5000, 700}};
    long cases = 0, differ = 0, full_sims = 0, early_sims = 0;
    for (size_t a = 0; a < sizeof nns / sizeof *nns; a++)
        for (size_t b = 0; b < sizeof ppns / sizeof *ppns; b++)
            for (int uneven = 0; uneven < 2; uneven++) {
                int nn = nns[a], ppn = ppns[b];
                sim s = sim_new(nn, ppn, uneven);
                for (int root = 0; root < s.size; root += s.size / 3 > 0 ? s.size / 3 : 1)
                    for (size_t c = 0; c < sizeof bytes / sizeof *bytes; c++)
                        for (size_t m = 0; m < sizeof costs / sizeof *costs; m++)
                            for (int rbw = 0; rbw <= 4000; rbw += 4000) {
                                ct_logp_key k = {.root = root, .lf = -1, .bytes = bytes[c],
                                                 .cost = {costs[m][0], costs[m][1], costs[m][2], 12500, 20000, rbw}};
                                int lfull = -1, learly = -1;
                                int64_t tfull = search(&s, root, &k, ppn, 0, &lfull, &full_sims);
                                int64_t tearly = search(&s, root, &k, ppn, 1, &learly, &early_sims);
                                cases++;
                                if ((tfull != tearly || lfull != learly) && differ++ < 5)
                                    printf("differ: %d nodes x %d ranks%s, root %d, %lld B, costs %d/%d/%d "
                                           "rbw %d: every lf chooses lf %d (%lld ns), the search lf %d (%lld ns)\n",
                                           nn, ppn, uneven ? " (uneven)" : "", root, bytes[c], costs[m][0],
                                           costs[m][1], costs[m][2], rbw, lfull, (long long)tfull, learly,
                                           (long long)tearly);
                            }
                sim_free(&s);
            }
    if (differ) {
        printf("logpsearch FAILED: %ld of %ld cases differ\n", differ, cases);
        return 1;
    }
    printf("logpsearch ok: %ld cases, %ld simulations instead of %ld\n", cases, early_sims, full_sims);
    return 0;
}

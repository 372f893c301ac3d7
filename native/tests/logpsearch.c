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

/* node sizes: ppn each, or (uneven) ppn, ppn - 1, ppn, ppn - 1, ... (at least 1) */
static int layout(int nn, int ppn, int uneven, int *node_of, int *first)
{
    int size = 0;
    for (int v = 0; v < nn; v++) {
        int k = uneven && v % 2 && ppn > 1 ? ppn - 1 : ppn;
        first[v] = size;
        for (int j = 0; j < k; j++) node_of[size++] = v;
    }
    first[nn] = size;
    return size;
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
    int size = nn * ppn, *node_of = malloc(sizeof(int) * (size_t)size);
    int *first = malloc(sizeof(int) * (size_t)(nn + 1)), *members = malloc(sizeof(int) * (size_t)size);
    layout(nn, ppn, 0, node_of, first);
    for (int r = 0; r < size; r++) members[r] = r;
    sim s = {.size = size, .nnodes = nn, .node_of = node_of, .first = first, .members = members};
    s.lnext = malloc(sizeof(int) * (size_t)nn);
    s.sent = malloc(sizeof(int) * (size_t)size);
    s.from = malloc(sizeof(int) * (size_t)size);
    s.heap = malloc(sizeof(ev) * 2 * (size_t)size);
    s.port = malloc(2 * sizeof(int64_t) * (size_t)nn);
    s.mem = s.port + nn;
    ct_logp_key k = {.root = 0, .lf = -1, .bytes = nbytes, .cost = {250, 1300, 550, 12500, 8000, 0}};
    for (int early = 1; early >= 0; early--) {
        int64_t best = INT64_MAX;
        int lf = -1, sims = 0, bound = 1;
        double t0 = seconds();
        for (int l = 0; l < ppn && (bound || !early); l++, sims++) {
            bound = 0;
            int64_t t = simulate(&s, 0, &k, l, 0, &bound);
            if (t < best) best = t, lf = l;
        }
        printf("%s: lf %d (%lld ns in the model), %d simulations, %.3f s\n",
               early ? "search stopping where lf never binds" : "every lf", lf, (long long)best,
               sims, seconds() - t0);
    }
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
                int nn = nns[a], ppn = ppns[b], cap = nn * ppn;
                int *node_of = malloc(sizeof(int) * (size_t)cap), *first = malloc(sizeof(int) * (size_t)(nn + 1));
                int *members = malloc(sizeof(int) * (size_t)cap);
                int size = layout(nn, ppn, uneven, node_of, first);
                for (int r = 0; r < size; r++) members[r] = r;
                sim s = {.size = size, .nnodes = nn, .node_of = node_of, .first = first, .members = members};
                s.lnext = malloc(sizeof(int) * (size_t)nn);
                s.sent = malloc(sizeof(int) * (size_t)size);
                s.from = malloc(sizeof(int) * (size_t)size);
                s.heap = malloc(sizeof(ev) * 2 * (size_t)size);
                s.port = malloc(2 * sizeof(int64_t) * (size_t)nn);
                s.mem = s.port + nn;
                for (int root = 0; root < size; root += size / 3 > 0 ? size / 3 : 1)
                    for (size_t c = 0; c < sizeof bytes / sizeof *bytes; c++)
                        for (size_t m = 0; m < sizeof costs / sizeof *costs; m++)
                            for (int rbw = 0; rbw <= 4000; rbw += 4000) {
                                ct_logp_key k = {.root = root, .lf = -1, .bytes = bytes[c],
                                                 .cost = {costs[m][0], costs[m][1], costs[m][2], 12500, 20000, rbw}};
                                int64_t tfull = INT64_MAX, tearly = INT64_MAX;
                                int lfull = -1, learly = -1, bound = 1, ignored;
                                for (int l = 0; l < ppn; l++, full_sims++) {
                                    ignored = 0;
                                    int64_t t = simulate(&s, root, &k, l, 0, &ignored);
                                    if (t < tfull) tfull = t, lfull = l;
                                }
                                for (int l = 0; l < ppn && bound; l++, early_sims++) {
                                    bound = 0;
                                    int64_t t = simulate(&s, root, &k, l, 0, &bound);
                                    if (t < tearly) tearly = t, learly = l;
                                }
                                cases++;
                                if (tfull != tearly || lfull != learly) {
                                    if (differ++ < 5)
                                        printf("differ: %d nodes x %d ranks%s, root %d, %lld B, costs %d/%d/%d "
                                               "rbw %d: every lf chooses lf %d (%lld ns), the search lf %d (%lld ns)\n",
                                               nn, ppn, uneven ? " (uneven)" : "", root, bytes[c], costs[m][0],
                                               costs[m][1], costs[m][2], rbw, lfull, (long long)tfull, learly,
                                               (long long)tearly);
                                }
                            }
                free(node_of), free(first), free(members), free(s.lnext), free(s.sent), free(s.from);
                free(s.heap), free(s.port);
            }
    if (differ) {
        printf("logpsearch FAILED: %ld of %ld cases differ\n", differ, cases);
        return 1;
    }
    printf("logpsearch ok: %ld cases, %ld simulations instead of %ld\n", cases, early_sims, full_sims);
    return 0;
}

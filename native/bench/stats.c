/* rse_median (reported): the standard error of the median by the large-sample
 * formula for normally distributed data, SE(median) = sqrt(pi/2) * stddev / sqrt(n),
 * over the median. One outlier inflates it and skewed timings break its assumption,
 * so the stopping rule uses instead the distribution-free confidence interval of the
 * median from order statistics (ci_lo, ci_hi: the l-th and u-th smallest, l and u
 * n/2 -+ 0.98 sqrt(n), the normal approximation of the binomial; about 95 %, the
 * whole range when n < 6), as ReproMPI and Hoefler & Belli recommend. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void stats_compute(const double *x, int n, stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    if (n <= 0) return;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) return;
    memcpy(v, x, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s->min = v[0];
    s->max = v[n - 1];
    s->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s->mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (v[i] - s->mean) * (v[i] - s->mean);
    s->stddev = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    s->rse_median = s->median != 0 ? 1.2533 * s->stddev / sqrt((double)n) / fabs(s->median) : 0.0;
    double h = 0.98 * sqrt((double)n);                 /* 1.96 sqrt(n) / 2 */
    int lo = (int)floor(n / 2.0 - h), hi = (int)ceil(n / 2.0 + h);   /* 0-based: lo, hi - 1 */
    if (lo < 0) lo = 0;
    if (hi > n) hi = n;
    s->ci_lo = v[lo];
    s->ci_hi = v[hi - 1];
    s->ci_rel = s->median != 0 ? (s->ci_hi - s->ci_lo) / 2 / fabs(s->median) : 0.0;
    free(v);
}

/* The standard error of the median is estimated with the large-sample formula for
 * normally distributed data, SE(median) = sqrt(pi/2) * stddev / sqrt(n), i.e.
 * 1.2533 * stddev / sqrt(n); rse_median = SE(median) / median (0 if median is 0).
 * Timing distributions are skewed, so this is a stopping heuristic, not a
 * confidence interval. */
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
    free(v);
}

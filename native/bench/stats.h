/* Summary statistics of a sample of repetition times. */
#ifndef COLLTUNE_STATS_H
#define COLLTUNE_STATS_H

typedef struct {
    int n;
    double median, mean, min, max;
    double stddev;     /* sample standard deviation (n - 1); 0 when n < 2 */
    double rse_median; /* relative standard error of the median, see stats.c */
    double ci_lo, ci_hi; /* distribution-free ~95 % confidence interval of the median */
    double ci_rel;     /* its half-width / median (0 if median is 0): the stopping rule's */
} stats_t;

/* All fields 0 when n == 0. x is not modified. */
void stats_compute(const double *x, int n, stats_t *s);

#endif

#ifndef COLLTUNE_ALGOTEST_TIMING_H
#define COLLTUNE_ALGOTEST_TIMING_H
/* One timed call per algorithm (algotest -t BYTES), see timing.c. */
void timing_run(long bytes, const char *filter);
#endif

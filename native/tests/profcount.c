/* Traffic-counting check program (tests/test_profile_count.py): point-to-point
 * sends of every covered kind with known sizes, nested named regions, an APS
 * numbered region, a pause, colltune's forced allreduce (COLLTUNE_FORCE), and
 * library collectives; the test compares the rank files with what this program
 * sent. Every rank sends to next = rank + 1 and receives from prev.
 *   profcount          the run above, prints "profcount ok" on rank 0
 *   profcount crash    the same, then rank 1 waits for the other ranks' files in
 *                      $COLLTUNE_PROFILE and kills itself before MPI_Finalize
 *   profcount warm     one more MPI_Bcast first (region "run"): a hierarchical
 *                      algorithm's one-time set-up traffic goes there */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>

enum { REGION = 100, NTAGS = 16 };
static int rank, size, next, prev;
static char sbuf[8192], rbuf[NTAGS][8192];   /* receives of one kind share a buffer */

static void ring_step(int bytes, int tag)       /* one counted send to next */
{
    MPI_Sendrecv(sbuf, bytes, MPI_BYTE, next, tag, rbuf[0], bytes, MPI_BYTE, prev, tag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}

static void p2p_kinds(void)
{
    MPI_Request rq[NTAGS], sq[8], ps[4];
    int nr = 0;
    /* every receive is posted before the barrier, so ready sends are legal */
    static const int tags[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 10, 10, 11, 11, 12};
    static const int lens[] = {100, 200, 300, 400, 500, 600, 700, 800, 1100, 1100, 1100, 1200, 1200,
                               1300, 1300, 1400};
    for (nr = 0; nr < NTAGS; nr++)
        MPI_Irecv(rbuf[nr], lens[nr], MPI_BYTE, prev, tags[nr], MPI_COMM_WORLD, &rq[nr]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Send(sbuf, 100, MPI_BYTE, next, 1, MPI_COMM_WORLD);
    MPI_Bsend(sbuf, 50, MPI_INT, next, 2, MPI_COMM_WORLD);          /* 200 bytes */
    MPI_Ssend(sbuf, 300, MPI_BYTE, next, 3, MPI_COMM_WORLD);
    MPI_Rsend(sbuf, 400, MPI_BYTE, next, 4, MPI_COMM_WORLD);
    MPI_Isend(sbuf, 500, MPI_BYTE, next, 5, MPI_COMM_WORLD, &sq[0]);
    MPI_Ibsend(sbuf, 600, MPI_BYTE, next, 6, MPI_COMM_WORLD, &sq[1]);
    MPI_Issend(sbuf, 700, MPI_BYTE, next, 7, MPI_COMM_WORLD, &sq[2]);
    MPI_Irsend(sbuf, 100, MPI_DOUBLE, next, 8, MPI_COMM_WORLD, &sq[3]); /* 800 bytes */
    MPI_Waitall(4, sq, MPI_STATUSES_IGNORE);
    MPI_Send_init(sbuf, 1100, MPI_BYTE, next, 9, MPI_COMM_WORLD, &ps[0]);
    MPI_Ssend_init(sbuf, 1200, MPI_BYTE, next, 10, MPI_COMM_WORLD, &ps[1]);
    MPI_Bsend_init(sbuf, 1300, MPI_BYTE, next, 11, MPI_COMM_WORLD, &ps[2]);
    MPI_Rsend_init(sbuf, 1400, MPI_BYTE, next, 12, MPI_COMM_WORLD, &ps[3]);
    for (int i = 0; i < 3; i++) {
        MPI_Start(&ps[0]);
        MPI_Wait(&ps[0], MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < 2; i++) {
        MPI_Startall(2, &ps[1]);
        MPI_Waitall(2, &ps[1], MPI_STATUSES_IGNORE);
    }
    MPI_Start(&ps[3]);
    MPI_Wait(&ps[3], MPI_STATUS_IGNORE);
    for (int i = 0; i < 4; i++) MPI_Request_free(&ps[i]);
    MPI_Waitall(NTAGS, rq, MPI_STATUSES_IGNORE);
    ring_step(900, 20);                                              /* Sendrecv */
    MPI_Sendrecv_replace(rbuf[1], 1000, MPI_BYTE, next, 21, prev, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(sbuf, 5000, MPI_BYTE, MPI_PROC_NULL, 22, MPI_COMM_WORLD); /* not counted */
    /* a communicator in reverse order: its rank+1 is world rank-1 */
    MPI_Comm rev;
    int rr;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &rev);
    MPI_Comm_rank(rev, &rr);
    MPI_Sendrecv(sbuf, 1500, MPI_BYTE, (rr + 1) % size, 23, rbuf[2], 1500, MPI_BYTE,
                 (rr - 1 + size) % size, 23, rev, MPI_STATUS_IGNORE);
    MPI_Barrier(rev);
    MPI_Comm_free(&rev);
#ifndef SMPI_H                         /* SMPI 3.32 has no MPI_Intercomm_create */
    /* an intercommunicator between ranks < h and the others: everyone sends 2100 bytes to
     * the other group's rank 0 (world rank h or 0: the remote group translates) */
    MPI_Comm half, inter;
    MPI_Request iq[NTAGS];
    int h = size / 2, lo = rank < h, rsize, ni = 0;
    MPI_Comm_split(MPI_COMM_WORLD, lo, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, lo ? h : 0, 40, &inter);
    MPI_Comm_remote_size(inter, &rsize);
    if (rank == 0 || rank == h)
        for (; ni < rsize; ni++) MPI_Irecv(rbuf[7 + ni % 8], 2100, MPI_BYTE, ni, 41, inter, &iq[ni]);
    MPI_Isend(sbuf, 2100, MPI_BYTE, 0, 41, inter, &iq[ni++]);
    MPI_Waitall(ni, iq, MPI_STATUSES_IGNORE);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    if (rank == 0) printf("profcount extra: intercomm\n");
#endif
    /* MPI-4 forms, where the library has them (printed by rank 0: the test adds them) */
    MPI_Request q[2];
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
    MPI_Isendrecv(sbuf, 1600, MPI_BYTE, next, 24, rbuf[3], 1600, MPI_BYTE, prev, 24, MPI_COMM_WORLD, &q[0]);
    MPI_Isendrecv_replace(rbuf[4], 1700, MPI_BYTE, next, 25, prev, 25, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    if (rank == 0) printf("profcount extra: isendrecv\n");
#endif
#if MPI_VERSION >= 4
    MPI_Sendrecv_c(sbuf, 1800, MPI_BYTE, next, 26, rbuf[5], 1800, MPI_BYTE, prev, 26, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    MPI_Irecv_c(rbuf[6], 1900, MPI_BYTE, prev, 27, MPI_COMM_WORLD, &q[0]);
    MPI_Isend_c(sbuf, 1900, MPI_BYTE, next, 27, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    if (rank == 0) printf("profcount extra: large-count\n");
#endif
    (void)q;
}

/* the other ranks' files, written in their MPI_Finalize */
static void wait_for_others(void)
{
    const char *dir = getenv("COLLTUNE_PROFILE");
    char path[4200];
    for (int tries = 0; dir && tries < 600; tries++) {
        int have = 0;
        for (int r = 0; r < size; r++) {
            snprintf(path, sizeof path, "%s/rank-%d.json", dir, r);
            have += r != rank && access(path, F_OK) == 0;
        }
        if (have == size - 1) return;
        usleep(100000);
    }
}

int main(int argc, char **argv)
{
    static char bsend_buf[1 << 16];
    int data[60], out[60], n8[64], all[64];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    MPI_Buffer_attach(bsend_buf, sizeof bsend_buf);

    if (argc > 1 && !strcmp(argv[1], "warm")) MPI_Bcast(sbuf, 1000, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Pcontrol(REGION, "p2p");
    p2p_kinds();
    MPI_Pcontrol(-REGION, "p2p");

    MPI_Pcontrol(REGION, "outer");
    ring_step(10, 30);
    MPI_Pcontrol(REGION, "inner");
    ring_step(20, 31);
    MPI_Pcontrol(-REGION, "inner");
    ring_step(30, 32);
    MPI_Pcontrol(-REGION, "outer");
    MPI_Pcontrol(7);                                  /* Intel APS style: "pcontrol-7" */
    ring_step(40, 33);
    MPI_Pcontrol(-7);
    MPI_Pcontrol(0);                                  /* mpiP: paused, not counted */
    ring_step(50, 34);
    MPI_Allreduce(data, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Pcontrol(1);
    MPI_Pcontrol(2);                                  /* mpiP's reset: ignored */

    MPI_Pcontrol(REGION, "coll");
    for (int i = 0; i < 60; i++) data[i] = rank + i;
    MPI_Allreduce(data, out, 60, MPI_INT, MPI_SUM, MPI_COMM_WORLD);  /* forced ring */
    int bad = 0;
    for (int i = 0; i < 60; i++) bad |= out[i] != size * (size - 1) / 2 + size * i;
    for (int i = 0; i < 2; i++) MPI_Bcast(sbuf, 1000, MPI_BYTE, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 64; i++) n8[i] = rank;
    MPI_Alltoall(n8, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    MPI_Gather(n8, 3, MPI_INT, all, 3, MPI_INT, size - 1, MPI_COMM_WORLD);
    MPI_Scan(n8, all, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Pcontrol(-REGION, "coll");

    int buf_size;
    void *b;
    MPI_Buffer_detach(&b, &buf_size);
    int anybad = 0;
    MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (argc > 1 && !strcmp(argv[1], "crash") && rank == 1) {
        wait_for_others();
        raise(SIGKILL);
    }
    if (rank == 0) printf(anybad ? "profcount FAILED: wrong allreduce result\n" : "profcount ok\n");
    MPI_Finalize();
    return anybad;
}

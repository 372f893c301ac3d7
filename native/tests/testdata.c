/* Inputs are small integers (exact in double, no overflow), so every correct
 * reduction order gives bit-identical results. The non-commutative op composes
 * affine maps x -> a*x + b modulo M packed into one element: associative,
 * non-commutative, and any reordering of operands changes the result. */
#include <stdlib.h>
#include <string.h>
#include "testdata.h"

const char *const td_type_name[NTYPES] = {"int", "double", "b3"};
const char *const td_op_name[NOPS] = {"-", "sum", "max", "noncomm", "bytesum"};

static MPI_Datatype b3 = MPI_DATATYPE_NULL;
static MPI_Op op_nc = MPI_OP_NULL, op_bsum = MPI_OP_NULL;

static unsigned hash(int r, int i, int salt)
{
    unsigned h = (unsigned)r * 2654435761u ^ (unsigned)i * 2246822519u ^ (unsigned)salt * 3266489917u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    return h;
}

/* affine maps mod 1024 packed as a*1024+b; (in o inout)(x) = in(inout(x)) */
static int compose(int in, int io)
{
    int a1 = in / 1024, b1 = in % 1024, a2 = io / 1024, b2 = io % 1024;
    return (a1 * a2 % 1024) * 1024 + (a1 * b2 + b1) % 1024;
}

static void compose3(const unsigned char *in, unsigned char *io)
{
    unsigned char a = (unsigned char)(in[0] * io[0]), b = (unsigned char)(in[0] * io[1] + in[1]);
    io[2] = (unsigned char)(in[2] + io[2]);
    io[0] = a; io[1] = b;
}

static void nc_fn(void *in, void *io, int *len, MPI_Datatype *dt)
{
    for (int i = 0; i < *len; i++) {
        if (*dt == MPI_INT) ((int *)io)[i] = compose(((int *)in)[i], ((int *)io)[i]);
        else if (*dt == MPI_DOUBLE)
            ((double *)io)[i] = compose((int)((double *)in)[i], (int)((double *)io)[i]);
        else compose3((unsigned char *)in + 3 * i, (unsigned char *)io + 3 * i);
    }
}

static void bsum_fn(void *in, void *io, int *len, MPI_Datatype *dt)
{
    (void)dt;  /* only registered for b3 */
    for (int i = 0; i < 3 * *len; i++) ((unsigned char *)io)[i] += ((unsigned char *)in)[i];
}

void td_init(void)
{
    MPI_Type_contiguous(3, MPI_BYTE, &b3);
    MPI_Type_commit(&b3);
    MPI_Op_create(nc_fn, 0, &op_nc);
    MPI_Op_create(bsum_fn, 1, &op_bsum);
}

void td_free(void)
{
    MPI_Op_free(&op_nc);
    MPI_Op_free(&op_bsum);
    MPI_Type_free(&b3);
}

MPI_Datatype td_type(int t) { return t == T_INT ? MPI_INT : t == T_DOUBLE ? MPI_DOUBLE : b3; }

MPI_Op td_op(int o)
{
    return o == O_SUM ? MPI_SUM : o == O_MAX ? MPI_MAX : o == O_NC ? op_nc
         : o == O_BSUM ? op_bsum : MPI_OP_NULL;
}

int td_size(int t) { return t == T_INT ? (int)sizeof(int) : t == T_DOUBLE ? (int)sizeof(double) : 3; }

void td_gen(int t, int o, int r, int i, void *out)
{
    unsigned h = hash(r, i, t * 8 + o);
    int v = o == O_NC ? (int)(2 * (h % 512) + 1) * 1024 + (int)((h >> 10) % 1024)
                      : (int)(h % 2001) - 1000;
    if (t == T_INT) { memcpy(out, &v, sizeof v); return; }
    if (t == T_DOUBLE) {
        double d = v + (o == O_NC ? 0.0 : 0.5 * (h >> 31));
        memcpy(out, &d, sizeof d);
        return;
    }
    unsigned char *c = out;
    c[0] = (unsigned char)(o == O_NC ? 2 * (h % 128) + 1 : h);
    c[1] = (unsigned char)(h >> 8);
    c[2] = (unsigned char)(h >> 16);
}

void td_fill(int t, int o, int r, int n, void *buf)
{
    int s = td_size(t);
    for (int i = 0; i < n; i++) td_gen(t, o, r, i, (char *)buf + (size_t)s * i);
}

static void combine(int t, int o, const char *acc, char *x)  /* x = acc op x */
{
    if (t == T_INT) {
        int a, b;
        memcpy(&a, acc, sizeof a); memcpy(&b, x, sizeof b);
        b = o == O_SUM ? a + b : o == O_MAX ? (a > b ? a : b) : compose(a, b);
        memcpy(x, &b, sizeof b);
    } else if (t == T_DOUBLE) {
        double a, b;
        memcpy(&a, acc, sizeof a); memcpy(&b, x, sizeof b);
        b = o == O_SUM ? a + b : o == O_MAX ? (a > b ? a : b) : compose((int)a, (int)b);
        memcpy(x, &b, sizeof b);
    } else if (o == O_NC) {
        compose3((const unsigned char *)acc, (unsigned char *)x);
    } else {
        for (int j = 0; j < 3; j++) x[j] = (char)((unsigned char)x[j] + (unsigned char)acc[j]);
    }
}

void td_expect(int t, int o, int k, int n, void *out)
{
    int s = td_size(t);
    char x[8];
    for (int i = 0; i < n; i++) {
        char *acc = (char *)out + (size_t)s * i;
        td_gen(t, o, 0, i, acc);
        for (int r = 1; r < k; r++) {
            td_gen(t, o, r, i, x);
            combine(t, o, acc, x);
            memcpy(acc, x, (size_t)s);
        }
    }
}

void td_fold(int t, int o, int r, int n, void *acc)
{
    int s = td_size(t);
    char x[8];
    for (int i = 0; i < n; i++) {
        td_gen(t, o, r, i, x);
        combine(t, o, (char *)acc + (size_t)s * i, x);
        memcpy((char *)acc + (size_t)s * i, x, (size_t)s);
    }
}

"""Modelled traffic of MPICH's collective algorithms (MPICH 5.0 exposes no per-peer counters).

Each model replays the send side of MPICH's own code (src/mpi/coll/<coll>/<coll>_intra_<alg>.c,
v5.0.1, the base of the 5.0.2 wheel) and returns every message of one call: (sender, receiver,
bytes) in communicator ranks. Sizes follow MPICH's arithmetic exactly (scatter_size rounding,
non-power-of-two fix-ups, ring chunking, zero-byte sends that MPICH still posts);
tests/test_profile_data_model.py checks them against the messages MPICH hands to UCX.
Used by counts.load_profile for library_calls when job.json says which algorithm MPICH was
forced to run (MPIR_CVAR_<COLL>_INTRA_ALGORITHM); anything else is 'not visible'.
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Callable

Msgs = list[tuple[int, int, int]]        # (sender, receiver, bytes), communicator ranks
# MPIR_CVAR_ALLGATHERV_PIPELINE_MSG_SIZE's default (cvars.txt): the ring allgatherv chunk.
ALLGATHERV_PIPELINE_MSG_SIZE = 32768


def _pof2(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


# ---- bcast --------------------------------------------------------------------------------
def bcast_binomial(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    out: Msgs = []
    if nbytes == 0:
        return out
    for rel in range(n):
        mask = 1
        while mask < n and not rel & mask:
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if rel + mask < n:
                out.append(((rel + root) % n, (rel + mask + root) % n, nbytes))
            mask >>= 1
    return out


def _scatter_for_bcast(n: int, root: int, nbytes: int, out: Msgs) -> int:
    """MPII_Scatter_for_bcast; returns scatter_size."""
    ss = (nbytes + n - 1) // n
    curr = {0: nbytes}
    for rel in range(n):                  # a rank receives from a smaller relative rank
        mask = 1
        while mask < n and not rel & mask:
            mask <<= 1
        if rel and nbytes - rel * ss <= 0:
            curr[rel] = 0
        c = curr.get(rel, 0)
        mask >>= 1
        while mask > 0:
            if rel + mask < n:
                send = c - ss * mask
                if send > 0:
                    out.append(((rel + root) % n, (rel + mask + root) % n, send))
                    curr[rel + mask] = send
                    c -= send
            mask >>= 1
    return ss


def _rd_allgather(n: int, curr: list[int], out: Msgs, rank_of: Callable[[int], int]) -> None:
    """The recursive-doubling allgather of MPICH (bcast's and allgather's, same code), with
    its non-power-of-two fix-up; curr[rel]: bytes each relative rank holds at the start."""
    recv = [0] * n
    mask, i = 1, 0
    while mask < n:
        sent = list(curr)
        for rel in range(n):
            dst = rel ^ mask
            if dst < n:
                out.append((rank_of(rel), rank_of(dst), sent[rel]))
                recv[rel] = sent[dst]
                curr[rel] += sent[dst]
        k = mask.bit_length() - 1
        tmp = mask >> 1
        active = [rel for rel in range(n) if ((rel ^ mask) >> i << i) + mask > n]
        while tmp:
            moves = []
            for rel in active:
                my_root = rel >> i << i
                done = n - my_root - mask
                dst = rel ^ tmp
                tree_root = rel >> k << k
                if dst > rel and rel < tree_root + done <= dst:
                    moves.append((rel, dst, recv[rel]))
            for rel, dst, nb in moves:
                out.append((rank_of(rel), rank_of(dst), nb))
                recv[dst] = nb
                curr[dst] += nb
            tmp >>= 1
            k -= 1
        mask <<= 1
        i += 1


def bcast_scatter_recursive_doubling_allgather(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    out: Msgs = []
    if nbytes == 0:
        return out
    ss = _scatter_for_bcast(n, root, nbytes, out)
    curr = [max(0, min(ss, nbytes - rel * ss)) for rel in range(n)]
    _rd_allgather(n, curr, out, lambda rel: (rel + root) % n)
    return out


def bcast_scatter_ring_allgather(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    out: Msgs = []
    if nbytes == 0:
        return out
    ss = _scatter_for_bcast(n, root, nbytes, out)
    for rank in range(n):
        j = rank
        for _ in range(1, n):
            rel_j = (j - root + n) % n
            out.append((rank, (rank + 1) % n, max(0, min(ss, nbytes - rel_j * ss))))
            j = (j - 1 + n) % n
    return out


# ---- reduce / allreduce -------------------------------------------------------------------
def reduce_binomial(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    """Commutative operation (every predefined op): the tree is rooted at root."""
    out: Msgs = []
    for rel in range(n):
        mask = 1
        while mask < n:
            if rel & mask:
                out.append(((rel + root) % n, ((rel & ~mask) + root) % n, nbytes))
                break
            mask <<= 1
    return out


def _fold(n: int, nbytes: int, out: Msgs) -> tuple[int, int]:
    pof2 = _pof2(n)
    rem = n - pof2
    for r in range(0, 2 * rem, 2):
        out.append((r, r + 1, nbytes))
    return pof2, rem


def _unfold(rem: int, nbytes: int, out: Msgs) -> None:
    for r in range(1, 2 * rem, 2):
        out.append((r, r - 1, nbytes))


def allreduce_recursive_doubling(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    out: Msgs = []
    pof2, rem = _fold(n, nbytes, out)
    for newrank in range(pof2):
        rank = newrank * 2 + 1 if newrank < rem else newrank + rem
        mask = 1
        while mask < pof2:
            nd = newrank ^ mask
            out.append((rank, nd * 2 + 1 if nd < rem else nd + rem, nbytes))
            mask <<= 1
    _unfold(rem, nbytes, out)
    return out


def allreduce_reduce_scatter_allgather(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    count = nbytes // ts
    out: Msgs = []
    pof2, rem = _fold(n, nbytes, out)
    cnts = [count // pof2 + (1 if i < count % pof2 else 0) for i in range(pof2)]
    for newrank in range(pof2):
        rank = newrank * 2 + 1 if newrank < rem else newrank + rem
        mask, send_idx, recv_idx, last_idx = 1, 0, 0, pof2
        while mask < pof2:
            nd = newrank ^ mask
            if newrank < nd:
                send_idx = recv_idx + pof2 // (mask * 2)
                send = sum(cnts[send_idx:last_idx])
            else:
                recv_idx = send_idx + pof2 // (mask * 2)
                send = sum(cnts[send_idx:recv_idx])
            out.append((rank, nd * 2 + 1 if nd < rem else nd + rem, send * ts))
            send_idx = recv_idx
            mask <<= 1
            if mask < pof2:
                last_idx = recv_idx + pof2 // mask
        mask >>= 1
        while mask > 0:
            nd = newrank ^ mask
            if newrank < nd:
                if mask != pof2 // 2:
                    last_idx = last_idx + pof2 // (mask * 2)
                recv_idx = send_idx + pof2 // (mask * 2)
                send = sum(cnts[send_idx:recv_idx])
            else:
                recv_idx = send_idx - pof2 // (mask * 2)
                send = sum(cnts[send_idx:last_idx])
            out.append((rank, nd * 2 + 1 if nd < rem else nd + rem, send * ts))
            if newrank > nd:
                send_idx = recv_idx
            mask >>= 1
    _unfold(rem, nbytes, out)
    return out


def _allgatherv_ring(n: int, counts: list[int], ts: int, out: Msgs) -> None:
    total = sum(counts)
    if total == 0:
        return
    big = max(counts)
    chunk = 0
    if ALLGATHERV_PIPELINE_MSG_SIZE > 0 and big * ts > ALLGATHERV_PIPELINE_MSG_SIZE:
        chunk = max(1, ALLGATHERV_PIPELINE_MSG_SIZE // ts)
    chunk = chunk or big
    for rank in range(n):
        left, right = (rank - 1) % n, (rank + 1) % n
        torecv, tosend = total - counts[rank], total - counts[right]
        sidx, ridx, soff, roff = rank, left, 0, 0
        while tosend or torecv:
            sendnow = min(counts[sidx] - soff, chunk) if tosend else 0
            recvnow = min(counts[ridx] - roff, chunk) if torecv else 0
            if sendnow:
                out.append((rank, right, sendnow * ts))
                tosend -= sendnow
            torecv -= recvnow
            soff += sendnow
            roff += recvnow
            if soff == counts[sidx]:
                soff, sidx = 0, (sidx - 1) % n
            if roff == counts[ridx]:
                roff, ridx = 0, (ridx - 1) % n


def allreduce_ring(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    count = nbytes // ts
    cnts, total = [0] * n, 0
    for i in range(n):
        cnts[i] = (count + n - 1) // n
        if total + cnts[i] > count:
            cnts[i] = count - total
            break
        total += cnts[i]
    out: Msgs = []
    for rank in range(n):
        for i in range(n - 1):
            out.append((rank, (rank + 1) % n, cnts[(rank - 1 - i) % n] * ts))
    _allgatherv_ring(n, cnts, ts, out)
    return out


# ---- allgather / alltoall (bytes: one rank's block) ---------------------------------------
def allgather_ring(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    return [(r, (r + 1) % n, nbytes) for r in range(n) for _ in range(1, n)]


def allgather_recursive_doubling(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    out: Msgs = []
    _rd_allgather(n, [nbytes] * n, out, lambda rel: rel)
    return out


def allgather_brucks(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    out: Msgs = []
    if nbytes == 0:
        return out
    for rank in range(n):
        curr, pof2 = nbytes, 1
        while pof2 <= n // 2:
            out.append((rank, (rank - pof2) % n, curr))
            curr *= 2
            pof2 *= 2
        if n - pof2:
            out.append((rank, (rank - pof2) % n, (n - pof2) * nbytes))
    return out


def alltoall_pairwise(n: int, root: int, nbytes: int, ts: int = 1) -> Msgs:
    pof2 = n & (n - 1) == 0
    return [(r, (r ^ i) if pof2 else (r + i) % n, nbytes) for r in range(n) for i in range(1, n)]


# MPICH's names (MPIR_CVAR_<COLL>_INTRA_ALGORITHM values) -> model; needs_type_size: the
# algorithm splits the buffer by elements, so the bytes alone do not give its messages.
MODELS: dict[str, dict[str, Callable[..., Msgs]]] = {
    "bcast": {"binomial": bcast_binomial,
              "scatter_recursive_doubling_allgather": bcast_scatter_recursive_doubling_allgather,
              "scatter_ring_allgather": bcast_scatter_ring_allgather},
    "reduce": {"binomial": reduce_binomial},
    "allreduce": {"recursive_doubling": allreduce_recursive_doubling,
                  "reduce_scatter_allgather": allreduce_reduce_scatter_allgather,
                  "ring": allreduce_ring},
    "allgather": {"ring": allgather_ring, "recursive_doubling": allgather_recursive_doubling,
                  "brucks": allgather_brucks},
    "alltoall": {"pairwise": alltoall_pairwise},
}
NEEDS_TYPE_SIZE = {("allreduce", "reduce_scatter_allgather"), ("allreduce", "ring")}


def usable(kind: str, algorithm: str, n: int, nbytes: int, type_size: int = 1) -> bool:
    """MPICH's own restrictions (MPIR_<Coll>_impl refuses the forced algorithm otherwise,
    with 'User set collective algorithm is not usable'; checked on the wheel)."""
    if (kind, algorithm) == ("allreduce", "reduce_scatter_allgather"):
        return nbytes // type_size >= _pof2(n)
    if (kind, algorithm) == ("allgather", "recursive_doubling"):
        return n & (n - 1) == 0
    return True


@lru_cache(maxsize=4096)
def collective_messages(kind: str, algorithm: str, n: int, root: int, nbytes: int,
                        type_size: int = 1) -> tuple[tuple[int, int, int], ...]:
    """Every message of one call, communicator ranks: ((sender, receiver, bytes), ...)."""
    if nbytes == 0 or n < 2:            # MPICH returns before sending anything
        return ()
    return tuple(MODELS[kind][algorithm](n, max(root, 0), nbytes, type_size))


def cvar_settings(job: dict) -> dict[str, str]:
    """MPICH control variables the job ran with: the MPIR_CVAR_ entries of job.json's
    'settings' (the environment libcolltune saw at MPI_Init)."""
    return {k: str(v) for k, v in (job.get("settings") or {}).items() if k.startswith("MPIR_CVAR_")}


def forced_algorithm(job: dict, kind: str) -> str | None:
    alg = cvar_settings(job).get(f"MPIR_CVAR_{kind.upper()}_INTRA_ALGORITHM")
    return alg if alg and alg in MODELS.get(kind, {}) else None


def model_sends(kind: str, members: list[int], root: int, nbytes: int, job: dict, *, rank: int,
                type_size: int | None = None) -> list[tuple[int, int, int]] | None:
    """What world rank ``rank`` sends in one call of ``kind`` on the communicator ``members``
    (world ranks in communicator order): [(destination world rank, bytes, messages)], or
    None when the algorithm is not known (or needs the datatype's size, not recorded)."""
    alg = forced_algorithm(job, kind)
    if alg is None or rank not in members:
        return None
    if (kind, alg) in NEEDS_TYPE_SIZE and not type_size:
        return None
    if not usable(kind, alg, len(members), nbytes, type_size or 1):
        return None
    me = members.index(rank)
    per: Counter = Counter()
    count: Counter = Counter()
    for s, d, nb in collective_messages(kind, alg, len(members), root, nbytes, type_size or 1):
        if s == me:
            per[members[d]] += nb
            count[members[d]] += 1
    return [(d, per[d], count[d]) for d in count]


def why_not(job: dict) -> str:
    forced = {k: v for k, v in cvar_settings(job).items() if k.endswith("_INTRA_ALGORITHM")}
    if not forced:
        return "no MPIR_CVAR_<COLL>_INTRA_ALGORITHM recorded in job.json"
    return "only these are forced: " + ", ".join(f"{k}={v}" for k, v in sorted(forced.items()))

#!/usr/bin/env python3
"""Write a large OTF2 archive for the import benchmark.

    python3 benches/otf2_gen.py OUT_DIR --events N [--ranks R]

writes OUT_DIR/traces.otf2 (plus traces.def and traces/<location>.evt|.def) with about N event
records in total (every record counts: Enter/Leave, MPI records, ProgramBegin/End), written
with the official OTF2 library (`pip install otf2`) and following Score-P's conventions (the
same as tests/fixtures/otf2/make_fixtures.py): one process location group per rank, location
id = rank (thread 0), a COMM_LOCATIONS group, MPI_COMM_WORLD on a COMM_GROUP of 0..R-1,
MPI_COMM_SELF, MPI regions named like the calls, timer resolution 1 ns, a non-zero global
offset, 1 MiB event chunks (so big locations span many chunks).

The program is a 2D five-point stencil on a px x py grid of ranks (px*py = R, as square as
possible, not periodic, so corner/edge/interior ranks have 2/3/4 neighbours):

    ProgramBegin, Enter main, MPI_Init
    repeat: Enter "iteration"
              MPI_Irecv x k (one per neighbour), MPI_Isend x k
              MPI_Waitall completing all 2k requests (MPI_IRECV and MPI_ISEND_COMPLETE)
              every 10th iteration: MPI_Allreduce (8 bytes) on MPI_COMM_WORLD
            Leave "iteration"
    MPI_Finalize, Leave main, ProgramEnd

The number of iterations is chosen so that the total is as close to N as possible. At the end
one JSON line is printed: {"events": ..., "messages": ..., "message_bytes": ...,
"event_chunk": ..., ...} with the exact numbers written (the event count is checked against
OTF2's own count per location).

Speed: the OTF2 C functions are called through ctypes function pointers whose argument types
are set once (the `_otf2` wrappers set them on every call, which costs several times more).
Records are kept in OTF2's memory chunks until the archive is closed (about 10-20 bytes per
event, so 10M events need about 200 MB of memory).
"""

import argparse
import ctypes
import json
import math
import os
import shutil
import sys
import time

import _otf2
from _otf2.Config import conf

C_VOID_P, C_U8, C_U32, C_U64, C_INT = (ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32,
                                       ctypes.c_uint64, ctypes.c_int)

TIMER_RESOLUTION = 10**9  # ns
GLOBAL_OFFSET = 1_600_000_000 * 10**9  # a non-zero epoch-like start
SLOT = 20  # ns between two records of a phase
PERIOD = 2000 * SLOT  # one iteration: 40 us
EVENT_CHUNK = 1024 * 1024
DEF_CHUNK = 4 * 1024 * 1024
ALLREDUCE_EVERY = 10
ALLREDUCE_BYTES = 8
HALO_BYTES_X = 8 * 512  # to/from west and east neighbours
HALO_BYTES_Y = 8 * 256  # to/from north and south neighbours

REGIONS = ["main", "iteration", "MPI_Init", "MPI_Finalize", "MPI_Isend", "MPI_Irecv",
           "MPI_Waitall", "MPI_Allreduce"]
(R_MAIN, R_ITER, R_INIT, R_FINALIZE, R_ISEND, R_IRECV, R_WAITALL,
 R_ALLREDUCE) = range(len(REGIONS))
MPI_ROLES = {
    "MPI_Init": _otf2.REGION_ROLE_FUNCTION,
    "MPI_Finalize": _otf2.REGION_ROLE_FUNCTION,
    "MPI_Isend": _otf2.REGION_ROLE_POINT2POINT,
    "MPI_Irecv": _otf2.REGION_ROLE_POINT2POINT,
    "MPI_Waitall": _otf2.REGION_ROLE_FUNCTION,
    "MPI_Allreduce": _otf2.REGION_ROLE_COLL_ALL2ALL,
}
COMM_WORLD, COMM_SELF = 0, 1


def flush_callbacks():
    """OTF2 writes an event buffer only if the pre-flush callback says so. No post-flush
    callback: OTF2 would otherwise insert a BUFFER_FLUSH record (with the callback's time)
    whenever a location's buffer exceeds its memory limit (128 MiB) and has to be written out
    in the middle of the trace."""
    callbacks = _otf2.FlushCallbacks(pre_flush=lambda *args: _otf2.FLUSH,
                                     post_flush=lambda *args: 0)
    callbacks.post_flush = _otf2.Callbacks._PostFlushCallback_FP()  # NULL
    return callbacks


def c_function(name, *argtypes):
    """A private function pointer (lib[name] is not the cached object the _otf2 wrappers
    reconfigure) taking (writer, attribute list, time, *argtypes) and returning the error."""
    f = conf.lib[name]
    f.argtypes = [C_VOID_P, C_VOID_P, C_U64] + list(argtypes)
    f.restype = C_INT
    return f


def grid(ranks):
    """px x py = ranks with px >= py, as square as possible."""
    py = int(math.isqrt(ranks))
    while ranks % py:
        py -= 1
    return ranks // py, py


def neighbours(rank, px, py):
    """(peer, tag of the message to the peer, tag of the message from the peer, bytes)."""
    x, y = rank % px, rank // px
    out = []
    # Tags name the direction a message travels: 0 east, 1 west, 2 north, 3 south.
    if x + 1 < px:
        out.append((rank + 1, 0, 1, HALO_BYTES_X))
    if x > 0:
        out.append((rank - 1, 1, 0, HALO_BYTES_X))
    if y + 1 < py:
        out.append((rank + px, 2, 3, HALO_BYTES_Y))
    if y > 0:
        out.append((rank - px, 3, 2, HALO_BYTES_Y))
    return out


def count(ranks, iterations):
    """Exact records the program writes (see the module docstring)."""
    px, py = grid(ranks)
    total = 0
    for r in range(ranks):
        k = len(neighbours(r, px, py))
        # 8 fixed records; per iteration Enter/Leave iteration (2), 3 per Irecv and per Isend,
        # Waitall Enter/Leave + 2k completions; 4 per Allreduce.
        total += 8 + iterations * (2 + 6 * k + 2 + 2 * k) + 4 * (iterations // ALLREDUCE_EVERY)
    return total


def choose_iterations(ranks, events):
    lo, hi = 1, 1
    while count(ranks, hi) < events:
        hi *= 2
    while lo < hi:  # smallest iterations with count >= events
        mid = (lo + hi) // 2
        if count(ranks, mid) < events:
            lo = mid + 1
        else:
            hi = mid
    if lo > 1 and events - count(ranks, lo - 1) < count(ranks, lo) - events:
        lo -= 1
    return lo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--events", type=int, required=True, help="about this many records")
    ap.add_argument("--ranks", type=int, default=16)
    opts = ap.parse_args()
    ranks = opts.ranks
    if ranks < 1:
        ap.error("--ranks must be at least 1")
    started = time.time()
    iterations = choose_iterations(ranks, opts.events)
    px, py = grid(ranks)

    out = os.path.abspath(opts.out_dir)
    os.makedirs(out, exist_ok=True)
    for stale in ("traces", "traces.otf2", "traces.def"):
        p = os.path.join(out, stale)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)

    archive = _otf2.Archive_Open(out, "traces", _otf2.FILEMODE_WRITE, EVENT_CHUNK, DEF_CHUNK,
                                 _otf2.SUBSTRATE_POSIX, _otf2.COMPRESSION_NONE)

    callbacks = flush_callbacks()
    _otf2.Archive_SetFlushCallbacks(archive, callbacks, None)
    _otf2.Archive_SetSerialCollectiveCallbacks(archive)
    _otf2.Archive_SetCreator(archive, "mtfdb benches/otf2_gen.py")
    _otf2.Archive_SetDescription(archive, "2D stencil, %d ranks (%dx%d), %d iterations"
                                 % (ranks, px, py, iterations))
    _otf2.Archive_SetMachineName(archive, "Linux")

    enter = c_function("OTF2_EvtWriter_Enter", C_U32)
    leave = c_function("OTF2_EvtWriter_Leave", C_U32)
    isend = c_function("OTF2_EvtWriter_MpiIsend", C_U32, C_U32, C_U32, C_U64, C_U64)
    irecv_request = c_function("OTF2_EvtWriter_MpiIrecvRequest", C_U64)
    isend_complete = c_function("OTF2_EvtWriter_MpiIsendComplete", C_U64)
    irecv = c_function("OTF2_EvtWriter_MpiIrecv", C_U32, C_U32, C_U32, C_U64, C_U64)
    coll_begin = c_function("OTF2_EvtWriter_MpiCollectiveBegin")
    coll_end = c_function("OTF2_EvtWriter_MpiCollectiveEnd", C_U8, C_U32, C_U32, C_U64, C_U64)
    op_allreduce = _otf2.COLLECTIVE_OP_ALLREDUCE.value
    no_root = _otf2.UNDEFINED_UINT32.value

    _otf2.Archive_OpenEvtFiles(archive)
    written = {}
    first_last = {}
    messages = 0
    message_bytes = 0
    expected_total = count(ranks, iterations)
    s_program, s_arg = 0, 1  # string ids, defined below
    t_end_iterations = GLOBAL_OFFSET + 10 * SLOT + iterations * PERIOD
    for rank in range(ranks):
        w_handle = _otf2.Archive_GetEvtWriter(archive, rank)
        w = ctypes.cast(w_handle, C_VOID_P).value
        peers = neighbours(rank, px, py)
        k = len(peers)
        # Ranks start a few ns apart (at most 16 distinct starts, all before the first
        # iteration, whatever the number of ranks).
        t = GLOBAL_OFFSET + rank % 16 * SLOT // 4
        t0 = t
        _otf2.EvtWriter_ProgramBegin(w_handle, None, t, s_program, [s_arg])
        enter(w, None, t + 1, R_MAIN)
        enter(w, None, t + 2, R_INIT)
        leave(w, None, t + 3, R_INIT)
        request = 0
        recvs = [(peer, from_tag, size) for peer, _, from_tag, size in peers]
        sends = [(peer, to_tag, size) for peer, to_tag, _, size in peers]
        for i in range(iterations):
            base = GLOBAL_OFFSET + 10 * SLOT + i * PERIOD
            enter(w, None, base, R_ITER)
            # Irecvs in slots 1..12, Isends in slots 13..24 (whatever k is), so every send of
            # an iteration precedes every completion of that iteration on every rank.
            t = base + SLOT
            recv_requests = []
            for peer, tag, size in recvs:
                request += 1
                enter(w, None, t, R_IRECV)
                irecv_request(w, None, t + SLOT, request)
                leave(w, None, t + 2 * SLOT, R_IRECV)
                recv_requests.append((peer, tag, size, request))
                t += 3 * SLOT
            t = base + 13 * SLOT
            send_requests = []
            for peer, tag, size in sends:
                request += 1
                enter(w, None, t, R_ISEND)
                isend(w, None, t + SLOT, peer, COMM_WORLD, tag, size, request)
                leave(w, None, t + 2 * SLOT, R_ISEND)
                send_requests.append(request)
                t += 3 * SLOT
            # Compute, then wait for the halo.
            t = base + 1000 * SLOT
            enter(w, None, t, R_WAITALL)
            for peer, tag, size, req in recv_requests:
                t += SLOT
                irecv(w, None, t, peer, COMM_WORLD, tag, size, req)
            for req in send_requests:
                t += SLOT
                isend_complete(w, None, t, req)
            t += SLOT
            leave(w, None, t, R_WAITALL)
            if i % ALLREDUCE_EVERY == ALLREDUCE_EVERY - 1:
                t = base + 1500 * SLOT
                enter(w, None, t, R_ALLREDUCE)
                coll_begin(w, None, t + SLOT)
                coll_end(w, None, t + 50 * SLOT, op_allreduce, COMM_WORLD, no_root,
                         ALLREDUCE_BYTES, ALLREDUCE_BYTES)
                leave(w, None, t + 51 * SLOT, R_ALLREDUCE)
            leave(w, None, base + 1990 * SLOT, R_ITER)
        for _, _, size in sends:
            messages += iterations
            message_bytes += iterations * size
        t = max(t_end_iterations, t0 + 10)
        enter(w, None, t, R_FINALIZE)
        leave(w, None, t + SLOT, R_FINALIZE)
        leave(w, None, t + 2 * SLOT, R_MAIN)
        _otf2.EvtWriter_ProgramEnd(w_handle, None, t + 3 * SLOT, 0)
        first_last[rank] = (t0, t + 3 * SLOT)
        written[rank] = _otf2.EvtWriter_GetNumberOfEvents(w_handle)
        _otf2.Archive_CloseEvtWriter(archive, w_handle)
    _otf2.Archive_CloseEvtFiles(archive)
    total = sum(written.values())
    if total != expected_total:
        sys.exit("otf2_gen: OTF2 counted %d events, expected %d (a write failed)"
                 % (total, expected_total))

    # Global definitions (Score-P's layout).
    g = _otf2.Archive_GetGlobalDefWriter(archive)
    first = min(v[0] for v in first_last.values())
    last = max(v[1] for v in first_last.values())
    assert first == GLOBAL_OFFSET
    _otf2.GlobalDefWriter_WriteClockProperties(g, TIMER_RESOLUTION, GLOBAL_OFFSET, last - first,
                                               _otf2.UNDEFINED_TIMESTAMP)
    strings = {}

    def s(text):
        if text not in strings:
            strings[text] = len(strings)
            _otf2.GlobalDefWriter_WriteString(g, strings[text], text)
        return strings[text]

    if (s("./stencil2d"), s("--iterations=%d" % iterations)) != (s_program, s_arg):
        raise AssertionError("ProgramBegin's strings must be the first two")
    s("")
    _otf2.GlobalDefWriter_WriteParadigm(g, _otf2.PARADIGM_MPI, s("MPI"),
                                        _otf2.PARADIGM_CLASS_PROCESS)
    _otf2.GlobalDefWriter_WriteSystemTreeNode(g, 0, s("Linux"), s("machine"),
                                              _otf2.UNDEFINED_SYSTEM_TREE_NODE)
    ranks_per_node = 4
    nodes = (ranks + ranks_per_node - 1) // ranks_per_node
    for n in range(nodes):
        _otf2.GlobalDefWriter_WriteSystemTreeNode(g, n + 1, s("node-%03d" % n), s("node"), 0)
    for r in range(ranks):
        _otf2.GlobalDefWriter_WriteLocationGroup(g, r, s("MPI Rank %d" % r),
                                                 _otf2.LOCATION_GROUP_TYPE_PROCESS,
                                                 r // ranks_per_node + 1,
                                                 _otf2.UNDEFINED_LOCATION_GROUP)
    for r in range(ranks):
        _otf2.GlobalDefWriter_WriteLocation(g, r, s("Master thread"),
                                            _otf2.LOCATION_TYPE_CPU_THREAD, written[r], r)
    for rid, name in enumerate(REGIONS):
        if name in MPI_ROLES:
            role, paradigm, source, line = MPI_ROLES[name], _otf2.PARADIGM_MPI, "MPI", 0
        else:
            role, paradigm, source, line = (_otf2.REGION_ROLE_FUNCTION, _otf2.PARADIGM_USER,
                                            "stencil2d.c", 10 * (rid + 1))
        _otf2.GlobalDefWriter_WriteRegion(g, rid, s(name), s(name), s(""), role, paradigm,
                                          _otf2.REGION_FLAG_NONE, s(source), line, line)
    _otf2.GlobalDefWriter_WriteGroup(g, 0, s(""), _otf2.GROUP_TYPE_COMM_LOCATIONS,
                                     _otf2.PARADIGM_MPI, _otf2.GROUP_FLAG_NONE,
                                     list(range(ranks)))
    _otf2.GlobalDefWriter_WriteGroup(g, 1, s(""), _otf2.GROUP_TYPE_COMM_GROUP,
                                     _otf2.PARADIGM_MPI, _otf2.GROUP_FLAG_NONE,
                                     list(range(ranks)))
    _otf2.GlobalDefWriter_WriteGroup(g, 2, s(""), _otf2.GROUP_TYPE_COMM_SELF,
                                     _otf2.PARADIGM_MPI, _otf2.GROUP_FLAG_NONE, [])
    _otf2.GlobalDefWriter_WriteComm(g, COMM_WORLD, s("MPI_COMM_WORLD"), 1,
                                    _otf2.UNDEFINED_COMM, _otf2.COMM_FLAG_NONE)
    _otf2.GlobalDefWriter_WriteComm(g, COMM_SELF, s("MPI_COMM_SELF"), 2,
                                    _otf2.UNDEFINED_COMM, _otf2.COMM_FLAG_NONE)
    _otf2.Archive_CloseGlobalDefWriter(archive, g)

    # Local definitions: Score-P's two clock offsets per location (zero here).
    _otf2.Archive_OpenDefFiles(archive)
    for r in range(ranks):
        d = _otf2.Archive_GetDefWriter(archive, r)
        _otf2.DefWriter_WriteClockOffset(d, first_last[r][0], 0, 0.0)
        _otf2.DefWriter_WriteClockOffset(d, first_last[r][1], 0, 0.0)
        _otf2.Archive_CloseDefWriter(archive, d)
    _otf2.Archive_CloseDefFiles(archive)
    _otf2.Archive_Close(archive)
    del callbacks

    print(json.dumps({
        "events": total,
        "messages": messages,
        "message_bytes": message_bytes,
        "ranks": ranks,
        "grid": [px, py],
        "iterations": iterations,
        "event_chunk": EVENT_CHUNK,
        "anchor": os.path.join(out, "traces.otf2"),
        "seconds": round(time.time() - started, 2),
    }))


if __name__ == "__main__":
    main()

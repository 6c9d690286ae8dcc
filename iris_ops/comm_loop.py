"""The loop every communication program runs: take a tile, wait until it is ready, move it, log it.

A communication program takes tiles in tile order (the order the GEMM finishes them in, roughly):
statically (pid, pid + num_programs, ...) or, with a claim counter, dynamically, so that GEMM
programs that have finished their own tiles can join in and share the tail. For each tile it waits
with acquire loads until the tile's READY word on this rank reaches `ready_target`, then calls the
algorithm's TILE_FN. A wait that times out records an error word and moves on, so a lost flag fails
the run instead of hanging it.

Two-phase tiles (PIPELINED): an algorithm whose tile needs word from the peers before it can finish
(all_reduce: "my C tile holds my contribution, add into it"; one_shot with comm-side notification:
"my partial tile is ready") splits its work in two. Phase 1 publishes (and tells the peers, with a
one-way signal), phase 2 waits for the peers' signals and finishes. The loop runs phase 1 of a tile
and then phase 2 of the tile before it, so the peers' signals have had a whole tile's time to arrive
and nobody waits for a round trip over the links per tile.

TILE_FN(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
        AUX, aux_target, max_spins, ERRORS, heap_bases, cur_rank, world_size,
        BLK_M, BLK_N, CTM, CTN, PHASE)
moves the BLK_M x BLK_N tile (pid_m, pid_n) in sub-tiles of CTM x CTN; PHASE is 1 or 2 (single-phase
algorithms do everything in 1). AUX holds the algorithm's per-tile counters on the heap and
aux_target what this launch waits for there.
"""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.device import read_timer, record_error, wait_local
from iris_ops.tiles import tile_coords


@triton.jit
def _start_tile(
    tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
    READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
    heap_bases, cur_rank, world_size,
    TILE_FN: tl.constexpr, READY_SCOPE: tl.constexpr,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr,
    CTM: tl.constexpr, CTN: tl.constexpr, TIMER: tl.constexpr,
):
    """Wait until tile_id is ready here, run phase 1, and log the wait."""
    if COMM_TRACE is not None:
        t_wait = read_timer(CLOCK, TIMER)
    if not wait_local(READY + tile_id, ready_target, max_spins, READY_SCOPE):
        record_error(ERRORS, 2, tile_id)  # ERR_TILE_READY
    if COMM_TRACE is not None:
        t_ready = read_timer(CLOCK, TIMER)
        tl.store(COMM_TRACE + tile_id * 5 + 0, t_wait)
        tl.store(COMM_TRACE + tile_id * 5 + 1, t_ready)
        tl.store(COMM_TRACE + tile_id * 5 + 2, t_ready)
    pid_m, pid_n = tile_coords(tile_id, M, N, BLK_M, BLK_N, GSIZE_M)
    TILE_FN(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
            AUX, aux_target, max_spins, ERRORS, heap_bases, cur_rank, world_size, BLK_M, BLK_N, CTM, CTN, 1)


@triton.jit
def _finish_tile(
    tile_id, trace_pid, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
    max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
    heap_bases, cur_rank, world_size,
    TILE_FN: tl.constexpr, PIPELINED: tl.constexpr,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr,
    CTM: tl.constexpr, CTN: tl.constexpr, TIMER: tl.constexpr,
):
    """Run phase 2 (if the algorithm has one) and log the end of the tile's move."""
    if PIPELINED:
        tl.debug_barrier()
        pid_m, pid_n = tile_coords(tile_id, M, N, BLK_M, BLK_N, GSIZE_M)
        TILE_FN(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                AUX, aux_target, max_spins, ERRORS, heap_bases, cur_rank, world_size, BLK_M, BLK_N, CTM, CTN, 2)
    if COMM_TRACE is not None:
        tl.store(COMM_TRACE + tile_id * 5 + 3, read_timer(CLOCK, TIMER))
        tl.store(COMM_TRACE + tile_id * 5 + 4, trace_pid.to(tl.int64))


@triton.jit
def comm_program(
    pid, num_programs, trace_pid,
    SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
    READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
    heap_bases, cur_rank, world_size, CLAIM, claim_base,
    TILE_FN: tl.constexpr, READY_SCOPE: tl.constexpr, PIPELINED: tl.constexpr,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr,
    CTM: tl.constexpr, CTN: tl.constexpr, TIMER: tl.constexpr,
):
    """Move tiles until none is left. CLAIM None: tiles pid, pid + num_programs, ... (static).
    CLAIM a counter: take the next tile in tile order with an atomic ticket, so that programs that
    join late (GEMM programs done with their own work) share the tail; a launch's participants make
    n_tiles + (one failing claim each) tickets, and the host passes where this launch's tickets start.
    With PIPELINED, phase 2 of each tile runs after phase 1 of the next one (and of the last one at
    the end)."""
    n_tiles = tl.cdiv(M, BLK_M) * tl.cdiv(N, BLK_N)
    if CLAIM is None:
        tile_id = pid
    else:
        tile_id = tl.atomic_add(CLAIM, 1, sem="relaxed", scope="gpu") - claim_base
    prev = tile_id * 0 - 1  # a tensor like tile_id (a loop-carried value keeps its type)
    while tile_id < n_tiles:
        _start_tile(tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                    READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
                    heap_bases, cur_rank, world_size,
                    TILE_FN, READY_SCOPE, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER)
        if PIPELINED:
            if prev >= 0:
                _finish_tile(prev, trace_pid, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                             max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target, heap_bases, cur_rank, world_size,
                             TILE_FN, PIPELINED, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER)
            prev = tile_id
        else:
            _finish_tile(tile_id, trace_pid, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                         max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target, heap_bases, cur_rank, world_size,
                         TILE_FN, PIPELINED, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER)
        if CLAIM is None:
            tile_id += num_programs
        else:
            tile_id = tl.atomic_add(CLAIM, 1, sem="relaxed", scope="gpu") - claim_base
    if PIPELINED:
        if prev >= 0:
            _finish_tile(prev, trace_pid, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                         max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target, heap_bases, cur_rank, world_size,
                         TILE_FN, PIPELINED, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER)


@triton.jit
def subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M: tl.constexpr, BLK_N: tl.constexpr,
                    CTM: tl.constexpr, CTN: tl.constexpr):
    """Row and column indices of sub-tile (sm, sn) of tile (pid_m, pid_n), and its in-bounds mask."""
    rm = pid_m * BLK_M + sm * CTM + tl.arange(0, CTM)
    rn = pid_n * BLK_N + sn * CTN + tl.arange(0, CTN)
    rn = tl.max_contiguous(tl.multiple_of(rn, CTN), CTN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    return rm, rn, mask

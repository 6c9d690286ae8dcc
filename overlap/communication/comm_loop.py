"""The loop every communication program runs: take a tile, wait until it is ready, move it, log it.

A communication program takes tiles in tile order (the order the GEMM finishes them in, roughly):
statically (pid, pid + num_programs, ...) or, with a claim counter, dynamically, so that GEMM
programs that have finished their own tiles can join in and share the tail. Where the algorithm's
tiles have owners (MoveFlags.OWNED: tile t belongs to rank t % W, so consecutive tiles, which the
GEMM finishes together, belong to different ranks), a rank takes only its own tiles, in the same order.
It waits with acquire loads until the tile's ready words reach the step's epoch `e` (READY_SOURCES words
per tile: one for a tile this rank's GEMM makes, one per rank for a reduction, whose tile needs every rank's
partial; 0 for communication timed alone, with every tile taken as ready), then calls the
algorithm's TILE_FN on each piece (CTM rows) of it that the ticket holds: the whole tile, or one
piece where tiles are few, so that they still spread over many programs. A wait that times out records the error on
every rank (iris_ops.error_state) and moves on, so a lost flag fails the step everywhere instead of hanging it.

TILE_FN(pid_m, pid_n, sm, e, MOVE, CTX, BLK_M, BLK_N, CTM, CTN) (CTX: iris_ops.context.DeviceContext; e: the
step's epoch) moves piece sm of the BLK_M x BLK_N tile (pid_m, pid_n) of MOVE.SRC (its plane of step e where the
partial has two: overlap.algorithms.one_shot), its rows sm*CTM .. sm*CTM + CTM - 1, into
MOVE.DST (overlap.kernel_args.Move), in sub-tiles of CTM x CTN. `rank_order_sum` is the reduction the
reduce family's movers share: every rank's copy of a sub-tile, loaded together and added in rank order 0, 1,
..., W-1, so the sum is the same bits on every rank and in every run.
"""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas.iris_ops.context import now, wait_or_record
from streamk_pgas.iris_ops.device import ERR_TILE_READY, translate
from streamk_pgas.stream_k.tiles import tile_coords

_ERR_TILE: tl.constexpr = tl.constexpr(ERR_TILE_READY)


@triton.jit
def _move_pieces(tile_id, sm0, n_tiles, trace_pid, MOVE, MOVE_FLAGS, TILE_FN: tl.constexpr, e, COMM_TRACE, CTX,
                 BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr):
    """Pieces sm0 .. sm0 + MOVE.span - 1 (CTM rows each) of tile_id: wait until the tile is ready (each of its
    READY_SOURCES words >= e), move the pieces with TILE_FN, log them (the tile's trace row: its first piece's wait
    and ready times, its last piece's end and program). Pieces past M have nothing to move."""
    CTM: tl.constexpr = MOVE_FLAGS.CTM
    PIECES: tl.constexpr = BLK_M // CTM
    READY_SOURCES: tl.constexpr = MOVE_FLAGS.READY_SOURCES
    pid_m, pid_n = tile_coords(tile_id, MOVE.M, MOVE.N, BLK_M, BLK_N, GSIZE_M)
    held = tl.minimum(PIECES, tl.cdiv(MOVE.M - pid_m * BLK_M, CTM))  # pieces of the tile inside M
    end = tl.minimum(sm0 + MOVE.span, held)
    if sm0 < end:
        if COMM_TRACE is not None:
            t_wait = now(CTX)
        for s in tl.static_range(READY_SOURCES):
            if MOVE_FLAGS.READY_SYS:
                wait_or_record(CTX, MOVE.READY + s * n_tiles + tile_id, e, _ERR_TILE.value, tile_id, "sys")
            else:
                wait_or_record(CTX, MOVE.READY + s * n_tiles + tile_id, e, _ERR_TILE.value, tile_id, "gpu")
        if COMM_TRACE is not None:
            t_ready = now(CTX)
        for sm in range(sm0, end):
            TILE_FN(pid_m, pid_n, sm, e, MOVE, CTX, BLK_M, BLK_N, CTM, MOVE_FLAGS.CTN)
        if COMM_TRACE is not None:
            row = COMM_TRACE + tile_id * 5
            if sm0 == 0:
                tl.store(row + 0, t_wait)
                tl.store(row + 1, t_ready)
                tl.store(row + 2, t_ready)
            if end == held:
                tl.store(row + 3, now(CTX))
                tl.store(row + 4, trace_pid.to(tl.int64))


@triton.jit
def _my_tiles(n_tiles, rotate, cur_rank, world_size, OWNED: tl.constexpr):
    """(tiles this rank moves, the index among them of the first one at or after tile `rotate`). OWNED: the tiles
    cur_rank, cur_rank + W, ...; else every tile."""
    if OWNED:
        return (n_tiles - cur_rank + world_size - 1) // world_size, (rotate + world_size - 1 - cur_rank) // world_size
    else:
        return n_tiles, rotate


@triton.jit
def _tile_of(ticket, n_tiles, n_mine, first, rotate, cur_rank, world_size, OWNED: tl.constexpr):
    """The tile of a ticket: this rank's tiles in tile order, starting at tile `rotate` (the GEMM's first)."""
    if OWNED:
        return ((ticket + first) % n_mine) * world_size + cur_rank
    else:
        return (ticket + rotate) % n_tiles


@triton.jit
def owner_of(tile_id, world_size):
    """The rank that moves tile_id where tiles have owners (MoveFlags.OWNED)."""
    return tile_id % world_size


@triton.jit
def rank_order_sum(SRC, offs, mask, heap_bases, cur_rank, world_size: tl.constexpr):
    """Sum over every rank p of SRC[offs] on p's heap, loaded together and added in rank order (accumulated in
    fp32, int32 for integer data)."""
    if SRC.dtype.element_ty.is_int():
        acc = tl.load(translate(SRC, cur_rank, 0, heap_bases) + offs, mask=mask).to(tl.int32)
    else:
        acc = tl.load(translate(SRC, cur_rank, 0, heap_bases) + offs, mask=mask).to(tl.float32)
    for p in tl.static_range(1, world_size):
        acc += tl.load(translate(SRC, cur_rank, p, heap_bases) + offs, mask=mask).to(acc.dtype)
    return acc


@triton.jit
def comm_program(pid, num_programs, trace_pid, MOVE, MOVE_FLAGS, TILE_FN: tl.constexpr, e, CLAIM, COMM_TRACE, CTX,
                 BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr):
    """Move this rank's tiles until none is left, MOVE.span pieces (CTM rows each) a ticket: the whole tile, or
    one piece where tiles are few, so that they still spread over many programs (overlap.parts.ticket_span).
    Without CLAIM_TILES: tickets pid, pid + num_programs, ... (static). With CLAIM_TILES, CLAIM is a counter (zero
    when the step starts; the step's last program resets it): take the next ticket with an atomic, so that programs
    that join late (GEMM programs done with their own work) share the tail. Tickets follow the order the GEMM
    completes tiles in, from tile claim_rotate (a GEMM that runs its Stream-K tiles, the last ones, first passes
    the first of them); a tile's tickets are consecutive."""
    PIECES: tl.constexpr = BLK_M // MOVE_FLAGS.CTM
    groups = PIECES // MOVE.span  # tickets per tile
    n_tiles = tl.cdiv(MOVE.M, BLK_M) * tl.cdiv(MOVE.N, BLK_N)
    n_mine, first = _my_tiles(n_tiles, MOVE.claim_rotate, CTX.cur_rank, CTX.world_size, MOVE_FLAGS.OWNED)
    if not MOVE_FLAGS.CLAIM_TILES:
        for ticket in range(pid, n_mine * groups, num_programs):
            tile_id = _tile_of(ticket // groups, n_tiles, n_mine, first, MOVE.claim_rotate, CTX.cur_rank,
                               CTX.world_size, MOVE_FLAGS.OWNED)
            _move_pieces(tile_id, (ticket % groups) * MOVE.span, n_tiles, trace_pid, MOVE, MOVE_FLAGS, TILE_FN, e,
                         COMM_TRACE, CTX, BLK_M, BLK_N, GSIZE_M)
    else:
        ticket = tl.atomic_add(CLAIM, 1, sem="relaxed", scope="gpu")
        while ticket < n_mine * groups:
            tile_id = _tile_of(ticket // groups, n_tiles, n_mine, first, MOVE.claim_rotate, CTX.cur_rank,
                               CTX.world_size, MOVE_FLAGS.OWNED)
            _move_pieces(tile_id, (ticket % groups) * MOVE.span, n_tiles, trace_pid, MOVE, MOVE_FLAGS, TILE_FN, e,
                         COMM_TRACE, CTX, BLK_M, BLK_N, GSIZE_M)
            ticket = tl.atomic_add(CLAIM, 1, sem="relaxed", scope="gpu")


@triton.jit
def subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M: tl.constexpr, BLK_N: tl.constexpr,
                    CTM: tl.constexpr, CTN: tl.constexpr):
    """Row and column indices of sub-tile (sm, sn) of tile (pid_m, pid_n), and its in-bounds mask."""
    rm = pid_m * BLK_M + sm * CTM + tl.arange(0, CTM)
    rn = pid_n * BLK_N + sn * CTN + tl.arange(0, CTN)
    rn = tl.max_contiguous(tl.multiple_of(rn, CTN), CTN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    return rm, rn, mask

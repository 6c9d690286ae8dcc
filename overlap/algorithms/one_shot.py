"""one_shot: each rank publishes its M x N partial on the heap; a tile is reduced once all W
ranks have produced it, by loading it from every rank and adding in rank order, so every rank ends
with the whole reduced C (the same bits on every rank). One phase, every peer's tile read at once: the
latency algorithm, for small outputs; each rank reads (W-1) |C|, W/2 times all_reduce's bytes. SRC is the
partial (on the heap), DST this rank's C. Buffers: partial [2, M, N] (H), read by every peer; C [M, N] (this
rank's result); READY [W, tiles] (H).

Readiness is one word per (source rank, tile) on every rank, holding the epoch of the step that last
produced it: each rank's GEMM epilogue writes the step's epoch into its own word of the tile on every
rank (release, system scope for the peers), so the tile is complete once all world_size words of it
reach the epoch. Epochs, not counters: a step that runs a GEMM alone or communication alone keeps
every word consistent with the step count.

No end-of-step barrier. The partial has two planes and step e writes and reads plane e % 2 (`step_plane`). A rank
overwrites plane e % 2 in step e + 2 only after its step e + 1 has read every peer's tiles of step e + 1; each peer
published those from its step e + 1 GEMM, which its stream ran after its step e, reads of plane e % 2 included. No
peer writes into this rank's buffers but the ready words, whose epochs only grow, and this rank's C is final when
its own programs end, so the step ends without waiting for its peers (overlap.kernels: the finish without
PEER_SYNC). Communication timed alone, which waits for no tile, waits for every rank's arrival at the step
instead, which tells the same (the peer's previous step is over)."""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.device import notify_ranks, opaque
from streamk_pgas.overlap.algorithms.record import SYS_RELEASE_US, AlgorithmRecord, Rates, rows_for_loads_in_flight
from streamk_pgas.overlap.communication.comm_loop import rank_order_sum, subtile_offsets


@triton.jit
def step_plane(PTR, e, rows, stride_m):
    """Step e's plane of a buffer of two planes of `rows` rows each, one under the other (overlap.buffers)."""
    return PTR + (e % 2).to(tl.int64) * rows * stride_m


@triton.jit
def one_shot_tile(pid_m, pid_n, sm, e, MOVE, CTX,
                  BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    """Piece sm of tile (pid_m, pid_n): the rank-order sum of every rank's partial (step e's plane), stored into
    this rank's C."""
    # This rank's heap base address and its peers, computed here from the rank: where GEMM programs join the
    # communication, the compiler would otherwise share them with the publish epilogue's equal values and keep
    # those in registers across the GEMM, where sm_90's 128x256 tile leaves none to spare.
    cur_rank = opaque(CTX.cur_rank)
    src = step_plane(MOVE.SRC, e, MOVE.M, MOVE.stride_sm)
    for sn in tl.static_range(BLK_N // CTN):
        rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.n_cols, BLK_M, BLK_N, CTM, CTN)
        acc = rank_order_sum(src, rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask,
                             CTX.heap_bases, cur_rank, CTX.world_size)
        tl.store(MOVE.DST + rm[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn,
                 acc.to(MOVE.DST.dtype.element_ty), mask=mask)


@triton.jit
def one_shot_publish_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """Store the partial tile locally (the step's plane), then mark it ready on every rank (TILE_FLAGS[cur_rank,
    tile_id] = epoch): released at system scope for the peers (iris_ops.notify_ranks: one system-scope fence for all of
    them, the expensive part of the epilogue), at GPU scope for this rank's own word (its readers are on this
    GPU)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    C = step_plane(C, epoch, M, stride_cm)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    n_tiles = tl.cdiv(M, acc.shape[0]) * tl.cdiv(N, acc.shape[1])
    flag = TILE_FLAGS + CTX.cur_rank * n_tiles + tile_id
    notify_ranks(flag, epoch, CTX.cur_rank, CTX.heap_bases, CTX.world_size, 1)
    tl.atomic_xchg(flag, epoch, sem="release", scope="gpu")


RECORD = AlgorithmRecord(
    spec.ALGORITHMS["one_shot"], one_shot_tile, one_shot_publish_epilogue, None,
    ready_from_every_rank=True, writes_peers=False, partial_buffer=True, partial_planes=2,
    comm_tile_rows=rows_for_loads_in_flight,
    # reads of remote tiles: alone on 4 x H100 (tools.comm_bench) 286-325 GB/s of reads on 32-128 programs for
    # |C| of 64 MiB to 1 GiB; inside the fused kernel ~10% slower than in a kernel of its own (2 x H200). At W = 2 a
    # program keeps one remote load of its two in flight: 16 programs alone read 6.6-7.2 GB/s each at 16-64 MiB,
    # where all_reduce's moved 8.6-9.3 (2 x H200, results/logs/h200x2/oneshot-4b34844). The epilogue releases every
    # tile at system scope (to every rank), as all_reduce's does (to its owner).
    rates=Rates(per_program_gbs=10.0, link_gbs=310.0, fused_efficiency=0.9, signal_us=SYS_RELEASE_US,
                per_program_at=((2, 7.0),)),
)

"""one_shot: each rank publishes its M x N partial on the heap; a tile is reduced once all W
ranks have produced it, by loading it from every rank and summing locally, so every rank ends
with the whole reduced C. SRC is the partial (on the heap), DST this rank's C.

Readiness is one word per (source rank, tile) on every rank, holding the epoch of the step that last
produced it: each rank's GEMM epilogue writes the step's epoch into its own word of the tile on every
rank (release, system scope for the peers), so the tile is complete once all world_size words of it
reach the epoch. Epochs, not counters: a step that runs a GEMM alone or communication alone keeps
every word consistent with the step count."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.device import opaque, translate
from overlap.communication.comm_loop import subtile_offsets

PEER_LOADS: tl.constexpr = tl.constexpr(2)  # ranks whose sub-tile loads one_shot_tile keeps in flight together


def sub_tile_rows(blk_m: int, world_size: int) -> int:
    """Rows of the sub-tile one_shot_tile reduces at once by default (its columns: the whole tile's): the whole tile
    while every rank's load is in flight at once (world_size <= PEER_LOADS); beyond that, half of it: the accumulator,
    PEER_LOADS ranks' loads and the sub-tile's offsets (kept for the ranks still to read) are then live together,
    which for a whole 128 x 256 tile on 8 warps spills on sm_90 (24-88 B at world 4 and 8: the compile check)."""
    return blk_m if world_size <= PEER_LOADS.value else max(1, blk_m // 2)


@triton.jit
def one_shot_tile(pid_m, pid_n, MOVE, heap_bases, cur_rank, world_size,
                  BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    # This rank's heap base address and its peers, computed here from the rank: where GEMM programs join the
    # communication, the compiler would otherwise share them with the publish epilogue's equal values and keep
    # those in registers across the GEMM, where sm_90's 128x256 tile leaves none to spare.
    cur_rank = opaque(cur_rank)
    for sm in tl.static_range(BLK_M // CTM):
        for sn in tl.static_range(BLK_N // CTN):
            rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.N, BLK_M, BLK_N, CTM, CTN)
            offs = rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn
            if MOVE.SRC.dtype.element_ty.is_int():
                acc = tl.zeros((CTM, CTN), dtype=tl.int32)
            else:
                acc = tl.zeros((CTM, CTN), dtype=tl.float32)
            # Remote partials first, the local one last. Up to PEER_LOADS ranks: every load in flight before the
            # first add (unrolled); more ranks go PEER_LOADS at a time, so their sub-tiles fit in the registers.
            if world_size <= PEER_LOADS:
                for i in tl.static_range(world_size):
                    peer = (cur_rank + 1 + i) % world_size
                    acc += tl.load(translate(MOVE.SRC, cur_rank, peer, heap_bases) + offs, mask=mask).to(acc.dtype)
            else:
                for i0 in range(0, world_size, PEER_LOADS):
                    for u in tl.static_range(PEER_LOADS):
                        peer = (cur_rank + 1 + i0 + u) % world_size
                        held = mask & (i0 + u < world_size)
                        acc += tl.load(translate(MOVE.SRC, cur_rank, peer, heap_bases) + offs, mask=held).to(acc.dtype)
            tl.store(MOVE.DST + rm[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn,
                     acc.to(MOVE.DST.dtype.element_ty), mask=mask)


@triton.jit
def one_shot_publish_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                              heap_bases, cur_rank, world_size):
    """Store the partial tile locally, then mark it ready on every rank (TILE_FLAGS[cur_rank, tile_id] =
    epoch): a release at system scope for each peer, at GPU scope for this rank's own word (its readers
    are on this GPU, and a system-scope release, a fence the GPU must clear with its peers, is the
    expensive part of the epilogue)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    tl.debug_barrier()
    n_tiles = tl.cdiv(M, acc.shape[0]) * tl.cdiv(N, acc.shape[1])
    flag = TILE_FLAGS + cur_rank * n_tiles + tile_id
    for i in range(1, world_size):
        peer = (cur_rank + i) % world_size
        tl.atomic_xchg(translate(flag, cur_rank, peer, heap_bases), epoch, sem="release", scope="sys")
    tl.atomic_xchg(flag, epoch, sem="release", scope="gpu")

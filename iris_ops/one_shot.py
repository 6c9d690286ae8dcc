"""one_shot: each rank publishes its M x N partial on the heap; a tile is reduced once all W
ranks have produced it, by loading it from every rank and summing locally, so every rank ends
with the whole reduced C. SRC is the partial (on the heap), DST this rank's C.

Readiness: each rank's GEMM epilogue stores the partial tile and releases its own READY[t] = epoch
(system scope, a local write: the GEMM never waits on the links). The communication loop waits for
READY[t] on this rank and then on every peer (acquire loads of the peer's word) before the tile
function reads the partials. Remote notification from the epilogue (an atomic on every peer's
counter) was measured slower: when the last wave's tiles are moved, the links are saturated and
the last GEMM tiles' remote atomics queued behind that traffic for 20-30 us on 2 x H200."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.comm_loop import subtile_offsets
from iris_ops.device import translate


@triton.jit
def one_shot_tile(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                  AUX, aux_epoch, max_spins, ERRORS, heap_bases, cur_rank, world_size,
                  BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    for sm in tl.static_range(BLK_M // CTM):
        for sn in tl.static_range(BLK_N // CTN):
            rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M, BLK_N, CTM, CTN)
            src = SRC + rm[:, None] * stride_sm + rn[None, :] * stride_sn
            if SRC.dtype.element_ty.is_int():
                acc = tl.zeros((CTM, CTN), dtype=tl.int32)
            else:
                acc = tl.zeros((CTM, CTN), dtype=tl.float32)
            # Unrolled when world_size is a constexpr: every rank's load is in flight before the first add.
            for i in tl.static_range(world_size):
                peer = (cur_rank + 1 + i) % world_size  # remote partials first, the local one last
                acc += tl.load(translate(src, cur_rank, peer, heap_bases), mask=mask).to(acc.dtype)
            tl.store(DST + rm[:, None] * stride_dm + rn[None, :] * stride_dn,
                     acc.to(DST.dtype.element_ty), mask=mask)


@triton.jit
def one_shot_publish_epilogue(acc, rm, rn, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                              heap_bases, cur_rank, world_size):
    """Store the partial tile here, then release this rank's READY[tile] = epoch (system scope)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(TILE_FLAGS + tile_id, epoch, sem="release", scope="sys")

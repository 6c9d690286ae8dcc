"""all_reduce: each rank computes a full M x N partial sum (its K slice); each finished tile is
atomically added into every rank's C. DST (the global C, zeroed before the GEMM) is on the heap;
SRC is this rank's partial."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.device import translate
from overlap.communication.comm_loop import subtile_offsets


@triton.jit
def all_reduce_tile(pid_m, pid_n, MOVE, heap_bases, cur_rank, world_size,
                    BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    for sm in tl.static_range(BLK_M // CTM):
        for sn in tl.static_range(BLK_N // CTN):
            rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.N, BLK_M, BLK_N, CTM, CTN)
            vals = tl.load(MOVE.SRC + rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask=mask)
            offs = rm[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn
            for i in range(0, world_size):
                peer = (cur_rank + 1 + i) % world_size  # peers first, own copy last
                tl.atomic_add(translate(MOVE.DST, cur_rank, peer, heap_bases) + offs, vals, mask=mask,
                              sem="relaxed", scope="sys")


@triton.jit
def all_reduce_push_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                             heap_bases, cur_rank, world_size):
    """fused_sequential: the GEMM program adds its tile straight into every rank's C."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    vals = acc.to(C.dtype.element_ty)
    offs = rm[:, None] * stride_cm + rn[None, :] * stride_cn
    for i in range(0, world_size):
        peer = (cur_rank + 1 + i) % world_size
        tl.atomic_add(translate(C, cur_rank, peer, heap_bases) + offs, vals, mask=mask, sem="relaxed", scope="sys")

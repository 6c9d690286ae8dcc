"""all_scatter: each rank computes M x N/W columns of C and stores each finished tile into every
rank's C (an all-gather done tile by tile). SRC and DST are the same heap tensor (the global C):
a tile is read where the local GEMM left it and written to the same place on every peer."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.device import translate
from overlap.communication.comm_loop import subtile_offsets


@triton.jit
def all_scatter_tile(pid_m, pid_n, MOVE, heap_bases, cur_rank, world_size,
                     BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    for sm in tl.static_range(BLK_M // CTM):
        for sn in tl.static_range(BLK_N // CTN):
            rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.N, BLK_M, BLK_N, CTM, CTN)
            vals = tl.load(MOVE.SRC + rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask=mask)
            offs = rm[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn
            for i in range(1, world_size):
                peer = (cur_rank + i) % world_size
                tl.store(translate(MOVE.DST, cur_rank, peer, heap_bases) + offs, vals, mask=mask)


@triton.jit
def all_scatter_push_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                              heap_bases, cur_rank, world_size):
    """fused_sequential: the GEMM program stores its tile here and straight into every peer's C."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    vals = acc.to(C.dtype.element_ty)
    offs = rm[:, None] * stride_cm + rn[None, :] * stride_cn
    for i in range(0, world_size):
        peer = (cur_rank + i) % world_size
        tl.store(translate(C, cur_rank, peer, heap_bases) + offs, vals, mask=mask)

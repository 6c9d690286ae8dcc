"""one_shot: each rank publishes its M x N partial on the heap; a tile is reduced once all W
ranks have produced it, by loading it from every rank and summing locally, so every rank ends
with the whole reduced C. SRC is the partial (on the heap), DST this rank's C.

Who tells the peers that a partial tile is ready (--ready_notify):
  gemm  the GEMM epilogue stores the tile, then adds 1 to the tile's counter on every rank (one
        system fence, relaxed adds); a communication program waits until the local counter has
        heard from all W ranks (READY target W x epoch), then reduces (one phase).
  comm  the GEMM epilogue only stores and releases its local READY word (no system fence, no
        remote atomic in the GEMM); the communication program that takes the tile, once READY
        is set here, adds 1 to the tile's AUX counter on every peer (phase 1), and reduces after
        AUX here has heard from every peer (phase 2, run after the next tile's phase 1).
On 2 x H200 the GEMM's remote atomics cost its 120 programs ~8 us at 4864x4096x8256 and, while
the last wave is moved, queue behind the saturated links (traced tiles ended 20-30 us late); comm
keeps the GEMM clear of both at the price of one more signal per tile in the communication."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.comm_loop import subtile_offsets
from iris_ops.device import ERR_PEER_READY, record_error, signal_ranks, translate, wait_local

_ERR_PEER: tl.constexpr = tl.constexpr(ERR_PEER_READY)


@triton.jit
def _reduce_tile(pid_m, pid_n, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                 heap_bases, cur_rank, world_size,
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
def one_shot_tile(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                  AUX, aux_target, max_spins, ERRORS, heap_bases, cur_rank, world_size,
                  BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr,
                  PHASE: tl.constexpr):
    """--ready_notify gemm (AUX None): one phase, the tile is ready everywhere. comm: see the module."""
    if AUX is None:
        _reduce_tile(pid_m, pid_n, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                     heap_bases, cur_rank, world_size, BLK_M, BLK_N, CTM, CTN)
    elif PHASE == 1:
        signal_ranks(AUX + tile_id, 1, cur_rank, heap_bases, world_size, False)
    else:
        if not wait_local(AUX + tile_id, aux_target, max_spins, "sys"):
            record_error(ERRORS, _ERR_PEER.value, tile_id)
        _reduce_tile(pid_m, pid_n, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                     heap_bases, cur_rank, world_size, BLK_M, BLK_N, CTM, CTN)


@triton.jit
def one_shot_publish_epilogue(acc, rm, rn, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                              heap_bases, cur_rank, world_size):
    """--ready_notify gemm: store the partial tile, then count it ready on every rank (this one included)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    signal_ranks(TILE_FLAGS + tile_id, 1, cur_rank, heap_bases, world_size, True)

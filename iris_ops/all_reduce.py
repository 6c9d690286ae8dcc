"""all_reduce: each rank computes a full M x N partial sum (its K slice); every rank's C ends as the
sum of all of them, built tile by tile without zeroing C first.

A communication program that takes tile t on rank r (once r's GEMM has finished t):
  phase 1: stores r's partial tile into r's own C (a plain store: the tile's first contribution),
           then adds 1 to INIT[t] on every peer (one system fence, relaxed adds: iris_ops.device
           signal_ranks): "my C tile t holds my share, add yours";
  phase 2: waits until INIT[t] here has heard from every peer (a local poll) and atomically adds
           r's partial tile into every peer's C.
So every rank's C tile gets one store and W - 1 atomic adds, and no add lands before the store it
adds to. The communication loop runs phase 2 of a tile after phase 1 of the next one, so the peers'
signals are normally there already (iris_ops/comm_loop.py). Nothing runs before the GEMM: no memset
of C and no whole-C handshake (this replaced zero-C-then-add, whose memset cost 0.023 ms of each
0.32 ms step at 4864x4096x8256 on 2 x H200). A wait that times out records ERR_PEER_READY and skips
the tile's adds (the run then raises).

fused_sequential has no communication programs: there the GEMM epilogue atomically adds each tile
into every rank's C (`all_reduce_push_epilogue`), so C is zeroed (and the peers told) first.
SRC is this rank's partial, DST the global C (on the heap), AUX the INIT counters (on the heap) and
aux_target the count phase 2 waits for ((W - 1) x the launches so far)."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.comm_loop import subtile_offsets
from iris_ops.device import ERR_PEER_READY, record_error, signal_ranks, translate, wait_local

_ERR_PEER: tl.constexpr = tl.constexpr(ERR_PEER_READY)


@triton.jit
def all_reduce_tile(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                    AUX, aux_target, max_spins, ERRORS, heap_bases, cur_rank, world_size,
                    BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr,
                    PHASE: tl.constexpr):
    if PHASE == 1:
        for sm in tl.static_range(BLK_M // CTM):
            for sn in tl.static_range(BLK_N // CTN):
                rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M, BLK_N, CTM, CTN)
                vals = tl.load(SRC + rm[:, None] * stride_sm + rn[None, :] * stride_sn, mask=mask)
                tl.store(DST + rm[:, None] * stride_dm + rn[None, :] * stride_dn, vals, mask=mask)
        signal_ranks(AUX + tile_id, 1, cur_rank, heap_bases, world_size, False)
    else:
        if wait_local(AUX + tile_id, aux_target, max_spins, "sys"):
            for sm in tl.static_range(BLK_M // CTM):
                for sn in tl.static_range(BLK_N // CTN):
                    rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M, BLK_N, CTM, CTN)
                    vals = tl.load(SRC + rm[:, None] * stride_sm + rn[None, :] * stride_sn, mask=mask)
                    dst = DST + rm[:, None] * stride_dm + rn[None, :] * stride_dn
                    for i in tl.static_range(1, world_size):
                        peer = (cur_rank + i) % world_size
                        tl.atomic_add(translate(dst, cur_rank, peer, heap_bases), vals, mask=mask,
                                      sem="relaxed", scope="sys")
        else:
            record_error(ERRORS, _ERR_PEER.value, tile_id)


@triton.jit
def all_reduce_push_epilogue(acc, rm, rn, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                             heap_bases, cur_rank, world_size):
    """fused_sequential: the GEMM program adds its tile straight into every rank's (zeroed) C."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    vals = acc.to(C.dtype.element_ty)
    ptrs = C + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    for i in range(0, world_size):
        peer = (cur_rank + 1 + i) % world_size
        tl.atomic_add(translate(ptrs, cur_rank, peer, heap_bases), vals, mask=mask, sem="relaxed", scope="sys")

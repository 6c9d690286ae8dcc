"""all_reduce: each rank computes a full M x N partial sum (its K slice); every rank's C ends as the
sum of all of them, built tile by tile without zeroing C first.

A communication program that takes tile t on rank r (once r's GEMM has finished t):
  1. stores r's partial tile into r's own C (a plain store: it is the tile's first contribution),
  2. releases INIT[t] = epoch on r (system scope): "my C tile t holds my partial; add into it",
  3. for every peer p: waits until p's INIT[t] reaches epoch (acquire, remote), then atomically adds
     r's partial tile into p's C.
So every rank's C tile gets one store and W - 1 atomic adds, and an add never lands before the
store it adds to. No memset of C and no whole-C handshake sit in front of the GEMM, and a peer that
is late only holds up the tiles it has not produced yet. A wait that times out records
ERR_PEER_READY for the tile and skips that peer's add (the run then fails validation and raises).

fused_sequential has no communication programs: there the GEMM epilogue atomically adds each tile
into every rank's C (`all_reduce_push_epilogue`), so C is zeroed (and the peers told) first.
SRC is this rank's partial, DST the global C (on the heap), AUX the INIT words (on the heap)."""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.comm_loop import subtile_offsets
from iris_ops.device import ERR_PEER_READY, notify, record_error, translate, wait

_ERR_PEER: tl.constexpr = tl.constexpr(ERR_PEER_READY)


@triton.jit
def all_reduce_tile(pid_m, pid_n, tile_id, SRC, DST, M, N, stride_sm, stride_sn, stride_dm, stride_dn,
                    AUX, aux_epoch, max_spins, ERRORS, heap_bases, cur_rank, world_size,
                    BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    for sm in tl.static_range(BLK_M // CTM):
        for sn in tl.static_range(BLK_N // CTN):
            rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M, BLK_N, CTM, CTN)
            vals = tl.load(SRC + rm[:, None] * stride_sm + rn[None, :] * stride_sn, mask=mask)
            tl.store(DST + rm[:, None] * stride_dm + rn[None, :] * stride_dn, vals, mask=mask)
    notify(AUX + tile_id, aux_epoch, cur_rank, cur_rank, heap_bases, "sys")
    for i in tl.static_range(1, world_size):
        peer = (cur_rank + i) % world_size
        if wait(AUX + tile_id, aux_epoch, cur_rank, peer, heap_bases, max_spins, "sys"):
            for sm in tl.static_range(BLK_M // CTM):
                for sn in tl.static_range(BLK_N // CTN):
                    rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, M, N, BLK_M, BLK_N, CTM, CTN)
                    vals = tl.load(SRC + rm[:, None] * stride_sm + rn[None, :] * stride_sn, mask=mask)
                    dst = DST + rm[:, None] * stride_dm + rn[None, :] * stride_dn
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

"""all_reduce: A column-sharded (M x K/W), B row-sharded (K/W x N); each rank computes a full M x N partial sum
(its K slice) and every rank ends with the whole sum C. A reduce-scatter and an all-gather, tile by tile, with
plain loads and stores:

- Tile t has an owner, rank t % W (consecutive tiles, which the GEMM finishes together, have different owners, so
  every rank's links carry the same load at every moment).
- As a rank's GEMM finishes tile t of its partial (on the heap), its epilogue marks it ready on the owner only:
  READY[rank, t] = epoch on the owner (release; system scope unless the owner is this rank).
- The owner's communication programs wait for all W words of an owned tile, load the tile from every rank's
  partial together, add them in rank order (fp32), and store the sum into every rank's C (its own last).

Each rank moves 2(W-1)/W of |C| over its links (reads of (W-1)/W, writes of (W-1)/W), the bandwidth-optimal
all-reduce's bytes, and C is the same bits on every rank and in every run. SRC is the partial, DST C (on the
heap, written by the owners). In fused_sequential the GEMM programs reduce owned tiles once their GEMM work is
done. Buffers: partial [M, N] (H), C [M, N] (H), READY [W, tiles] (H).
"""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.device import translate
from streamk_pgas.overlap.algorithms.record import SYS_RELEASE_US, AlgorithmRecord, Rates, rows_for_loads_in_flight
from streamk_pgas.overlap.communication.comm_loop import owner_of, rank_order_sum, subtile_offsets


@triton.jit
def reduce_to_all_tile(pid_m, pid_n, sm, e, MOVE, CTX,
                       BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    """Piece sm of owned tile (pid_m, pid_n): the rank-order sum of every rank's partial, stored into every rank's
    C."""
    for sn in tl.static_range(BLK_N // CTN):
        rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.n_cols, BLK_M, BLK_N, CTM, CTN)
        acc = rank_order_sum(MOVE.SRC, rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask,
                             CTX.heap_bases, CTX.cur_rank, CTX.world_size)
        vals = acc.to(MOVE.DST.dtype.element_ty)
        offs = rm[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn
        for i in range(1, CTX.world_size + 1):  # the peers first, this rank's own C last
            peer = (CTX.cur_rank + i) % CTX.world_size
            tl.store(translate(MOVE.DST, CTX.cur_rank, peer, CTX.heap_bases) + offs, vals, mask=mask)


@triton.jit
def signal_owner_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """Store the partial tile here, then mark it ready on its owner (TILE_FLAGS[cur_rank, tile_id] = epoch there):
    a release at system scope for a peer, at GPU scope where the owner is this rank."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    tl.debug_barrier()
    n_tiles = tl.cdiv(M, acc.shape[0]) * tl.cdiv(N, acc.shape[1])
    flag = TILE_FLAGS + CTX.cur_rank * n_tiles + tile_id
    owner = owner_of(tile_id, CTX.world_size)
    if owner == CTX.cur_rank:
        tl.atomic_xchg(flag, epoch, sem="release", scope="gpu")
    else:
        tl.atomic_xchg(translate(flag, CTX.cur_rank, owner, CTX.heap_bases), epoch, sem="release", scope="sys")


RECORD = AlgorithmRecord(
    spec.ALGORITHMS["all_reduce"], reduce_to_all_tile, signal_owner_epilogue, None,
    ready_from_every_rank=True, writes_peers=True, partial_buffer=True, owns_tiles=True,
    comm_tile_rows=rows_for_loads_in_flight,
    # Its communication alone on 4 x H100 (tools.comm_bench, results/README.md): |C| of 64 MiB to 1 GiB at
    # 288-321 GB/s of bus bandwidth (= the bytes each rank moves over its links, its reads and stores, per second)
    # on 32 to 128 programs, 32 programs as fast as 128 from 64 MiB on.
    rates=Rates(per_program_gbs=10.0, link_gbs=310.0, signal_us=SYS_RELEASE_US),
)

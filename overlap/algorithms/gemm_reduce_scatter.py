"""gemm_reduce_scatter: A column-sharded (M x K/W), B row-sharded (K/W x N) as for all_reduce; each rank computes a
full M x N partial (its K slice) and ends with its M/W rows of the summed C (M/W x N; rank p owns rows
[p*M/W, (p+1)*M/W)). all_reduce's reduce-scatter, with the sum's rows stored where they belong, plain loads and
stores, no atomics:

- Tile t is summed by rank t % W, whatever rows it holds (consecutive tiles, which the GEMM finishes together,
  have different summing ranks, so every rank's links carry the same load at every moment; were the rows' owner to
  sum, the GEMM's row order would keep one rank's links busy at a time).
- As a rank's GEMM finishes tile t of its partial (on the heap), its epilogue marks it ready on the tile's summing
  rank only (READY[rank, t] = epoch there; all_reduce's epilogue).
- The summing rank's communication programs wait for all W words of the tile, load it from every rank's partial
  together, add in rank order (fp32), and store each row of the sum into its owner's C.

Each rank reads (W-1)/W of |partial| from its peers and stores (W-1)/W^2 of it into them (the other direction of
its links), and C is the same bits in every run. SRC is the partial, DST C (on the heap). In fused_sequential the
GEMM programs sum tiles once their GEMM work is done.

Buffers: partial [M, N] (H); C [M/W, N] (H); READY [W, tiles] (H). copy_engine: the partial's rows go to their
owner's RECV [W, M/W, N] (H), slot = sender (overlap.copy_steps "reduce_rows"), and C = the rank-order sum of the own
rows and the other slots: in the GEMM's epilogue of the own rows, which the GEMM computes last, once the peers'
copies of a tile row have landed (sum_own_rows_epilogue; each copy is followed by its ROWS_READY words [W, tile rows]
(H)), or where that cannot be (overlap.copy_steps.sums_own_rows) in one kernel after the step's copies."""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.context import wait_or_record
from streamk_pgas.iris_ops.device import ERR_PEER_ROWS, translate
from streamk_pgas.overlap.algorithms.all_reduce import signal_owner_epilogue
from streamk_pgas.overlap.algorithms.record import SYS_RELEASE_US, AlgorithmRecord, Rates, rows_for_loads_in_flight
from streamk_pgas.overlap.communication.comm_loop import rank_order_sum, subtile_offsets
from streamk_pgas.overlap.communication.copy_engine import rank_order_slots, store_and_count

_ERR_PEER_ROWS: tl.constexpr = tl.constexpr(ERR_PEER_ROWS)
_OWN_SUM_ELEMENTS: tl.constexpr = tl.constexpr(8192)  # one sub-tile of the epilogue's sum (W loads of it in flight)


@triton.jit
def reduce_to_row_owners_tile(pid_m, pid_n, sm, MOVE, CTX,
                              BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    """Piece sm of summed tile (pid_m, pid_n): the rank-order sum of every rank's partial, each row stored into the
    C of the rank that owns it (a piece straddles at most a few owners: one masked store each)."""
    a_rows = MOVE.M // CTX.world_size
    row0 = pid_m * BLK_M + sm * CTM
    first = row0 // a_rows
    last = (tl.minimum(row0 + CTM, MOVE.M) - 1) // a_rows
    for sn in tl.static_range(BLK_N // CTN):
        rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.n_cols, BLK_M, BLK_N, CTM, CTN)
        acc = rank_order_sum(MOVE.SRC, rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask,
                             CTX.heap_bases, CTX.cur_rank, CTX.world_size)
        vals = acc.to(MOVE.DST.dtype.element_ty)
        for p in range(first, last + 1):
            local = rm - p * a_rows
            mine = (local >= 0) & (local < a_rows)
            offs = tl.where(mine, local, 0)[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn
            tl.store(translate(MOVE.DST, CTX.cur_rank, p, CTX.heap_bases) + offs, vals, mask=mask & mine[:, None])


@triton.jit
def sum_own_rows_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """EPILOGUE of copy_engine where the GEMM sums this rank's rows (TILE_FLAGS: overlap.kernel_args.OwnRows): the
    tile is stored and counted as store_and_count does; a tile of this rank's own rows then waits (bounded) until
    every peer's copy of its tile row has landed in RECV (ROWS_READY[s, tile row] >= epoch), and stores into OUT the
    rank-order sum of the slots, its own the partial just stored (copy_engine.rank_order_slots, as the sum after the
    copies adds them: the same bits). Tile rows lie within one rank's rows (M a multiple of W * BLK_M)."""
    BLK_M: tl.constexpr = acc.shape[0]
    BLK_N: tl.constexpr = acc.shape[1]
    SUB0: tl.constexpr = _OWN_SUM_ELEMENTS // BLK_N
    SUB: tl.constexpr = SUB0 if SUB0 < BLK_M else BLK_M
    store_and_count(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS.COUNTS, epoch, CTX)
    a_rows = M // CTX.world_size
    own0 = CTX.cur_rank * a_rows
    if (row0 >= own0) & (row0 < own0 + a_rows):
        pid_m = row0 // BLK_M
        for s in tl.static_range(CTX.world_size):
            if s != CTX.cur_rank:
                wait_or_record(CTX, TILE_FLAGS.ROWS_READY + s * (M // BLK_M) + pid_m, epoch, _ERR_PEER_ROWS.value,
                               tile_id, "sys")
        cols = rn[None, :]
        for sm in tl.static_range(BLK_M // SUB):
            rows = row0 + sm * SUB + tl.arange(0, SUB)
            local = (rows - own0)[:, None]
            mask = (rows[:, None] < M) & (cols < N)
            total = rank_order_slots(C, rows[:, None] * stride_cm + cols * stride_cn, TILE_FLAGS.RECV,
                                     TILE_FLAGS.stride_slot, local * TILE_FLAGS.stride_recv + cols, mask,
                                     CTX.cur_rank, CTX.world_size)
            out = TILE_FLAGS.OUT
            tl.store(out + local * TILE_FLAGS.stride_out + cols, total.to(out.dtype.element_ty), mask=mask)


RECORD = AlgorithmRecord(
    spec.ALGORITHMS["gemm_reduce_scatter"], reduce_to_row_owners_tile, signal_owner_epilogue, None,
    ready_from_every_rank=True, writes_peers=True, partial_buffer=True, owns_tiles=True,
    copy_schedule="reduce_rows", comm_tile_rows=rows_for_loads_in_flight, own_rows_epilogue=sum_own_rows_epilogue,
    # all_reduce's reduction with one store of the sum instead of W; the ceiling: its communication alone moved
    # 203-243 GB/s at W = 2 and 4 on 20-48 programs, at 2048 x 8192 x 8192 .. 4096 x 57344 x 8192
    # (results/logs/h100x4/ce-6f13f82, calib-9f9b036)
    rates=Rates(per_program_gbs=10.0, link_gbs=220.0, signal_us=SYS_RELEASE_US),
)

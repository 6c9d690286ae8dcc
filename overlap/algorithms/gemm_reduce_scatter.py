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
owner's RECV [W, M/W, N] (H), slot = sender, and C = own rows + the other slots, added after the step's copies
(overlap.copy_steps "reduce_rows")."""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.device import translate
from streamk_pgas.overlap.algorithms.all_reduce import signal_owner_epilogue
from streamk_pgas.overlap.algorithms.record import SYS_RELEASE_US, AlgorithmRecord, Rates, rows_for_loads_in_flight
from streamk_pgas.overlap.communication.comm_loop import rank_order_sum, subtile_offsets


@triton.jit
def reduce_to_row_owners_tile(pid_m, pid_n, sm, e, MOVE, CTX,
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


RECORD = AlgorithmRecord(
    spec.ALGORITHMS["gemm_reduce_scatter"], reduce_to_row_owners_tile, signal_owner_epilogue, None,
    ready_from_every_rank=True, writes_peers=True, partial_buffer=True, owns_tiles=True,
    copy_schedule="reduce_rows", comm_tile_rows=rows_for_loads_in_flight,
    # all_reduce's reduction with one store of the sum instead of W; the ceiling at W > 2: its communication alone
    # moved 203-243 GB/s at W = 4 on 20-48 programs, at 2048 x 8192 x 8192 .. 4096 x 57344 x 8192
    # (results/logs/h100x4/ce-6f13f82, calib-9f9b036); at W = 2, one peer, 300 fits fused_sequential's measured
    # steps at three cells on two machines (4 x H100's calib-9f9b036, 4 x H200's modes-a41f013; 220 put the model
    # 18-30% above them). In the fused kernel its GEMM runs ~6% slower than in a kernel of its
    # own: two_streams measured 1-11% ahead of fused at 1024 x 8192 x 8192, 2048 x 4096 x 14336, 2048 x 8192 x 8192
    # and 4864 x 4096 x 8256 (W = 4) on both machines (logs/h100x4/auto-8e57628, logs/h200x4/rule-08fc971)
    rates=Rates(per_program_gbs=10.0, link_gbs=300.0, switch_link_gbs=220.0, signal_us=SYS_RELEASE_US,
                fused_gemm_cost=0.06),
)

"""gemm_reduce_scatter: A column-sharded (M x K/W), B row-sharded (K/W x N) as for all_reduce; each rank computes a
full M x N partial (its K slice) and ends with its M/W rows of the summed C (M/W x N; rank p owns rows
[p*M/W, (p+1)*M/W)). A reduce-scatter tile by tile, with plain stores only over the links:

- Tile t is summed by rank t % W, whatever rows it holds (consecutive tiles, which the GEMM finishes together,
  have different summing ranks, so every rank's links carry the same load at every moment; were the rows' owner to
  sum, the GEMM's row order would keep one rank's links busy at a time).
- The GEMM's epilogue stores each finished tile of its partial straight into its slot of that tile on the summing
  rank (SLOTS: W copies of each of the owner's tiles) and marks it ready there (READY[rank, t] = epoch).
- The summing rank's communication programs wait for all W words of the tile, add the W copies in rank order
  (fp32, local loads), and store each row of the sum into the C of the rank that owns it.

Each rank stores (W-1)/W of |partial| into its peers' slots and (W-1)/W^2 of it into their C; it loads nothing
over its links (remote loads wait a round trip each: stores stream). C is the same bits in every run. DST is C (on
the heap). In fused_sequential the GEMM programs sum tiles once their GEMM work is done.

Buffers: SLOTS [cdiv(tiles, W) * W tiles] (H, overlap.buffers.slot_rows); C [M/W, N] (H); READY [W, tiles] (H).
copy_engine: the GEMM writes its partial [M, N] (H), whose rows go to their owner's RECV [W, M/W, N] (H), slot =
sender, and C = own rows + the other slots, added after the step's copies (overlap.copy_steps "reduce_rows")."""

from __future__ import annotations

import triton
import triton.language as tl

import spec
from iris_ops.device import translate
from overlap.algorithms.record import Algorithm, Rates, rows_for_loads_in_flight
from overlap.communication.comm_loop import push_to_owner_epilogue, slot_order_sum, subtile_offsets


@triton.jit
def sum_to_row_owners_tile(tile_id, pid_m, pid_n, sm, MOVE, heap_bases, cur_rank, world_size,
                           BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    """Piece sm of owned tile tile_id = (pid_m, pid_n): the rank-order sum of the W copies in this rank's SLOTS
    (MOVE.SRC), each row stored into the C of the rank that owns it (a piece straddles at most a few owners: one
    masked store each)."""
    a_rows = MOVE.M // world_size
    row0 = pid_m * BLK_M + sm * CTM
    first = row0 // a_rows
    last = (tl.minimum(row0 + CTM, MOVE.M) - 1) // a_rows
    for sn in tl.static_range(BLK_N // CTN):
        rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.N, BLK_M, BLK_N, CTM, CTN)
        in_tile = (rm - pid_m * BLK_M)[:, None] * BLK_N + (rn - pid_n * BLK_N)[None, :]
        vals = slot_order_sum(MOVE.SRC, tile_id, in_tile, world_size, BLK_M, BLK_N).to(MOVE.DST.dtype.element_ty)
        for p in range(first, last + 1):
            local = rm - p * a_rows
            mine = (local >= 0) & (local < a_rows)
            offs = tl.where(mine, local, 0)[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn
            tl.store(translate(MOVE.DST, cur_rank, p, heap_bases) + offs, vals, mask=mask & mine[:, None])


RECORD = Algorithm(
    spec.ALGORITHMS["gemm_reduce_scatter"], sum_to_row_owners_tile, push_to_owner_epilogue, None,
    ready_from_every_rank=True, writes_peers=True, partial_buffer=True, owns_tiles=True, pushes_to_slots=True,
    copy_schedule="reduce_rows", comm_tile_rows=rows_for_loads_in_flight,
    # all_reduce's rates (not measured for this algorithm yet)
    rates=Rates(per_program_gbs=10.0, link_gbs=310.0),
)

"""gemm_reduce_scatter: A column-sharded (M x K/W), B row-sharded (K/W x N) as for all_reduce; each rank
computes a full M x N partial (its K slice) and ends with its M/W rows of the summed C (M/W x N).
Each finished tile of the partial is atomically added into the rows of C of the rank(s) that own its
rows (rank p owns rows [p*M/W, (p+1)*M/W)); C (on the heap, M/W x N) is zeroed every step before
any rank adds into it (the all_reduce protocol: zeroed by the communication programs as they start,
arrival announced by the last slice). SRC is this rank's partial, DST its C.

Buffers: partial [M, N] (H); C [M/W, N] (H); READY [tiles] (H). copy_engine: the partial's rows go to their
owner's RECV [W, M/W, N] (H), slot = sender, and C = own rows + the other slots, added after the step's copies
(overlap.copy_steps "reduce_rows")."""

from __future__ import annotations

import triton
import triton.language as tl

import spec
from iris_ops.device import translate
from overlap.algorithms.record import Algorithm, Rates
from overlap.communication.comm_loop import subtile_offsets
from stream_k.kernel import column_halves, store_and_signal


@triton.jit
def _add_rows_to_owners(vals, rm, lo, hi, rn, mask, M, DST, stride_dm, stride_dn, heap_bases, cur_rank, world_size):
    """Add the block (rows rm, columns rn) into each owner's C: the owners of rows lo..hi, the block's first and last
    row below M (none if hi < lo)."""
    a_rows = M // world_size
    if hi >= lo:
        for p in range(lo // a_rows, hi // a_rows + 1):
            local = rm - p * a_rows
            pmask = mask & ((local >= 0) & (local < a_rows))[:, None]
            local = tl.where((local >= 0) & (local < a_rows), local, 0)
            offs = local[:, None] * stride_dm + rn[None, :] * stride_dn
            tl.atomic_add(translate(DST, cur_rank, p, heap_bases) + offs, vals, mask=pmask, sem="relaxed", scope="sys")


@triton.jit
def reduce_scatter_tile(pid_m, pid_n, sm, MOVE, heap_bases, cur_rank, world_size,
                        BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    for sn in tl.static_range(BLK_N // CTN):
        rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.N, BLK_M, BLK_N, CTM, CTN)
        vals = tl.load(MOVE.SRC + rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask=mask)
        lo = tl.min(rm, axis=0)
        hi = tl.max(tl.where(rm < MOVE.M, rm, -1), axis=0)
        _add_rows_to_owners(vals, rm, lo, hi, rn, mask, MOVE.M, MOVE.DST, MOVE.stride_dm, MOVE.stride_dn,
                            heap_bases, cur_rank, world_size)


@triton.jit
def reduce_scatter_push_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch,
                                 heap_bases, cur_rank, world_size):
    """fused_sequential: the GEMM program adds its tile straight into the owners' C (C: this rank's M/W x N), one
    column quarter after another (a whole tile's remote addresses beside the accumulator would spill)."""
    QUARTER: tl.constexpr = acc.shape[1] // 4
    # The tile's rows below M from the scalar row0, not from reductions over rm: a reduction's shared-memory
    # addresses are computed once per program and held in registers across the GEMM, where sm_90's 128x256 tile
    # leaves none to spare.
    hi = tl.minimum(row0 + acc.shape[0] - 1, M - 1)
    v0, v1 = column_halves(acc.to(C.dtype.element_ty))
    c0, c1 = column_halves(tl.broadcast_to(rn[None, :], (1, acc.shape[1])))
    vals = column_halves(v0) + column_halves(v1)
    cols = column_halves(c0) + column_halves(c1)
    for q in tl.static_range(4):
        rnq = tl.reshape(cols[q], (QUARTER,))
        mask = (rm[:, None] < M) & (rnq[None, :] < N)
        _add_rows_to_owners(vals[q], rm, row0, hi, rnq, mask, M, C, stride_cm, stride_cn, heap_bases, cur_rank,
                            world_size)


RECORD = Algorithm(
    spec.ALGORITHMS["gemm_reduce_scatter"], reduce_scatter_tile, store_and_signal, reduce_scatter_push_epilogue,
    ready_from_every_rank=False, writes_peers=True, zeroes_c=True, partial_buffer=True, copy_schedule="reduce_rows",
    # atomic adds: 20 MB in 0.24 ms from 8 programs (2 x H200); from the epilogue ~2.6 GB/s a program
    rates=Rates(per_program_gbs=10.0, link_gbs=300.0, epilogue_gbs=2.6),
)

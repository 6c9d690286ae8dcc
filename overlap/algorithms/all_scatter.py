"""all_scatter: each rank computes M x N/W columns of C and stores each finished tile into every
rank's C (an all-gather done tile by tile). SRC and DST are the same heap tensor (the global C):
a tile is read where the local GEMM left it and written to the same place on every peer. Buffers: C [M, N] (H);
the GEMM writes C[:, r*N/W:(r+1)*N/W]; READY [tiles] (H). copy_engine: the copy engines copy C's column block to
every peer (overlap.copy_steps "scatter")."""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.device import translate
from streamk_pgas.overlap.algorithms.record import AlgorithmRecord, Rates
from streamk_pgas.overlap.communication.comm_loop import subtile_offsets
from streamk_pgas.stream_k.kernel import store_and_signal


@triton.jit
def all_scatter_tile(pid_m, pid_n, sm, e, MOVE, CTX,
                     BLK_M: tl.constexpr, BLK_N: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr):
    for sn in tl.static_range(BLK_N // CTN):
        rm, rn, mask = subtile_offsets(pid_m, pid_n, sm, sn, MOVE.M, MOVE.n_cols, BLK_M, BLK_N, CTM, CTN)
        vals = tl.load(MOVE.SRC + rm[:, None] * MOVE.stride_sm + rn[None, :] * MOVE.stride_sn, mask=mask)
        offs = rm[:, None] * MOVE.stride_dm + rn[None, :] * MOVE.stride_dn
        for i in range(1, CTX.world_size):
            peer = (CTX.cur_rank + i) % CTX.world_size
            tl.store(translate(MOVE.DST, CTX.cur_rank, peer, CTX.heap_bases) + offs, vals, mask=mask)


@triton.jit
def all_scatter_push_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """fused_sequential: the GEMM program stores its tile here, then copies it from here into every peer's C, 16
    rows at a time: the accumulator is dead by then, so no peer's addresses sit beside it in the registers (a
    whole tile stored from the accumulator into each peer spilled on sm_90 and sm_100: tools.compile_check)."""
    BLK_M: tl.constexpr = acc.shape[0]
    ROWS: tl.constexpr = 16 if BLK_M > 16 else BLK_M
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    tl.debug_barrier()  # the tile is in C for every thread of the program
    for r0 in tl.range(0, BLK_M, ROWS, loop_unroll_factor=1, disable_licm=True):
        rows = row0 + r0 + tl.arange(0, ROWS)
        part = (rows[:, None] < M) & (rn[None, :] < N)
        offs = rows[:, None] * stride_cm + rn[None, :] * stride_cn
        vals = tl.load(C + offs, mask=part)
        for i in tl.range(1, CTX.world_size, loop_unroll_factor=1):
            peer = (CTX.cur_rank + i) % CTX.world_size
            tl.store(translate(C, CTX.cur_rank, peer, CTX.heap_bases) + offs, vals, mask=part)


def rows_for_stores(blk_m: int, blk_n: int, world_size: int) -> int:
    """Sub-tile rows of all_scatter_tile: 8 K elements (32 x 256), whose W - 1 remote stores go out one after
    another, a power of two, at most the whole tile (the whole 128 x 256 tile spilled GEMM programs that join the
    communication at W = 4 on sm_90: tools.compile_check)."""
    rows = max(1, 8192 // blk_n)
    return min(blk_m, 1 << (rows.bit_length() - 1))


RECORD = AlgorithmRecord(
    spec.ALGORITHMS["all_scatter"], all_scatter_tile, store_and_signal, all_scatter_push_epilogue,
    ready_from_every_rank=False, writes_peers=True, partial_buffer=False, copy_schedule="scatter",
    comm_tile_rows=rows_for_stores,
    # stores (no reply to wait for); from the epilogue: 0.272 ms at 4864 x 4096 x 8256 on 2 x H200 (~5 GB/s a
    # program, stalling it)
    rates=Rates(per_program_gbs=22.0, link_gbs=360.0, epilogue_gbs=5.0),
)

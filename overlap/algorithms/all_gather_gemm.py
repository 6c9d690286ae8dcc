"""all_gather_gemm: A row-sharded (M/W x K per rank), B column-sharded (K x N/W); each rank gathers the
whole A into a heap buffer AG (M x K) while its GEMM multiplies AG @ B into C (M x N/W, this rank's
columns of the product). Communication moves A, not C.

AG is kept rank-rotated: on rank d, slot j (rows [j*M/W, (j+1)*M/W)) holds the shard of rank (d + j) % W,
so slot 0 is the rank's own shard and the GEMM, whose tile order starts at row block 0, begins with
the rows it has at once. The epilogue un-rotates: row x of AG @ B is row (x + d*M/W) % M of C.

Readiness, chunk by chunk: A's columns are cut into chunks of `a_chunk_cols(K)` (a multiple of every BLK_K), and
A_READY[(slot * cdiv(M, BLK_M) + rb) * n_chunks + kc] on the destination holds the step's epoch once the rows of
slot `slot` inside row block rb have landed in chunk kc's columns (the pusher's release, system scope). A GEMM work
item of row block rb waits for the chunks of every slot its rows overlap, those its K range reads only
(stream_k.kernel.streamk_program's A_WAIT); where communication programs push A (fused, two_streams), or the copy
engine pushes it in chunks of columns (overlap.copy_steps.gathers_a_in_columns), it reads its K range in segments
of `a_segment_cols(K)` columns and waits for each segment's chunks just before reading them, so a tile starts once
its first columns are there.

Work units of the pushing programs, in the order the GEMM reads the slots: (slot j of the destination, chunk kc,
row-block piece c of this rank's shard cut at the destination's row-block boundaries); slot 0 is the own copy, slot
j goes to rank (cur_rank - j) % W. Each slot's units are spread over every pushing program, so the slots arrive one
after another at the full rate, slot 1 (the GEMM's second) first; within a slot, where the GEMM waits by segments,
every row block's first columns before any row block's next, else one row block after another.

No end-of-step barrier: a peer writes into this rank's AG only after this rank's arrival at the step (its previous
GEMM, the last reader of AG, is over), and every write is followed by a ready word that this rank's GEMM waits for,
so once the GEMM's programs end, every row of the step has landed and nothing of a peer's is still being read.
(copy_engine's pull experiment, STREAMK_PGAS_CE_PULL=1, reads the peers' own slots, so it keeps the barrier:
overlap.parts.Parts.end_barrier.)

Buffers: AG [M, K] (H), the gathered A, whose slot 0 is the op's own A (`op.a`: a step on it copies nothing into
slot 0 and only releases its ready words; a caller's A is copied there, Gather.OWN_IN_PLACE); A_READY (H); C
[M, N/W], this rank's columns, written by the GEMM; nothing moves C. copy_engine: A's rows copied into every rank's
AG, each chunk (of rows, or of columns) followed by its ready words (overlap.copy_steps "gather_a"; the own slot
goes on the main stream before the GEMM: copy_steps.gather_a_own_ops).
"""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.device import notify, translate
from streamk_pgas.overlap.algorithms.record import AlgorithmRecord, Rates

A_CHUNK_COLS = 1024  # columns of one arrival chunk (a multiple of every BLK_K): 256 KiB of 128 bf16 rows
MAX_A_CHUNKS = 32  # chunks of A's columns at most (the ready words a GEMM work item may wait on)
# A GEMM work item reads its K range in up to this many segments of whole chunks, waiting for a segment's chunks just
# before reading them (a tile starts once its first columns are there, not all of them); fewer segments where a
# segment would be shorter than A_SEGMENT_MIN_COLS (each one restarts the GEMM's load pipeline).
A_SEGMENTS = 4
A_SEGMENT_MIN_COLS = 4096


def a_chunk_cols(k: int) -> int:
    """Columns of A in one arrival chunk: A_CHUNK_COLS, or a multiple of it that cuts K into MAX_A_CHUNKS."""
    chunks = -(-k // A_CHUNK_COLS)
    return A_CHUNK_COLS * max(1, -(-chunks // MAX_A_CHUNKS))


def a_chunks(k: int) -> int:
    """Chunks of A's K columns, each with its ready words."""
    return -(-k // a_chunk_cols(k))


def a_segment_cols(k: int) -> int:
    """Columns of A in one wait segment of a GEMM work item (whole chunks)."""
    chunk, n = a_chunk_cols(k), a_chunks(k)
    per = max(-(-n // A_SEGMENTS), -(-A_SEGMENT_MIN_COLS // chunk))
    return chunk * min(n, per)


def a_ready_words(m: int, k: int, blk_m: int, world: int) -> int:
    """Ready words of the gathered A: one per (slot, row block, chunk of columns)."""
    return world * -(-m // blk_m) * a_chunks(k)


@triton.jit
def gather_program(pid, num_programs, GATHER, e, CTX, BLK_M: tl.constexpr):
    """Push this rank's shard of A (GATHER.A_LOCAL, M/W x K) into slot j of rank (cur_rank - j)'s AG, slot 0 (the
    own copy) first, unit by unit (units pid, pid + num_programs, ...; a unit is one chunk of columns of the rows of
    one row block; a slot's units chunk by chunk where the GEMM waits by segments, else row block by row block),
    releasing each unit's A_READY word."""
    RM: tl.constexpr = GATHER.RM
    KB: tl.constexpr = GATHER.KB
    a_rows = GATHER.a_rows
    M = a_rows * CTX.world_size
    K = GATHER.K
    kc_cols = GATHER.chunk_cols
    n_kc = tl.cdiv(K, kc_cols)
    n_rb = tl.cdiv(M, BLK_M)
    pieces = tl.cdiv(a_rows, BLK_M) + 1  # row blocks one slot can overlap
    for u in range(pid, pieces * CTX.world_size * n_kc, num_programs):
        slot = u // (pieces * n_kc)
        if GATHER.SEGMENTED:  # the GEMM reads a row block segment by segment: every row block's first chunks first
            kc = (u // pieces) % n_kc
            c = u % pieces
        else:  # the GEMM waits for a row block's whole K: one row block after another
            c = (u // n_kc) % pieces
            kc = u % n_kc
        dest = (CTX.cur_rank + CTX.world_size - slot) % CTX.world_size
        slot_lo = slot * a_rows
        rb = slot_lo // BLK_M + c
        lo = tl.maximum(rb * BLK_M, slot_lo)
        hi = tl.minimum(rb * BLK_M + BLK_M, slot_lo + a_rows)
        k_hi = tl.minimum(GATHER.k_cols, kc * kc_cols + kc_cols)  # padded: whole vectors (Gather.k_cols)
        if lo < hi:
            copies = (slot > 0) | (not GATHER.OWN_IN_PLACE)  # the own A may be slot 0 already: its words only
            for r0 in range(lo, hi if copies else lo, RM):  # in RM x KB blocks: few registers beside a GEMM program's
                rows = r0 + tl.arange(0, RM)
                rmask = rows < hi
                src_rows = tl.where(rmask, rows - slot_lo, 0)
                for k0 in range(kc * kc_cols, k_hi, KB):
                    rk = k0 + tl.arange(0, KB)
                    mask = rmask[:, None] & (rk < k_hi)[None, :]
                    src = GATHER.A_LOCAL + src_rows[:, None] * GATHER.stride_lm + rk[None, :] * GATHER.stride_lk
                    vals = tl.load(src, mask=mask)
                    dst = GATHER.AG + rows[:, None] * GATHER.stride_gm + rk[None, :] * GATHER.stride_gk
                    tl.store(translate(dst, CTX.cur_rank, dest, CTX.heap_bases), vals, mask=mask)
            notify(GATHER.A_READY + (slot * n_rb + rb) * n_kc + kc, e, CTX.cur_rank, dest, CTX.heap_bases, "sys")


@triton.jit
def gathered_store_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """Store the tile of the rotated product into its rows of C (no flag: nothing moves C afterwards)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    rows = (rm + CTX.cur_rank * (M // CTX.world_size)) % M
    tl.store(C + rows[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)



RECORD = AlgorithmRecord(
    spec.ALGORITHMS["all_gather_gemm"], None, gathered_store_epilogue, None,
    ready_from_every_rank=False, writes_peers=True, partial_buffer=False, copy_schedule="gather_a",
    flags_every_write=True,
    # pushes of A's rows: 40 MB in 0.58 ms from 12 programs, 0.16 ms from 132 (4864 x 4096 x 8256 on 2 x H200); at
    # W = 4 to three peers at once, bulk_sync's push on 132 programs: 25 MB in 0.087 ms (2048 x 8192 x 8192), 60 MB
    # in 0.19 ms (4864 x 4096 x 8256) on 4 x H200 (results/logs/h200x4/rows-a12af5e), ~290-320 GB/s
    rates=Rates(per_program_gbs=6.0, link_gbs=250.0, switch_link_gbs=300.0),
)

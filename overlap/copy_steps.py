"""The copy schedules of mode copy_engine (overlap.communication.copy_engine), one per algorithm kind.

Every schedule runs on the communication stream after the step's start kernel (ce_start: arrival of every
rank, so the peers' buffers may receive), and ends with ce_finish, which counts as one program of the step:
the last of the GEMM's programs and ce_finish closes the step (with the peer barrier where the step needs one:
overlap.parts.Parts.end_barrier), after every copy of this rank has landed. The GEMM runs on every SM.

    scatter      (all_scatter) for each band of tile rows: wait for its tiles, copy this rank's columns of
                 those rows into every peer's C; then the counts back to 0
    reduce_rows  (gemm_reduce_scatter) for each band of tile rows that holds a peer's rows, in the order the
                 GEMM finishes them (its rows rotated to start at rank + 1's: overlap.bands.reduce_rows_shift):
                 wait, copy those rows of the partial into the owner's RECV slot of this rank; C = own rows +
                 RECV's other slots, summed in rank order on the main stream after the step's copies (the op's
                 `post`: one kernel, sum_slots_kernel)
    gather_a     (all_gather_gemm) this rank's rows of A into slot 0 of its own gathered A, then into each
                 peer's slot, in chunks of row blocks; after each chunk its A_READY words, copied from FILL
                 (every word = this step's epoch, written by ce_start), so the GEMM's row waits see them.
                 With STREAMK_PGAS_CE_PULL=1 (an experiment) each rank instead copies its own rows into its
                 slot 0 before the step's start and pulls slot j from rank + j's slot 0, its ready words here.
                 Where K has several GEMM wait segments, W >= 4 and a slot would go in several row chunks
                 (gathers_a_in_columns; STREAMK_PGAS_CE_A_COLUMNS overrides the rule) each peer's slot goes in
                 chunks of columns instead (all its rows, one segment a copy),
                 each followed by the ready words of that segment's chunks of its row blocks, and the GEMM reads K
                 in wait segments: a tile starts on its rows' first columns while the rest are in flight. The own
                 slot is then copied on the main stream after the step's start and before the GEMM (one copy of
                 its rows, one of its words: gather_a_own_ops), so that no copy within this GPU's memory is queued
                 beside the GEMM, and each words copy to a peer is one contiguous copy (column_word_pattern)

Bands: overlap.bands (how many per copy region, and why).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from streamk_pgas.iris_ops.env import flag_from_env
from streamk_pgas.overlap.algorithms.all_gather_gemm import a_chunk_cols, a_chunks, a_segment_cols
from streamk_pgas.overlap.bands import finish_order, reduce_rows_shift, row_bands
from streamk_pgas.overlap.buffers import OpBuffers
from streamk_pgas.overlap.communication.copy_engine import (
    Copy2D,
    Launch,
    Op,
    WaitGeq,
    Zero32,
    bands,
    rows_copy,
    sum_slots_kernel,
)
from streamk_pgas.stream_k.launch import BoundLaunch
from streamk_pgas.stream_k.layout import vector_cols

GATHER_CHUNKS = 4  # chunks of one rank's rows of A, at most
# the fewest bytes a chunk of A's rows carries: its copy and its words copy each cost the copy stream a few
# microseconds whatever the bytes (overlap.rates.CE_GATHER_OP_US), so a chunk brings more transfer than that
GATHER_CHUNK_MIN_BYTES = 4 << 20
CE_PULL_ENV = "STREAMK_PGAS_CE_PULL"  # 1: all_gather_gemm's copy engines pull A's rows (0, the default: push)


def ce_pulls_a() -> bool:
    """Whether all_gather_gemm's copy_engine mode pulls the peers' rows of A instead of pushing its own (an
    experiment: STREAMK_PGAS_CE_PULL=1); a bad value raises iris_ops.errors.ConfigError naming it."""
    return flag_from_env(CE_PULL_ENV, False)


# all_gather_gemm's layout of A on the copy engines: unset, by the rule (gathers_a_in_columns); 0: row chunks only;
# 1: chunks of columns wherever K has several wait segments at W >= COLUMNS_FROM_WORLD, whatever the slot's size
CE_A_COLUMNS_ENV = "STREAMK_PGAS_CE_A_COLUMNS"


def ce_a_columns_setting() -> bool | None:
    """STREAMK_PGAS_CE_A_COLUMNS: None where unset or empty, else its 0 or 1; a bad value raises
    iris_ops.errors.ConfigError naming it."""
    if not os.environ.get(CE_A_COLUMNS_ENV, "").strip():
        return None
    return flag_from_env(CE_A_COLUMNS_ENV, True)


COLUMNS_FROM_WORLD = 4  # the fewest ranks at which all_gather_gemm's copy engine pushes A in chunks of columns


def gathers_a_in_columns(m: int, k: int, world: int, element_bytes: int) -> bool:
    """Whether all_gather_gemm's copy_engine pushes each slot of A in chunks of columns (gather_a_column_ops) and its
    GEMM reads K in wait segments, for A of M x K elements of `element_bytes` on `world` ranks: where the rows are
    pushed (not ce_pulls_a), K has several wait segments (with one, a tile waits for its whole K either way, and the
    row chunks let the first row blocks start sooner), there are COLUMNS_FROM_WORLD ranks or more (at W = 2 the row
    chunks measured faster) and a slot would go in more than one copy of its rows (gather_chunk_count): a smaller
    slot goes in one copy, whose operations cost less than its segments' (both layouts measured at W = 4:
    results/README.md). STREAMK_PGAS_CE_A_COLUMNS=0 keeps the rows, =1 takes the columns whatever the slot's size. A
    bad value of either variable raises iris_ops.errors.ConfigError naming it."""
    setting = ce_a_columns_setting()
    if world < COLUMNS_FROM_WORLD or setting is False or ce_pulls_a() or a_segment_cols(k) >= k:
        return False
    return setting is True or _row_copies(m, k, world, element_bytes) > 1


class Peers:
    """Addresses of a heap tensor on every rank (the heap is symmetric: the same offset on each)."""

    def __init__(self, heap_bases: list[int], rank: int) -> None:
        self.bases = heap_bases
        self.rank = rank

    def addr(self, t: torch.Tensor, peer: int) -> int:
        return t.data_ptr() - self.bases[self.rank] + self.bases[peer]


def _wait_band(counts: torch.Tensor, n_rb: int, band: int, lo: int, hi: int, per_row: int) -> WaitGeq:
    return WaitGeq(counts[n_rb + band:].data_ptr(), (hi - lo) * per_row)


def _reset(counts: torch.Tensor, n_rb: int, n_bands: int) -> Zero32:
    return Zero32(counts[n_rb:].data_ptr(), n_bands)


def scatter_ops(src: torch.Tensor, counts: torch.Tensor, per_row: int, blk_m: int, peers: Peers, world: int,
                wait: bool = True) -> list[Op]:
    """all_scatter: `src` (M x N/W, this rank's columns of C on the heap) to the same place on every peer."""
    m = src.shape[0]
    n_rb = -(-m // blk_m)
    cut = row_bands("scatter", n_rb, world)
    ops: list[Op] = []
    for band, (lo, hi) in enumerate(cut):
        if wait:
            ops.append(_wait_band(counts, n_rb, band, lo, hi, per_row))
        rows = src[lo * blk_m:min(hi * blk_m, m)]
        for i in range(1, world):
            p = (peers.rank + i) % world
            ops.append(rows_copy(rows, rows, peers.addr(rows, p)))
    if wait:
        ops.append(_reset(counts, n_rb, len(cut)))
    return ops


def reduce_rows_ops(partial: torch.Tensor, recv: torch.Tensor, counts: torch.Tensor, per_row: int, blk_m: int,
                    peers: Peers, world: int, wait: bool = True) -> list[Op]:
    """gemm_reduce_scatter: each peer's rows of the partial (M x N) into that peer's recv[this rank], band by band in
    the order the GEMM finishes them (its row order rotated: overlap.bands.reduce_rows_shift)."""
    m, r = partial.shape[0], peers.rank
    a_rows = m // world
    n_rb = -(-m // blk_m)
    cut = row_bands("reduce_rows", n_rb, world)
    ops: list[Op] = []
    for band in finish_order(cut, n_rb, reduce_rows_shift(m, blk_m, r, world)):
        lo, hi = cut[band]
        r0, r1 = lo * blk_m, min(hi * blk_m, m)
        owners = [p for p in range(r0 // a_rows, (r1 - 1) // a_rows + 1) if p != r]
        if not owners:
            continue  # this rank's own rows: read on the main stream after the GEMM
        if wait:
            ops.append(_wait_band(counts, n_rb, band, lo, hi, per_row))
        for p in owners:
            p0, p1 = max(r0, p * a_rows), min(r1, (p + 1) * a_rows)
            dst = recv[r, p0 - p * a_rows:p1 - p * a_rows]
            ops.append(rows_copy(dst, partial[p0:p1], peers.addr(dst, p)))
    if wait:
        ops.append(_reset(counts, n_rb, len(cut)))
    return ops


def gather_chunk_count(slot_bytes: int) -> int:
    """How many chunks the copy engine cuts a slot of A's rows into: GATHER_CHUNKS, fewer where a chunk would carry
    less than GATHER_CHUNK_MIN_BYTES (a small slot in one copy: its operations, not its bytes, cost the time)."""
    return max(1, min(GATHER_CHUNKS, slot_bytes // GATHER_CHUNK_MIN_BYTES))


def _gather_chunks(m: int, world: int, blk_m: int, slot: int, row_bytes: int) -> list[tuple[int, int, int, int]]:
    """(first row, end row, first row block, end row block) of each chunk of slot `slot` of the gathered A (rows of
    `row_bytes`)."""
    a_rows = m // world
    lo_row, hi_row = slot * a_rows, (slot + 1) * a_rows
    rb_lo, rb_hi = lo_row // blk_m, (hi_row - 1) // blk_m + 1
    out = []
    for c0, c1 in bands(rb_hi - rb_lo, gather_chunk_count(a_rows * row_bytes)):
        rb_a, rb_b = rb_lo + c0, rb_lo + c1
        out.append((max(rb_a * blk_m, lo_row), min(rb_b * blk_m, hi_row), rb_a, rb_b))
    return out


def own_in_place(a: torch.Tensor, ag: torch.Tensor, world: int) -> bool:
    """Whether this rank's rows `a` are slot 0 of its gathered A already (the op's own A: overlap.buffers), so that
    nothing copies them there."""
    own = ag[:ag.shape[0] // world]
    return a.data_ptr() == own.data_ptr() and a.stride() == own.stride() and a.shape == own.shape


def _ready_words(a_ready: torch.Tensor, fill: torch.Tensor, slot: int, rb_a: int, rb_b: int, n_rb: int, n_kc: int,
                 peers: Peers, on: int) -> Copy2D:
    """The A_READY words of a chunk (every chunk of columns of its row blocks) on rank `on`, from FILL."""
    words = a_ready[(slot * n_rb + rb_a) * n_kc:(slot * n_rb + rb_b) * n_kc]
    nbytes = 4 * words.numel()
    return Copy2D(peers.addr(words, on), nbytes, fill.data_ptr(), nbytes, nbytes, 1)


def gather_a_ops(a: torch.Tensor, ag: torch.Tensor, a_ready: torch.Tensor, fill: torch.Tensor, blk_m: int,
                 peers: Peers, world: int) -> list[Op]:
    """all_gather_gemm, the copy stream's part: this rank's rows `a` (M/W x K) into slot j >= 1 of rank (rank - j)'s
    gathered A, in the order the GEMM reads the slots, chunk by chunk, each chunk followed by its A_READY words
    (every chunk of columns of its row blocks: overlap.algorithms.all_gather_gemm; copied from FILL). The own slot
    goes on the main stream before the GEMM (gather_a_own_ops)."""
    m = ag.shape[0]
    a_rows, n_rb, n_kc = m // world, -(-m // blk_m), a_chunks(a.shape[1])
    ops: list[Op] = []
    for slot in range(1, world):
        dest = (peers.rank + world - slot) % world
        for r0, r1, rb_a, rb_b in _gather_chunks(m, world, blk_m, slot, a.shape[1] * a.element_size()):
            dst = ag[r0:r1]
            ops.append(rows_copy(dst, a[r0 - slot * a_rows:r1 - slot * a_rows], peers.addr(dst, dest)))
            ops.append(_ready_words(a_ready, fill, slot, rb_a, rb_b, n_rb, n_kc, peers, dest))
    return ops


def _column_copies(k: int) -> list[tuple[int, int]]:
    """[first, end) columns of each copy of a slot pushed in columns: the GEMM's wait segments (a_segment_cols,
    whole chunks of ready words). A work item waits for every chunk of a segment at once, so finer copies would land
    nothing that it reads sooner, at more operations."""
    seg = a_segment_cols(k)
    return [(c, min(k, c + seg)) for c in range(0, k, seg)]


def gather_copies_per_slot(m: int, k: int, world: int, element_bytes: int) -> int:
    """Copies of one slot of A the copy engine's push makes (each followed by its ready words): one per wait segment
    in columns (gathers_a_in_columns), else gather_chunk_count's row chunks."""
    if gathers_a_in_columns(m, k, world, element_bytes):
        return len(_column_copies(k))
    return _row_copies(m, k, world, element_bytes)


def _row_copies(m: int, k: int, world: int, element_bytes: int) -> int:
    """Row copies of one slot of A (M / W rows of K elements): gather_chunk_count of its bytes."""
    return gather_chunk_count(m // world * k * element_bytes)


def column_word_pattern(m: int, k: int, blk_m: int, world: int) -> torch.Tensor:
    """[wait segments, L] int32 of 0 / 1, row g: the A_READY words of a slot's row blocks (row block after row
    block, n_kc words each; L for the most row blocks a slot can overlap) once its segments 0..g of columns have
    landed: 1 for a chunk of those segments, 0 for a later one. Times the step's epoch (column_words_action), the
    source of the peers' words in columns: each words copy is one contiguous copy of a slot's words, as the row
    chunks' are, instead of a 2-D copy of narrow rows (a segment's chunks in each row block). Writing 0 over a later
    segment's words is harmless: they are below the epoch until their own copy, which comes later on the stream."""
    a_rows, n_kc, chunk = m // world, a_chunks(k), a_chunk_cols(k)
    kc = torch.arange(n_kc, dtype=torch.int32).repeat(-(-a_rows // blk_m) + 1)
    return torch.stack([(kc < -(-c1 // chunk)).to(torch.int32) for _, c1 in _column_copies(k)])


def column_words_action(pattern: torch.Tensor, fill: torch.Tensor, words: torch.Tensor) -> Any:
    """The step's source of the peers' words in columns: words = pattern x the epoch (FILL[0], written by ce_start),
    one small kernel queued on the main stream after ce_start and before the copy stream forks."""

    def column_words() -> None:
        torch.mul(pattern, fill[:1], out=words)

    return column_words


def gather_a_column_ops(a: torch.Tensor, ag: torch.Tensor, a_ready: torch.Tensor, words: torch.Tensor, blk_m: int,
                        peers: Peers, world: int) -> list[Op]:
    """all_gather_gemm in columns (gathers_a_in_columns), the copy stream's part: this rank's rows `a` (M/W x K) into
    slot j >= 1 of rank (rank - j)'s gathered A, in the order the GEMM reads the slots, each slot in copies of all
    its rows and one wait segment of columns (_column_copies), each followed by one contiguous copy of the A_READY
    words of the slot's row blocks from `words` (column_word_pattern x the epoch: the epoch for the chunks landed
    so far). Every copy here lands on a peer; the own slot (slot 0) goes before the GEMM on the main stream
    (gather_a_own_ops)."""
    m, k = ag.shape[0], a.shape[1]
    a_rows, n_rb, n_kc = m // world, -(-m // blk_m), a_chunks(k)
    assert words.shape[0] == len(_column_copies(k))
    ops: list[Op] = []
    for slot in range(1, world):
        dest = (peers.rank + world - slot) % world
        r0, r1 = slot * a_rows, (slot + 1) * a_rows
        rb_a, rb_b = r0 // blk_m, (r1 - 1) // blk_m + 1
        assert words.shape[1] >= (rb_b - rb_a) * n_kc
        for g, (c0, c1) in enumerate(_column_copies(k)):
            dst = ag[r0:r1, c0:c1]
            ops.append(rows_copy(dst, a[:, c0:c1], peers.addr(dst, dest)))
            ops.append(_ready_words(a_ready, words[g], slot, rb_a, rb_b, n_rb, n_kc, peers, dest))
    return ops


def gather_a_own_ops(a: torch.Tensor, ag: torch.Tensor, a_ready: torch.Tensor, fill: torch.Tensor, blk_m: int,
                     world: int) -> list[Op]:
    """all_gather_gemm's own slot (slot 0), the main stream's part of every copy schedule of A, queued after the
    step's start (ce_start, which writes FILL) and before the GEMM: this rank's rows `a` into slot 0 of its own
    gathered A in one copy (none where they are there: own_in_place, or pulled: gather_own_rows), then the A_READY
    words of slot 0's row blocks, every chunk, in one copy from FILL.

    Every copy within this GPU's memory goes here, ahead of the GEMM in stream order, and the copy stream beside the
    GEMM holds copies to peers only: a copy within one GPU may run on its SMs, which the persistent GEMM holds while
    it waits for that copy. Queued beside the GEMM, such a copy can stall the step until the GEMM's wait gives up
    (measured where the GEMM was queued before the copy stream: results/README.md)."""
    a_rows, n_kc = ag.shape[0] // world, a_chunks(a.shape[1])
    words = a_ready[:((a_rows - 1) // blk_m + 1) * n_kc]  # slot 0: row blocks 0 .. the last one its rows reach
    nbytes = 4 * words.numel()
    assert fill.numel() * 4 >= nbytes
    rows = [] if own_in_place(a, ag, world) else [rows_copy(ag[:a_rows], a)]
    return [*rows, Copy2D(words.data_ptr(), nbytes, fill.data_ptr(), nbytes, nbytes, 1)]


def gather_own_rows(a: torch.Tensor, ag: torch.Tensor, world: int) -> list[Op]:
    """all_gather_gemm pulled (ce_pulls_a): this rank's rows into slot 0 of its own gathered A, queued before the
    step's start, whose arrival then tells every peer that they are there to be pulled."""
    return [] if own_in_place(a, ag, world) else [rows_copy(ag[:ag.shape[0] // world], a)]


def gather_a_pull_ops(ag: torch.Tensor, a_ready: torch.Tensor, fill: torch.Tensor, k: int, blk_m: int, peers: Peers,
                      world: int) -> list[Op]:
    """all_gather_gemm pulled (ce_pulls_a): slot j >= 1 of this rank's gathered A from slot 0 of rank (rank + j)'s
    (its own rows, there since its step started: gather_own_rows), in the order the GEMM reads the slots, chunk by
    chunk, each chunk followed by its A_READY words here. Those words are copies within this GPU beside the GEMM
    (what gather_a_own_ops keeps off the copy stream for the own slot): one reason this schedule stays an
    experiment."""
    m = ag.shape[0]
    a_rows, n_rb, n_kc = m // world, -(-m // blk_m), a_chunks(k)
    ops: list[Op] = []
    for slot in range(1, world):
        src_rank = (peers.rank + slot) % world
        for r0, r1, rb_a, rb_b in _gather_chunks(m, world, blk_m, slot, k * ag.element_size()):
            src = ag[r0 - slot * a_rows:r1 - slot * a_rows]
            ops.append(rows_copy(ag[r0:r1], src, src_addr=peers.addr(src, src_rank)))
            ops.append(_ready_words(a_ready, fill, slot, rb_a, rb_b, n_rb, n_kc, peers, peers.rank))
    return ops


def schedule_ops(kind: str, bufs: OpBuffers, a: torch.Tensor, heap_bases: list[int], rank: int, world: int,
                 blk_m: int, finish: Any, wait: bool = True, column_words: torch.Tensor | None = None) -> list[Op]:
    """The step's copy-engine operations over an op's buffers (overlap.buffers.OpBuffers), then its ce_finish
    launch `finish`. `column_words`: given where A goes in chunks of columns (gathers_a_in_columns), the source of
    the peers' ready words (column_word_pattern x the epoch)."""
    peers = Peers(heap_bases, rank)
    if kind == "scatter":
        assert bufs.counts is not None
        ops = scatter_ops(bufs.gemm_out, bufs.counts, bufs.tiles_per_row, blk_m, peers, world, wait)
    elif kind == "reduce_rows":
        assert bufs.partial is not None and bufs.recv is not None and bufs.counts is not None
        ops = reduce_rows_ops(bufs.partial, bufs.recv, bufs.counts, bufs.tiles_per_row, blk_m, peers, world, wait)
    elif ce_pulls_a():
        assert bufs.ag is not None and bufs.a_ready is not None and bufs.fill is not None
        ops = gather_a_pull_ops(bufs.ag, bufs.a_ready, bufs.fill, a.shape[1], blk_m, peers, world)
    elif column_words is not None:  # the caller decided: gathers_a_in_columns
        assert bufs.ag is not None and bufs.a_ready is not None
        ops = gather_a_column_ops(a, bufs.ag, bufs.a_ready, column_words, blk_m, peers, world)
    else:
        assert bufs.ag is not None and bufs.a_ready is not None and bufs.fill is not None
        ops = gather_a_ops(a, bufs.ag, bufs.a_ready, bufs.fill, blk_m, peers, world)
    return [*ops, Launch(finish)]


def schedule_pre_ops(kind: str, bufs: OpBuffers, a: torch.Tensor, world: int) -> list[Op]:
    """What the schedule needs queued on the main stream before the step's start (ce_start): all_gather_gemm's own
    rows into its gathered A where the peers pull them (ce_pulls_a); nothing otherwise."""
    if kind == "gather_a" and ce_pulls_a():
        assert bufs.ag is not None
        return gather_own_rows(a, bufs.ag, world)
    return []


SUM_BLOCK = (8, 256)  # rows x columns of one program of the sum after the copies (4 KiB of bf16 a slot)


def reduce_rows_post(c: torch.Tensor, partial: torch.Tensor, recv: torch.Tensor, rank: int, world: int) -> BoundLaunch:
    """The main stream's part of reduce_rows, after the step's copies: C = the rank-order sum of this rank's rows of
    the partial and every other rank's slot of RECV, in one kernel (sum_slots_kernel)."""
    a_rows, n = c.shape
    own = partial[rank * a_rows:(rank + 1) * a_rows]
    assert c.stride(1) == own.stride(1) == recv.stride(2) == 1 and own.shape == c.shape == recv.shape[1:]
    bm, bn = SUM_BLOCK
    n = vector_cols(n, c, own, recv[0])  # the padded columns where every row holds them: whole vectors
    args = {"C": c, "OWN": own, "RECV": recv, "rows": a_rows, "n": n, "stride_c": c.stride(0),
            "stride_own": own.stride(0), "stride_slot": recv.stride(0), "stride_recv": recv.stride(1), "rank": rank,
            "WORLD": world, "BLOCK_M": bm, "BLOCK_N": bn}
    return BoundLaunch(sum_slots_kernel, -(-a_rows // bm) * -(-n // bn), args, {"num_warps": 4})

"""The copy-engine schedules (overlap/copy_steps.py) run by the host engine, in this process: two "ranks'" heaps
are two host buffers, so every copy lands where the peer's buffer is, and the result is checked element by
element. The multi-rank runs (mode copy_engine through the op, 2 and 4 ranks) are in test_op.py and
test_new_algorithms.py."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
import torch

from streamk_pgas.iris_ops.errors import ConfigError
from streamk_pgas.overlap.algorithms.all_gather_gemm import a_chunk_cols, a_chunks, a_segment_cols
from streamk_pgas.overlap.bands import finish_order, reduce_rows_shift, row_bands
from streamk_pgas.overlap.communication.copy_engine import (
    Copy2D,
    CopySchedule,
    HostEngine,
    WaitGeq,
    Zero32,
    band_counts,
    bands,
    rows_copy,
)
from streamk_pgas.overlap.copy_steps import (
    CE_A_COLUMNS_ENV,
    CE_PULL_ENV,
    GATHER_CHUNK_MIN_BYTES,
    GATHER_CHUNKS,
    Peers,
    column_word_pattern,
    column_words_action,
    gather_a_column_ops,
    gather_a_ops,
    gather_a_own_ops,
    gather_a_pull_ops,
    gather_chunk_count,
    gather_copies_per_slot,
    gather_own_rows,
    gathers_a_in_columns,
    reduce_rows_ops,
    reduce_rows_post,
    scatter_ops,
)


def test_bands_cover_every_row_once() -> None:
    for n, count in ((1, 8), (7, 8), (19, 8), (64, 8), (5, 2), (40, 16)):
        cut = bands(n, count)
        assert len(cut) == min(n, count)
        assert cut[0][0] == 0 and cut[-1][1] == n
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(cut))
        sizes = [hi - lo for lo, hi in cut]
        assert max(sizes) - min(sizes) <= 1


def test_band_counts_map_each_row_to_its_band_word() -> None:
    cut = [(0, 3), (3, 5), (5, 7)]
    init = band_counts(cut, 7, 16)
    assert init[:7] == [7, 7, 7, 8, 8, 9, 9]
    assert init[7:] == [0] * 9


class TwoHeaps:
    """Host buffers standing for the ranks' heaps, two unless told (symmetric: one allocation offset for all)."""

    def __init__(self, nbytes: int, ranks: int = 2) -> None:
        self.heaps = [torch.zeros(nbytes, dtype=torch.uint8) for _ in range(ranks)]
        self.offset = 0

    def peers(self, rank: int = 0) -> Peers:
        return Peers([h.data_ptr() for h in self.heaps], rank)

    def tensor(self, rows: int, cols: int, dtype: torch.dtype, stride: int | None = None,
               rank: int = 0) -> torch.Tensor:
        stride = stride or cols
        elem = torch.empty((), dtype=dtype).element_size()
        nbytes = rows * stride * elem
        t = self.heaps[rank][self.offset:self.offset + nbytes].view(dtype).view(rows, stride)[:, :cols]
        self.offset += -(-nbytes // 64) * 64
        return t

    def on(self, t: torch.Tensor, rank: int) -> torch.Tensor:
        """The same tensor on `rank`'s heap."""
        home = next(h for h in self.heaps if 0 <= t.data_ptr() - h.data_ptr() < h.numel())
        off = t.data_ptr() - home.data_ptr()
        elem = t.element_size()
        span = (t.shape[0] - 1) * t.stride(0) + t.shape[1]
        flat = self.heaps[rank][off:off + span * elem].view(t.dtype)
        return flat.as_strided(t.shape, t.stride())


def run(ops: list, timeout_s: float = 1.0) -> None:
    CopySchedule(ops, HostEngine(timeout_s))()


def test_scatter_moves_this_ranks_columns_and_resets_the_counts() -> None:
    M, n_local, blk_m, per_row = 40, 24, 8, 3
    h = TwoHeaps(1 << 16)
    c = h.tensor(M, 2 * n_local, torch.float32, stride=64)
    src = c[:, :n_local]  # rank 0's columns
    src.copy_(torch.randn(M, n_local))
    n_rb = M // blk_m
    cut = row_bands("scatter", n_rb, 2)
    counts = torch.tensor(band_counts(cut, n_rb, 2 * n_rb), dtype=torch.int32)
    for lo, hi in cut:  # the GEMM's counts: every band complete
        counts[n_rb + cut.index((lo, hi))] = (hi - lo) * per_row
    ops = scatter_ops(src, counts, per_row, blk_m, h.peers(), 2)
    kinds = [type(x).__name__ for x in ops]
    assert kinds.count("WaitGeq") == len(cut) and kinds.count("Copy2D") == len(cut) and kinds[-1] == "Zero32"
    run(ops)
    peer_c = h.on(c, 1)
    assert torch.equal(peer_c[:, :n_local], src)
    assert torch.equal(peer_c[:, n_local:], torch.zeros(M, n_local))  # rank 1's own columns untouched
    assert counts[n_rb:n_rb + len(cut)].tolist() == [0] * len(cut)
    assert counts[:n_rb].tolist() == band_counts(cut, n_rb, 2 * n_rb)[:n_rb]  # the map stays


def test_reduce_rows_sends_each_owner_its_rows_only() -> None:
    M, N, blk_m, world, rank = 40, 16, 8, 2, 1
    h = TwoHeaps(1 << 16)
    partial = h.tensor(M, N, torch.float32, stride=32, rank=rank)
    partial.copy_(torch.randn(M, N))
    recv = h.tensor(world * (M // world), N, torch.float32, stride=32, rank=rank).view(world, M // world, N)
    n_rb = M // blk_m
    cut = row_bands("reduce_rows", n_rb, world)
    counts = torch.tensor(band_counts(cut, n_rb, 2 * n_rb), dtype=torch.int32)
    counts[n_rb:n_rb + len(cut)] = torch.tensor([(hi - lo) * 2 for lo, hi in cut], dtype=torch.int32)
    ops = reduce_rows_ops(partial, recv, counts, 2, blk_m, h.peers(rank), world)
    run(ops)
    # rank 1 sends rows [0, 20) (rank 0's) into rank 0's recv[1]; nothing of its own rows moves
    assert torch.equal(h.on(recv[1], 0), partial[:20])
    assert torch.equal(h.on(recv[0], 0), torch.zeros(20, N))
    waited = [op for op in ops if isinstance(op, WaitGeq)]
    assert len(waited) == sum(1 for lo, hi in cut if lo * blk_m < 20)


def test_bands_in_the_order_a_rotated_gemm_finishes_them() -> None:
    cut = [(0, 3), (3, 5), (5, 7), (7, 10)]
    assert finish_order(cut, 10, 0) == [0, 1, 2, 3]
    assert finish_order(cut, 10, 5) == [2, 3, 0, 1]
    assert finish_order(cut, 10, 4) == [2, 3, 0, 1]  # band (3, 5) wraps past row block 4: its row block 3 comes last


@pytest.mark.parametrize("m,blk_m,world", [(64, 4, 4), (96, 8, 4), (40, 4, 2), (48, 2, 8), (72, 8, 3)])
def test_reduce_rows_ranks_copy_to_distinct_owners_at_every_moment(m: int, blk_m: int, world: int) -> None:
    """With each rank's GEMM rotated to start at the next rank's rows, the k-th copy of every rank goes to a
    different owner (no W - 1 senders into one rank's links), every peer gets its rows once, the own rows never."""

    class Heap:  # addresses only: rank q's heap at q << 40, the same offset on every rank
        def __init__(self, rank: int) -> None:
            self.peers = Peers([q << 40 for q in range(world)], rank)

    n_rb = -(-m // blk_m)
    n = 4
    partial = torch.zeros(m, n)
    recv = torch.zeros(world, m // world, n)
    counts = torch.zeros(2 * n_rb, dtype=torch.int32)
    owners_by_rank = []
    for rank in range(world):
        ops = reduce_rows_ops(partial, recv, counts, 1, blk_m, Heap(rank).peers, world)
        dests = [(op.dst - recv.data_ptr() + (rank << 40)) >> 40 for op in ops if isinstance(op, Copy2D)]
        assert rank not in dests and sorted(set(dests)) == sorted(set(range(world)) - {rank})
        shift = reduce_rows_shift(m, blk_m, rank, world)
        assert shift * blk_m == ((rank + 1) % world) * (m // world) // blk_m * blk_m
        owners_by_rank.append(dests)
    if (m // world) % blk_m == 0:  # owners' rows fall on row-block boundaries: one owner per band
        for k in range(len(owners_by_rank[0])):
            assert len({dests[k] for dests in owners_by_rank}) == world, (k, owners_by_rank)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_reduce_rows_post_adds_every_other_slot(world: int) -> None:
    """C = this rank's rows of the partial + every other rank's slot of RECV; on one rank, its own rows alone (a
    world-1 copy_engine step of gemm_reduce_scatter once raised IndexError here)."""
    rows, n, rank = 6, 5, world - 1
    # small integers in float32: every order of the sums is exact, so the check is equality, not a tolerance
    partial = torch.randint(-64, 64, (world * rows, n)).float()
    recv = torch.randint(-64, 64, (world, rows, n)).float()
    c = torch.full((rows, n), float("nan"))
    reduce_rows_post(c, partial, recv, rank, world)()
    want = partial[rank * rows:(rank + 1) * rows] + sum((recv[s] for s in range(world) if s != rank),
                                                         torch.zeros(rows, n))
    assert torch.equal(c, want)


def test_reduce_rows_post_sums_in_rank_order_in_fp32() -> None:
    """Half-precision slots summed as the SM modes sum them (comm_loop.rank_order_sum): from slot 0, in rank order,
    in fp32, rounded once (fp16 here: the CPU interpreter truncates to bf16 where a GPU rounds); a strided partial and
    a ragged block edge."""
    world, rank, rows, n = 4, 2, 11, 300
    partial = torch.randn(world * rows, n + 20).to(torch.float16)[:, :n]
    recv = (torch.randn(world, rows, n) * 100).to(torch.float16)
    c = torch.full((rows, n), float("nan"), dtype=torch.float16)
    reduce_rows_post(c, partial, recv, rank, world)()
    slots = [partial[rank * rows:(rank + 1) * rows] if s == rank else recv[s] for s in range(world)]
    acc = slots[0].float()
    for x in slots[1:]:
        acc = acc + x.float()
    assert torch.equal(c, acc.to(torch.float16))
    sequential = slots[0].clone()
    for x in slots[1:]:
        sequential += x  # a sum rounded at every add differs: the check above sees the difference
    assert not torch.equal(c, sequential)


def test_gather_a_fills_every_slot_and_its_ready_words() -> None:
    M, K, blk_m, world, rank = 24, 40, 8, 2, 0
    h = TwoHeaps(1 << 16)
    a = torch.randn(M // world, K)
    ag = h.tensor(M, K, torch.float32, stride=64)
    n_rb = M // blk_m
    a_ready = h.tensor(1, world * n_rb, torch.int32)[0]
    fill = torch.full((n_rb,), 5, dtype=torch.int32)
    run(gather_a_own_ops(a, ag, a_ready, fill, blk_m, world))  # the main stream's part, before the GEMM
    run(gather_a_ops(a, ag, a_ready, fill, blk_m, h.peers(rank), world))
    assert torch.equal(ag[:12], a)  # slot 0 of this rank: its own rows
    assert torch.equal(h.on(ag, 1)[12:], a)  # slot 1 of rank 1: rank 0's rows
    # slot 0 covers row blocks 0, 1 (rows 0-11); slot 1 row blocks 1, 2 (rows 12-23)
    assert a_ready.tolist() == [5, 5, 0, 0, 0, 0]
    assert h.on(a_ready.view(1, -1), 1)[0].tolist() == [0, 0, 0, 0, 5, 5]


def test_a_small_slot_goes_in_one_copy_and_a_large_one_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot of A's rows is cut into GATHER_CHUNKS copies only where each carries GATHER_CHUNK_MIN_BYTES: a small
    slot's copies cost their operations, not their bytes."""
    from streamk_pgas.overlap import copy_steps

    assert gather_chunk_count(0) == gather_chunk_count(GATHER_CHUNK_MIN_BYTES - 1) == 1
    assert gather_chunk_count(2 * GATHER_CHUNK_MIN_BYTES) == 2
    assert gather_chunk_count(100 * GATHER_CHUNK_MIN_BYTES) == GATHER_CHUNKS
    assert gather_chunk_count(250 * 2500 * 2) == 1  # 1000 x 3000 x 2500 at W = 4: one copy a slot
    assert gather_chunk_count(1216 * 8256 * 2) == GATHER_CHUNKS  # 4864 x 4096 x 8256 at W = 4
    M, K, blk_m, world = 64, 40, 8, 2  # a slot: 32 rows of 160 B, 4 row blocks
    h = TwoHeaps(1 << 16)
    ag = h.tensor(M, K, torch.float32)
    a_ready = h.tensor(1, world * (M // blk_m), torch.int32)[0]
    fill = torch.ones(M // blk_m, dtype=torch.int32)
    for min_bytes, chunks in ((1 << 20, 1), (1024, 4)):
        monkeypatch.setattr(copy_steps, "GATHER_CHUNK_MIN_BYTES", min_bytes)
        ops = gather_a_ops(ag[:M // world], ag, a_ready, fill, blk_m, h.peers(0), world)
        assert len(ops) == 2 * chunks * (world - 1)  # rows + words a chunk, the peer's slot


def test_gather_a_pulled_fills_every_slot_and_its_ready_words_here() -> None:
    """STREAMK_PGAS_CE_PULL=1's schedule: the own rows into slot 0 (before the step's start), then slot 1 pulled from
    the peer's slot 0, every ready word written on this rank only."""
    M, K, blk_m, world, rank = 24, 40, 8, 2, 0
    h = TwoHeaps(1 << 16)
    a = torch.randn(M // world, K)
    ag = h.tensor(M, K, torch.float32, stride=64)
    peer_rows = torch.randn(M // world, K)
    h.on(ag, 1)[:12].copy_(peer_rows)  # rank 1's own rows, in its slot 0 since its step started
    n_rb = M // blk_m
    a_ready = h.tensor(1, world * n_rb, torch.int32)[0]
    fill = torch.full((n_rb,), 5, dtype=torch.int32)
    run(gather_own_rows(a, ag, world))
    run(gather_a_own_ops(ag[:12], ag, a_ready, fill, blk_m, world))  # the own slot's words: its rows are there
    run(gather_a_pull_ops(ag, a_ready, fill, K, blk_m, h.peers(rank), world))
    assert torch.equal(ag[:12], a) and torch.equal(ag[12:], peer_rows)
    assert a_ready.tolist() == [5, 5, 0, 0, 5, 5]  # slot 0: row blocks 0, 1; slot 1: row blocks 1, 2
    assert h.on(a_ready.view(1, -1), 1)[0].tolist() == [0] * 6  # nothing written on the peer
    assert torch.equal(h.on(ag, 1)[12:], torch.zeros(12, K))


def _column_setup(world: int, m: int, k: int, blk_m: int) -> tuple:
    """The ranks' heaps (the gathered A and the ready words), every rank's column schedule as the op splits it (the
    own slot on the main stream before the GEMM, the peers' slots on the copy stream), and what the schedules read
    from (each rank's rows of A, FILL, the source of the peers' words), which must outlive them: they hold raw
    addresses. A step writes its rows, its epoch into FILL and the words' source (_column_step) before running them."""
    h = TwoHeaps(2 * m * k * 4 + (1 << 16), ranks=world)
    ag = h.tensor(m, k, torch.float32, stride=k + 8)  # rows with a pitch past K, as the op's padded rows
    n_rb, n_kc = -(-m // blk_m), a_chunks(k)
    a_ready = h.tensor(1, world * n_rb * n_kc, torch.int32)[0]
    fill = torch.zeros(n_rb * n_kc, dtype=torch.int32)
    pattern = column_word_pattern(m, k, blk_m, world)
    words = torch.zeros_like(pattern)
    rows = [torch.zeros(m // world, k) for _ in range(world)]
    mine = [(h.on(ag, r), h.on(a_ready.view(1, -1), r)[0]) for r in range(world)]  # each rank's own heap's tensors
    own = [gather_a_own_ops(rows[r], *mine[r], fill, blk_m, world) for r in range(world)]
    side = [gather_a_column_ops(rows[r], *mine[r], words, blk_m, h.peers(r), world) for r in range(world)]
    return h, ag, a_ready, own, side, (rows, fill, column_words_action(pattern, fill, words), words)


def _column_step(sources: tuple, world: int, m: int, k: int, epoch: int) -> torch.Tensor:
    """A step's inputs: new rows of A on every rank, FILL = the step's epoch (ce_start's), then the peers' words'
    source from it (the main stream's action after ce_start); returns the whole A."""
    rows, fill, column_words, _words = sources
    whole = torch.randn(m, k)
    for r in range(world):
        rows[r].copy_(whole[r * (m // world):(r + 1) * (m // world)])
    fill.fill_(epoch)
    column_words()
    return whole


def _gemm_reads(m: int, k: int, blk_m: int, world: int) -> list[tuple[int, int, int]]:
    """(slot, row block, chunk) of every ready word the GEMM waits for, by stream_k.kernel._wait_a_rows's arithmetic:
    row block pid_m waits for every slot its rows overlap, every chunk of columns."""
    a_rows, n_rb, n_kc = m // world, -(-m // blk_m), a_chunks(k)
    return [(slot, pid_m, kc) for pid_m in range(n_rb)
            for slot in range(pid_m * blk_m // a_rows, (min(m, pid_m * blk_m + blk_m) - 1) // a_rows + 1)
            for kc in range(n_kc)]


def _landed(h: TwoHeaps, ag: torch.Tensor, whole: torch.Tensor, world: int, blk_m: int, d: int, slot: int, rb: int,
            kc: int) -> bool:
    """Whether rank d's gathered A holds, in slot `slot`, row block rb, chunk kc, rank (d + slot)'s rows of `whole`."""
    m, k = whole.shape
    a_rows, chunk = m // world, a_chunk_cols(k)
    lo, hi = max(rb * blk_m, slot * a_rows), min(rb * blk_m + blk_m, (slot + 1) * a_rows)
    src = ((d + slot) % world) * a_rows - slot * a_rows
    cols = slice(kc * chunk, min(k, kc * chunk + chunk))
    assert lo < hi, (d, slot, rb)  # no word of a row block outside the slot
    return torch.equal(h.on(ag, d)[lo:hi, cols], whole[src + lo:src + hi, cols])


def _landed_where_ready(h: TwoHeaps, ag: torch.Tensor, a_ready: torch.Tensor, whole: torch.Tensor, world: int,
                        blk_m: int, epoch: int) -> int:
    """Check that on every rank each ready word at `epoch` has its rows and columns in place (slot j of rank d:
    rank (d + j)'s rows); returns how many words are set."""
    m, k = whole.shape
    n_rb, n_kc = -(-m // blk_m), a_chunks(k)
    done = 0
    for d in range(world):
        words = h.on(a_ready.view(1, -1), d)[0].view(world, n_rb, n_kc)
        for slot, rb, kc in (words == epoch).nonzero().tolist():
            assert _landed(h, ag, whole, world, blk_m, d, slot, rb, kc), (d, slot, rb, kc)
            done += 1
    return done


@pytest.mark.parametrize("world,m,blk_m", [(2, 24, 8), (4, 48, 16), (4, 64, 16)])
def test_gather_a_in_columns_fills_every_slot_and_its_ready_words_after_the_rows(world: int, m: int,
                                                                                 blk_m: int) -> None:
    """STREAMK_PGAS_CE_A_COLUMNS=1's schedule on every rank (the own slot, then the peers' slots), run one operation
    after another: after each, every ready word already set has its rows and columns in place on its rank (words
    after their copy); at the end every slot is filled on the right rank and exactly the words the GEMM reads hold
    the epoch. K = 9000: 9 chunks of columns, 3 wait segments (the last one ragged); M/W not a multiple of the row
    blocks in the first two cases."""
    k, epoch = 9000, 7
    h, ag, a_ready, own, side, sources = _column_setup(world, m, k, blk_m)
    whole = _column_step(sources, world, m, k, epoch)
    segments = -(-k // a_segment_cols(k))
    assert segments == 3 and a_chunks(k) == 9
    for r in range(world):  # the own slot: its rows, its words; each peer's: rows then words per segment
        assert [type(op).__name__ for op in own[r]] == ["Copy2D"] * 2
        assert [type(op).__name__ for op in side[r]] == ["Copy2D"] * 2 * (world - 1) * segments
        assert all(op.rows == 1 and op.dst_pitch == op.src_pitch == op.width for op in side[r][1::2])  # contiguous
    ops = [own[r] + side[r] for r in range(world)]
    seen = 0
    for step in zip(*ops, strict=True):  # the ranks' schedules interleaved, operation by operation
        for op in step:
            run([op])
        seen = max(seen, _landed_where_ready(h, ag, a_ready, whole, world, blk_m, epoch))
    a_rows, n_rb, n_kc = m // world, -(-m // blk_m), a_chunks(k)
    reads = _gemm_reads(m, k, blk_m, world)
    assert seen == world * len(reads)  # every rank: each slot's row blocks, every chunk
    for d in range(world):
        words = h.on(a_ready.view(1, -1), d)[0].view(world, n_rb, n_kc)
        assert sorted(map(tuple, (words == epoch).nonzero().tolist())) == sorted(reads)
        assert int((words != epoch).sum()) == int((words == 0).sum())  # the others never written
        rotated = torch.cat([whole[((d + j) % world) * a_rows:((d + j) % world + 1) * a_rows] for j in range(world)])
        assert torch.equal(h.on(ag, d), rotated)


def test_column_word_pattern_marks_the_chunks_of_the_segments_landed() -> None:
    """K = 9000: 9 chunks of 1024 columns, wait segments of 4096 (chunks 0-3, 4-7, 8); M/W = 12 rows over row blocks
    of 16: a slot overlaps at most 2 of them."""
    pattern = column_word_pattern(48, 9000, 16, 4)
    assert pattern.dtype == torch.int32 and tuple(pattern.shape) == (3, 2 * 9)
    for g, end in enumerate((4, 8, 9)):
        assert pattern[g].tolist() == ([1] * end + [0] * (9 - end)) * 2


def test_gather_a_in_columns_copy_stream_copies_only_to_peers() -> None:
    """The column schedule's split: the copy stream (beside the GEMM) holds only copies whose destination is a
    peer's heap, and the own slot's two copies (rows, words) stay in this rank's heap, on the main stream before
    the GEMM (on 4 x H100, with the own slot's 2-D copies on the copy stream beside the segmented GEMM, every timed
    step's GEMM waited out its timeout for rows of A, first those of the own slot: CHANGELOG)."""
    world, m, k, blk_m = 4, 48, 9000, 16
    h, _ag, _a_ready, own, side, _sources = _column_setup(world, m, k, blk_m)
    for r in range(world):
        base, size = h.heaps[r].data_ptr(), h.heaps[r].numel()
        for op in side[r]:
            assert isinstance(op, Copy2D) and not base <= op.dst < base + size, (r, op)
            assert any(p != r and h.heaps[p].data_ptr() <= op.dst < h.heaps[p].data_ptr() + size
                       for p in range(world)), (r, op)
        assert all(base <= op.dst < base + size for op in own[r])


@pytest.mark.parametrize("world,m,blk_m", [(4, 48, 16), (4, 64, 16)])
def test_gather_a_in_columns_back_to_back_steps_words_only_after_their_rows(world: int, m: int, blk_m: int) -> None:
    """Four steps back to back (epochs 1..4, new rows of A each step, FILL rewritten as ce_start does), the ranks'
    copy streams each in a thread of the host engine while this thread plays every rank's GEMM: it polls each ready
    word the GEMM reads, which must hold the last step's epoch or 0 (a later segment's word, not landed) until it
    reaches this step's, and then the word's rows and columns must hold this step's rows. Every word the GEMM reads
    reaches the epoch."""
    k = 9000
    h, ag, a_ready, own, side, sources = _column_setup(world, m, k, blk_m)
    n_rb, n_kc = -(-m // blk_m), a_chunks(k)
    reads = _gemm_reads(m, k, blk_m, world)
    words = [h.on(a_ready.view(1, -1), d)[0].view(world, n_rb, n_kc) for d in range(world)]
    for epoch in range(1, 5):
        whole = _column_step(sources, world, m, k, epoch)
        for r in range(world):
            run(own[r])  # the main stream: after ce_start, before the GEMM
        failed: list[BaseException] = []

        def copy_stream(ops: list, failed: list[BaseException] = failed) -> None:
            try:
                run(ops, timeout_s=10.0)
            except BaseException as exc:  # raised below, in the test's thread
                failed.append(exc)

        threads = [threading.Thread(target=copy_stream, args=(side[r],), daemon=True) for r in range(world)]
        for t in threads:
            t.start()
        waiting = {(d, *w) for d in range(world) for w in reads}
        deadline = time.monotonic() + 30
        while waiting and not failed:
            for d, slot, rb, kc in sorted(waiting):
                seen = int(words[d][slot, rb, kc])
                assert seen in (0, epoch - 1, epoch), (epoch, d, slot, rb, kc, seen)  # never stale, never ahead
                if seen == epoch:
                    assert _landed(h, ag, whole, world, blk_m, d, slot, rb, kc), (epoch, d, slot, rb, kc)
                    waiting.discard((d, slot, rb, kc))
            assert time.monotonic() < deadline, f"step {epoch}: words never set: {sorted(waiting)[:8]}"
        for t in threads:
            t.join()
        if failed:
            raise failed[0]


def _inside(addr: int, *tensors: torch.Tensor) -> bool:
    """Whether `addr` lies in one of `tensors`' storage spans (this rank's buffers)."""
    return any(t.data_ptr() <= addr < t.data_ptr() + ((t.shape[0] - 1) * t.stride(0) + t.shape[-1]) * t.element_size()
               for t in (x.view(x.shape[0], -1) for x in tensors))


@pytest.mark.parametrize("columns", [True, False])
def test_all_gather_gemm_copy_engine_step_queues_the_own_slot_before_the_gemm_in_columns(
        columns: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The op's step on rank 1 of 4 (built for an H100, not run). In either layout (STREAMK_PGAS_CE_A_COLUMNS=1:
    columns) the main stream queues ce_start, then the own slot (its ready words from FILL; its rows too where the
    A is a caller's: the op's own A is slot 0 already), then the GEMM; every copy of the copy stream lands on a peer.
    In columns the source of the peers' words comes after the own slot, and each words copy is one contiguous row."""
    from streamk_pgas import spec
    from streamk_pgas.overlap.listing import op_for
    from streamk_pgas.overlap.step import StepLaunches

    monkeypatch.delenv(CE_PULL_ENV, raising=False)
    monkeypatch.setenv(CE_A_COLUMNS_ENV, "1" if columns else "0")
    op = op_for("all_gather_gemm", "copy_engine", 256, 512, 9000, "bf16", spec.known_target("h100"), world_size=4,
                rank=1)
    bufs = op.buffers
    assert op.parts.a_in_columns() == columns
    step: StepLaunches = op.mode.build(op.parts, "step", bufs.a, bufs.b)
    assert step.side_first and [name for name, _ in step.main] == ["gemm"]
    assert step.pre[0].name == "ce_start_kernel"
    copies = [op_ for op_ in step.side.ops if isinstance(op_, Copy2D)]
    user_a = bufs.a.clone()
    user_step: StepLaunches = op.mode.build(op.parts, "step", user_a, bufs.b)
    user_copies = [op_ for op_ in user_step.side.ops if isinstance(op_, Copy2D)]
    assert len(step.pre) == len(user_step.pre) == (3 if columns else 2)
    assert isinstance(step.pre[1], CopySchedule) and isinstance(user_step.pre[1], CopySchedule)
    (words,) = step.pre[1].ops  # the own A is slot 0: its words only
    rows, user_words = user_step.pre[1].ops
    assert rows.dst == bufs.ag.data_ptr() and rows.src == user_a.data_ptr() and rows.rows == bufs.a.shape[0]
    assert words.dst == user_words.dst == bufs.a_ready.data_ptr() and words.src == bufs.fill.data_ptr()
    for schedule in (copies, user_copies):  # copies to peers only
        assert not any(_inside(c.dst, bufs.ag, bufs.a_ready, bufs.fill) for c in schedule)
    if not columns:
        assert len(copies) == 2 * 3  # three peers' slots of 64 rows, one chunk each: rows + words
        return
    assert callable(step.pre[2])
    assert len(copies) == 2 * 3 * -(-9000 // a_segment_cols(9000))  # three peers' slots, rows + words a segment
    source = op.parts.column_words()[1]
    assert all(c.rows == 1 and _inside(c.src, source) for c in copies[1::2])  # the words: one contiguous row each
    kinds = [launch.name for launch in step.kernels()]  # no kernel added: the own slot is copies only
    assert kinds == ["ce_start_kernel", "ce_finish_kernel", "overlap_kernel"], kinds


def test_gather_a_in_columns_where_pushed_k_has_segments_w_is_4_or_more_and_a_slot_is_large(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns where K has several wait segments, W >= 4 and a slot of A would go in more than one row copy
    (gather_chunk_count); STREAMK_PGAS_CE_A_COLUMNS=0 keeps the rows, =1 takes the columns at any slot size."""
    monkeypatch.delenv(CE_A_COLUMNS_ENV, raising=False)
    monkeypatch.delenv(CE_PULL_ENV, raising=False)
    assert gathers_a_in_columns(4096, 28672, 4, 2) and gathers_a_in_columns(8192, 9000, 8, 2)  # 56 MiB, 18 MB slots
    assert not gathers_a_in_columns(4096, 28672, 2, 2)  # two ranks: the own slot, half of A, would wait before the GEMM
    # the slot's size decides at W = 4 (bf16): one row copy below 2 * GATHER_CHUNK_MIN_BYTES
    for m, k in ((128, 8192), (512, 8192), (1024, 8192), (512, 28672)):
        assert gather_chunk_count(m // 4 * k * 2) == 1 and not gathers_a_in_columns(m, k, 4, 2), (m, k)
    for m, k in ((2048, 8192), (2048, 14336), (4864, 8256), (8192, 8192)):
        assert gather_chunk_count(m // 4 * k * 2) > 1 and gathers_a_in_columns(m, k, 4, 2), (m, k)
    assert gathers_a_in_columns(1024, 8192, 4, 4)  # fp32: the same rows carry twice the bytes
    # the copies of one slot the schedule makes (and the planner counts): one row copy, row chunks, or segments
    assert gather_copies_per_slot(512, 8192, 4, 2) == 1
    assert gather_copies_per_slot(16384, 1024, 4, 2) == 2  # one wait segment: 8 MiB slots in two row chunks
    assert gather_copies_per_slot(8192, 8192, 4, 2) == -(-8192 // a_segment_cols(8192))
    monkeypatch.setenv(CE_A_COLUMNS_ENV, "0")
    assert not gathers_a_in_columns(4096, 28672, 4, 2)
    monkeypatch.setenv(CE_A_COLUMNS_ENV, "1")
    assert gathers_a_in_columns(4096, 28672, 4, 2) and gathers_a_in_columns(128, 8192, 4, 2)  # any slot size
    assert not gathers_a_in_columns(4096, 28672, 2, 2)
    assert not gathers_a_in_columns(4096, 2100, 4, 2)  # one wait segment: the row chunks
    monkeypatch.setenv(CE_PULL_ENV, "1")
    assert not gathers_a_in_columns(4096, 28672, 4, 2)  # pulled: the pull schedule
    monkeypatch.setenv(CE_A_COLUMNS_ENV, "columns")
    with pytest.raises(ConfigError, match=CE_A_COLUMNS_ENV):
        gathers_a_in_columns(4096, 28672, 4, 2)


def test_host_wait_gives_up_with_an_error() -> None:
    word = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(TimeoutError, match="stayed at 0 < 3"):
        run([WaitGeq(word.data_ptr(), 3)], timeout_s=0.05)


def test_rows_copy_and_zero() -> None:
    src = torch.arange(24, dtype=torch.float32).view(4, 6)
    dst = torch.zeros(4, 8)[:, 1:7]
    op = rows_copy(dst, src)
    assert (op.width, op.rows, op.src_pitch, op.dst_pitch) == (24, 4, 24, 32)
    words = torch.ones(4, dtype=torch.int32)
    run([op, Zero32(words[1:].data_ptr(), 2)])
    assert torch.equal(dst, src) and words.tolist() == [1, 0, 0, 1]
    sched = CopySchedule([op, op, Copy2D(0, 1, 0, 1, 0, 0)], HostEngine(1.0))
    assert sched.counts() == {"Copy2D": 3} and sched.fast

"""gemm_reduce_scatter's copy_engine where the GEMM's epilogue sums this rank's own rows (overlap.algorithms.
gemm_reduce_scatter.sum_own_rows_epilogue): the bands it needs, when the op may do it (overlap.copy_steps.
sums_own_rows), the ready words its schedule copies, and the epilogue itself on one tile under the interpreter (or
a GPU). The whole step runs on GPUs (tests/test_new_algorithms.py): on the CPU backend the host engine copies only
after the kernels have run, so the op keeps the sum after the copies there."""

from __future__ import annotations

import itertools
import time

import pytest
import torch
import triton
import triton.language as tl

from streamk_pgas.iris_ops.context import device_context
from streamk_pgas.iris_ops.device import ERR_PEER_ROWS, ERROR_KIND_SCALE, ERROR_WORDS, TIMER_LOGICAL, decode_error
from streamk_pgas.iris_ops.env import interpreted
from streamk_pgas.iris_ops.errors import ConfigError
from streamk_pgas.overlap.algorithms.gemm_reduce_scatter import sum_own_rows_epilogue
from streamk_pgas.overlap.bands import row_bands, rows_within_owners
from streamk_pgas.overlap.communication.copy_engine import (
    Copy2D,
    CopySchedule,
    HostEngine,
    Launch,
    WaitGeq,
    band_counts,
)
from streamk_pgas.overlap.copy_steps import CE_OWN_ROWS_ENV, Peers, programs_run, reduce_rows_ops, sums_own_rows
from streamk_pgas.overlap.kernel_args import OwnRows
from streamk_pgas.spec.target import known_target
from streamk_pgas.stream_k.plan import plan_streamk
from streamk_pgas.stream_k.tiles import tile_coords_host

INTERPRET = interpreted()
DEVICE = "cpu" if INTERPRET else "cuda"
needs_kernels = pytest.mark.skipif(not (INTERPRET or torch.cuda.is_available()),
                                   reason="needs a GPU or TRITON_INTERPRET=1")


@pytest.mark.parametrize("m,blk_m,world", [(256, 16, 4), (512, 64, 4), (96, 16, 2), (1024, 128, 8)])
def test_reduce_rows_bands_never_hold_two_owners_rows(m: int, blk_m: int, world: int) -> None:
    assert rows_within_owners(m, blk_m, world)
    cut = row_bands("reduce_rows", m, blk_m, world)
    per = m // world // blk_m
    assert cut[0][0] == 0 and cut[-1][1] == m // blk_m
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cut))
    assert all(lo // per == (hi - 1) // per for lo, hi in cut)


def test_reduce_rows_bands_where_tile_rows_straddle_owners() -> None:
    assert not rows_within_owners(1000, 64, 4)
    cut = row_bands("reduce_rows", 1000, 64, 4)
    assert cut[0][0] == 0 and cut[-1][1] == 16 and len(cut) == 16


def _plan(m: int, n: int, k: int, programs: int, **kw) -> object:
    return plan_streamk(m, n, k, 64, 64, 32, programs, **kw)


def _own_last_in_every_program(plan, world: int) -> bool:
    first_own = plan.tiles_m - plan.tiles_m // world
    for pid in range(plan.num_programs):
        own = [tile_coords_host(x.tile_id, plan.tiles_m, plan.tiles_n, plan.gsize_m)[0] >= first_own
               for x in plan.work_items(pid)]
        if own != sorted(own):
            return False
    return True


def test_sums_own_rows_only_where_no_program_waits_before_a_peers_tile() -> None:
    # data-parallel tiles in order: each program's own tiles come last
    plan = _plan(512, 256, 128, 8, gsize_m=2, schedule="dp")
    assert sums_own_rows(plan, 4, programs_run="at_once") and _own_last_in_every_program(plan, 4)
    assert not sums_own_rows(plan, 4, programs_run=None)  # the copies follow the kernels
    # the interpreter runs the programs one after another: program 0's own tiles come before program 1's others
    assert not sums_own_rows(plan, 4, programs_run="in_order")
    one_each = _plan(256, 64, 128, 4, gsize_m=1, schedule="dp")  # a tile row per program, in order
    assert sums_own_rows(one_each, 4, programs_run="in_order")
    assert not sums_own_rows(plan, 1, programs_run="at_once")
    # a tile-order group taller than a rank's rows mixes own and peer tiles
    tall = _plan(512, 256, 128, 5, gsize_m=8, schedule="dp")
    assert not sums_own_rows(tall, 4, programs_run="at_once") and not _own_last_in_every_program(tall, 4)
    # tile rows that straddle two ranks' rows
    assert not sums_own_rows(_plan(480, 256, 128, 8, gsize_m=2, schedule="dp"), 4, programs_run="at_once")
    # the Stream-K share (the last tiles: own rows) run first
    first = _plan(512, 256, 128, 12, gsize_m=2, schedule="hybrid", sk_first=True)
    assert first.sk_tiles > 0
    assert sums_own_rows(first, 4, programs_run="at_once") == _own_last_in_every_program(first, 4)
    assert not sums_own_rows(first, 4, programs_run="at_once")


@pytest.mark.parametrize("m,programs,gsize_m,schedule,sk_first", [
    (512, 12, 2, "hybrid", False), (1024, 12, 2, "hybrid", False), (1024, 7, 4, "dp", False),
    (1024, 12, 4, "hybrid", True), (2048, 20, 8, "hybrid", False), (256, 3, 1, "sk", False)])
def test_sums_own_rows_is_the_order_of_every_programs_work(m: int, programs: int, gsize_m: int, schedule: str,
                                                            sk_first: bool) -> None:
    plan = _plan(m, 256, 256, programs, gsize_m=gsize_m, schedule=schedule, sk_first=sk_first)
    assert sums_own_rows(plan, 4, programs_run="at_once") == _own_last_in_every_program(plan, 4)


def test_programs_run_by_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter sums the own rows where the order allows; a GPU only with STREAMK_PGAS_CE_OWN_ROWS=1."""
    monkeypatch.delenv(CE_OWN_ROWS_ENV, raising=False)
    assert programs_run(known_target("interpreter")) == "in_order"
    assert programs_run(known_target("h100")) is None
    assert programs_run(known_target("mi300x")) is None
    monkeypatch.setenv(CE_OWN_ROWS_ENV, "1")
    assert programs_run(known_target("h100")) == "at_once"
    monkeypatch.setenv(CE_OWN_ROWS_ENV, "yes please")
    with pytest.raises(ConfigError, match=CE_OWN_ROWS_ENV):
        programs_run(known_target("h100"))


def test_reduce_rows_copies_ready_words_after_each_band() -> None:
    """Rank 1 of 2 sends rank 0 its rows band by band, each band followed by rank 0's ROWS_READY words of rank 1 for
    the band's tile rows, copied from FILL (the step's epoch)."""
    m, n, blk_m, world, rank, epoch = 64, 8, 8, 2, 1, 7
    heaps = [torch.zeros(1 << 14, dtype=torch.uint8) for _ in range(world)]
    peers = Peers([h.data_ptr() for h in heaps], rank)
    off = 0

    def on(rank_: int, nbytes: int, dtype: torch.dtype) -> torch.Tensor:
        nonlocal off
        t = heaps[rank_][off:off + nbytes].view(dtype)
        return t

    partial = on(rank, m * n * 4, torch.float32).view(m, n)
    partial.copy_(torch.randn(m, n))
    off += m * n * 4
    recv = on(rank, m * n * 4, torch.float32).view(world, m // world, n)
    recv_peer = on(0, m * n * 4, torch.float32).view(world, m // world, n)
    off += m * n * 4
    n_rb = m // blk_m
    rows_ready = on(rank, world * n_rb * 4, torch.int32)
    ready_peer = on(0, world * n_rb * 4, torch.int32)
    fill = torch.full((n_rb,), epoch, dtype=torch.int32)
    cut = row_bands("reduce_rows", m, blk_m, world)
    counts = torch.tensor(band_counts(cut, n_rb, 2 * n_rb), dtype=torch.int32)
    counts[n_rb:n_rb + len(cut)] = torch.tensor([(hi - lo) for lo, hi in cut], dtype=torch.int32)
    ops = reduce_rows_ops(partial, recv, counts, 1, blk_m, peers, world, rows_ready=rows_ready, fill=fill)
    copies = [op for op in ops if isinstance(op, Copy2D)]
    assert len(copies) == 2 * sum(1 for lo, _ in cut if lo < n_rb // world)  # rows, then their words
    CopySchedule(ops, HostEngine(1.0))()
    assert torch.equal(recv_peer[rank], partial[:m // world])
    assert ready_peer.view(world, n_rb)[rank, :n_rb // world].tolist() == [epoch] * (n_rb // world)
    assert ready_peer.view(world, n_rb)[rank, n_rb // world:].tolist() == [0] * (n_rb // world)
    assert ready_peer.view(world, n_rb)[0].tolist() == [0] * n_rb


def test_run_beside_copies_while_main_runs_and_raises_after_both() -> None:
    """The host engine's copies in a thread beside `main`: a copy that waits for a word `main` sets lands while main
    runs; the schedule's launches run after both; a copy that gives up raises here once main has ended."""
    word = torch.zeros(1, dtype=torch.int32)
    src, dst = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    order: list[str] = []

    class Probe:
        def __call__(self, stream: object = None) -> None:
            order.append("launch")

    ops = [WaitGeq(word.data_ptr(), 1), Copy2D(dst.data_ptr(), 32, src.data_ptr(), 32, 32, 1), Launch(Probe())]
    schedule = CopySchedule(ops, HostEngine(5.0), beside=True)

    def main() -> None:
        order.append("main")
        word[0] = 1  # what the GEMM's count would be
        deadline = time.monotonic() + 5
        while not torch.equal(dst, src) and time.monotonic() < deadline:
            time.sleep(1e-3)
        order.append("copied" if torch.equal(dst, src) else "not copied")

    schedule.run_beside(main)
    assert order == ["main", "copied", "launch"]
    never = torch.zeros(1, dtype=torch.int32)  # a count nothing sets
    stuck = CopySchedule([WaitGeq(never.data_ptr(), 1), Launch(Probe())], HostEngine(0.2), beside=True)
    ran: list[str] = []
    with pytest.raises(TimeoutError, match="stayed at 0"):
        stuck.run_beside(lambda: ran.append("main"))
    assert ran == ["main"] and order.count("launch") == 1  # no launch after a copy gave up


@triton.jit
def _one_tile(ACC, C, stride_cm, TILE_FLAGS, CTX, row0, tile_id, epoch, M, N,
              BLK_M: tl.constexpr, BLK_N: tl.constexpr):
    rows = tl.arange(0, BLK_M)
    rn = tl.arange(0, BLK_N)
    acc = tl.load(ACC + rows[:, None] * BLK_N + rn[None, :])
    sum_own_rows_epilogue(acc, row0 + rows, rn, row0, M, N, C, stride_cm, 1, tile_id, TILE_FLAGS, epoch, CTX)


class OneTile:
    """One rank (`rank` of `world`) of an M x N partial, one tile row per rank, with its RECV slots filled."""

    def __init__(self, world: int = 4, rank: int = 2, blk_m: int = 64, blk_n: int = 256, n: int = 200,
                 dtype: torch.dtype = torch.float16) -> None:
        g = torch.Generator().manual_seed(3)
        self.world, self.rank, self.blk_m, self.blk_n, self.n = world, rank, blk_m, blk_n, n
        self.m = world * blk_m
        self.c = torch.zeros(self.m, blk_n, dtype=dtype, device=DEVICE)
        self.recv = (torch.randn(world, blk_m, blk_n, generator=g) * 4).to(dtype).to(DEVICE)
        self.out = torch.full((blk_m, blk_n), float("nan"), dtype=dtype, device=DEVICE)
        self.n_rb = world
        cut = row_bands("reduce_rows", self.m, blk_m, world)
        self.counts = torch.tensor(band_counts(cut, self.n_rb, 2 * self.n_rb), dtype=torch.int32, device=DEVICE)
        self.ready = torch.zeros(world * self.n_rb, dtype=torch.int32, device=DEVICE)
        self.errors = torch.zeros(ERROR_WORDS, dtype=torch.int32, device=DEVICE)
        self.acc = torch.randn(blk_m, blk_n, generator=g).to(DEVICE)

    def run(self, pid_m: int, epoch: int, max_spins: int = 1 << 20) -> None:
        flags = OwnRows(self.counts, self.recv, self.out, self.ready, self.recv.stride(0), self.recv.stride(1),
                        self.out.stride(0))
        ctx = device_context(torch.zeros(self.world, dtype=torch.int64, device=DEVICE), self.rank, self.world,
                             self.errors, torch.zeros(1, dtype=torch.int64, device=DEVICE), max_spins, TIMER_LOGICAL,
                             world_constexpr=True)
        _one_tile[(1,)](self.acc, self.c, self.c.stride(0), flags, ctx, pid_m * self.blk_m, pid_m, epoch, self.m,
                        self.n, BLK_M=self.blk_m, BLK_N=self.blk_n)

    def want(self) -> torch.Tensor:
        """The rank-order sum of the slots in fp32, the own slot the stored partial, rounded once."""
        own = self.c[self.rank * self.blk_m:(self.rank + 1) * self.blk_m]
        slots = [own if s == self.rank else self.recv[s] for s in range(self.world)]
        acc = slots[0].float()
        for x in slots[1:]:
            acc = acc + x.float()
        return acc.to(self.c.dtype)


@needs_kernels
def test_own_rows_epilogue_sums_the_slots_in_rank_order() -> None:
    t = OneTile()
    epoch = 5
    t.ready.view(t.world, t.n_rb)[:, t.rank] = epoch  # every peer's copy of the own tile row has landed
    band_word = int(t.counts[t.rank])
    t.run(t.rank, epoch)
    n = t.n
    assert torch.equal(t.c[t.rank * t.blk_m:(t.rank + 1) * t.blk_m, :n], t.acc[:, :n].to(t.c.dtype))
    assert torch.equal(t.out[:, :n], t.want()[:, :n])
    assert torch.isnan(t.out[:, n:].float()).all()  # past N: nothing stored
    assert int(t.counts[band_word]) == 1 and t.errors.tolist() == [0, 0]
    # a tile of a peer's rows: stored and counted, nothing summed
    before = t.out.clone()
    t.run(0, epoch)
    assert torch.equal(t.c[:t.blk_m, :n], t.acc[:, :n].to(t.c.dtype))
    assert torch.equal(t.out[:, :n], before[:, :n]) and int(t.counts[int(t.counts[0])]) == 1


@needs_kernels
def test_own_rows_epilogue_wait_gives_up_with_an_error() -> None:
    t = OneTile(world=2, rank=1, blk_m=16, blk_n=32, n=32)
    epoch = 3
    t.ready.view(t.world, t.n_rb)[0, t.rank] = epoch - 1  # the peer's copy of the previous step only
    t.run(t.rank, epoch, max_spins=50)
    code = int(t.errors[0])
    assert code // ERROR_KIND_SCALE == ERR_PEER_ROWS and "peer's copy" in decode_error(code)

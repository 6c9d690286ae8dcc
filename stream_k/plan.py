"""Stream-K work split (host side): which program computes which MAC-loop iterations of which tile.

Vocabulary. The output C (M x N) is cut into `num_tiles` tiles of BLK_M x BLK_N, numbered in the
grouped order of the Triton matmul tutorial (`tile_coords`). Each tile needs `iters_per_tile =
ceil(K / BLK_K)` MAC-loop iterations. Tiles `0 .. dp_tiles-1` are data-parallel (DP): program p
computes tiles p, p + P, p + 2P, ... whole. The last `sk_tiles` tiles are Stream-K (SK): their
`sk_iters_total = sk_tiles * iters_per_tile` iterations, laid end to end (tile after tile, each
tile's K iterations consecutive), are cut into `num_programs` contiguous ranges that differ by at
most one iteration (the first `rem` programs get one more).

Rounds (`sk_rounds` R >= 1). Every program ends on a piece of a tile that completes at the very
end, so as many tiles complete together at the GEMM's end as there are distinct tiles among the
programs' last pieces: about one per program with a single Stream-K round. With R >= 2 the last
round is *aligned*: L = min(num_programs // S, sk_tiles) tiles with S = 2^(R-1), each cut into S
pieces of K iterations, one piece per program (pid -> tile pid // S, piece pid % S), so only L tiles
complete at the end and each program adds a single work item for it. The other SK tiles run first,
in R - 1 rounds of halving size (`round_bounds`), each split evenly as above. Communication that
waits for finished tiles then has a shorter tail after the GEMM (the point of rounds in overlap/;
the GEMM alone gains nothing from them).

A tile whose iterations fall into several programs' ranges is *split*; each program's share of it is a
*piece*. Every piece is stored as a partial accumulator in the workspace, slot `(round * num_programs + pid) * 2
+ side` (side 0: the piece holds the start of the program's range in that round; side 1: its end; a range meets
at most two split tiles of a round, at its two ends), and counted on the tile's arrival counter. The program
whose piece arrives last sums all of the tile's pieces, in the order of their programs, and stores the tile: no
program waits for another, and the result does not depend on which one arrives last.

Each program walks its DP tiles first, then its SK tiles round by round, in *reverse* tile order inside a round
(with `sk_first`, its SK tiles first and its DP tiles after).

`StreamKPlan.work_items` is the pure-Python mirror of the kernel's loop; tests check it covers every
iteration exactly once.

Split-K (`schedule="splitk"`, the stand-alone GEMM's only: the op's kernels do not run it): for outputs of
fewer tiles than half the programs, every tile is cut along K into `split_k` = S pieces of equal K steps, and
program p computes piece p % S of tile p // S, so num_programs = tiles * S (at most the programs asked for) and
each program runs one K loop, in one tile (no range across two tiles, so one pipeline fill). Its fix-up is the
one above: each piece stored in slot p, counted, the last to arrive sums the tile's S pieces in order.

A tile whose width is not a power of two (stream_k.tiles.width_parts: 3 or 5 times one, e.g. 320 or 160) is
planned data-parallel only: such widths exist so that a shape's tiles fill whole waves of programs.

Which schedule (`schedule="auto"`: the default of StreamKGemm.create and matmul; the op's planner ranks the same
two): the cheaper by `cost_iters` of "dp" and "hybrid" with a Stream-K share of the leftover tiles only
(`two_tiles=False`). The cost is the critical path in MAC iterations (`max_iters_per_program`), plus the fix-up
(a fixed cost for each round that splits tiles, and a cost per piece that the last arriver of the round's most
split tile reads),
plus a surcharge on each program's Stream-K iterations beyond one tile's worth: while every program works on
another tile at another K offset, L2 reuse collapses. Measured on one H200 (bf16, 128 x 256 x 64 tiles, 132
programs, 18 shards of the model grid, tools.gemm_sweep, results/README.md "The GEMM's Stream-K
schedule chosen by the shape"): the fix-up costs
about FIXUP_ITERS + FIXUP_PARTIAL_ITERS * partials iterations (~15 us + ~3 us per partial), FIXUP_ROUND_ITERS
more for each further round; all-Stream-K plans took 1.06-1.78x (median 1.5x) the time of data-parallel ones
(SK_SURCHARGE). So DP wins when the last wave is nearly full or the leftover tiles are few (each split over many
programs), the one-tile hybrid when the last wave is far from full; the two-tile hybrid of Osama et al. was
never faster than the better of those two by more than its spread, and 6-17% slower with long tiles (K / BLK_K
>= 224), so "auto" does not choose it (it stays available as schedule="hybrid", two_tiles=True).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from streamk_pgas.spec.schedules import GEMM_ONLY_SCHEDULES, GEMM_SCHEDULE_CHOICES
from streamk_pgas.spec.schedules import SCHEDULES as OP_SCHEDULES
from streamk_pgas.stream_k.tiles import tile_coords_host as tile_coords  # noqa: F401  (re-exported)
from streamk_pgas.stream_k.tiles import width_parts

SCHEDULES = (*OP_SCHEDULES, *GEMM_ONLY_SCHEDULES)  # spec.schedules: "splitk" is the stand-alone GEMM's only
AUTO_SCHEDULE = "auto"  # plan_streamk picks dp or the one-tile hybrid by cost_iters
SCHEDULE_CHOICES = GEMM_SCHEDULE_CHOICES  # what a caller may ask plan_streamk for
# The fix-up's cost in MAC iterations of a 128 x 256 x 64 tile (module docstring); partials scale with the tile.
FIXUP_ITERS = 20.0
FIXUP_PARTIAL_ITERS = 4.0
FIXUP_ROUND_ITERS = 10.0  # each further round with split tiles (two rounds measured +6..+45 iterations, median ~10)
SK_SURCHARGE = 0.6  # extra cost of a Stream-K iteration past the first tile's worth of a program's share


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _check_block(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 16 or value & (value - 1):
        raise ValueError(f"{name} must be a power of two >= 16; got {value!r}")


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")


@dataclass(frozen=True)
class WorkItem:
    """One tile's share of one program's work: K iterations [k_lo, k_hi) of tile `tile_id`.

    role: "dp" (a whole tile, stored by this program) or "piece" (part of a split tile: stored in workspace slot
    `slot`; the last of the tile's pieces to arrive sums those of `programs`, in that order, and stores the tile).
    """

    tile_id: int
    k_lo: int
    k_hi: int
    role: str
    round: int = 0  # the SK round (0 for DP tiles)
    slot: int = -1  # a piece's workspace slot
    programs: tuple[int, ...] = ()  # a piece's tile: the programs holding its pieces, in the order they are summed


@dataclass(frozen=True)
class StreamKPlan:
    """The Stream-K split of one GEMM shape over `num_programs` programs (see the module docstring)."""

    M: int
    N: int
    K: int
    BLK_M: int
    BLK_N: int
    BLK_K: int
    num_programs: int
    gsize_m: int
    schedule: str
    two_tiles: bool
    tiles_m: int
    tiles_n: int
    num_tiles: int
    iters_per_tile: int
    even_k: bool
    sk_tiles: int
    dp_tiles: int
    sk_iters_total: int
    partials_shape: tuple[int, int, int]  # P: two BLK_M x BLK_N fp32/int32 slots per program and round
    locks_len: int  # LOCKS: one int32 arrival counter per tile
    # The Stream-K share first, then the DP waves: the memory-heavy fix-up runs before any tile is
    # ready to communicate, and the GEMM ends on compute-bound DP tiles. Tiles then complete SK first.
    sk_first: bool = False
    sk_rounds: int = 1
    split_k: int = 0  # schedule "splitk": pieces per tile (one program each); 0 otherwise

    # ---- the schedule, as the kernel computes it ------------------------------------------------

    def round_bounds(self) -> tuple[int, ...]:
        """b_0 = 0 <= ... <= b_R = sk_tiles: round r holds SK tiles [b_r, b_r+1) (counted from the
        first SK tile); see the module docstring. The kernel computes the same integers."""
        return round_bounds(self.sk_tiles, self.sk_rounds, self.num_programs)

    def aligned(self, r: int) -> bool:
        """Whether round r is the aligned last round (one piece of a tile per program)."""
        return self.sk_rounds > 1 and r == self.sk_rounds - 1

    @property
    def split(self) -> int:
        """S: pieces per tile in the aligned last round."""
        return 1 << (self.sk_rounds - 1)

    def round_split(self, r: int) -> tuple[int, int, int]:
        """Round r's first SK tile, iterations per program, and how many programs get one more
        (for the aligned round: its first SK tile, S and its tile count L)."""
        b = self.round_bounds()
        if self.aligned(r):
            return b[r], self.split, b[r + 1] - b[r]
        iters = (b[r + 1] - b[r]) * self.iters_per_tile
        return b[r], iters // self.num_programs, iters % self.num_programs

    def _piece(self, pid: int) -> tuple[int, int]:
        """[start, end) of pid's piece in the aligned round (round-local iterations)."""
        ipt, s = self.iters_per_tile, self.split
        t, j = divmod(pid, s)
        return t * ipt + j * ipt // s, t * ipt + (j + 1) * ipt // s

    def sk_range(self, pid: int, r: int = 0) -> tuple[int, int]:
        """[start, end) of program pid's share of round r's iterations (counted from the round's start)."""
        _, ipp, rem = self.round_split(r)
        if self.aligned(r):
            return self._piece(pid) if pid < rem * ipp else (0, 0)
        start = pid * ipp + min(pid, rem)
        return start, start + ipp + (1 if pid < rem else 0)

    def program_of(self, sk_iter: int, r: int = 0) -> int:
        """The program whose share of round r holds that round's iteration `sk_iter`."""
        _, ipp, rem = self.round_split(r)
        if self.aligned(r):
            t = sk_iter // self.iters_per_tile
            return next(q for q in range(t * ipp, t * ipp + ipp) if self._piece(q)[0] <= sk_iter < self._piece(q)[1])
        big = rem * (ipp + 1)
        if sk_iter < big:
            return sk_iter // (ipp + 1)
        return rem + (sk_iter - big) // max(ipp, 1)

    def round_of(self, tile_id: int) -> int:
        """The SK round of tile `tile_id` (an SK tile)."""
        ts = tile_id - self.dp_tiles
        b = self.round_bounds()
        return next(r for r in range(self.sk_rounds) if b[r] <= ts < b[r + 1])

    def split_piece(self, pid: int) -> tuple[int, int, int]:
        """Split-K: program pid's tile and its K steps [k_lo, k_hi)."""
        tile, j = divmod(pid, self.split_k)
        return tile, j * self.iters_per_tile // self.split_k, (j + 1) * self.iters_per_tile // self.split_k

    def piece_programs(self, tile_id: int) -> tuple[int, ...]:
        """The programs that hold a piece of tile `tile_id`, in the order the pieces are summed (a DP tile: the one
        program that computes it)."""
        if self.split_k:
            return tuple(range(tile_id * self.split_k, (tile_id + 1) * self.split_k))
        if tile_id < self.dp_tiles:
            return (tile_id % self.num_programs,)
        r = self.round_of(tile_id)
        ts = tile_id - self.dp_tiles - self.round_bounds()[r]
        ipt = self.iters_per_tile
        if self.aligned(r):  # a piece of no iterations (K steps < S) is no piece
            pieces = range(ts * self.split, (ts + 1) * self.split)
            return tuple(q for q in pieces if self._piece(q)[1] > self._piece(q)[0])
        return tuple(range(self.program_of(ts * ipt, r), self.program_of(ts * ipt + ipt - 1, r) + 1))

    def dp_tiles_of(self, pid: int) -> list[int]:
        return list(range(pid, self.dp_tiles, self.num_programs))

    def work_items(self, pid: int) -> list[WorkItem]:
        """Program pid's work in the order the kernel does it: DP tiles, then SK tiles round by round,
        in reverse inside a round (SK tiles first with sk_first); split-K: its one piece."""
        if self.split_k:
            tile, lo, hi = self.split_piece(pid)
            return [WorkItem(tile, lo, hi, "piece", 0, pid, self.piece_programs(tile))]
        dp = [WorkItem(t, 0, self.iters_per_tile, "dp") for t in self.dp_tiles_of(pid)]
        items: list[WorkItem] = []
        ipt = self.iters_per_tile
        for r in range(self.sk_rounds):
            first_tile = self.dp_tiles + self.round_split(r)[0]
            start, end = self.sk_range(pid, r)
            if end <= start:
                continue
            for ts in range((end - 1) // ipt, start // ipt - 1, -1):
                lo = max(start, ts * ipt) - ts * ipt
                hi = min(end, ts * ipt + ipt) - ts * ipt
                if lo == 0 and hi == ipt:
                    items.append(WorkItem(first_tile + ts, lo, hi, "dp", r))
                else:
                    slot = (r * self.num_programs + pid) * 2 + (0 if start >= ts * ipt else 1)
                    items.append(WorkItem(first_tile + ts, lo, hi, "piece", r, slot,
                                          self.piece_programs(first_tile + ts)))
        return items + dp if self.sk_first else dp + items

    def max_iters_per_program(self) -> int:
        """The most MAC iterations any program runs (the critical path, ignoring fix-up)."""
        if self.split_k:
            return cdiv(self.iters_per_tile, self.split_k)
        dp = cdiv(self.dp_tiles, self.num_programs) * self.iters_per_tile
        sk = 0
        ipt = self.iters_per_tile
        for r in range(self.sk_rounds):
            _, ipp, rem = self.round_split(r)
            if self.aligned(r):
                sk += max((j + 1) * ipt // ipp - j * ipt // ipp for j in range(ipp)) if rem else 0
            else:
                sk += ipp + (1 if rem else 0)
        return dp + sk

    def fixup_pieces(self) -> list[int]:
        """Per SK round, the most pieces a split tile has (the partials its last arriver reads; 0: none split)."""
        if self.split_k:
            return [self.split_k]
        out = []
        for r in range(self.sk_rounds):
            b = self.round_bounds()
            tiles = [self.dp_tiles + t for t in range(b[r], b[r + 1])]
            out.append(max((n for n in (len(self.piece_programs(t)) for t in tiles) if n > 1), default=0))
        return out

    def fixup_iters(self, fixup_iters: float = FIXUP_ITERS, partial_iters: float = FIXUP_PARTIAL_ITERS) -> float:
        """The fix-up's part of cost_iters: a fixed cost per round with split tiles and a cost per piece that the
        round's most split tile's last arriver reads, scaled with the tile's area (it follows the K loops: nothing
        else streams while it runs)."""
        area = self.BLK_M * self.BLK_N / (128 * 256)
        split = [n for n in self.fixup_pieces() if n]
        return sum(partial_iters * area * n for n in split) + (fixup_iters + FIXUP_ROUND_ITERS * (len(split) - 1)
                                                               if split else 0.0)

    def cost_iters(self, fixup_iters: float = FIXUP_ITERS, partial_iters: float = FIXUP_PARTIAL_ITERS) -> float:
        """The GEMM's time in MAC iterations of one tile: the critical path, the fix-up of each round with split
        tiles (fixup_iters), the Stream-K surcharge (module docstring)."""
        crit = self.max_iters_per_program()
        sk_share = crit - cdiv(self.dp_tiles, self.num_programs) * self.iters_per_tile
        return (crit + self.fixup_iters(fixup_iters, partial_iters)
                + SK_SURCHARGE * max(0, sk_share - self.iters_per_tile))

    def final_tiles(self) -> int:
        """How many tiles complete together at the GEMM's end: the last DP wave's, or the last SK round's."""
        if self.split_k:
            return self.num_tiles
        if self.sk_tiles == 0:
            return self.dp_tiles - (cdiv(self.dp_tiles, self.num_programs) - 1) * self.num_programs
        b = self.round_bounds()
        return b[-1] - b[-2]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


MAX_SK_ROUNDS = 4


def round_bounds(sk_tiles: int, rounds: int, num_programs: int) -> tuple[int, ...]:
    """Tile boundaries of `rounds` SK rounds over `sk_tiles` tiles: with rounds > 1 the last (aligned)
    round holds min(num_programs // 2^(rounds-1), sk_tiles) tiles, the rounds before it the rest in
    sizes 2^(rounds-2) : ... : 1 (floored)."""
    if rounds == 1:
        return (0, sk_tiles)
    last = min(num_programs // (1 << (rounds - 1)), sk_tiles)
    head = sk_tiles - last
    early = rounds - 1
    whole = (1 << early) - 1
    return (*(head * ((1 << early) - (1 << (early - r))) // whole for r in range(early + 1)), sk_tiles)


def plan_streamk(
    M: int,
    N: int,
    K: int,
    BLK_M: int,
    BLK_N: int,
    BLK_K: int,
    num_programs: int,
    *,
    gsize_m: int = 8,
    two_tiles: bool = True,
    schedule: str = "hybrid",
    sk_first: bool = False,
    sk_rounds: int = 1,
    split_k: int | None = None,
) -> StreamKPlan:
    """Split an M x N x K GEMM over num_programs programs.

    schedule:
      "auto":   the cheaper by cost_iters of "dp" and "hybrid" with two_tiles=False (module docstring); the
                plan returned names the one chosen.
      "hybrid": full waves of DP tiles plus one Stream-K wave holding the r = tiles % P leftover tiles,
                or, with two_tiles and at least one full wave, r + P tiles (the "two-tile" hybrid of
                Osama et al.: each program's SK share is between one and two tiles, so no program's
                share is tiny); all DP when r == 0.
      "dp":     data-parallel only (the last wave may be partly idle).
      "sk":     every tile Stream-K.
      "splitk": every tile cut into split_k pieces of K (default: as many as the programs allow, at most one per K
                step), one program each (module docstring); needs split_k >= 2.
    sk_first: each program runs its Stream-K share before its DP tiles (see StreamKPlan.sk_first).
    sk_rounds: cut the Stream-K tiles into this many rounds, the last one aligned (module docstring).
    """
    for name, value in (("M", M), ("N", N), ("K", K), ("num_programs", num_programs), ("gsize_m", gsize_m)):
        _check_positive(name, value)
    for name, value in (("BLK_M", BLK_M), ("BLK_K", BLK_K)):
        _check_block(name, value)
    try:
        two_blocks = width_parts(BLK_N)[1] > 0
    except (TypeError, ValueError) as e:
        raise ValueError(f"BLK_N: {e}") from None
    if two_blocks:  # two column blocks: whole tiles only (stream_k/kernel.py)
        if schedule not in ("dp", AUTO_SCHEDULE):
            raise ValueError(f"a tile {BLK_N} columns wide (two column blocks) runs data-parallel only; "
                             f"schedule must be dp or auto, got {schedule!r}")
        schedule = "dp"
    if not isinstance(sk_rounds, int) or not 1 <= sk_rounds <= MAX_SK_ROUNDS:
        raise ValueError(f"sk_rounds must be an integer in 1..{MAX_SK_ROUNDS}; got {sk_rounds!r}")
    if schedule not in SCHEDULE_CHOICES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULE_CHOICES)}; got {schedule!r}")
    if schedule == AUTO_SCHEDULE:
        options = [plan_streamk(M, N, K, BLK_M, BLK_N, BLK_K, num_programs, gsize_m=gsize_m, two_tiles=False,
                                schedule=s, sk_first=sk_first, sk_rounds=sk_rounds) for s in ("dp", "hybrid")]
        return min(options, key=lambda p: p.cost_iters())  # dp on a tie: no fix-up at all

    tiles_m, tiles_n = cdiv(M, BLK_M), cdiv(N, BLK_N)
    num_tiles = tiles_m * tiles_n
    iters_per_tile = cdiv(K, BLK_K)
    if schedule == "splitk":
        s = min(num_programs // num_tiles, iters_per_tile) if split_k is None else split_k
        if not isinstance(s, int) or s < 2 or s > iters_per_tile or num_tiles * s > num_programs:
            raise ValueError(f"splitk needs 2 <= split_k <= K steps ({iters_per_tile}) and tiles * split_k <= "
                             f"num_programs ({num_tiles} tiles, {num_programs} programs); got split_k {s!r}")
        return StreamKPlan(
            M=M, N=N, K=K, BLK_M=BLK_M, BLK_N=BLK_N, BLK_K=BLK_K, num_programs=num_tiles * s, gsize_m=gsize_m,
            schedule=schedule, two_tiles=False, tiles_m=tiles_m, tiles_n=tiles_n, num_tiles=num_tiles,
            iters_per_tile=iters_per_tile, even_k=K % BLK_K == 0, sk_tiles=num_tiles, dp_tiles=0,
            sk_iters_total=num_tiles * iters_per_tile, partials_shape=(num_tiles * s, BLK_M, BLK_N),
            locks_len=num_tiles, split_k=s)
    if split_k is not None:
        raise ValueError(f"split_k is for schedule splitk; got schedule {schedule!r}")
    if schedule == "dp":
        sk_tiles = 0
    elif schedule == "sk":
        sk_tiles = num_tiles
    else:
        r = num_tiles % num_programs
        if r == 0:
            sk_tiles = 0
        elif two_tiles and num_tiles >= num_programs:
            sk_tiles = r + num_programs
        else:
            sk_tiles = r
    sk_iters_total = sk_tiles * iters_per_tile
    return StreamKPlan(
        M=M, N=N, K=K, BLK_M=BLK_M, BLK_N=BLK_N, BLK_K=BLK_K,
        num_programs=num_programs, gsize_m=gsize_m, schedule=schedule, two_tiles=two_tiles,
        tiles_m=tiles_m, tiles_n=tiles_n, num_tiles=num_tiles, iters_per_tile=iters_per_tile,
        even_k=K % BLK_K == 0,
        sk_tiles=sk_tiles, dp_tiles=num_tiles - sk_tiles,
        sk_iters_total=sk_iters_total,
        partials_shape=(2 * sk_rounds * num_programs, BLK_M, BLK_N),
        locks_len=num_tiles,
        sk_first=sk_first,
        sk_rounds=sk_rounds,
    )

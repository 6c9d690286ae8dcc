"""The bands of tile rows of mode copy_engine: the GEMM's epilogue counts finished tiles per band, the copy
schedule (overlap.copy_steps) waits for a band's count before copying its rows, and the op's buffers
(overlap.buffers) hold the counts.

`BANDS` per copy region (a peer's rows, this rank's columns): enough that the copy of the last band, which no
GEMM work hides, is a small part of the whole, few enough that a step costs the host tens of operations (each a
driver call of a few microseconds)."""

from __future__ import annotations

from streamk_pgas.overlap.communication.copy_engine import bands

BANDS = 8  # bands per copy region (see the module docstring)


def rows_within_owners(m: int, blk_m: int, world: int) -> bool:
    """Whether every tile row of an M-row output lies within one rank's M/W rows."""
    return m % (world * blk_m) == 0


def row_bands(kind: str, m: int, blk_m: int, world: int) -> list[tuple[int, int]]:
    """The bands of tile rows (of BLK_M rows, M in all) that the GEMM counts and the schedule waits on, for schedule
    `kind`. "reduce_rows" cuts each rank's rows into BANDS where every tile row lies within one rank's rows, so that
    no band holds two owners' rows (a copy then never waits for the GEMM's tiles of rows it does not send), else all
    tile rows into BANDS * world."""
    n_rb = -(-m // blk_m)
    if kind != "reduce_rows":
        return bands(n_rb, BANDS)
    if not rows_within_owners(m, blk_m, world):
        return bands(n_rb, BANDS * world)
    per = n_rb // world
    return [(p * per + lo, p * per + hi) for p in range(world) for lo, hi in bands(per, BANDS)]


def reduce_rows_shift(m: int, blk_m: int, rank: int, world: int) -> int:
    """The tile rows by which the GEMM of schedule "reduce_rows" (gemm_reduce_scatter) rotates its order on `rank`:
    it starts at the rows that rank + 1 owns and ends with its own, so that at every moment each rank copies to a
    different owner. In the plain row order every rank would copy into rank 0 first, then into rank 1, ...: W - 1
    senders into one rank's links while the other links idle."""
    return ((rank + 1) % world) * (m // world) // blk_m if world > 1 else 0


def finish_order(cut: list[tuple[int, int]], n_rb: int, shift: int) -> list[int]:
    """The bands of `cut` (row-block ranges of n_rb row blocks) in the order a GEMM whose row order starts at row
    block `shift` completes them: by the position of the last of each band's row blocks in that order (a band that
    holds row blocks on both sides of `shift` completes last)."""
    return sorted(range(len(cut)), key=lambda i: max((b - shift) % n_rb for b in range(*cut[i])))

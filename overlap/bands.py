"""The bands of tile rows of mode copy_engine: the GEMM's epilogue counts finished tiles per band, the copy
schedule (overlap.copy_steps) waits for a band's count before copying its rows, and the op's buffers
(overlap.buffers) hold the counts.

`BANDS` per copy region (a peer's rows, this rank's columns): enough that the copy of the last band, which no
GEMM work hides, is a small part of the whole, few enough that a step costs the host tens of operations (each a
driver call of a few microseconds)."""

from __future__ import annotations

from streamk_pgas.overlap.communication.copy_engine import bands

BANDS = 8  # bands per copy region (see the module docstring)


def row_bands(kind: str, n_rb: int, world: int) -> list[tuple[int, int]]:
    """The bands of tile rows that the GEMM counts and the schedule waits on, for schedule `kind`."""
    return bands(n_rb, BANDS * world if kind == "reduce_rows" else BANDS)


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

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

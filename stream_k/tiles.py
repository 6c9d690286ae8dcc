"""Tile bookkeeping shared by the GEMM and the communication tiles: which (row, column) block a
tile id names, in the grouped order of the Triton matmul tutorial (GSIZE_M rows of tiles are
walked together, column-major inside a group, so that B's columns stay in L2)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_coords(tile_id, M, N, BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr):
    """(pid_m, pid_n) of tile_id in the grouped order (device side)."""
    tiles_m = tl.cdiv(M, BLK_M)
    tiles_n = tl.cdiv(N, BLK_N)
    in_group = GSIZE_M * tiles_n
    group = tile_id // in_group
    first_m = group * GSIZE_M
    group_m = tl.minimum(tiles_m - first_m, GSIZE_M)
    local = tile_id % in_group
    return first_m + local % group_m, local // group_m


@triton.jit
def gemm_tile_coords(tile_id, SIZES, BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr):
    """(pid_m, pid_n) of a GEMM tile: the grouped order with its tile rows rotated by SIZES.row_shift, so that a
    rank's GEMM may start at other rows than the first (every tile row still comes exactly once)."""
    pid_m, pid_n = tile_coords(tile_id, SIZES.M, SIZES.N, BLK_M, BLK_N, GSIZE_M)
    return (pid_m + SIZES.row_shift) % tl.cdiv(SIZES.M, BLK_M), pid_n


def tile_coords_host(tile_id: int, tiles_m: int, tiles_n: int, gsize_m: int) -> tuple[int, int]:
    """(pid_m, pid_n) of a tile in the grouped order (host side; the same arithmetic as tile_coords)."""
    in_group = gsize_m * tiles_n
    group = tile_id // in_group
    first_m = group * gsize_m
    group_m = min(tiles_m - first_m, gsize_m)
    local = tile_id % in_group
    return first_m + local % group_m, local // group_m


def width_parts(width: int) -> tuple[int, int]:
    """The column blocks of a tile `width` columns wide: (width, 0) for a power of two; for 3 or 5 times a power of
    two, (2w, w) or (4w, w) (320 = 256 + 64, 160 = 128 + 32, 192 = 128 + 64), the narrower block >= 16 columns
    (tl.dot's least N). ValueError for any other width."""
    low = width & -width
    if width >= 16 and low == width:
        return width, 0
    if width // low in (3, 5) and low >= 16:
        return width - low, low
    raise ValueError(f"a tile width must be a power of two >= 16, or 3 or 5 times a power of two >= 16 "
                     f"(e.g. 48, 80, 96, 160, 192, 320, 384); got {width!r}")


def num_tiles(M: int, N: int, BLK_M: int, BLK_N: int) -> int:
    return triton.cdiv(M, BLK_M) * triton.cdiv(N, BLK_N)

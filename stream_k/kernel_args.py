"""The argument groups of the Stream-K GEMM (Triton tuples), beside the device context (iris_ops.context):

    Sizes      M, N, K and the operands' strides (runtime values)
    Workspace  the fix-up's workspace: partials P and arrival counters LOCKS
    Tiling     compile-time: the tile, its tile-order group, the K remainder, the load path (TMA or pointers)
    Schedule   compile-time: how the tiles are shared among the programs (Stream-K rounds, split-K, XCD remap) and
               how the fix-up sums a split tile's pieces
    AWait      all_gather_gemm's A, whose rows arrive during the launch (built in the kernel; None: A is complete)

A, B and C stay arguments of their own (each may be a tensor descriptor, which the bound launcher expands at the top
level only), as do the optional P_DESC and B1, TILE_FLAGS and GEMM_TRACE (a group holds no None) and the unspecialised
scalars sk_tiles and epoch (`do_not_specialize` names top-level parameters: inside a tuple Triton specialises every
element). The compile-time groups are built by `constexprs`: Triton wants constexpr elements of a tuple argument
wrapped in tl.constexpr, and they are read by field (`BLK_M: tl.constexpr = TILING.BLK_M`), never unpacked (Triton
3.6 loses constexpr-ness in a tuple unpacking, as it does in any assignment of a tuple that holds constexprs: a group
is passed on as it came, never assigned to a variable in a kernel).
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar

import triton.language as tl


class Sizes(NamedTuple):
    M: int
    N: int
    K: int
    stride_am: int
    stride_ak: int
    stride_bk: int
    stride_bn: int
    stride_cm: int
    stride_cn: int
    row_shift: int = 0  # the tile order's rows rotated by this many tile rows (stream_k.tiles.gemm_tile_coords)


class Workspace(NamedTuple):
    P: Any  # [2 * SK_ROUNDS * programs, BLK_M, BLK_N] fp32 (int32 for int8): one slot per piece of a split tile
    LOCKS: Any  # int32 [tiles]: arrival counters, 0 between launches


class Tiling(NamedTuple):
    BLK_M: Any
    BLK_N: Any
    BLK_K: Any
    GSIZE_M: Any  # tile-order group height
    EVEN_K: Any  # K % BLK_K == 0
    BLK_N1: Any  # > 0: a tile of two column blocks, BLK_N - BLK_N1 and BLK_N1 wide (TMA, data-parallel only)
    USE_TMA: Any  # A, B are tensor descriptors loaded by the copy engine (NVIDIA sm_90+)
    STRIDE_ALIGN: Any  # stride_am and stride_bk are multiples of this (elements)
    INPUT_PRECISION: Any  # tl.dot's input_precision (fp32 only; None otherwise)


class Schedule(NamedTuple):
    SK_FIRST: Any  # the Stream-K share before the data-parallel tiles
    SK_ROUNDS: Any  # Stream-K rounds (the last one aligned)
    SPLIT_K: Any  # > 0: split-K, one piece of one tile per program
    NUM_XCDS: Any  # > 1: pids remapped so that consecutive ones share an XCD
    REDUCE_LOADS: Any  # partials a tile's last piece reads at once
    FIXUP_BY_HALF: Any  # the fix-up's order (stream_k.kernel._sum_pieces' BY_HALF)


class AWait(NamedTuple):
    A_READY: Any  # int32 ready words of the gathered A (stream_k.kernel.streamk_program's docstring)
    a_rows: Any  # rows per slot
    a_chunk: Any  # K blocks per chunk of columns
    a_segment: Any  # K blocks a work item reads between two waits (whole chunks)
    SEGMENTED: Any  # tl.constexpr: K has several segments (else one wait for the whole K range, then the K loop)


T = TypeVar("T", bound=tuple)


def constexprs(group: type[T], **values: Any) -> T:
    """A compile-time group with every value wrapped in tl.constexpr."""
    return group(**{k: tl.constexpr(v) for k, v in values.items()})


def unwrapped(group: tuple) -> dict[str, Any]:
    """A group's fields by name, tl.constexpr unwrapped (for the host: labels, checks)."""
    return {k: getattr(v, "value", v) if isinstance(v, tl.constexpr) else v for k, v in group._asdict().items()}

"""The argument groups of the overlap kernels (Triton tuples): each kernel takes the groups its algorithm and mode
need, and None for the others.

    Step / StepFlags      the step protocol (overlap.kernels): the control block, program counts; what this kernel's
                          programs do at the step's start and end
    Move / MoveFlags      what a communication program moves: the GEMM's tiles (SRC, READY) into DST
    Gather                all_gather_gemm: this rank's rows of A pushed into every rank's gathered A (its buffers
                          and sizes, then its compile-time fields: one group, present or None as a whole)

Beside them every kernel takes the device context CTX (iris_ops.context.DeviceContext), and the overlap kernel the
GEMM's groups (stream_k.kernel_args). The *Flags groups (and Gather's last fields) are compile-time constants:
`constexprs(...)` (stream_k.kernel_args) wraps their values in tl.constexpr, as Triton wants constexpr elements of a
tuple argument passed. Inside a kernel they are read by field, never unpacked (`CTM: tl.constexpr = MOVE_FLAGS.CTM`):
Triton 3.6 loses constexpr-ness in a tuple unpacking. A @triton.jit function (the algorithm's TILE_FN) is never a
field: Triton's cache key holds the source of a top-level constexpr function, only the name of one inside a tuple.
A group holds no None (Triton 3.6 cannot type a None inside a tuple); a group a kernel does not need is passed as
None.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from streamk_pgas.stream_k.kernel_args import constexprs


class Step(NamedTuple):
    CTRL: Any  # int32 control block on the heap (overlap.kernels: EPOCH, CLAIM, FINISHED, peers' words)
    step_programs: int  # programs of every kernel of the step: the last of them to finish closes the step
    gemm_programs: int  # programs of this kernel that compute (overlap_kernel)
    comm_programs: int  # programs of this kernel that communicate


class StepFlags(NamedTuple):
    COMM: Any  # the kernel has communication programs (overlap_kernel: beside its GEMM programs)
    PEER_SYNC: Any  # the step's last program waits for every peer's DONE word before the next epoch
    GEMM_SYS: Any  # GEMM programs finish with a system-scope release (they wrote to peers or joined)
    COMM_AFTER_GEMM: Any  # GEMM programs join the communication once their own tiles are done
    GEMM_WAITS_ARRIVED: Any  # GEMM programs wait for every rank's arrival first (their epilogue writes peers)
    WAITS_ARRIVED: Any  # communication programs wait for every rank's arrival before their first write
    ANNOUNCE: Any  # this kernel announces this rank's arrival: its first communication program (its first GEMM
    #               program where it has none)


class Move(NamedTuple):
    SRC: Any  # the GEMM's output tiles
    stride_sm: int
    stride_sn: int
    DST: Any  # where they go (C, on the heap)
    stride_dm: int
    stride_dn: int
    READY: Any  # int32 ready words: READY_SOURCES per tile
    M: int
    N: int
    n_cols: int  # columns a move may touch: N's row padded to a multiple of 16 (stream_k.layout.padded_cols), so its
    # masks keep whole vectors (both buffers hold those columns; nothing reads the padding)
    claim_rotate: int  # ticket t is tile (t + claim_rotate) % tiles: the order the GEMM completes them in
    span: int  # pieces (CTM rows) of a tile one ticket moves: the whole tile, or 1 where tiles are few


class MoveFlags(NamedTuple):
    READY_SYS: Any  # ready words are released at system scope (written by peers)
    READY_SOURCES: Any  # ready words per tile (0: every tile taken as ready)
    CTM: Any  # the sub-tile a communication step moves
    CTN: Any
    CLAIM_TILES: Any  # tiles are claimed with tickets (programs may join late), else taken statically
    OWNED: Any  # tile t is moved by rank t % W alone (overlap.communication.comm_loop)


class Gather(NamedTuple):
    A_LOCAL: Any  # this rank's rows of A (M/W x K)
    stride_lm: int
    stride_lk: int
    AG: Any  # the gathered A on the heap (M x K), rank-rotated (overlap.communication.all_gather)
    stride_gm: int
    stride_gk: int
    A_READY: Any  # int32 ready words of AG: one per (slot, row block, chunk of columns)
    a_rows: int  # rows per rank (M / W)
    K: int
    k_cols: int  # columns a push may touch: K's row padded to a multiple of 16 (stream_k.layout.padded_cols) where
    # both buffers' rows hold them, so its masks keep whole vectors (nothing reads the padding); else K
    chunk_cols: int  # columns of one arrival chunk (overlap.algorithms.all_gather_gemm.a_chunk_cols)
    segment_cols: int  # columns a GEMM work item reads between two waits (all_gather_gemm.a_segment_cols)
    # compile-time (tl.constexpr)
    RM: Any  # rows and columns of one pushed block (16 K elements: enough loads in flight per program)
    KB: Any
    IN_COMM: Any  # communication programs push A's rows
    IN_GEMM: Any  # each GEMM program pushes its share of A's rows before computing (fused_sequential)
    GEMM_WAITS: Any  # GEMM programs wait for the rows of a tile's row block before reading them
    SEGMENTED: Any  # ... in wait segments of segment_cols columns, and pushes go chunk by chunk (K has several)
    OWN_IN_PLACE: Any  # A_LOCAL is slot 0 of AG already: the own copy moves nothing, it only releases its words


__all__ = ["Gather", "Move", "MoveFlags", "Step", "StepFlags", "constexprs"]

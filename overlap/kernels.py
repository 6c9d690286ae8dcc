"""The kernels that put GEMM and communication programs together, and the step protocol they share.

Every kernel here takes the device context CTX (iris_ops.context.DeviceContext: heap bases, rank, world size,
the step's collective error words, clock and timer kind, spin budget), its world_size a compile-time constant, so
loops over ranks unroll and a communication program has all of its ranks' loads in flight at once.

`overlap_kernel` is the one kernel every mode launches for the GEMM when there are peers: programs
0..gemm_programs-1 run `stream_k.kernel.streamk_program`; the other programs communicate
(workgroup specialisation by program id): `overlap.communication.comm_loop.comm_program` moves the
GEMM's tiles (MOVE, with the algorithm's TILE_FN), or `overlap.algorithms.all_gather_gemm.gather_program` pushes
A's rows (GATHER).
With no communication programs it is the plain GEMM in the step protocol (bulk_sync, two_streams).
With COMM_AFTER_GEMM the GEMM programs join the communication once their own GEMM work is done,
claiming tiles from the same counter as the communication programs, so the last wave's tiles are
moved by many programs instead of the few set aside. `comm_kernel` is communication alone;
`announce_kernel` tells the peers that this rank has arrived at the step (a preload). Their argument
groups are overlap.kernel_args'; a kernel gets None for a group its algorithm does not use.

A world of one rank has nothing to communicate and no peer to wait for: its steps launch the
stand-alone GEMM (stream_k.kernel.streamk_gemm_kernel) and none of this.

The step protocol. No kernel argument changes from one step to the next (so a step can be
captured in a CUDA graph and replayed): what changes lives in the control block CTRL, int32 words
on the heap:

    CTRL[EPOCH]          the last finished step of this rank; a step's programs use e = CTRL[EPOCH] + 1
    CTRL[CLAIM]          tile tickets of this step (dynamic tile order)
    CTRL[FINISHED]       programs of this step that have finished
    CTRL[PEERS + p]      ARRIVED: the last step for which rank p's C may receive writes (p writes it)
    CTRL[PEERS + W + p]  DONE: the last step whose communication rank p has finished (p writes it)

- Arrival: an algorithm that writes into the peers' buffers (all_reduce's sums, all_scatter's tiles)
  waits for each peer's ARRIVED word to reach e before its first write there; the first communicating
  program of each rank releases ARRIVED = e on every rank as it starts. A peer's next step therefore
  never writes into C before this rank's stream has reached that step, whatever runs between two steps.
- Finish: every program of every kernel of the step counts itself on CTRL[FINISHED] as it exits,
  with release semantics (system scope when it wrote to peers and the barrier follows). The last of the step's
  `step_programs` programs (PEER_SYNC: where the step needs the barrier, overlap.parts.Parts.end_barrier; one_shot
  and all_gather_gemm do not) writes DONE = e on every peer, waits until every
  peer's DONE word reaches e (every peer's contribution to this rank's C has landed, and every peer has finished
  reading this rank's buffers), resets CLAIM and FINISHED, and only then advances
  CTRL[EPOCH]. The step's kernels end after that, so when a rank's stream reaches the end of a
  step its C is final and the next step may start at once, with no host barrier.

Every wait is bounded by max_spins; a wait that gives up records the error in every rank's error words
(iris_ops.error_state: ERRORS lies on the heap) and carries on, and every wait gives up at once once this
rank's word is set: a lost peer fails the step on every rank (each host raises) instead of hanging it, and
the steps queued behind it drain without waiting.
"""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas.iris_ops.context import wait_or_record
from streamk_pgas.iris_ops.device import ERR_PEER_READY, count_release, notify_ranks
from streamk_pgas.overlap.algorithms.all_gather_gemm import gather_program
from streamk_pgas.overlap.communication.comm_loop import comm_program
from streamk_pgas.stream_k.kernel import streamk_program
from streamk_pgas.stream_k.kernel_args import AWait

EPOCH = 0
CLAIM = 1
FINISHED = 2
PEERS = 8


def control_words(world_size: int) -> int:
    """Length of the control block for world_size ranks."""
    return PEERS + 2 * world_size


_EPOCH: tl.constexpr = tl.constexpr(EPOCH)
_CLAIM: tl.constexpr = tl.constexpr(CLAIM)
_FINISHED: tl.constexpr = tl.constexpr(FINISHED)
_PEERS: tl.constexpr = tl.constexpr(PEERS)
_ERR_PEER: tl.constexpr = tl.constexpr(ERR_PEER_READY)


@triton.jit
def _step_epoch(CTRL):
    """This step's epoch: one past the last finished step (read once, as the program starts)."""
    return tl.load(CTRL + _EPOCH, volatile=True) + 1


@triton.jit
def _announce(CTRL, e, CTX):
    """ARRIVED[cur_rank] = e on every rank (release, system scope): peers may write into this rank's C."""
    notify_ranks(CTRL + _PEERS + CTX.cur_rank, e, CTX.cur_rank, CTX.heap_bases, CTX.world_size, 0)


@triton.jit
def _wait_arrived(CTRL, e, CTX):
    """Wait until every rank (this one included) has arrived at step e."""
    for p in range(0, CTX.world_size):
        wait_or_record(CTX, CTRL + _PEERS + p, e, _ERR_PEER.value, p, "sys")  # the "tile": the peer


@triton.jit
def _start_comm(c, STEP, STEP_FLAGS, e, CTX):
    """What communication program c does before its first tile: announce arrival (program 0), then wait for every
    rank's arrival."""
    if STEP_FLAGS.ANNOUNCE:
        if c == 0:
            _announce(STEP.CTRL, e, CTX)
    if STEP_FLAGS.WAITS_ARRIVED:
        _wait_arrived(STEP.CTRL, e, CTX)


@triton.jit
def _finish(CTRL, e, step_programs, CTX, PEER_SYNC: tl.constexpr, SYS: tl.constexpr):
    """Count this program finished; the step's last program closes the step (see the module docstring)."""
    tl.debug_barrier()
    if PEER_SYNC:  # SYS: its writes to peers are covered by the DONE release below
        n = count_release(CTRL + _FINISHED, SYS)
    else:  # no DONE follows: only this GPU reads the count
        n = count_release(CTRL + _FINISHED, False)
    if n == step_programs - 1:
        if PEER_SYNC:
            notify_ranks(CTRL + _PEERS + CTX.world_size + CTX.cur_rank, e, CTX.cur_rank, CTX.heap_bases,
                         CTX.world_size, 1)
            for i in range(1, CTX.world_size):
                p = (CTX.cur_rank + i) % CTX.world_size
                wait_or_record(CTX, CTRL + _PEERS + CTX.world_size + p, e, _ERR_PEER.value, p, "sys")
        tl.store(CTRL + _CLAIM, 0)
        tl.store(CTRL + _FINISHED, 0)
        tl.atomic_xchg(CTRL + _EPOCH, e, sem="release", scope="gpu")


@triton.jit
def _communicate(c, programs, trace_pid, STEP, MOVE, MOVE_FLAGS, TILE_FN: tl.constexpr, GATHER, e, COMM_TRACE, CTX,
                 BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr):
    """Communication program c of `programs`: push its pieces of A's rows (GATHER), or move tiles (MOVE)."""
    if GATHER is not None:
        gather_program(c, programs, GATHER, e, CTX, BLK_M)
    else:
        comm_program(c, programs, trace_pid, MOVE, MOVE_FLAGS, TILE_FN, e, STEP.CTRL + _CLAIM, COMM_TRACE, CTX, BLK_M,
                     BLK_N, GSIZE_M)


@triton.jit(do_not_specialize=["sk_tiles"])
def overlap_kernel(
    # the GEMM: stream_k.kernel.streamk_program's arguments, by the same names (StreamKGemm.launch_args; CTX with
    # world_size a compile-time constant and the step's collective error words)
    A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles, CTX, TILING, SCHEDULE, EPILOGUE: tl.constexpr, P_DESC,
    # the step and the communication (overlap.kernel_args; None where unused)
    STEP, STEP_FLAGS, MOVE, MOVE_FLAGS, TILE_FN: tl.constexpr, COMM_TRACE, GATHER,
):
    BLK_M: tl.constexpr = TILING.BLK_M
    pid = tl.program_id(0)
    CTRL = STEP.CTRL
    e = _step_epoch(CTRL)
    gemm_programs = STEP.gemm_programs
    comm_programs = STEP.comm_programs
    # Communication programs that push A's rows come first: the interpreter runs programs in order, and the
    # GEMM programs wait on the rows that they push.
    gpid = pid
    if GATHER is not None:
        gpid = pid - comm_programs
    if (gpid >= 0) & (gpid < gemm_programs):
        a_wait = None
        if GATHER is not None:
            if GATHER.GEMM_WAITS:
                a_wait = AWait(GATHER.A_READY, GATHER.a_rows, GATHER.chunk_cols // TILING.BLK_K,
                               GATHER.segment_cols // TILING.BLK_K, GATHER.SEGMENTED)
        if not STEP_FLAGS.COMM:  # no communication program to announce this rank's arrival: the first GEMM program
            if STEP_FLAGS.ANNOUNCE:
                if gpid == 0:
                    _announce(CTRL, e, CTX)
        if STEP_FLAGS.GEMM_WAITS_ARRIVED:  # fused_sequential: the epilogue (or the gather) writes every rank's buffers
            _wait_arrived(CTRL, e, CTX)
        if GATHER is not None:
            if GATHER.IN_GEMM:  # fused_sequential all_gather_gemm: push this program's share of A, then compute
                gather_program(gpid, gemm_programs, GATHER, e, CTX, BLK_M)
        streamk_program(gpid, gemm_programs, A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles, e, CTX, TILING,
                        SCHEDULE, EPILOGUE, P_DESC, a_wait)
        if STEP_FLAGS.COMM_AFTER_GEMM:  # join the communication (claiming tiles) once this program's GEMM work is done
            if STEP_FLAGS.WAITS_ARRIVED:
                _wait_arrived(CTRL, e, CTX)
            comm_program(pid, gemm_programs, pid, MOVE, MOVE_FLAGS, TILE_FN, e, CTRL + _CLAIM, COMM_TRACE, CTX, BLK_M,
                         TILING.BLK_N, TILING.GSIZE_M)
        _finish(CTRL, e, STEP.step_programs, CTX, STEP_FLAGS.PEER_SYNC, STEP_FLAGS.GEMM_SYS)
    elif STEP_FLAGS.COMM:
        c = pid - gemm_programs
        if GATHER is not None:
            c = pid
        _start_comm(c, STEP, STEP_FLAGS, e, CTX)
        _communicate(c, comm_programs, pid, STEP, MOVE, MOVE_FLAGS, TILE_FN, GATHER, e, COMM_TRACE, CTX, BLK_M,
                     TILING.BLK_N, TILING.GSIZE_M)
        _finish(CTRL, e, STEP.step_programs, CTX, STEP_FLAGS.PEER_SYNC, True)


@triton.jit
def comm_kernel(CTX, BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr, STEP, STEP_FLAGS, MOVE,
                MOVE_FLAGS, TILE_FN: tl.constexpr, COMM_TRACE, GATHER):
    """Communication alone, on every program of its grid: tiles of the GEMM's output (MOVE) or A's rows (GATHER)."""
    pid = tl.program_id(0)
    e = _step_epoch(STEP.CTRL)
    _start_comm(pid, STEP, STEP_FLAGS, e, CTX)
    _communicate(pid, tl.num_programs(0), pid, STEP, MOVE, MOVE_FLAGS, TILE_FN, GATHER, e, COMM_TRACE, CTX, BLK_M,
                 BLK_N, GSIZE_M)
    _finish(STEP.CTRL, e, STEP.step_programs, CTX, STEP_FLAGS.PEER_SYNC, True)


@triton.jit
def announce_kernel(CTRL, CTX):
    """Tell every rank that this rank has arrived at the coming step."""
    _announce(CTRL, _step_epoch(CTRL), CTX)


@triton.jit(do_not_specialize=["n_fill"])
def ce_start_kernel(CTRL, FILL, n_fill, CTX, FILL_BLOCK: tl.constexpr):
    """The copy-engine mode's step start (one program, before the step's GEMM and copies): FILL[:n_fill] = e
    (the words the copy engine copies into the peers' ready flags), announce arrival, wait for every rank's."""
    e = _step_epoch(CTRL)
    if FILL is not None:
        offs = tl.arange(0, FILL_BLOCK)
        for start in range(0, n_fill, FILL_BLOCK):
            tl.store(FILL + start + offs, tl.full((FILL_BLOCK,), 0, tl.int32) + e, mask=start + offs < n_fill)
        tl.debug_barrier()
    _announce(CTRL, e, CTX)
    _wait_arrived(CTRL, e, CTX)


@triton.jit(do_not_specialize=["step_programs"])
def ce_finish_kernel(CTRL, step_programs, CTX, PEER_SYNC: tl.constexpr):
    """The copy-engine mode's step end, queued after the step's copies: counts as one program of the step
    (the GEMM's are the others); the last to finish closes the step (the peer barrier where PEER_SYNC, the epoch)."""
    _finish(CTRL, _step_epoch(CTRL), step_programs, CTX, PEER_SYNC, True)

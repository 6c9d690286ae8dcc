"""The kernels that put GEMM and communication programs together.

world_size is a compile-time constant here, so loops over ranks unroll and a communication
program has all of its ranks' loads in flight at once.

`overlap_kernel` is the one kernel every mode launches for the GEMM: programs 0..gemm_programs-1
run `stream_k.kernel.streamk_program`; programs from gemm_programs on run
`iris_ops.comm_loop.comm_program` (workgroup specialisation by program id). With no
communication programs it is the plain GEMM (bulk_sync, two_streams). With COMM_AFTER_GEMM the
GEMM programs join the communication once their own GEMM work is done, claiming tiles from the
same counter (CLAIM) as the communication programs, so the last wave's tiles are moved by many
programs instead of the few set aside (fused and two_streams on a GPU; fused_sequential one_shot,
whose GEMM programs are the only ones). `comm_kernel` is communication alone.

ZEROED: all_reduce adds into every rank's C, so C must be zeroed everywhere before anyone adds,
and every rank must know. With communication programs (bulk_sync, two_streams, fused) they zero C
themselves as they start (ZERO_C): the first `zero_programs` of them each clear a slice, count
themselves done on ZERO_COUNT, and the last one to finish releases `ZEROED[cur_rank] = zero_epoch` on
every rank; a program then waits for every rank's word before its first add. On the GPU that
zeroing runs beside the GEMM's first wave, before any tile is ready (a host memset before the
fused kernel cost 0.023 ms of 0.32 at 4864x4096x8256 on 2 x H200). In the interpreter one
program zeroes (programs run one after another there, so a program waiting for a later one's
slice would never finish). fused_sequential has no communication programs: the host zeroes C and
`signal_zeroed` releases the words.
"""

from __future__ import annotations

import triton
import triton.language as tl

from iris_ops.comm_loop import comm_program
from iris_ops.device import notify, record_error, wait_local
from stream_k.kernel import streamk_program


@triton.jit
def _wait_peers_zeroed(ZEROED, epoch, max_spins, world_size, ERRORS):
    for p in range(0, world_size):
        if not wait_local(ZEROED + p, epoch, max_spins, "sys"):
            record_error(ERRORS, 3, p)  # ERR_PEER_READY (the "tile" is the peer's rank)


@triton.jit
def _release_zeroed(ZEROED, zero_epoch, heap_bases, cur_rank, world_size):
    """ZEROED[cur_rank] = zero_epoch on every rank (release, system scope): this rank's C is zeroed."""
    for p in range(0, world_size):
        notify(ZEROED + cur_rank, zero_epoch, cur_rank, p, heap_bases, "sys")


@triton.jit
def _zero_and_signal_c(C, n_elems, part, parts, ZERO_COUNT, zero_base, ZEROED, epoch, heap_bases, cur_rank,
                       world_size, ZERO_BLOCK: tl.constexpr):
    """Zero slice `part` of `parts` of the contiguous C; the last part to finish tells every rank."""
    per_part = tl.cdiv(tl.cdiv(n_elems, parts), ZERO_BLOCK) * ZERO_BLOCK
    lo = part * per_part
    hi = tl.minimum(lo + per_part, n_elems)
    offs = tl.arange(0, ZERO_BLOCK)
    zeros = tl.zeros((ZERO_BLOCK,), dtype=C.dtype.element_ty)
    for start in range(lo, hi, ZERO_BLOCK):
        tl.store(C + start + offs, zeros, mask=start + offs < hi)
    tl.debug_barrier()
    done = tl.atomic_add(ZERO_COUNT, 1, sem="acq_rel", scope="gpu") - zero_base + 1
    if done == parts:  # the last part: every slice is zeroed (acquired through the counter)
        _release_zeroed(ZEROED, epoch, heap_bases, cur_rank, world_size)


_DNS = ["sk_tiles", "epoch", "max_spins", "ready_target",
        "gemm_programs", "comm_programs", "claim_base", "zero_base", "zero_programs", "zero_epoch",
        "claim_rotate"]


@triton.jit(do_not_specialize=_DNS)
def overlap_kernel(
    # GEMM (stream_k.kernel.streamk_program's arguments, by the same names)
    A, B, C, P, LOCKS, TILE_FLAGS, GEMM_TRACE, CLOCK, ERRORS,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    sk_tiles,
    epoch, max_spins,
    heap_bases, cur_rank, world_size: tl.constexpr,
    # communication (iris_ops.comm_loop.comm_program's arguments)
    SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
    READY, ready_target, COMM_TRACE, ZEROED, zero_epoch, CLAIM, claim_base, claim_rotate,
    ZERO_COUNT, zero_base, zero_programs,
    gemm_programs, comm_programs,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, BLK_K: tl.constexpr, GSIZE_M: tl.constexpr,
    EVEN_K: tl.constexpr, EPILOGUE: tl.constexpr, TIMER: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, NUM_XCDS: tl.constexpr, USE_TMA: tl.constexpr, SK_FIRST: tl.constexpr,
    SK_ROUNDS: tl.constexpr, P_DESC,
    TILE_FN: tl.constexpr, READY_SCOPE: tl.constexpr, CTM: tl.constexpr, CTN: tl.constexpr,
    COMM_AFTER_GEMM: tl.constexpr, GEMM_WAITS_ZEROED: tl.constexpr, COMM_WAITS_ZEROED: tl.constexpr,
    ZERO_C: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid < gemm_programs:
        if GEMM_WAITS_ZEROED:  # fused_sequential all_reduce adds into every rank's C from its epilogue
            _wait_peers_zeroed(ZEROED, zero_epoch, max_spins, world_size, ERRORS)
        streamk_program(
            pid, gemm_programs,
            A, B, C, P, LOCKS, TILE_FLAGS, GEMM_TRACE, CLOCK, ERRORS,
            M, N, K,
            stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            sk_tiles,
            epoch, max_spins,
            heap_bases, cur_rank, world_size,
            BLK_M, BLK_N, BLK_K, GSIZE_M, EVEN_K, EPILOGUE, TIMER, INPUT_PRECISION, NUM_XCDS, USE_TMA, SK_FIRST,
            SK_ROUNDS, P_DESC,
        )
        if COMM_AFTER_GEMM:  # join the communication (claiming tiles) once this program's GEMM work is done
            if COMM_WAITS_ZEROED:
                _wait_peers_zeroed(ZEROED, zero_epoch, max_spins, world_size, ERRORS)
            comm_program(
                pid, gemm_programs, pid,
                SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
                READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK,
                heap_bases, cur_rank, world_size, CLAIM, claim_base, claim_rotate,
                TILE_FN, READY_SCOPE, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER,
            )
    else:
        if ZERO_C:
            if pid - gemm_programs < zero_programs:
                _zero_and_signal_c(DST, CM * CN, pid - gemm_programs, zero_programs, ZERO_COUNT, zero_base, ZEROED,
                                   zero_epoch, heap_bases, cur_rank, world_size, 4096)
        if COMM_WAITS_ZEROED:
            _wait_peers_zeroed(ZEROED, zero_epoch, max_spins, world_size, ERRORS)
        comm_program(
            pid - gemm_programs, comm_programs, pid,
            SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
            READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK,
            heap_bases, cur_rank, world_size, CLAIM, claim_base, claim_rotate,
            TILE_FN, READY_SCOPE, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER,
        )


@triton.jit(do_not_specialize=["zero_epoch", "max_spins", "ready_target", "claim_base", "zero_base",
                               "zero_programs", "claim_rotate"])
def comm_kernel(
    SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
    READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, ZEROED, zero_epoch, CLAIM, claim_base, claim_rotate,
    ZERO_COUNT, zero_base, zero_programs,
    heap_bases, cur_rank, world_size: tl.constexpr,
    TILE_FN: tl.constexpr, READY_SCOPE: tl.constexpr,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr,
    CTM: tl.constexpr, CTN: tl.constexpr, TIMER: tl.constexpr, COMM_WAITS_ZEROED: tl.constexpr,
    ZERO_C: tl.constexpr,
):
    pid = tl.program_id(0)
    if ZERO_C:
        if pid < zero_programs:
            _zero_and_signal_c(DST, CM * CN, pid, zero_programs, ZERO_COUNT, zero_base, ZEROED, zero_epoch,
                               heap_bases, cur_rank, world_size, 4096)
    if COMM_WAITS_ZEROED:
        _wait_peers_zeroed(ZEROED, zero_epoch, max_spins, world_size, ERRORS)
    comm_program(
        pid, tl.num_programs(0), pid,
        SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
        READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK,
        heap_bases, cur_rank, world_size, CLAIM, claim_base, claim_rotate,
        TILE_FN, READY_SCOPE, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER,
    )


@triton.jit(do_not_specialize=["zero_epoch"])
def signal_zeroed(ZEROED, zero_epoch, heap_bases, cur_rank, world_size: tl.constexpr):
    """Tell every rank that this rank's C is zeroed for `zero_epoch` (runs after the memset, same stream)."""
    _release_zeroed(ZEROED, zero_epoch, heap_bases, cur_rank, world_size)

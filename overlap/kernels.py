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

ZEROED (fused_sequential all_reduce only): there the GEMM epilogue adds each tile into every rank's
C, so C must be zeroed everywhere before anyone adds. Each rank zeroes its C, then `signal_zeroed`
releases `zeroed[cur_rank] = epoch` on every rank; a GEMM program waits for every peer's word
before its first remote add. The modes with communication programs need no zeroing: their
all_reduce tile stores a rank's own contribution first (iris_ops/all_reduce.py).
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


_DNS = ["sk_tiles", "sk_iters_per_program", "sk_iters_remainder", "epoch", "max_spins", "ready_target",
        "gemm_programs", "comm_programs", "claim_base", "aux_target"]


@triton.jit(do_not_specialize=_DNS)
def overlap_kernel(
    # GEMM (stream_k.kernel.streamk_program's arguments, by the same names)
    A, B, C, P, LOCKS, TILE_FLAGS, GEMM_TRACE, CLOCK, ERRORS,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    sk_tiles, sk_iters_per_program, sk_iters_remainder,
    epoch, max_spins,
    heap_bases, cur_rank, world_size: tl.constexpr,
    # communication (iris_ops.comm_loop.comm_program's arguments)
    SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
    READY, ready_target, COMM_TRACE, ZEROED, CLAIM, claim_base, AUX, aux_target,
    gemm_programs, comm_programs,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, BLK_K: tl.constexpr, GSIZE_M: tl.constexpr,
    EVEN_K: tl.constexpr, EPILOGUE: tl.constexpr, TIMER: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, NUM_XCDS: tl.constexpr, USE_TMA: tl.constexpr,
    TILE_FN: tl.constexpr, READY_SCOPE: tl.constexpr, PIPELINED: tl.constexpr,
    CTM: tl.constexpr, CTN: tl.constexpr,
    COMM_AFTER_GEMM: tl.constexpr, GEMM_WAITS_ZEROED: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid < gemm_programs:
        if GEMM_WAITS_ZEROED:  # fused_sequential all_reduce adds into every rank's C from its epilogue
            _wait_peers_zeroed(ZEROED, epoch, max_spins, world_size, ERRORS)
        streamk_program(
            pid, gemm_programs,
            A, B, C, P, LOCKS, TILE_FLAGS, GEMM_TRACE, CLOCK, ERRORS,
            M, N, K,
            stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            sk_tiles, sk_iters_per_program, sk_iters_remainder,
            epoch, max_spins,
            heap_bases, cur_rank, world_size,
            BLK_M, BLK_N, BLK_K, GSIZE_M, EVEN_K, EPILOGUE, TIMER, INPUT_PRECISION, NUM_XCDS, USE_TMA,
        )
        if COMM_AFTER_GEMM:  # join the communication (claiming tiles) once this program's GEMM work is done
            comm_program(
                pid, gemm_programs, pid,
                SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
                READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
                heap_bases, cur_rank, world_size, CLAIM, claim_base,
                TILE_FN, READY_SCOPE, PIPELINED, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER,
            )
    else:
        comm_program(
            pid - gemm_programs, comm_programs, pid,
            SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
            READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
            heap_bases, cur_rank, world_size, CLAIM, claim_base,
            TILE_FN, READY_SCOPE, PIPELINED, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER,
        )


@triton.jit(do_not_specialize=["max_spins", "ready_target", "claim_base", "aux_target"])
def comm_kernel(
    SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
    READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, CLAIM, claim_base, AUX, aux_target,
    heap_bases, cur_rank, world_size: tl.constexpr,
    TILE_FN: tl.constexpr, READY_SCOPE: tl.constexpr, PIPELINED: tl.constexpr,
    BLK_M: tl.constexpr, BLK_N: tl.constexpr, GSIZE_M: tl.constexpr,
    CTM: tl.constexpr, CTN: tl.constexpr, TIMER: tl.constexpr,
):
    pid = tl.program_id(0)
    comm_program(
        pid, tl.num_programs(0), pid,
        SRC, DST, CM, CN, stride_sm, stride_sn, stride_dm, stride_dn,
        READY, ready_target, max_spins, ERRORS, COMM_TRACE, CLOCK, AUX, aux_target,
        heap_bases, cur_rank, world_size, CLAIM, claim_base,
        TILE_FN, READY_SCOPE, PIPELINED, BLK_M, BLK_N, GSIZE_M, CTM, CTN, TIMER,
    )


@triton.jit(do_not_specialize=["epoch"])
def signal_zeroed(ZEROED, epoch, heap_bases, cur_rank, world_size: tl.constexpr):
    """Tell every rank that this rank's C is zeroed for `epoch` (runs after the memset, same stream)."""
    for p in range(0, world_size):
        notify(ZEROED + cur_rank, epoch, cur_rank, p, heap_bases, "sys")

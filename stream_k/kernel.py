"""The persistent Stream-K GEMM kernel (Triton), C = A @ B, with fix-up and a tile-ready epilogue hook.

The whole work of one GEMM program is the device function

    streamk_program(
        pid, num_programs,                    # this program's id in 0..num_programs-1, and how many compute
        A, B, C,                              # A: M x K, B: K x N (any strides), C: M x N; with TILING.USE_TMA A and
                                              #   B are tensor descriptors (blocks [BLK_M, BLK_K], [BLK_K, BLK_N])
                                              #   loaded by the copy engine (NVIDIA sm_90+)
        WORK,                                 # stream_k.kernel_args.Workspace: P [2 * SK_ROUNDS * num_programs,
                                              #   BLK_M, BLK_N] fp32 (int32 for int8), LOCKS [num_tiles] int32 (0)
        TILE_FLAGS, GEMM_TRACE,               # int32 [num_tiles] or None; int64 [num_tiles, 3] or None
        SIZES,                                # stream_k.kernel_args.Sizes: M, N, K, the six strides and row_shift
                                              #   (the tile order's rows rotated by that many tile rows)
        sk_tiles,                             # from StreamKPlan (its SK rounds are computed in-kernel)
        epoch,                                # > every earlier launch's epoch on this workspace
        CTX,                                  # iris_ops.context.DeviceContext: heap bases, rank, world size (handed
                                              #   to EPILOGUE; [0], 0, 1 on one GPU), error words (with A_WAIT: the
                                              #   step's words on the heap), the clock and TIMER kind of GEMM_TRACE,
                                              #   the poll budget of an A_WAIT wait (max_spins)
        TILING,                               # constexpr stream_k.kernel_args.Tiling: BLK_M, BLK_N, BLK_K, GSIZE_M,
                                              #   EVEN_K (K % BLK_K == 0), BLK_N1, USE_TMA, STRIDE_ALIGN,
                                              #   INPUT_PRECISION
        SCHEDULE,                             # constexpr stream_k.kernel_args.Schedule: SK_FIRST, SK_ROUNDS, SPLIT_K,
                                              #   NUM_XCDS, REDUCE_LOADS, FIXUP_BY_HALF
        EPILOGUE,                             # constexpr @triton.jit function, see below
        P_DESC=None,                          # with USE_TMA: P as a tensor descriptor over [slots * BLK_M, BLK_N],
                                              #   blocks [BLK_M, BLK_N // 2]; pieces are written and summed
                                              #   through it (_store_partial, _sum_pieces)
        A_WAIT=None,                          # stream_k.kernel_args.AWait: the all-gather of A (streamk_program's
                                              #   docstring)
        B1=None,                              # with BLK_N1 > 0: B as a tensor descriptor, blocks [BLK_K, BLK_N1]
    )

The fields of TILING and SCHEDULE: BLK_N1 > 0: a tile BLK_N wide that is not a power of two is two column blocks,
BLK_N - BLK_N1 and BLK_N1 (stream_k.tiles.width_parts; TMA and data-parallel plans only); STRIDE_ALIGN: stride_am and
stride_bk are multiples of this (elements): on the pointer path rows 16-byte aligned but not 16-element aligned still
load in 16-byte vectors (Triton only knows the latter itself); INPUT_PRECISION: tl.dot's ("ieee"/"tf32"/...; fp32
only); SK_FIRST: the Stream-K share before the DP tiles; SK_ROUNDS: Stream-K rounds (plan.sk_rounds; the last one
aligned); SPLIT_K: plan.split_k (schedule "splitk": one piece of one tile per program, _split_k_piece), 0 otherwise;
NUM_XCDS > 1 remaps pids so consecutive ones share an XCD; REDUCE_LOADS: partials a tile's last piece reads at once;
FIXUP_BY_HALF: the fix-up's order (_sum_pieces' BY_HALF).

so a fused kernel can call it from programs 0..gemm_sms-1 and communicate from the others;
`streamk_gemm_kernel` is the stand-alone kernel (pid = program_id(0), num_programs = num_programs(0)).
The accumulator is fp32, or int32 when C is an integer type (int8 inputs, int32 C).

EPILOGUE contract: `EPILOGUE(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX)` is
called exactly once per tile per launch, by the program that completes it, with `acc` the tile's final
[BLK_M, BLK_N] accumulator (after fix-up), rm / rn the tile's global row / column indices (unclipped: they may run
past M / N at the edges) and row0 = rm's first (least) row as a scalar, so that an epilogue needs no reduction over
rm to find it; CTX is the launch's device context (an epilogue that writes to peers reads heap_bases, cur_rank and
world_size from it). It stores the tile and signals it; `store_and_signal` (the default) does a masked store of acc
in C's element type, then, when TILE_FLAGS is not None, a barrier and a release `TILE_FLAGS[tile_id] = epoch`.

Schedule (see stream_k/plan.py, whose `work_items` mirrors this loop): DP tiles 0..dp_tiles-1
first (p, p+P, ...), then the program's Stream-K range of each round, tile by tile in reverse order
(with SK_ROUNDS > 1 the last round is aligned: one piece of one tile per program, `_sk_round`);
with SK_FIRST the Stream-K ranges first, then the DP tiles.

Fix-up (no program ever waits for another): every *piece* of a split tile (the part of the tile's K loop
that one program's range holds) is stored as an fp32 partial in workspace slot P[(r * P + pid) * 2 + side]
(side 0: the piece holds the start of the program's range in round r; side 1: its end), then the program adds
one to the tile's arrival counter LOCKS[tile] (acq_rel). The program that arrives last sums the tile's pieces in
the order of their programs (so results are bit-identical run to run, whoever arrives last), resets the counter
to 0 for the next launch, and runs the EPILOGUE. Programs may run in any order (the interpreter runs them one
after another), and a tile's pieces cost one partial store each and one read of each partial by the last.

Tile widths that are not a power of two (BLK_N1 > 0: 3 or 5 times a power of two, e.g. 320 = 256 + 64, so that
a shape's tiles fill whole waves of programs): the tile is two column blocks, each with its own accumulator and
B descriptor, multiplied by the same A block in one K loop; the EPILOGUE is called once per block, the tile's
flag passed to the second call only (so it is released after both blocks are stored). Such tiles are never
split: the plan is data-parallel, and the Stream-K fix-up is not compiled in.

Main loop: full BLK_K steps with unmasked loads (rows / columns past M / N are clamped to 0 and
masked at the store); when K % BLK_K != 0 the tile's last K block is one peeled, masked iteration,
run only by the program whose range holds it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import triton
import triton.language as tl

from streamk_pgas.iris_ops.context import now, wait_range_or_record
from streamk_pgas.iris_ops.device import ERR_A_ROWS, fence_proxy_async_global, wait_bulk_stores
from streamk_pgas.iris_ops.env import interpreted
from streamk_pgas.stream_k.tiles import gemm_tile_coords

_ERR_A_ROWS: tl.constexpr = tl.constexpr(ERR_A_ROWS)
_INTERPRET: tl.constexpr = tl.constexpr(interpreted())


@triton.jit
def store_and_signal(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """Default EPILOGUE: masked store of the tile in C's type, then release TILE_FLAGS[tile_id] = epoch."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    c_ptrs = C + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=mask)
    if TILE_FLAGS is not None:
        tl.debug_barrier()
        tl.atomic_xchg(TILE_FLAGS + tile_id, epoch, sem="release", scope="gpu")


@triton.jit
def column_halves(x):
    """The two column halves of a 2-D block."""
    return tl.split(tl.permute(tl.reshape(x, (x.shape[0], 2, x.shape[1] // 2)), (0, 2, 1)))


@triton.jit
def store_tma_and_signal(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """EPILOGUE for C given as a tensor descriptor whose block is one, a half or a quarter of the tile's columns
    (stream_k.gemm.c_store_columns: a 16 KiB piece or a quarter tile): the tile goes through shared memory to the
    copy engine piece after piece, in one staging buffer small enough to sit beside the pipeline's, and the copy
    engine drops what lies past M and N, so C's rows need only be 16-byte aligned. With TILE_FLAGS, the stores are
    waited for before the release, as in store_and_signal."""
    BLK_N: tl.constexpr = acc.shape[1]
    PIECE: tl.constexpr = C.block_shape[1]
    row = tl.min(rm, axis=0)
    col = tl.min(rn, axis=0)
    c = acc.to(C.dtype)
    if PIECE == BLK_N:
        C.store([row, col], c)
    else:
        a, b = column_halves(c)
        if PIECE == BLK_N // 2:
            C.store([row, col], a)
            C.store([row, col + PIECE], b)
        else:
            a0, a1 = column_halves(a)
            b0, b1 = column_halves(b)
            C.store([row, col], a0)
            C.store([row, col + PIECE], a1)
            C.store([row, col + 2 * PIECE], b0)
            C.store([row, col + 3 * PIECE], b1)
    if TILE_FLAGS is not None:
        wait_bulk_stores()
        tl.debug_barrier()
        tl.atomic_xchg(TILE_FLAGS + tile_id, epoch, sem="release", scope="gpu")


@triton.jit
def remap_xcd(pid, num_programs, NUM_XCDS: tl.constexpr):
    """Renumber pids so that consecutive logical pids run on one XCD (AMD dispatches round-robin).

    A bijection of 0..num_programs-1. Owners wait on lower *logical* pids, which after the remap may be
    dispatched later, so NUM_XCDS > 1 needs every program resident at once (num_programs <= CUs)."""
    if NUM_XCDS > 1:
        per_xcd = (num_programs + NUM_XCDS - 1) // NUM_XCDS
        tall = num_programs % NUM_XCDS
        tall = tl.where(tall == 0, NUM_XCDS, tall)
        xcd = pid % NUM_XCDS
        local = pid // NUM_XCDS
        pid = tl.where(xcd < tall, xcd * per_xcd + local, tall * per_xcd + (xcd - tall) * (per_xcd - 1) + local)
    return pid


@triton.jit
def _sk_program_of(i, ipp, rem):
    """The program whose Stream-K range holds SK iteration i (ranges: ipp + 1 for the first rem)."""
    big = rem * (ipp + 1)
    return tl.where(i < big, i // (ipp + 1), rem + (i - big) // tl.maximum(ipp, 1))


@triton.jit
def _sk_round(r: tl.constexpr, pid, num_programs, sk_tiles, iters_per_tile, SK_ROUNDS: tl.constexpr):
    """Round r of the Stream-K tiles (plan.round_bounds): its first tile (counted from the first SK
    tile), iterations per program and remainder (an even split), and pid's [start, end) in it.

    With SK_ROUNDS > 1 the last round is *aligned*: L = min(num_programs // S, its share) tiles, S =
    2^(SK_ROUNDS-1), each cut into S pieces, one per program (pid -> tile pid // S, piece pid % S;
    programs >= L * S have none there); ipp and rem are then S and L."""
    SPLIT: tl.constexpr = 2 ** (SK_ROUNDS - 1)  # (a power: the interpreter's constexpr has no <<)
    if SK_ROUNDS == 1:
        last = sk_tiles * 0
    else:
        last = tl.minimum(num_programs // SPLIT, sk_tiles)
    head = sk_tiles - last
    if SK_ROUNDS > 1 and r == SK_ROUNDS - 1:
        first = head
        t = pid // SPLIT
        j = pid % SPLIT
        active = pid < last * SPLIT
        start = tl.where(active, t * iters_per_tile + j * iters_per_tile // SPLIT, 0)
        end = tl.where(active, t * iters_per_tile + (j + 1) * iters_per_tile // SPLIT, 0)
        ipp = head * 0 + SPLIT
        rem = last
    else:
        EARLY: tl.constexpr = SK_ROUNDS - 1 if SK_ROUNDS > 1 else 1
        WHOLE: tl.constexpr = 2 ** EARLY - 1
        LO: tl.constexpr = 2 ** EARLY - 2 ** (EARLY - r)
        HI: tl.constexpr = 2 ** EARLY - 2 ** (EARLY - r - 1)
        first = head * LO // WHOLE
        iters = (head * HI // WHOLE - first) * iters_per_tile
        ipp = iters // num_programs
        rem = iters % num_programs
        start = pid * ipp + tl.minimum(pid, rem)
        end = start + ipp + (pid < rem).to(tl.int32)
    return first, ipp, rem, start, end


@triton.jit
def _sk_items(start, end, iters_per_tile):
    """How many tiles the iteration range [start, end) touches."""
    return tl.where(end > start, (end - 1) // iters_per_tile - start // iters_per_tile + 1, 0)


@triton.jit
def _partial_ptrs(P, slot, BLK_M: tl.constexpr, BLK_N: tl.constexpr):
    """Pointers to workspace slot P[slot], a row-major BLK_M x BLK_N block."""
    return P + slot * (BLK_M * BLK_N) + tl.arange(0, BLK_M)[:, None] * BLK_N + tl.arange(0, BLK_N)[None, :]


@triton.jit
def _store_partial(P, P_DESC, slot, acc, BLK_M: tl.constexpr, BLK_N: tl.constexpr, USE_TMA: tl.constexpr):
    """A piece's accumulator into workspace slot P[slot], complete before the caller's release.

    With USE_TMA the two column halves go through shared memory to the copy engine (no layout change of
    the accumulator in registers); `wait_bulk_stores` waits until the copy engine's writes are complete
    (not only until it has read shared memory) and fences them towards the generic proxy."""
    if USE_TMA:
        halves = tl.permute(tl.reshape(acc, (BLK_M, 2, BLK_N // 2)), (0, 2, 1))
        lo, hi = tl.split(halves)
        P_DESC.store([slot * BLK_M, 0], lo)
        P_DESC.store([slot * BLK_M, BLK_N // 2], hi)
        wait_bulk_stores()
    else:
        tl.store(_partial_ptrs(P, slot, BLK_M, BLK_N), acc)


@triton.jit
def _piece_slot(q, t_start, rnd, num_programs, q_start):
    """The workspace slot of program q's piece of a tile whose first (round-local) iteration is t_start: side 0
    when q's range in round rnd starts in that tile (q_start >= t_start), else side 1 (it ends there)."""
    return (rnd * num_programs + q) * 2 + (q_start < t_start).to(tl.int32)


@triton.jit
def _sum_pieces(P, rnd, ts, iters_per_tile, sk_ipp, sk_rem, aligned, num_programs, ACC_TYPE: tl.constexpr,
                BLK_M: tl.constexpr, BLK_N: tl.constexpr, SPLIT: tl.constexpr, REDUCE_LOADS: tl.constexpr,
                BY_HALF: tl.constexpr):
    """The sum of round-local tile ts's pieces, in the order of their programs (the tile's final accumulator).

    The pieces belong to programs first..last (the aligned round: ts * SPLIT + j for the j that hold iterations).
    Each column half of the tile is summed on its own (a whole 128 x 256 partial beside the sum would not fit in
    8 warps' registers), REDUCE_LOADS partials at a time: their loads are independent, so they are in flight
    together instead of one L2 round trip per partial. BY_HALF sums the left half over every piece, then the right
    half; otherwise each piece's two halves are added in turn (the same sums: which one fits a target's registers
    differs, stream_k/configs.py). A piece left out (past the last program, or an aligned piece of no iterations)
    loads zeros."""
    t_start = ts * iters_per_tile
    first = tl.where(aligned, ts * SPLIT, _sk_program_of(t_start, sk_ipp, sk_rem))
    last = tl.where(aligned, ts * SPLIT + SPLIT - 1, _sk_program_of(t_start + iters_per_tile - 1, sk_ipp, sk_rem))
    lo = tl.zeros((BLK_M, BLK_N // 2), dtype=ACC_TYPE)
    hi = tl.zeros((BLK_M, BLK_N // 2), dtype=ACC_TYPE)
    if BY_HALF:
        for q0 in range(first, last + 1, REDUCE_LOADS):
            for u in tl.static_range(REDUCE_LOADS):
                lo += _piece_half(P, q0 + u, 0, first, last, t_start, rnd, iters_per_tile, sk_ipp, sk_rem, aligned,
                                  num_programs, BLK_M, BLK_N, SPLIT)
        for q0 in range(first, last + 1, REDUCE_LOADS):
            for u in tl.static_range(REDUCE_LOADS):
                hi += _piece_half(P, q0 + u, 1, first, last, t_start, rnd, iters_per_tile, sk_ipp, sk_rem, aligned,
                                  num_programs, BLK_M, BLK_N, SPLIT)
    else:
        for q0 in range(first, last + 1, REDUCE_LOADS):
            for half in tl.static_range(2):
                for u in tl.static_range(REDUCE_LOADS):
                    part = _piece_half(P, q0 + u, half, first, last, t_start, rnd, iters_per_tile, sk_ipp, sk_rem,
                                       aligned, num_programs, BLK_M, BLK_N, SPLIT)
                    if half == 0:
                        lo += part
                    else:
                        hi += part
    return tl.reshape(tl.permute(tl.join(lo, hi), (0, 2, 1)), (BLK_M, BLK_N))


@triton.jit
def _piece_half(P, q, half: tl.constexpr, first, last, t_start, rnd, iters_per_tile, sk_ipp, sk_rem, aligned,
                num_programs, BLK_M: tl.constexpr, BLK_N: tl.constexpr, SPLIT: tl.constexpr):
    """Column half `half` of program q's piece of the tile whose pieces are first..last (zeros if q holds none)."""
    j = q - first
    held = (q <= last) & ~(aligned & ((j + 1) * iters_per_tile // SPLIT == j * iters_per_tile // SPLIT))
    q_start = tl.where(aligned, t_start, q * sk_ipp + tl.minimum(q, sk_rem))
    slot = _piece_slot(q, t_start, rnd, num_programs, q_start)
    offs = tl.arange(0, BLK_M)[:, None] * BLK_N + tl.arange(0, BLK_N // 2)[None, :]
    mask = (offs * 0 + held.to(tl.int32)) != 0  # the scalar, as a tensor (the interpreter's need)
    return tl.load(P + slot * (BLK_M * BLK_N) + half * (BLK_N // 2) + offs, mask=mask, other=0, cache_modifier=".cg")


@triton.jit
def _pieces_of(ts, iters_per_tile, sk_ipp, sk_rem, aligned, SPLIT: tl.constexpr):
    """How many pieces (programs with iterations in it) round-local tile ts has."""
    t_start = ts * iters_per_tile
    first = _sk_program_of(t_start, sk_ipp, sk_rem)
    last = _sk_program_of(t_start + iters_per_tile - 1, sk_ipp, sk_rem)
    return tl.where(aligned, tl.minimum(iters_per_tile, SPLIT), last - first + 1)


@triton.jit
def _dot(a, b, acc, INPUT_PRECISION: tl.constexpr):
    """acc + a @ b. Triton 3.9's interpreter multiplies bf16 bit patterns as integers, so there bf16
    operands go through fp32 (exact products, fp32 sums: what the tensor cores compute)."""
    if _INTERPRET and a.dtype == tl.bfloat16:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=acc.dtype)


@triton.jit
def _mac_loop(acc, A, B, ram, rbn, k_lo, k_hi, iters_per_tile, K,
              stride_am, stride_ak, stride_bk, stride_bn,
              BLK_K: tl.constexpr, EVEN_K: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """acc += A[ram, k] @ B[k, rbn] over K blocks [k_lo, k_hi); the tile's last block masked if K is ragged."""
    rk = tl.arange(0, BLK_K)
    k0 = k_lo * BLK_K
    a_ptrs = A + ram[:, None] * stride_am + (k0 + rk)[None, :] * stride_ak
    b_ptrs = B + (k0 + rk)[:, None] * stride_bk + rbn[None, :] * stride_bn
    n_full = k_hi - k_lo
    if not EVEN_K:
        n_full = tl.where(k_hi == iters_per_tile, n_full - 1, n_full)
    for _ in range(n_full):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = _dot(a, b, acc, INPUT_PRECISION)
        a_ptrs += BLK_K * stride_ak
        b_ptrs += BLK_K * stride_bk
    if not EVEN_K:
        if k_hi == iters_per_tile:
            k_ok = (iters_per_tile - 1) * BLK_K + rk < K
            a = tl.load(a_ptrs, mask=k_ok[None, :], other=0)
            b = tl.load(b_ptrs, mask=k_ok[:, None], other=0)
            acc = _dot(a, b, acc, INPUT_PRECISION)
    return acc


@triton.jit
def _mac_loop_tma(acc, A, B, off_m, off_n, k_lo, k_hi, BLK_K: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """acc += A[off_m:, k] @ B[k, off_n:] over K blocks [k_lo, k_hi), A and B tensor descriptors.

    The copy engine zero-fills whatever lies past M, N or K, so no block needs a mask."""
    for kb in range(k_lo, k_hi):
        a = A.load([off_m, kb * BLK_K])
        b = B.load([kb * BLK_K, off_n])
        acc = _dot(a, b, acc, INPUT_PRECISION)
    return acc


@triton.jit
def _wait_a_rows(A_WAIT, pid_m, M, k_lo, k_hi, iters_per_tile, epoch, tile_id, CTX, BLK_M: tl.constexpr,
                 USE_TMA: tl.constexpr):
    """Wait until the rows of row block pid_m of A have arrived in the columns of K blocks [k_lo, k_hi) (see
    streamk_program's A_WAIT). A wait that gives up records the error on every rank (CTX.ERRORS: the step's error
    words on the heap, iris_ops.error_state)."""
    a_rows = A_WAIT.a_rows
    a_chunk = A_WAIT.a_chunk
    n_rb = tl.cdiv(M, BLK_M)
    n_kc = tl.cdiv(iters_per_tile, a_chunk)
    lo = pid_m * BLK_M
    hi = tl.minimum(M, lo + BLK_M) - 1
    kc0 = k_lo // a_chunk
    for slot in range(lo // a_rows, hi // a_rows + 1):  # the slot's chunks of the row block are consecutive words
        wait_range_or_record(CTX, A_WAIT.A_READY + (slot * n_rb + pid_m) * n_kc + kc0, tl.cdiv(k_hi, a_chunk) - kc0,
                             epoch, _ERR_A_ROWS.value, tile_id, "sys")
    if USE_TMA:
        fence_proxy_async_global()  # the acquire above before the copy engine's reads of A


@triton.jit
def _tile_k_blocks_as_a_arrives(acc, A, B, A_WAIT, rm, rn, pid_m, pid_n, k_lo, k_hi, iters_per_tile, epoch, tile_id,
                                SIZES, CTX, TILING):
    """_tile_k_blocks over [k_lo, k_hi) in segments of A_WAIT.a_segment K blocks (at multiples of it), each read once
    A's rows have arrived in its columns (_wait_a_rows): a tile starts on its first columns while the rest arrive."""
    seg = A_WAIT.a_segment
    for s in range(k_lo // seg, tl.cdiv(k_hi, seg)):
        lo = tl.maximum(k_lo, s * seg)
        hi = tl.minimum(k_hi, s * seg + seg)
        _wait_a_rows(A_WAIT, pid_m, SIZES.M, lo, hi, iters_per_tile, epoch, tile_id, CTX, TILING.BLK_M,
                     TILING.USE_TMA)
        acc = _tile_k_blocks(acc, A, B, rm, rn, pid_m, pid_n, lo, hi, iters_per_tile, SIZES, TILING)
    return acc


@triton.jit
def _tile_k_blocks(acc, A, B, rm, rn, pid_m, pid_n, k_lo, k_hi, iters_per_tile, SIZES, TILING):
    """acc + the tile's K blocks [k_lo, k_hi): through tensor descriptors (USE_TMA) or pointers. On the pointer path
    rows / columns past the edge read row / column 0: loads need no mask, the store drops them."""
    BLK_M: tl.constexpr = TILING.BLK_M
    BLK_N: tl.constexpr = TILING.BLK_N
    BLK_K: tl.constexpr = TILING.BLK_K
    STRIDE_ALIGN: tl.constexpr = TILING.STRIDE_ALIGN
    if TILING.USE_TMA:
        acc = _mac_loop_tma(acc, A, B, pid_m * BLK_M, pid_n * BLK_N, k_lo, k_hi, BLK_K, TILING.INPUT_PRECISION)
    else:
        stride_am = SIZES.stride_am
        stride_bk = SIZES.stride_bk
        if STRIDE_ALIGN > 1:  # the product states the multiple to the compiler (the value is unchanged)
            stride_am = stride_am // STRIDE_ALIGN * STRIDE_ALIGN
            stride_bk = stride_bk // STRIDE_ALIGN * STRIDE_ALIGN
        ram = tl.max_contiguous(tl.multiple_of(tl.where(rm < SIZES.M, rm, 0), BLK_M), BLK_M)
        ran = tl.max_contiguous(tl.multiple_of(tl.where(rn < SIZES.N, rn, 0), BLK_N), BLK_N)
        acc = _mac_loop(acc, A, B, ram, ran, k_lo, k_hi, iters_per_tile, SIZES.K,
                        stride_am, SIZES.stride_ak, stride_bk, SIZES.stride_bn, BLK_K, TILING.EVEN_K,
                        TILING.INPUT_PRECISION)
    return acc


@triton.jit
def _split_k_piece(pid, A, B, C, WORK, P_DESC, TILE_FLAGS, GEMM_TRACE, iters_per_tile, epoch, SIZES, CTX, TILING,
                   SCHEDULE, EPILOGUE: tl.constexpr):
    """Split-K (plan.split_k): program pid computes piece pid % SPLIT_K of tile pid // SPLIT_K, stores it in
    workspace slot pid and counts it; the last of the tile's pieces to arrive sums the SPLIT_K slots in order and
    runs the EPILOGUE (the fix-up of the module docstring, with one piece per program)."""
    BLK_M: tl.constexpr = TILING.BLK_M
    BLK_N: tl.constexpr = TILING.BLK_N
    SPLIT_K: tl.constexpr = SCHEDULE.SPLIT_K
    REDUCE_LOADS: tl.constexpr = SCHEDULE.REDUCE_LOADS
    P = WORK.P
    LOCKS = WORK.LOCKS
    ACC_TYPE: tl.constexpr = P.dtype.element_ty
    t_begin = 0
    if GEMM_TRACE is not None:
        t_begin = now(CTX)
    tile_id = pid // SPLIT_K
    j = pid % SPLIT_K
    k_lo = j * iters_per_tile // SPLIT_K
    k_hi = (j + 1) * iters_per_tile // SPLIT_K
    pid_m, pid_n = gemm_tile_coords(tile_id, SIZES, BLK_M, BLK_N, TILING.GSIZE_M)
    rm = pid_m * BLK_M + tl.arange(0, BLK_M)
    rn = pid_n * BLK_N + tl.arange(0, BLK_N)
    acc = _tile_k_blocks(tl.zeros((BLK_M, BLK_N), dtype=ACC_TYPE), A, B, rm, rn, pid_m, pid_n, k_lo, k_hi,
                         iters_per_tile, SIZES, TILING)
    _store_partial(P, P_DESC, pid, acc, BLK_M, BLK_N, TILING.USE_TMA)
    tl.debug_barrier()
    arrived = tl.atomic_add(LOCKS + tile_id, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:
        tl.atomic_xchg(LOCKS + tile_id, 0, sem="relaxed", scope="gpu")  # ready for the next launch
        first = tile_id * SPLIT_K
        offs = tl.arange(0, BLK_M)[:, None] * BLK_N + tl.arange(0, BLK_N // 2)[None, :]
        lo = tl.zeros((BLK_M, BLK_N // 2), dtype=ACC_TYPE)
        hi = tl.zeros((BLK_M, BLK_N // 2), dtype=ACC_TYPE)
        for q0 in range(0, SPLIT_K, REDUCE_LOADS):
            for half in tl.static_range(2):
                for u in tl.static_range(REDUCE_LOADS):
                    held = offs * 0 + (q0 + u) < SPLIT_K  # a tensor (the interpreter's need)
                    part = tl.load(P + (first + q0 + u) * (BLK_M * BLK_N) + half * (BLK_N // 2) + offs, mask=held,
                                   other=0, cache_modifier=".cg")
                    if half == 0:
                        lo += part
                    else:
                        hi += part
        acc = tl.reshape(tl.permute(tl.join(lo, hi), (0, 2, 1)), (BLK_M, BLK_N))
        EPILOGUE(acc, rm, rn, pid_m * BLK_M, SIZES.M, SIZES.N, C, SIZES.stride_cm, SIZES.stride_cn, tile_id,
                 TILE_FLAGS, epoch, CTX)
        if GEMM_TRACE is not None:
            _trace_tile(GEMM_TRACE, tile_id, t_begin, pid, CTX)


@triton.jit
def _two_block_tile(tile_id, A, B, B1, C, TILE_FLAGS, GEMM_TRACE, t_begin, iters_per_tile, epoch, pid, A_WAIT, SIZES,
                    CTX, TILING, EPILOGUE: tl.constexpr, ACC_TYPE: tl.constexpr):
    """One whole tile of two column blocks, BLK_N - BLK_N1 and BLK_N1 wide, each with its own accumulator and B
    descriptor, one K loop over both (the copy engine zero-fills past M, N and K); the EPILOGUE per block, the tile's
    flag with the second."""
    BLK_M: tl.constexpr = TILING.BLK_M
    BLK_N: tl.constexpr = TILING.BLK_N
    BLK_N1: tl.constexpr = TILING.BLK_N1
    BLK_K: tl.constexpr = TILING.BLK_K
    BLK_N0: tl.constexpr = BLK_N - BLK_N1
    M = SIZES.M
    N = SIZES.N
    pid_m, pid_n = gemm_tile_coords(tile_id, SIZES, BLK_M, BLK_N, TILING.GSIZE_M)
    rm = pid_m * BLK_M + tl.arange(0, BLK_M)
    off_n = pid_n * BLK_N
    if A_WAIT is not None:
        _wait_a_rows(A_WAIT, pid_m, M, 0, iters_per_tile, iters_per_tile, epoch, tile_id, CTX, BLK_M, TILING.USE_TMA)
    acc0 = tl.zeros((BLK_M, BLK_N0), dtype=ACC_TYPE)
    acc1 = tl.zeros((BLK_M, BLK_N1), dtype=ACC_TYPE)
    for kb in range(0, iters_per_tile):
        a = A.load([pid_m * BLK_M, kb * BLK_K])
        acc0 = _dot(a, B.load([kb * BLK_K, off_n]), acc0, TILING.INPUT_PRECISION)
        acc1 = _dot(a, B1.load([kb * BLK_K, off_n + BLK_N0]), acc1, TILING.INPUT_PRECISION)
    EPILOGUE(acc0, rm, off_n + tl.arange(0, BLK_N0), pid_m * BLK_M, M, N, C, SIZES.stride_cm, SIZES.stride_cn, tile_id,
             None, epoch, CTX)
    EPILOGUE(acc1, rm, off_n + BLK_N0 + tl.arange(0, BLK_N1), pid_m * BLK_M, M, N, C, SIZES.stride_cm,
             SIZES.stride_cn, tile_id, TILE_FLAGS, epoch, CTX)
    if GEMM_TRACE is not None:
        _trace_tile(GEMM_TRACE, tile_id, t_begin, pid, CTX)


class Piece(NamedTuple):
    """A work item of streamk_program's loop (a tuple built in the kernel): its tile, the tile's index in its
    Stream-K round (ts), the K blocks [k_lo, k_hi) it holds, its round and the round's split of the program's range
    (sk_start, sk_ipp, sk_rem: stream_k.kernel._sk_round), and when the program began it (t_begin, for GEMM_TRACE)."""

    tile_id: Any
    ts: Any
    k_lo: Any
    k_hi: Any
    rnd: Any
    sk_start: Any
    sk_ipp: Any
    sk_rem: Any
    t_begin: Any


@triton.jit
def streamk_program(pid, num_programs, A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles, epoch, CTX, TILING,
                    SCHEDULE, EPILOGUE: tl.constexpr, P_DESC=None, A_WAIT=None, B1=None):
    """All of one GEMM program's work: its DP tiles and its Stream-K range (see the module docstring).

    A_WAIT (stream_k.kernel_args.AWait; None: A is complete at launch): A's rows arrive during the launch (an
    all-gather), in slots of a_rows rows and chunks of a_chunk K blocks; a work item reads its K blocks [k_lo, k_hi)
    in segments of a_segment blocks (SEGMENTED; else in one), and before each the program waits (acquire, system
    scope) until A_READY[(slot * cdiv(M, BLK_M) + pid_m) * n_chunks + kc] >= epoch for every slot that the tile's row
    block overlaps and every chunk kc that the segment touches (n_chunks = cdiv(iters, a_chunk))."""
    BLK_M: tl.constexpr = TILING.BLK_M
    BLK_N: tl.constexpr = TILING.BLK_N
    BLK_K: tl.constexpr = TILING.BLK_K
    BLK_N1: tl.constexpr = TILING.BLK_N1
    SK_ROUNDS: tl.constexpr = SCHEDULE.SK_ROUNDS
    SPLIT_K: tl.constexpr = SCHEDULE.SPLIT_K
    M = SIZES.M
    N = SIZES.N
    pid = remap_xcd(pid, num_programs, SCHEDULE.NUM_XCDS)
    ACC_TYPE: tl.constexpr = WORK.P.dtype.element_ty  # the workspace holds accumulators: fp32, or int32 for int8
    iters_per_tile = tl.cdiv(SIZES.K, BLK_K)
    num_tiles = tl.cdiv(M, BLK_M) * tl.cdiv(N, BLK_N)
    dp_tiles = num_tiles - sk_tiles
    n_dp = (dp_tiles + num_programs - 1 - pid) // num_programs

    tl.static_assert(BLK_N1 == 0 or TILING.USE_TMA, "two column blocks: TMA only (and a data-parallel plan)")
    n_sk = 0
    if BLK_N1 == 0 and SPLIT_K == 0:
        for r in tl.static_range(SK_ROUNDS):
            _, _, _, start_r, end_r = _sk_round(r, pid, num_programs, sk_tiles, iters_per_tile, SK_ROUNDS)
            n_sk += _sk_items(start_r, end_r, iters_per_tile)

    if SPLIT_K > 0:
        _split_k_piece(pid, A, B, C, WORK, P_DESC, TILE_FLAGS, GEMM_TRACE, iters_per_tile, epoch, SIZES, CTX, TILING,
                       SCHEDULE, EPILOGUE)
    elif BLK_N1 > 0:  # two column blocks, whole tiles only: program pid computes tiles pid, pid + P, ...
        for w in range(n_dp):
            t_begin = 0
            if GEMM_TRACE is not None:
                t_begin = now(CTX)
            _two_block_tile(pid + w * num_programs, A, B, B1, C, TILE_FLAGS, GEMM_TRACE, t_begin, iters_per_tile,
                            epoch, pid, A_WAIT, SIZES, CTX, TILING, EPILOGUE, ACC_TYPE)
    else:
        for w in range(n_dp + n_sk):
            t_begin = 0
            if GEMM_TRACE is not None:
                t_begin = now(CTX)
            if SCHEDULE.SK_FIRST:
                is_dp = w >= n_sk
                dp_w = w - n_sk
                sk_w = w
            else:
                is_dp = w < n_dp
                dp_w = w
                sk_w = w - n_dp
            # This item's SK round: its first tile, split (ipp, rem), pid's range, and the item's index in it.
            rnd = 0
            first_tile = 0
            sk_ipp = 0
            sk_rem = 0
            sk_start = 0
            sk_end = 0
            item = sk_w
            seen = 0
            for r in tl.static_range(SK_ROUNDS):
                first_r, ipp_r, rem_r, start_r, end_r = _sk_round(r, pid, num_programs, sk_tiles, iters_per_tile,
                                                                  SK_ROUNDS)
                n_r = _sk_items(start_r, end_r, iters_per_tile)
                hit = (sk_w >= seen) & (sk_w < seen + n_r)
                rnd = tl.where(hit, r, rnd)
                first_tile = tl.where(hit, first_r, first_tile)
                sk_ipp = tl.where(hit, ipp_r, sk_ipp)
                sk_rem = tl.where(hit, rem_r, sk_rem)
                sk_start = tl.where(hit, start_r, sk_start)
                sk_end = tl.where(hit, end_r, sk_end)
                item = tl.where(hit, sk_w - seen, item)
                seen += n_r
            if is_dp:
                tile_id = pid + dp_w * num_programs
                ts = 0
                k_lo = 0
                k_hi = iters_per_tile
            else:
                ts = (sk_end - 1) // iters_per_tile - item
                tile_id = dp_tiles + first_tile + ts
                k_lo = tl.maximum(sk_start, ts * iters_per_tile) - ts * iters_per_tile
                k_hi = tl.minimum(sk_end, ts * iters_per_tile + iters_per_tile) - ts * iters_per_tile
            pid_m, pid_n = gemm_tile_coords(tile_id, SIZES, BLK_M, BLK_N, TILING.GSIZE_M)
            rm = pid_m * BLK_M + tl.arange(0, BLK_M)
            rn = pid_n * BLK_N + tl.arange(0, BLK_N)
            acc = tl.zeros((BLK_M, BLK_N), dtype=ACC_TYPE)
            if A_WAIT is None:
                acc = _tile_k_blocks(acc, A, B, rm, rn, pid_m, pid_n, k_lo, k_hi, iters_per_tile, SIZES, TILING)
            elif A_WAIT.SEGMENTED:
                acc = _tile_k_blocks_as_a_arrives(acc, A, B, A_WAIT, rm, rn, pid_m, pid_n, k_lo, k_hi, iters_per_tile,
                                                  epoch, tile_id, SIZES, CTX, TILING)
            else:
                _wait_a_rows(A_WAIT, pid_m, M, k_lo, k_hi, iters_per_tile, epoch, tile_id, CTX, BLK_M, TILING.USE_TMA)
                acc = _tile_k_blocks(acc, A, B, rm, rn, pid_m, pid_n, k_lo, k_hi, iters_per_tile, SIZES, TILING)

            piece = Piece(tile_id, ts, k_lo, k_hi, rnd, sk_start, sk_ipp, sk_rem, t_begin)
            _finish_item(acc, pid, num_programs, piece, iters_per_tile, rm, rn, pid_m * BLK_M, C, WORK, P_DESC,
                         TILE_FLAGS, GEMM_TRACE, epoch, SIZES, CTX, TILING, SCHEDULE, EPILOGUE)


@triton.jit
def _arrive(pid, num_programs, PIECE, iters_per_tile, rm, rn, row0, C, WORK, TILE_FLAGS, GEMM_TRACE, epoch, SIZES,
            CTX, TILING, SCHEDULE, EPILOGUE: tl.constexpr):
    """Count a stored piece on its tile's arrival counter (release: the caller has made the piece's stores
    visible to the whole program); the last piece to arrive sums the tile's pieces and runs the EPILOGUE."""
    SK_ROUNDS: tl.constexpr = SCHEDULE.SK_ROUNDS
    SPLIT: tl.constexpr = 2 ** (SK_ROUNDS - 1)  # (a power: the interpreter's constexpr has no <<)
    ACC_TYPE: tl.constexpr = WORK.P.dtype.element_ty
    tile_id = PIECE.tile_id
    rnd = PIECE.rnd
    aligned = (rnd == SK_ROUNDS - 1) & (rnd >= 1)
    pieces = _pieces_of(PIECE.ts, iters_per_tile, PIECE.sk_ipp, PIECE.sk_rem, aligned, SPLIT)
    arrived = tl.atomic_add(WORK.LOCKS + tile_id, 1, sem="acq_rel", scope="gpu")
    if arrived == pieces - 1:
        tl.atomic_xchg(WORK.LOCKS + tile_id, 0, sem="relaxed", scope="gpu")  # ready for the next launch
        acc = _sum_pieces(WORK.P, rnd, PIECE.ts, iters_per_tile, PIECE.sk_ipp, PIECE.sk_rem, aligned, num_programs,
                          ACC_TYPE, TILING.BLK_M, TILING.BLK_N, SPLIT, SCHEDULE.REDUCE_LOADS, SCHEDULE.FIXUP_BY_HALF)
        EPILOGUE(acc, rm, rn, row0, SIZES.M, SIZES.N, C, SIZES.stride_cm, SIZES.stride_cn, tile_id, TILE_FLAGS, epoch,
                 CTX)
        if GEMM_TRACE is not None:
            _trace_tile(GEMM_TRACE, tile_id, PIECE.t_begin, pid, CTX)


@triton.jit
def _finish_item(acc, pid, num_programs, PIECE, iters_per_tile, rm, rn, row0, C, WORK, P_DESC, TILE_FLAGS,
                 GEMM_TRACE, epoch, SIZES, CTX, TILING, SCHEDULE, EPILOGUE: tl.constexpr):
    """After a work item's K loop: a whole tile goes to the EPILOGUE; a piece of a split tile is published and
    counted, and the last piece to arrive sums the tile's pieces and runs the EPILOGUE (module docstring)."""
    if (PIECE.k_lo > 0) | (PIECE.k_hi < iters_per_tile):
        slot = _piece_slot(pid, PIECE.ts * iters_per_tile, PIECE.rnd, num_programs, PIECE.sk_start)
        _store_partial(WORK.P, P_DESC, slot, acc, TILING.BLK_M, TILING.BLK_N, TILING.USE_TMA)
        tl.debug_barrier()
        _arrive(pid, num_programs, PIECE, iters_per_tile, rm, rn, row0, C, WORK, TILE_FLAGS, GEMM_TRACE, epoch, SIZES,
                CTX, TILING, SCHEDULE, EPILOGUE)
    else:
        EPILOGUE(acc, rm, rn, row0, SIZES.M, SIZES.N, C, SIZES.stride_cm, SIZES.stride_cn, PIECE.tile_id, TILE_FLAGS,
                 epoch, CTX)
        if GEMM_TRACE is not None:
            _trace_tile(GEMM_TRACE, PIECE.tile_id, PIECE.t_begin, pid, CTX)


@triton.jit
def _trace_tile(GEMM_TRACE, tile_id, t_begin, pid, CTX):
    """GEMM_TRACE[tile] = (the storing program's start of its item, now, that program)."""
    t_end = now(CTX)
    tl.store(GEMM_TRACE + tile_id * 3, t_begin)
    tl.store(GEMM_TRACE + tile_id * 3 + 1, t_end)
    tl.store(GEMM_TRACE + tile_id * 3 + 2, pid.to(tl.int64))


@triton.jit(do_not_specialize=["sk_tiles", "epoch"])
def streamk_gemm_kernel(A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles, epoch, CTX, TILING, SCHEDULE,
                        EPILOGUE: tl.constexpr, P_DESC=None, LAUNCHES=None, B1=None):
    """Stand-alone Stream-K GEMM: launch with a grid of (num_programs,).

    LAUNCHES (int64 [1], or None: the `epoch` argument is this launch's epoch): the epoch is counted on the
    device, so a launch replayed from a CUDA graph gets a new one. Each program takes a ticket (one relaxed
    atomic add); launches on one workspace never overlap (stream order), so the tickets of launch L are L * P
    .. L * P + P - 1 and every program computes epoch = ticket // P + 1 = L + 1."""
    if LAUNCHES is not None:
        ticket = tl.atomic_add(LAUNCHES, 1, sem="relaxed")
        epoch = (ticket // tl.num_programs(0) + 1).to(tl.int32)
    streamk_program(tl.program_id(0), tl.num_programs(0), A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles,
                    epoch, CTX, TILING, SCHEDULE, EPILOGUE, P_DESC, None, B1)

"""The OverlapOp API on 2 ranks, for tests/test_op.py.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/op_api.py [--only NAME,...]

Checks (every rank runs each one; rank 0 prints "OP_API_OK <name> ..." for each, and any failure
prints "OP_API_FAIL <name> rank R: <what>" and exits non-zero):

    config      resolve_config / OverlapOp.create reject an unknown algorithm or mode with a
                ValueError naming it (and a split that does not divide by the ranks), allocating nothing
    bad_args    a wrong shape, a wrong dtype and a non-tensor each raise one error naming the argument (a or
                b); after each error a good step still gives the right C (a wrong device is checked on GPUs
                only); a transposed tensor, a misaligned row stride and a misaligned start are copied into
                a staging buffer and give the right C, with op.a / op.b untouched
    reuse       one op called 5 times, then with user tensors that are not op.a / op.b (contiguous and
                padded-stride views), back to its own buffers, then user tensors changed in place:
                right every time
    interleave  two ops of different algorithms on one heap called op1, op2, op1, op2, ...: each C right
                after its own step and still right after the other op's step
    timeout     after one step on both ranks (which compiles the kernels everywhere), only rank 0 calls an op with
                timeout_s=0.5 (all_reduce fused, all_scatter two_streams, one_shot bulk_sync): the call ends and
                check_errors() raises CollectiveError within a bounded time on rank 0 and on rank 1, which did not
                call that step (the error state is collective: rank 0's give-up is written into rank 1's words); the
                op is then broken (calling it raises) until reset() on both ranks, after which steps on both ranks
                are right again
    create_skew (only with --only create_skew) the ranks create the op 1 s
                apart with no barrier after create(): the first steps must still be right
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from op_back_to_back import TOL, cpu_options, global_inputs, load_inputs, rel_error, shards, sync

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops import CollectiveError
from streamk_pgas.overlap.config import OverlapConfig
from streamk_pgas.overlap.op import OverlapOp
from streamk_pgas.overlap.resolution import resolve_config

M = N = K = 32
TIMEOUT_BOUND_S = 60.0  # the failed step and check_errors() must be over well before this


def expect_error(kind: type[Exception], fn: Callable[[], object], *words: str) -> str:
    """fn() must raise `kind` (exactly one error, not a chain) whose message contains every word."""
    try:
        fn()
    except kind as exc:
        msg = str(exc)
        missing = [w for w in words if w not in msg]
        assert not missing, f"{kind.__name__} message lacks {missing}: {msg!r}"
        assert exc.__cause__ is None and exc.__context__ is None, f"error raised while handling another: {msg!r}"
        return msg
    except Exception as exc:
        raise AssertionError(f"expected {kind.__name__} containing {words}; got {type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"expected {kind.__name__} containing {words}; nothing was raised")


def check_c(op: OverlapOp, a: torch.Tensor, b: torch.Tensor, what: str) -> float:
    sync(op)
    op.check_errors()
    err = rel_error(op, a, b)
    assert err <= TOL, f"{what}: relative error {err:.3g} > {TOL:g}"
    return err


def make_op(shmem, alg: str, mode: str = "fused", **options) -> OverlapOp:
    op = OverlapOp.create(shmem, alg, M, N, K, "fp32", mode, **{**cpu_options(mode), **options})
    shmem.barrier()  # every rank has zeroed its buffers before any rank's first step
    return op


# ---- checks -----------------------------------------------------------------------------------------


def check_config(shmem) -> str:
    dev = shmem.get_device()
    expect_error(ValueError, lambda: resolve_config(OverlapConfig("all_gather", M, N, K), dev), "algorithm",
                 "'all_gather'")
    expect_error(ValueError, lambda: resolve_config(OverlapConfig("all_reduce", M, N, K, mode="async"), dev), "mode",
                 "'async'")
    used = shmem.heap_offset
    expect_error(ValueError, lambda: OverlapOp.create(shmem, "allreduce", M, N, K, "fp32"), "'allreduce'")
    expect_error(ValueError, lambda: OverlapOp.create(shmem, "all_reduce", M, N, K, "fp32", "fusedd"), "'fusedd'")
    W = shmem.get_num_ranks()
    expect_error(ValueError, lambda: OverlapOp.create(shmem, "all_reduce", M, N, K + 1, "fp32", **cpu_options()),
                 "K", str(K + 1), str(W))
    expect_error(ValueError, lambda: OverlapOp.create(shmem, "all_scatter", M, N + 1, K, "fp32", **cpu_options()),
                 "N", str(N + 1))
    assert shmem.heap_offset == used, f"a rejected create allocated {shmem.heap_offset - used} B of heap"
    resolved = resolve_config(OverlapConfig("one_shot", M, N, K, "fp32", "bulk_sync"), dev)
    assert None not in (resolved.total_sms, resolved.gemm_sms, resolved.kernel, resolved.sk_rounds,
                        resolved.comm_tile_m, resolved.comm_tile_n), f"resolve left a field unset: {resolved}"
    return "unknown algorithm/mode and indivisible splits rejected, nothing allocated"


def check_bad_args(shmem) -> str:
    op = make_op(shmem, "all_reduce")
    a, b = global_inputs(M, N, K, 7, op.device)
    load_inputs(op, a, b)
    op()
    check_c(op, a, b, "first good step")
    ma, kb = op.a.shape  # M x K/W
    good_a, good_b = op.a, op.b
    f32, dev = torch.float32, op.device

    def z(*shape: int) -> torch.Tensor:
        return torch.zeros(*shape, dtype=f32, device=dev)

    cases = [
        ("a wrong shape", lambda: op(z(ma, kb + 4), good_b), ValueError, ("a", "shape")),
        ("b wrong shape", lambda: op(good_a, z(kb, N + 4)), ValueError, ("b", "shape")),
        ("a wrong dtype", lambda: op(good_a.to(torch.float16), good_b), ValueError, ("a", "float32", "float16")),
        ("b wrong dtype", lambda: op(good_a, good_b.double()), ValueError, ("b", "float32", "float64")),
        ("a not a tensor", lambda: op(good_a.cpu().numpy(), good_b), TypeError, ("a", "torch.Tensor", "ndarray")),
        ("b not a tensor", lambda: op(good_a, good_b.tolist()), TypeError, ("b", "torch.Tensor", "list")),
        ("b left out", lambda: op(good_a), ValueError, ("b", "is missing", "give a and b, or neither")),
    ]
    if op.on_gpu:  # a wrong device only exists where there is a device (skipped on the CPU backend)
        cases.append(("a on the CPU", lambda: op(good_a.cpu(), good_b), ValueError, ("a", str(dev), "cpu")))
    for name, call, kind, words in cases:
        msg = expect_error(kind, call, f"OverlapOp: {words[0]} ", *words[1:])
        assert op.broken is None, f"{name}: the op was marked broken by a rejected argument"
        op()  # the op is still usable: a good step gives the right C
        check_c(op, a, b, f"good step after {name} ({msg})")
    # Layouts the kernels cannot read in place are copied into a staging buffer, never into op.a / op.b.
    sa, sb = shards(op, a, b)
    padded = z(ma, kb + 1)[:, :kb]  # row stride 17 elements: rows not 16-element aligned
    shifted = z(ma * kb + 4)[1:1 + ma * kb].view(ma, kb)  # starts 4 B past an aligned address
    shifted_b = z(kb * N + 4)[2:2 + kb * N].view(kb, N)  # 8 B past
    for t, src in ((padded, sa), (shifted, sa), (shifted_b, sb)):
        t.copy_(src)
    own_a, own_b = op.a.clone(), op.b.clone()
    copied = [("a transposed", sa.t().contiguous().t(), good_b), ("b transposed", good_a, sb.t().contiguous().t()),
              ("a misaligned rows", padded, good_b), ("a misaligned start", shifted, good_b),
              ("b misaligned start", good_a, shifted_b)]
    for name, ua, ub in copied:
        assert op(ua, ub) is op.c
        check_c(op, a, b, f"{name} (copied in)")
        assert torch.equal(op.a, own_a) and torch.equal(op.b, own_b), f"{name}: op.a / op.b were overwritten"
    # After the errors, with a fresh pair of good user tensors, then the op's own buffers again.
    ua, ub = (t.clone() for t in shards(op, a, b))
    op(ua, ub)
    check_c(op, a, b, "user tensors after the rejected calls")
    op()  # the op's own buffers again
    check_c(op, a, b, "op() after user tensors")
    shmem.barrier()
    return (f"{len(cases)} bad arguments rejected with one error each; good steps right after them; "
            f"{len(copied)} unaligned layouts copied in and right")


def check_reuse(shmem) -> str:
    op = make_op(shmem, "one_shot")
    a, b = global_inputs(M, N, K, 11, op.device)
    load_inputs(op, a, b)
    for i in range(5):
        c = op()
        assert c is op.c, "op() returned another tensor than op.c"
        check_c(op, a, b, f"own buffers, call {i + 1} of 5")
    a2, b2 = global_inputs(M, N, K, 12, op.device)
    sa, sb = shards(op, a2, b2)
    ua, ub = sa.clone(), sb.clone()  # plain user tensors, not op.a / op.b
    for i in range(2):
        c = op(ua, ub)
        assert c is op.c, "op(a, b) returned another tensor than op.c"
        check_c(op, a2, b2, f"user tensors, call {i + 1}")
    # Views with a padded row stride (still row-major, 16-byte aligned rows and start).
    pa = torch.zeros(sa.shape[0], sa.shape[1] + 4, dtype=sa.dtype, device=sa.device)[:, 4:]
    pb = torch.zeros(sb.shape[0], sb.shape[1] + 8, dtype=sb.dtype, device=sb.device)[:, :sb.shape[1]]
    pa.copy_(sa)
    pb.copy_(sb)
    op(pa, pb)
    check_c(op, a2, b2, "padded-stride user views")
    op()
    check_c(op, a, b, "own buffers again after user tensors")
    a3, b3 = global_inputs(M, N, K, 13, op.device)
    sa3, sb3 = shards(op, a3, b3)
    ua.copy_(sa3)  # the same user tensors, new contents
    ub.copy_(sb3)
    op(ua, ub)
    check_c(op, a3, b3, "user tensors changed in place")
    shmem.barrier()
    return "5 calls on own buffers, user tensors (contiguous, padded views, changed in place) all right"


def check_interleave(shmem) -> str:
    op1 = make_op(shmem, "all_reduce", "fused")
    op2 = make_op(shmem, "all_scatter", "two_streams")
    a1, b1 = global_inputs(M, N, K, 21, op1.device)
    a2, b2 = global_inputs(M, N, K, 22, op2.device)
    load_inputs(op1, a1, b1)
    load_inputs(op2, a2, b2)
    assert op1.c.data_ptr() != op2.c.data_ptr(), "two ops share a C buffer"
    rounds = 4
    for i in range(rounds):
        op1()
        check_c(op1, a1, b1, f"op1 (all_reduce) step {i + 1}")
        if i:
            check_c(op2, a2, b2, f"op2's C after op1's step {i + 1}")
        op2()
        check_c(op2, a2, b2, f"op2 (all_scatter) step {i + 1}")
        check_c(op1, a1, b1, f"op1's C after op2's step {i + 1}")
    # Back to back with no checks between them, then both.
    for _ in range(3):
        op1()
        op2()
    check_c(op1, a1, b1, "op1 after 3 unchecked interleaved rounds")
    check_c(op2, a2, b2, "op2 after 3 unchecked interleaved rounds")
    shmem.barrier()
    return f"all_reduce and all_scatter interleaved {rounds + 3} rounds on one heap, each right"


TIMEOUT_CASES = (("all_reduce", "fused"), ("all_scatter", "two_streams"), ("one_shot", "bulk_sync"))


def check_timeout(shmem) -> str:
    done = []
    for alg, mode in TIMEOUT_CASES:
        try:
            done.append(f"{alg} {mode}: {timeout_case(shmem, alg, mode)}")
        except Exception:  # name the case (the ones before it passed), then fail as it did
            print(f"OP_API_CASE timeout rank {shmem.get_rank()}: {alg} {mode} failed", flush=True)
            raise
    return "; ".join(done)


def timeout_case(shmem, alg: str, mode: str) -> str:
    rank = shmem.get_rank()
    op = make_op(shmem, alg, mode, timeout_s=0.5)
    a, b = global_inputs(M, N, K, 31, op.device)
    load_inputs(op, a, b)
    # One step on both ranks first: each compiles and loads the op's kernels (its timeout_s is part of the build)
    # here, so that rank 1's first step after reset() does not spend longer than the 0.5 s wait compiling.
    op()
    check_c(op, a, b, "the step before the timeout")
    shmem.barrier()
    detail = ""
    if rank == 0:  # rank 1 never calls this step
        start = time.monotonic()
        op()
        sync(op)
        called = time.monotonic() - start
        msg = expect_error(RuntimeError, op.check_errors, "rank 0", "timed out")
        elapsed = time.monotonic() - start
        assert elapsed < TIMEOUT_BOUND_S, f"the failed step took {elapsed:.1f} s (bound {TIMEOUT_BOUND_S:.0f} s)"
        assert op.broken is not None, "op.broken is not set after check_errors() raised"
        expect_error(RuntimeError, op, "unusable", "reset()")
        expect_error(RuntimeError, lambda: op.run(op.step_for()), "unusable")
        expect_error(RuntimeError, lambda: op(op.a, op.b), "unusable")
        detail = f"step returned after {called:.1f} s, check_errors raised after {elapsed:.1f} s: {msg}"
    else:  # rank 1 ran nothing, but no rank may trust a step that failed on one
        msg = expect_error(CollectiveError, op.check_errors, "rank 1: rank 0 gave up", "timed out")
        assert op.broken is not None, "op.broken is not set on rank 1 after check_errors() raised"
        detail = f"rank 1 raised too: {msg}"
    op.reset()  # collective
    assert op.broken is None, "op.broken still set after reset()"
    for i in range(3):
        op()
        check_c(op, a, b, f"step {i + 1} after reset()")
    shmem.barrier()
    return detail


def check_create_skew(shmem) -> str:
    """Not in the default set (tests/test_op.py runs it on its own).

    No host barrier between create() and the first step, as the op's docstring and the README show it.
    Rank 1 creates its op only once something has landed in its heap (rank 0's first step announcing its
    arrival in rank 1's control block), or after 5 s if nothing does. Rank 1's create() then zeroes that
    control block, the announcement is lost and the first step times out on both ranks. If create()
    synchronised the ranks, rank 0 would wait in it, nothing would land, and the steps would be right."""
    op_timeout = 1.0
    if shmem.get_rank() == 1:
        pool = shmem.memory_pool
        deadline = time.monotonic() + 5.0
        while not bool(pool.any()) and time.monotonic() < deadline:
            time.sleep(0.01)
        landed = bool(pool.any())
    op = OverlapOp.create(shmem, "all_reduce", M, N, K, "fp32", "fused", timeout_s=op_timeout, **cpu_options())
    a, b = global_inputs(M, N, K, 41, op.device)
    load_inputs(op, a, b)
    for i in range(2):
        op()
        check_c(op, a, b, f"step {i + 1} with no barrier after create()"
                + (" (rank 0 wrote into rank 1's heap before rank 1's create())" if shmem.get_rank() == 1 and landed
                   else ""))
    shmem.barrier()
    return "no barrier after create(): steps right"


CHECKS: dict[str, Callable] = {"config": check_config, "bad_args": check_bad_args, "reuse": check_reuse,
                               "interleave": check_interleave, "timeout": check_timeout}
EXTRA_CHECKS: dict[str, Callable] = {"create_skew": check_create_skew}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(CHECKS), help="comma list of checks to run")
    args = p.parse_args()
    names = [x for x in args.only.split(",") if x]
    every = {**CHECKS, **EXTRA_CHECKS}
    for x in names:
        if x not in every:
            p.error(f"--only: unknown check {x!r} (one of {', '.join(every)})")
    shmem = iris_ops.iris(1 << 24)
    rank = shmem.get_rank()
    for name in names:
        start = time.monotonic()
        try:
            detail = every[name](shmem)
        except Exception as exc:
            here = [f"{Path(f.filename).name}:{f.lineno}" for f in traceback.extract_tb(exc.__traceback__)
                    if f.filename == __file__]  # where in this file it was raised: the check's step, not the library
            print(f"OP_API_FAIL {name} rank {rank} (at {' > '.join(here)}): {type(exc).__name__}: {exc}", flush=True)
            return 1
        if rank == 0:
            print(f"OP_API_OK {name} ({time.monotonic() - start:.1f} s): {detail}", flush=True)
    shmem.barrier()
    if rank == 0:
        print(f"OP_API_DONE {len(names)} checks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

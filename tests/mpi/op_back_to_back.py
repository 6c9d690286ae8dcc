"""OverlapOp called step after step with nothing between the steps, for tests/test_op.py.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/op_back_to_back.py --steps 200 [--poison_between]

For each algorithm x mode: one op on the heap (the heap's allocator is reset between ops), the same
seeded global A and B on every rank (fp32), this rank's shards written into op.a / op.b, then --steps
calls of op() back to back (no host barrier, no synchronisation between them; with --poison_between
op.c is filled with NaN between two steps, which the stream semantics allow). Then C is checked
against the float64 product on every rank and op.check_errors() is called. The first combination
also writes new inputs into op.a / op.b and checks that one more step gives the new product (the op
reads its buffers at every step). The reduce family's algorithms add every rank's partial in rank order, so their
C must be the same bits on every rank and at every step on the same inputs (BITWISE): C after the first step
(drained, kept) is compared bit for bit with C after the last one and with every peer's C. One line per
combination:

    OP_B2B_OK <algorithm> <mode> ranks W steps S err E time T s

--rotate: every call takes the next of three pairs of user tensors (contiguous shards of three seeded global
inputs) and a row of C is copied out on the stream right after it (C read between steps); every copied row is
checked afterwards against its call's product. --graph (GPU): one step on the first pair captured in a CUDA
graph, then --steps replays, each after the next pair is copied into the captured tensors and followed by a row
of C copied out, checked the same way.

Any failure prints "OP_B2B_FAIL <algorithm> <mode> ...: <what>" and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import torch

from streamk_pgas import iris_ops, spec
from streamk_pgas.overlap.op import OverlapOp
from streamk_pgas.stream_k import KernelConfig

MODES = tuple(spec.MODES)

ALGORITHMS = ("all_reduce", "all_scatter", "one_shot")
BITWISE = ("all_reduce", "one_shot")  # C the same bits on every rank and in every step on the same inputs
TOL = 1e-4  # relative Frobenius error for fp32 operands (harness.checks.TOLERANCE["fp32"])


def cpu_options(mode: str = "fused") -> dict:
    """The interpreter-friendly config (tiny tiles, two programs; the GEMM on both where the mode keeps every SM);
    on a GPU the op's defaults."""
    if torch.cuda.is_available():
        return {}
    return {"total_sms": 2, "gemm_sms": 2 if spec.MODES[mode].gemm_on_every_sm else 1, "comm_tile_m": 16,
            "comm_tile_n": 16,
            "kernel": KernelConfig(BLK_M=16, BLK_N=16, BLK_K=16, num_stages=1, num_warps=4)}


def global_inputs(m: int, n: int, k: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The same global A (m x k) and B (k x n) on every rank (drawn on the CPU from one seed)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen, dtype=torch.float32)
    b = torch.randn(k, n, generator=gen, dtype=torch.float32)
    return a.to(device), b.to(device)


def part(t: torch.Tensor, where: tuple[tuple[int, int], tuple[int, int]]) -> torch.Tensor:
    (r0, r1), (c0, c1) = where
    return t[r0:r1, c0:c1]


def shards(op: OverlapOp, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's shards of the global A and B for the op's algorithm (spec.sharding)."""
    fam, r, w = spec.ALGORITHMS[op.cfg.algorithm].family, op.rank, op.world
    (m, k), n = a.shape, b.shape[1]
    return part(a, fam.a_slice(r, m, k, w)), part(b, fam.b_slice(r, k, n, w))


def expected(op: OverlapOp, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """This rank's part of the float64 product of the whole inputs (spec.sharding: its C)."""
    full = a.double().cpu() @ b.double().cpu()
    fam = spec.ALGORITHMS[op.cfg.algorithm].family
    return part(full, fam.c_slice(op.rank, full.shape[0], full.shape[1], op.world))


def load_inputs(op: OverlapOp, a: torch.Tensor, b: torch.Tensor) -> None:
    sa, sb = shards(op, a, b)
    op.a.copy_(sa)
    op.b.copy_(sb)


def rel_error(op: OverlapOp, a: torch.Tensor, b: torch.Tensor) -> float:
    """||C - its part of A @ B|| / ||its part|| against the float64 product (NaN stays NaN, so poison fails)."""
    ref = expected(op, a, b)
    assert tuple(op.c.shape) == tuple(ref.shape), f"C has shape {tuple(op.c.shape)}, expected {tuple(ref.shape)}"
    err = float(torch.linalg.norm(op.c.double().cpu() - ref) / torch.linalg.norm(ref))
    return err if err == err else float("inf")


def worst_error(shmem, op: OverlapOp, a: torch.Tensor, b: torch.Tensor, what: str, tol: float = TOL) -> float:
    """C's error on every rank (checked here on each), gathered: the largest, or AssertionError naming the rank."""
    errs = shmem.allgather(rel_error(op, a, b))
    worst = max(range(len(errs)), key=lambda r: errs[r])
    assert errs[worst] <= tol, f"{what}: relative error {errs[worst]:.3g} > {tol:g} on rank {worst} (all: {errs})"
    return errs[worst]


def check_same_bits(shmem, op: OverlapOp, first: torch.Tensor, steps: int) -> None:
    """C after the last step is bit for bit C after the first one, and every rank's C is rank 0's."""
    last = op.c.cpu().contiguous()
    diff = int((last.view(torch.int32 if last.element_size() == 4 else torch.int16)
                != first.cpu().contiguous().view(torch.int32 if last.element_size() == 4 else torch.int16)).sum())
    assert diff == 0, f"C after step {steps} differs from C after step 1 in {diff} elements (same inputs)"
    ranks = shmem.allgather(last.numpy().tobytes())
    other = [r for r, bits in enumerate(ranks) if bits != ranks[0]]
    assert not other, f"C on rank(s) {other} is not bit for bit rank 0's"


def rotating_steps(shmem, op: OverlapOp, args: argparse.Namespace, seed: int, graph: bool) -> float:
    """--rotate / --graph: steps on three input pairs in rotation, a row of C read after each (see the module
    docstring); the worst relative error of the rows read, or AssertionError naming the step."""
    m, n, k = args.m, args.n, args.k
    sets = [global_inputs(m, n, k, seed + 101 * j, op.device) for j in range(3)]
    users = [[x.contiguous() for x in shards(op, a, b)] for a, b in sets]
    rows = op.c.shape[0]
    seen = torch.empty(args.steps, op.c.shape[1], dtype=op.c.dtype, device=op.device)
    if graph:
        captured = [x.clone() for x in users[0]]
        op(*captured)  # one eager call on the captured tensors (every rank), then the capture
        sync(op)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            op(*captured)
        sync(op)
        shmem.barrier()
    for i in range(args.steps):
        pair = users[i % 3]
        if graph:
            for dst, src in zip(captured, pair):
                dst.copy_(src)
            g.replay()
        else:
            op(*pair)
        seen[i].copy_(op.c[i % rows])
    sync(op)
    op.check_errors()
    refs = [expected(op, a, b) for a, b in sets]
    worst = 0.0
    for i in range(args.steps):
        ref = refs[i % 3][i % rows]
        err = float(torch.linalg.norm(seen[i].double().cpu() - ref) / max(float(torch.linalg.norm(ref)), 1e-30))
        assert err == err and err <= TOL, f"{'replay' if graph else 'step'} {i}: row {i % rows} of C has relative " \
                                          f"error {err:.3g}"
        worst = max(worst, err)
    return max(shmem.allgather(worst))


def sync(op: OverlapOp) -> None:
    if op.on_gpu:
        torch.cuda.synchronize(op.device)


def check_new_inputs(shmem, op: OverlapOp, a: torch.Tensor, b: torch.Tensor, seed: int, tol: float = TOL,
                     dtype: torch.dtype = torch.float32) -> None:
    """New seeded inputs (in `dtype`) written into op.a / op.b, one more step: C must be their product, not that of
    the old inputs `a`, `b` (the op reads its buffers at every step); AssertionError naming what failed."""
    m, k = a.shape
    n = b.shape[1]
    a2, b2 = (x.to(dtype) for x in global_inputs(m, n, k, seed, op.device))
    load_inputs(op, a2, b2)
    op()
    sync(op)
    op.check_errors()
    worst_error(shmem, op, a2, b2, "C after new inputs were written into op.a/op.b", tol)
    stale = rel_error(op, a, b)
    assert stale > 0.1, f"C still matches the old inputs (error {stale:.3g}): the op did not re-read its buffers"


def run_combinations(shmem, combos: list[tuple[str, str, bool]], args: argparse.Namespace,
                     run: Callable[..., str], tag: str) -> int:
    """run(shmem, alg, mode, args, change_inputs=...) of each (algorithm, mode, change_inputs), rank 0 printing its
    line, the heap's allocator reset between ops, then "<tag>_DONE <count> combinations". The first failure prints
    "<tag>_FAIL <algorithm> <mode> ...: <what>" and returns 1 (the exit code); else 0."""
    rank = shmem.get_rank()
    for alg, mode, change_inputs in combos:
        try:
            line = run(shmem, alg, mode, args, change_inputs=change_inputs)
        except Exception as exc:  # one line naming the combination, then a non-zero exit
            print(f"{tag}_FAIL {alg} {mode} rank {rank} ranks {shmem.get_num_ranks()} steps {args.steps}: "
                  f"{type(exc).__name__}: {exc}", flush=True)
            return 1
        if rank == 0:
            print(line, flush=True)
        if hasattr(shmem, "reset_allocator"):
            shmem.reset_allocator()
    shmem.barrier()
    if rank == 0:
        print(f"{tag}_DONE {len(combos)} combinations", flush=True)
    return 0


def run_combination(shmem, alg: str, mode: str, args: argparse.Namespace, change_inputs: bool) -> str:
    """Build one op, run the steps, check; returns the OK line or raises AssertionError naming what failed."""
    m, n, k = args.m, args.n, args.k
    op = OverlapOp.create(shmem, alg, m, n, k, "fp32", mode, **cpu_options(mode))
    seed = 1000 + 17 * tuple(spec.ALGORITHMS).index(alg) + MODES.index(mode)
    a, b = global_inputs(m, n, k, seed, op.device)
    load_inputs(op, a, b)
    # --user_tensors: contiguous copies of the shards passed to every other call (staged into padded buffers
    # when their rows are not 16-element aligned); the calls between use the op's own (padded) buffers
    user = [x.contiguous() for x in shards(op, a, b)] if args.user_tensors else []
    shmem.barrier()  # every rank has built its op (zeroed its heap buffers) before any rank's first step
    if args.rotate or args.graph:
        start = time.monotonic()
        err = rotating_steps(shmem, op, args, seed, graph=args.graph)
        shmem.barrier()
        what = "graph_replays" if args.graph else "rotating"
        return (f"OP_B2B_OK {alg} {mode} ranks {op.world} steps {args.steps} err {err:.2e} {what} "
                f"time {time.monotonic() - start:.1f} s")
    start = time.monotonic()
    nan = float("nan")
    first: torch.Tensor | None = None
    for i in range(args.steps):
        if args.poison_between and i:
            op.c.fill_(nan)  # between two steps, on the stream: allowed, the next step rewrites every element
        c = op(*(user if i % 2 == 0 else []))
        assert c is op.c, "op() must return the op's C buffer"
        if i == 0 and alg in BITWISE:
            first = op.c.clone()
    sync(op)
    elapsed = time.monotonic() - start
    op.check_errors()
    err = worst_error(shmem, op, a, b, f"C after {args.steps} steps")
    if first is not None:
        check_same_bits(shmem, op, first, args.steps)
    if change_inputs and not user:
        check_new_inputs(shmem, op, a, b, seed + 500)
    shmem.barrier()  # no rank frees (resets) its heap while a peer may still touch it
    return (f"OP_B2B_OK {alg} {mode} ranks {op.world} steps {args.steps} err {err:.2e} "
            f"{'new_inputs ok ' if change_inputs else ''}{'same_bits ' if first is not None else ''}"
            f"time {elapsed:.1f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--poison_between", action="store_true", help="fill op.c with NaN between two steps")
    p.add_argument("--user_tensors", action="store_true", help="pass contiguous shards to every call")
    p.add_argument("--rotate", action="store_true", help="three user input pairs in rotation, C read between steps")
    p.add_argument("--graph", action="store_true", help="replay one captured step (GPU), inputs rotated")
    p.add_argument("--m", type=int, default=32)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--heap_mib", type=int, default=16, help="symmetric heap per rank, MiB (large shapes need more)")
    args = p.parse_args()
    if args.heap_mib < 1:
        p.error(f"--heap_mib: a positive number of MiB, got {args.heap_mib}")
    if args.graph and not torch.cuda.is_available():
        p.error("--graph: CUDA graphs need a GPU")
    algorithms = [x for x in args.algorithms.split(",") if x]
    modes = [x for x in args.modes.split(",") if x]
    for x in algorithms:
        if x not in spec.ALGORITHMS:
            p.error(f"--algorithms: unknown algorithm {x!r}")
    for x in modes:
        if x not in MODES:
            p.error(f"--modes: unknown mode {x!r}")

    shmem = iris_ops.iris(args.heap_mib << 20)
    pairs = [(alg, mode) for alg in algorithms for mode in modes if spec.ALGORITHMS[alg].has_mode(mode)]
    # the first combination also checks that new inputs are read
    combos = [(alg, mode, i == 0) for i, (alg, mode) in enumerate(pairs)]
    return run_combinations(shmem, combos, args, run_combination, "OP_B2B")


if __name__ == "__main__":
    sys.exit(main())

"""Every algorithm x mode on several ranks, steps back to back with rotating user tensors and C read between the
steps, then CUDA-graph replays; every rank's C validated. Two ranks sharing one GPU is the one-GPU acceptance:

    STREAMK_PGAS_SHARE_GPU=1 mpirun -np 2 python -m tools.share_gpu_check [--steps 200]
    TRITON_INTERPRET=1 mpirun -np 2 python -m tools.share_gpu_check --steps 4      # the CPU (shm heap, interpreter)

Per combination: one op (the planner's config for the device; in the interpreter its small one), three pairs of
global A and B (the same on every rank, from one seed) and each rank's shards of them as its own contiguous
tensors; --steps calls back to back, pair i % 3 at call i, each followed by a copy of one row of C (read on the
stream; a different row each call), nothing else between them; then every copied row is checked against the
rank's part of the float64 product (spec.sharding), and the last C whole. On a GPU one step is then captured in
a CUDA graph and replayed --steps times on the pairs in rotation (copied into the captured buffers), the rows
copied and checked likewise. Rank 0 prints one line per combination:

    SHARE_OK <algorithm> <mode> ranks W steps S err E graph G

A failure prints "SHARE_FAIL <algorithm> <mode> ...: <what>" and the run exits 1 (2 for a bad flag).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from streamk_pgas import spec
from streamk_pgas.harness.checks import TOLERANCE, OneLineParser
from streamk_pgas.tools.op_overhead import add_algorithm_mode_flags, parse_combination_args


def part(t: torch.Tensor, where: tuple[tuple[int, int], tuple[int, int]]) -> torch.Tensor:
    (r0, r1), (c0, c1) = where
    return t[r0:r1, c0:c1]


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    diff = torch.linalg.vector_norm(got.double().cpu() - want.cpu()).item()
    err = diff / max(torch.linalg.vector_norm(want).item(), 1e-300)
    return err if err == err else float("inf")


def cpu_options(mode: str) -> dict[str, Any]:
    """The interpreter's small config (two programs; the GEMM on both where the mode keeps every SM)."""
    from streamk_pgas.stream_k import KernelConfig

    return {"total_sms": 2, "gemm_sms": 2 if spec.MODES[mode].gemm_on_every_sm else 1, "comm_tile_m": 16,
            "comm_tile_n": 16, "kernel": KernelConfig(BLK_M=16, BLK_N=16, BLK_K=16, num_stages=1, num_warps=4)}


def run_combination(shmem: Any, alg: str, mode: str, args: argparse.Namespace) -> str:
    from streamk_pgas.overlap import OverlapOp

    m, n, k = args.shape
    gpu = shmem.get_device().type == "cuda"
    options = {} if gpu else cpu_options(mode)
    op = OverlapOp.create(shmem, alg, m, n, k, args.datatype, mode, **options)
    fam, r, w = spec.ALGORITHMS[alg].family, op.rank, op.world
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 31 * list(spec.ALGORITHMS).index(alg))
    pairs, refs = [], []
    for _ in range(3):
        a = torch.randn(m, k, generator=gen).to(op.dtype)
        b = torch.randn(k, n, generator=gen).to(op.dtype)
        pairs.append((part(a, fam.a_slice(r, m, k, w)).contiguous().to(op.device),
                      part(b, fam.b_slice(r, k, n, w)).contiguous().to(op.device)))
        refs.append(part(a.double() @ b.double(), fam.c_slice(r, m, n, w)))
    rows = torch.empty(args.steps, op.c.shape[1], dtype=op.out_dtype, device=op.device)
    tol = TOLERANCE[args.datatype]

    def row(i: int) -> int:
        return (i * 7919) % op.c.shape[0]

    def check(what: str) -> float:
        if gpu:
            torch.cuda.synchronize()
        op.check_errors()
        worst = max(rel_err(rows[i], refs[i % 3][row(i)]) for i in range(args.steps))
        worst = max(worst, rel_err(op.c, refs[(args.steps - 1) % 3]))
        errs = shmem.allgather(worst)
        bad = max(range(len(errs)), key=lambda q: errs[q])
        if errs[bad] > tol:
            raise AssertionError(f"{what}: relative error {errs[bad]:.3g} > {tol:g} on rank {bad} (all: {errs})")
        return max(errs)

    shmem.barrier()  # every rank has built its op before any rank's first step
    for i in range(args.steps):
        op(*pairs[i % 3])
        rows[i].copy_(op.c[row(i)])  # C read on the stream between two steps
    err = check(f"{args.steps} steps back to back")
    graph = "n/a (no GPU)"
    if gpu:
        a_g, b_g = pairs[0][0].clone(), pairs[0][1].clone()
        captured = torch.empty_like(rows[0])  # where the graph copies row(0) of C: each replay overwrites it
        op(a_g, b_g)
        captured.copy_(op.c[row(0)])
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            op(a_g, b_g)
            captured.copy_(op.c[row(0)])  # captured too: replays read C likewise
        for i in range(args.steps):
            a_g.copy_(pairs[i % 3][0])
            b_g.copy_(pairs[i % 3][1])
            g.replay()
            rows[i].copy_(captured)  # keep this replay's row (row(0)) for the check below
        torch.cuda.synchronize()
        op.check_errors()
        worst = max(rel_err(rows[i], refs[i % 3][row(0)]) for i in range(args.steps))
        errs = shmem.allgather(worst)
        if max(errs) > tol:
            raise AssertionError(f"graph replays: relative error {max(errs):.3g} > {tol:g} (all ranks: {errs})")
        graph = f"{args.steps} replays err {max(errs):.2e}"
    shmem.barrier()  # no rank reuses its heap while a peer may still touch it
    return f"SHARE_OK {alg} {mode} ranks {w} steps {args.steps} err {err:.2e} graph {graph}"


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected MxNxK with positive integers, got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def main(argv: list[str] | None = None) -> int:
    gpu = torch.cuda.is_available()
    ap = OneLineParser(prog="python -m tools.share_gpu_check", description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--shape", type=parse_shape, default=(4864, 4096, 8256) if gpu else (32, 32, 32))
    ap.add_argument("--datatype", default="bf16" if gpu else "fp32", choices=tuple(spec.DATATYPES))
    add_algorithm_mode_flags(ap)
    ap.add_argument("--seed", type=int, default=0)
    parsed = parse_combination_args(
        ap, argv, "share_gpu_check", lambda a: f"--steps: must be >= 1, got {a.steps}" if a.steps < 1 else None)
    if parsed is None:
        return 2
    args, algorithms, modes = parsed
    from streamk_pgas import iris_ops
    from streamk_pgas.iris_ops.bootstrap import get_bootstrap
    from streamk_pgas.overlap import OverlapOp

    combos = [(a, m) for a in algorithms for m in modes if spec.ALGORITHMS[a].has_mode(m)]
    world = get_bootstrap().world_size
    need = max(OverlapOp.heap_bytes(a, *args.shape, args.datatype, world, mode=m) for a, m in combos)
    shmem = iris_ops.iris(need + (1 << 24))
    rank = shmem.get_rank()
    for alg, mode in combos:
        shmem.reset_allocator()
        try:
            line = run_combination(shmem, alg, mode, args)
        except Exception as exc:  # one line naming the combination
            print(f"SHARE_FAIL {alg} {mode} rank {rank} ranks {world} steps {args.steps}: "
                  f"{type(exc).__name__}: {exc}", flush=True)
            return 1  # a rank that failed cannot keep in step with its peers
        if rank == 0:
            print(line, flush=True)
    shmem.barrier()
    if rank == 0:
        print(f"SHARE_DONE {len(combos)} combinations", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""all_gather_gemm and gemm_reduce_scatter through the library op, step after step, for
tests/test_new_algorithms.py.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/op_new_algorithms.py --steps 8 [--poison_between]

For each algorithm x mode: one op, the same seeded global A and B on every rank, this rank's shards
written into op.a / op.b, then --steps calls of op() back to back (no host barrier between them; with
--poison_between op.c is filled with NaN between two steps). Then each rank's C is checked against its
part of torch's float64 product of the whole inputs (all_gather_gemm: C[:, its N/W columns];
gemm_reduce_scatter: C[its M/W rows, :]). The first combination of each algorithm also writes new
inputs and checks one more step. M is chosen so that M/W is not a multiple of the 16-row tiles: row
blocks straddle two ranks' rows. One line per combination:

    OP_NEW_OK <algorithm> <mode> ranks W steps S err E [new_inputs ok] [a_columns]

(a_columns: all_gather_gemm's copy_engine that pushes A in chunks of columns, its GEMM waiting by segments.)
Any failure prints "OP_NEW_FAIL <algorithm> <mode> ...: <what>" and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys

import torch
from op_back_to_back import (
    check_new_inputs,
    cpu_options,
    global_inputs,
    load_inputs,
    run_combinations,
    sync,
    worst_error,
)

from streamk_pgas import iris_ops, spec
from streamk_pgas.overlap.op import OverlapOp

MODES = tuple(spec.MODES)

ALGORITHMS = ("all_gather_gemm", "gemm_reduce_scatter")
TOL = {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1e-2}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def run_combination(shmem, alg: str, mode: str, args: argparse.Namespace, change_inputs: bool) -> str:
    m, n, k, dt = args.m, args.n, args.k, args.datatype
    op = OverlapOp.create(shmem, alg, m, n, k, dt, mode, **cpu_options(mode))
    seed = 2000 + 17 * ALGORITHMS.index(alg) + MODES.index(mode)
    a, b = (x.to(DTYPES[dt]) for x in global_inputs(m, n, k, seed, op.device))
    load_inputs(op, a, b)
    shmem.barrier()  # every rank has built its op before any rank's first step
    for i in range(args.steps):
        if args.poison_between and i:
            op.c.fill_(float("nan"))
        c = op()
        assert c is op.c, "op() must return the op's C buffer"
    sync(op)
    op.check_errors()
    err = worst_error(shmem, op, a, b, f"C after {args.steps} steps", TOL[dt])
    if change_inputs:
        check_new_inputs(shmem, op, a, b, seed + 500, TOL[dt], DTYPES[dt])
    shmem.barrier()  # no rank frees (resets) its heap while a peer may still touch it
    a_columns = " a_columns" if mode == "copy_engine" and op.parts.a_in_columns() else ""
    return (f"OP_NEW_OK {alg} {mode} ranks {op.world} steps {args.steps} err {err:.2e}"
            f"{' new_inputs ok' if change_inputs else ''}{a_columns}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--datatype", default="fp32", choices=sorted(DTYPES))
    p.add_argument("--poison_between", action="store_true", help="fill op.c with NaN between two steps")
    p.add_argument("--m", type=int, default=48)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--k", type=int, default=32)
    args = p.parse_args()
    algorithms = [x for x in args.algorithms.split(",") if x]
    modes = [x for x in args.modes.split(",") if x]
    shmem = iris_ops.iris(1 << 24)
    # the first combination of each algorithm also checks that new inputs are read
    combos = [(alg, mode, j == 0) for alg in algorithms for j, mode in enumerate(modes)]
    return run_combinations(shmem, combos, args, run_combination, "OP_NEW")


if __name__ == "__main__":
    sys.exit(main())

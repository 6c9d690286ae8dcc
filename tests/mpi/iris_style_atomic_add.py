#!/usr/bin/env python3
"""An Iris-style program: remote atomic_add bandwidth between every pair of ranks.

Written in the shape of Iris's examples (argument parsing, `iris.iris(heap_size)`, heap tensors, a Triton
kernel calling `iris.atomic_add(..., sem=, scope=)`, `iris.do_bench(fn, shmem.barrier, ...)`,
`shmem.broadcast(value, source_rank)`, `shmem.info/error`, a bandwidth matrix printed by rank 0), with
the one change an Iris user makes to run it on iris_ops: the import line.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/iris_style_atomic_add.py --validate
"""

import argparse
import json

import numpy as np
import torch
import triton
import triton.language as tl

import iris_ops as iris  # was: import iris


@triton.jit
def atomic_add_kernel(
    source_buffer,
    buffer_size,
    source_rank: tl.constexpr,
    destination_rank: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    heap_bases_ptr,
):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < buffer_size
    iris.atomic_add(
        source_buffer + offsets, 1, source_rank, destination_rank, heap_bases_ptr, mask=mask, sem="relaxed",
        scope="sys",
    )


def parse_args() -> dict:
    parser = argparse.ArgumentParser(description="Remote atomic_add bandwidth between ranks.")
    parser.add_argument("-z", "--buffer_size", type=int, default=1 << 20, help="buffer size in bytes")
    parser.add_argument("-b", "--block_size", type=int, default=512)
    parser.add_argument("-d", "--validate", action="store_true")
    parser.add_argument("-p", "--heap_size", type=int, default=1 << 26)
    parser.add_argument("-o", "--output_file", type=str, default="")
    parser.add_argument("-x", "--num_experiments", type=int, default=16)
    parser.add_argument("-w", "--num_warmup", type=int, default=4)
    return vars(parser.parse_args())


def run_experiment(shmem, args, source_rank, destination_rank, buffer):
    cur_rank = shmem.get_rank()
    n_elements = buffer.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)

    def run_atomic_add():
        if cur_rank == source_rank:
            atomic_add_kernel[grid](
                buffer, n_elements, source_rank, destination_rank, args["block_size"], shmem.get_heap_bases()
            )

    buffer.zero_()
    shmem.barrier()
    ms = iris.do_bench(run_atomic_add, shmem.barrier, n_repeat=args["num_experiments"], n_warmup=args["num_warmup"])

    bandwidth_gbps = 0.0
    if cur_rank == source_rank:
        total_bytes = n_elements * buffer.element_size()
        bandwidth_gbps = total_bytes / (max(ms, 1e-6) * 1e-3) / 2**30
    shmem.barrier()
    bandwidth_gbps = shmem.broadcast(bandwidth_gbps, source_rank)

    if args["validate"] and cur_rank == destination_rank:
        runs = 1 + args["num_warmup"] + args["num_experiments"]  # do_bench's first call, warm-ups, timed runs
        expected = torch.full_like(buffer, runs)
        if torch.equal(buffer, expected):
            shmem.info(f"validated atomic_add {source_rank}->{destination_rank}: ok")
        else:
            shmem.error(f"validated atomic_add {source_rank}->{destination_rank}: got {buffer.unique().tolist()}, "
                        f"expected {runs}")
    shmem.barrier()
    return bandwidth_gbps


def print_bandwidth_matrix(matrix, output_file=""):
    num_ranks = matrix.shape[0]
    print("\nUnidirectional ATOMIC_ADD bandwidth GiB/s [Remote atomic add]")
    print(" SRC\\DST ".ljust(10) + "".join(f"GPU {d:02d}".rjust(10) for d in range(num_ranks)))
    for src in range(num_ranks):
        print(f"GPU {src:02d}  ->".ljust(10) + "".join(f"{matrix[src, d]:10.2f}" for d in range(num_ranks)))
    if output_file:
        rows = [{"source_rank": s, "destination_rank": d, "bandwidth_gbps": float(matrix[s, d])}
                for s in range(num_ranks) for d in range(num_ranks)]
        with open(output_file, "w") as f:
            json.dump(rows, f, indent=2)


def main():
    args = parse_args()
    shmem = iris.iris(args["heap_size"])
    num_ranks = shmem.get_num_ranks()
    matrix = np.zeros((num_ranks, num_ranks), dtype=np.float32)
    buffer = shmem.zeros(args["buffer_size"] // 4, dtype=torch.int32)
    for source_rank in range(num_ranks):
        for destination_rank in range(num_ranks):
            matrix[source_rank, destination_rank] = run_experiment(shmem, args, source_rank, destination_rank,
                                                                   buffer)
            shmem.barrier()
    if shmem.get_rank() == 0:
        print_bandwidth_matrix(matrix, args["output_file"])


if __name__ == "__main__":
    main()

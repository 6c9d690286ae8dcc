"""torch symmetric-memory ops and iris_ops Triton kernels on the same heap tensors (IRIS_OPS_BACKEND=symm).

    mpirun -np 2 python tests/mpi/symm_mixed.py --json result.json          # one rank per GPU
    STREAMK_PGAS_SHARE_GPU=1 mpirun -np 2 python tests/mpi/symm_mixed.py ...  # two ranks on one GPU
    python tests/mpi/symm_mixed.py --backend cuda --startup_only --json t.json  # start-up time only

Cases, each on a heap tensor at offset 0 of the heap and on one at a later offset (torch may accept only
whole symmetric allocations, or also views into one; the result says which):
- kernel_then_torch: every rank atomic_adds (r + 1) into every rank's tensor with iris_ops.atomic_add; then
  torch.ops.symm_mem.one_shot_all_reduce sums the tensors; expected W * W(W+1)/2 everywhere;
- torch_then_kernel: each rank fills its tensor with r + 1, torch.ops.symm_mem.two_shot_all_reduce_ sums it
  in place, then each rank reads its peer's tensor with iris_ops.load; expected W(W+1)/2.
Rank 0 writes {"backend", "world_size", "startup_s": [per rank], "heap_bases_ok", "cases": {name: {"ok",
"error"}}} and the exit code is 0 only if every case passed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

from streamk_pgas import iris_ops

N = 4096


@triton.jit
def add_to_every_rank(x_ptr, value, n, cur_rank, world, heap_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    vals = tl.full([BLOCK], value, dtype=tl.float32)
    for peer in range(world):
        iris_ops.atomic_add(x_ptr + offs, vals, cur_rank, peer, heap_bases, mask=mask)


@triton.jit
def load_from_peer(x_ptr, out_ptr, n, cur_rank, peer, heap_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, iris_ops.load(x_ptr + offs, cur_rank, peer, heap_bases, mask=mask), mask=mask)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--backend", default="symm", choices=("symm", "cuda"))
    parser.add_argument("--startup_only", action="store_true", help="only time the heap's start-up")
    args = parser.parse_args()

    t0 = time.perf_counter()
    shmem = iris_ops.iris(64 << 20, backend=args.backend)
    startup_s = time.perf_counter() - t0
    me, world = shmem.get_rank(), shmem.get_num_ranks()
    startups = shmem.allgather(round(startup_s, 4))
    result: dict[str, Any] = {"backend": shmem.backend_name, "world_size": world, "startup_s": startups,
                              "device": str(shmem.get_device()), "torch": torch.__version__,
                              "triton": triton.__version__, "cases": {}}
    if args.startup_only:
        if me == 0:
            args.json.write_text(json.dumps(result, indent=1))
            print(json.dumps(result))
        shmem.barrier()
        return 0

    group_name = shmem._backend.group_name
    bases = [int(b) for b in shmem.get_heap_bases().cpu().tolist()]
    result["heap_bases_ok"] = bases[me] == shmem.memory_pool.data_ptr() and len(set(bases)) == world
    result["group_name"] = group_name
    peer = (me + 1) % world
    grid = (triton.cdiv(N, 1024),)
    total = world * (world + 1) / 2

    at_zero = shmem.zeros(N, dtype=torch.float32)  # the heap's first bytes: the start of torch's allocation
    shmem.zeros(3000, dtype=torch.uint8)  # push the next tensor off the allocation's start
    at_offset = shmem.zeros(N, dtype=torch.float32)
    scratch = shmem.zeros(N, dtype=torch.float32)
    tensors = {"offset0": at_zero, f"offset{at_offset.data_ptr() - shmem.memory_pool.data_ptr()}": at_offset}

    def kernel_then_torch(x: torch.Tensor) -> str | None:
        x.zero_()
        shmem.barrier()
        add_to_every_rank[grid](x, float(me + 1), N, me, world, shmem.get_heap_bases(), BLOCK=1024)
        shmem.barrier()
        if not bool((x == total).all()):
            return f"after the iris_ops atomic_adds: {x.unique().tolist()}, expected {total}"
        out = torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group_name)
        torch.cuda.synchronize()
        if not bool((out == world * total).all()):
            return f"one_shot_all_reduce gave {out.unique().tolist()}, expected {world * total}"
        return None

    def torch_then_kernel(x: torch.Tensor) -> str | None:
        x.fill_(float(me + 1))
        shmem.barrier()
        torch.ops.symm_mem.two_shot_all_reduce_(x, "sum", group_name)
        torch.cuda.synchronize()
        shmem.barrier()
        if not bool((x == total).all()):
            return f"two_shot_all_reduce_ left {x.unique().tolist()}, expected {total}"
        scratch.zero_()
        load_from_peer[grid](x, scratch, N, me, peer, shmem.get_heap_bases(), BLOCK=1024)
        torch.cuda.synchronize()
        if not bool((scratch == total).all()):
            return f"iris_ops.load from rank {peer} read {scratch.unique().tolist()}, expected {total}"
        return None

    mine: dict[str, str | None] = {}
    for label, tensor in tensors.items():
        for case in (kernel_then_torch, torch_then_kernel):
            name = f"{case.__name__}[{label}]"
            try:
                mine[name] = case(tensor)
            except Exception as exc:
                mine[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                traceback.print_exc(limit=3)
            shmem.barrier()
    everyone = shmem.allgather(mine)
    for name in mine:
        errors = [f"rank {r}: {e[name]}" for r, e in enumerate(everyone) if e[name]]
        result["cases"][name] = {"ok": not errors, "error": "; ".join(errors)}
    ok = result["heap_bases_ok"] and all(c["ok"] for c in result["cases"].values())
    if me == 0:
        args.json.write_text(json.dumps(result, indent=1))
        for name, c in result["cases"].items():
            print(f"{name:40s} {'ok' if c['ok'] else 'FAILED ' + c['error']}")
        print(f"heap start-up {startups} s on {shmem.backend_name}; heap bases ok: {result['heap_bases_ok']}")
    shmem.barrier()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

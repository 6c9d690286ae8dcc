"""Calling the overlapped GEMM + all-reduce from a torch program, step after step like a layer.

    mpirun -np 2 python examples/op_example.py     # one GPU per rank; without a GPU, the CPU heap and Triton's
                                                   # interpreter (chosen by the op itself)

Every rank holds a K-shard of A and B (A[:, r*K/W:(r+1)*K/W], B[r*K/W:(r+1)*K/W, :]); each call of the
op computes its partial product and sums it over the ranks, so every rank ends with the whole
C = A @ B. Rank 0 checks C against torch and prints one line.
"""

from __future__ import annotations

import torch

from streamk_pgas import iris_ops, spec
from streamk_pgas.iris_ops.bootstrap import get_bootstrap
from streamk_pgas.overlap import OverlapOp
from streamk_pgas.stream_k import KernelConfig

STEPS = 4  # "layers"


def main() -> None:
    world = get_bootstrap().world_size  # the ranks mpirun (or torchrun) started
    if torch.cuda.is_available():
        m, n, k, dtype, torch_dtype, tol = 2048, 2048, 4096, "bf16", torch.bfloat16, 2e-2
        options = {}  # the defaults for this GPU
    else:  # Triton's interpreter: a tiny problem, two programs (one GEMM, one communication), fp32
        m, n, k, dtype, torch_dtype, tol = 32, 32, 32, "fp32", torch.float32, 1e-4
        options = {"total_sms": 2, "gemm_sms": 1, "comm_tile_m": 16, "comm_tile_n": 16,
                   "kernel": KernelConfig(BLK_M=16, BLK_N=16, BLK_K=16, num_stages=1, num_warps=4)}

    # One symmetric heap per rank, sized for the op; the op, built by every rank with the same arguments.
    heap = iris_ops.iris(OverlapOp.heap_bytes("all_reduce", m, n, k, dtype, world, **options) + (1 << 20))
    op = OverlapOp.create(heap, "all_reduce", m, n, k, dtype, mode="fused", **options)
    rank, device = heap.get_rank(), heap.get_device()
    heap.barrier()  # every rank's op is built (its heap buffers zeroed) before any rank's first step

    # The same seeded A and B on every rank; each rank takes its shards (spec.sharding: all_reduce's K-slices).
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device, torch_dtype)
    b = torch.randn(k, n, generator=gen).to(device, torch_dtype)
    family = spec.ALGORITHMS["all_reduce"].family
    (ar, ac), (br, bc) = family.a_slice(rank, m, k, world), family.b_slice(rank, k, n, world)
    a_shard = a[ar[0]:ar[1], ac[0]:ac[1]].contiguous()
    b_shard = b[br[0]:br[1], bc[0]:bc[1]].contiguous()

    outputs = []
    for _ in range(STEPS):
        c = op(a_shard, b_shard)  # queued on the current stream; the whole C on this rank once the stream gets there
        outputs.append(c.clone())  # C is the op's buffer, overwritten by the next call: clone to keep it
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    op.check_errors()  # raises if a wait of any step gave up (a lost peer)

    if rank == 0:
        ref = a.double() @ b.double()
        errs = [float(torch.linalg.norm(x.double() - ref) / torch.linalg.norm(ref)) for x in outputs]
        worst = max(errs)
        ok = worst <= tol  # NaN compares False
        print(f"OP_EXAMPLE {'ok' if ok else 'FAILED'}: all_reduce fused on {world} ranks, {m}x{n}x{k} {dtype}, "
              f"{STEPS} steps, max relative error {worst:.2e} (tolerance {tol:g})", flush=True)
        if not ok:
            raise SystemExit(1)
    heap.barrier()


if __name__ == "__main__":
    main()

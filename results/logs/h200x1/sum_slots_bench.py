"""gemm_reduce_scatter copy_engine's add after the copies (overlap.communication.copy_engine.sum_slots_kernel) alone
on one GPU, at the op's sizes (rows = M / W, n = N, W slots), for program blocks and warps: ms (CUDA events around
20 launches back to back, median of 20), TB/s of its W reads and one write, bit equality with the default block;
and a torch copy of the same bytes (what the memory moves at best).

    python results/logs/h200x1/sum_slots_bench.py [--out FILE.csv]
"""

from __future__ import annotations

import argparse
import csv
import functools
import statistics

import torch

from streamk_pgas.overlap.communication.copy_engine import sum_slots_kernel
from streamk_pgas.overlap.copy_steps import SUM_BLOCK

# (rows, n, world): the W = 4 cells whose auto is copy_engine, and W = 2's 4864 x 4096 x 8256
SIZES = ((2048, 8192, 4), (4096, 8192, 4), (1024, 57344, 4), (1024, 8192, 4), (2432, 4096, 2))
CONFIGS = ((8, 256, 4), (8, 256, 8), (16, 256, 4), (16, 256, 8), (32, 256, 8), (8, 512, 4), (8, 512, 8),
           (16, 512, 8), (4, 1024, 4), (4, 1024, 8), (32, 128, 4), (64, 256, 8))


def timed(fn, reps: int = 20, batch: int = 20) -> float:
    """Milliseconds a launch: the median over `reps` of `batch` launches back to back between two events."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows_out = []
    for rows, n, world in SIZES:
        g = torch.Generator(device="cuda").manual_seed(0)
        own = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16, generator=g)
        recv = torch.randn(world, rows, n, device="cuda", dtype=torch.bfloat16, generator=g)
        rank = 1
        moved = (world + 1) * rows * n * 2  # W reads (own rows and W - 1 slots) and one write
        ref = None
        for bm, bn, warps in CONFIGS:
            c = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
            grid = (-(-rows // bm) * -(-n // bn),)
            run = functools.partial(sum_slots_kernel[grid], c, own, recv, rows, n, c.stride(0), own.stride(0),
                                    recv.stride(0), recv.stride(1), rank, WORLD=world, BLOCK_M=bm, BLOCK_N=bn,
                                    num_warps=warps)
            ms = timed(run)
            if (bm, bn) == SUM_BLOCK and warps == 4:
                ref = c.clone()
            same = None if ref is None else bool(torch.equal(c, ref))
            rows_out.append({"rows": rows, "n": n, "world": world, "block": f"{bm}x{bn}", "warps": warps,
                             "ms": round(ms, 5), "tbs": round(moved / ms / 1e9, 3), "same_bits": same})
            print(rows_out[-1], flush=True)
        src = torch.empty(moved // 4, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        ms = timed(functools.partial(dst.copy_, src))  # reads and writes `moved` bytes in all
        rows_out.append({"rows": rows, "n": n, "world": world, "block": "torch copy", "warps": 0, "ms": round(ms, 5),
                         "tbs": round(moved / ms / 1e9, 3), "same_bits": None})
        print(rows_out[-1], flush=True)
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows_out[0]))
            w.writeheader()
            w.writerows(rows_out)


if __name__ == "__main__":
    main()

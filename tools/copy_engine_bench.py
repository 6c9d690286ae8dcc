"""What the copy-engine mode's operations cost on this machine: bandwidth of its copies and host time per call.

    mpirun -np 2 python -m tools.copy_engine_bench [--mb 20] [--iters 20] [--output_file ce.json]

Rank 0 times, with CUDA events on one stream (median of --iters, each after a drain and a barrier):
    peer_1d        one Copy2D of --mb MB into rank 1's heap, rows as wide as their pitch (a plain copy)
    peer_2d_4k     the same bytes as 4 KB rows with an 8 KB pitch on both sides (all_scatter's columns of C
                   at N/W = 2048 bf16)
    peer_2d_16k    16 KB rows, 16.5 KB pitch (all_gather_gemm's rows of A at K = 8256)
    peer_banded    peer_1d cut into 8 copies, each behind a satisfied WaitGeq (the schedule's shape)
    local_1d       one Copy2D within rank 0's heap
and the host's cost of queueing one operation (microseconds per call, the device kept busy by a spin):
    host_wait_us, host_copy_us, host_graph_us (a CUDA graph replay of 16 of them).
Rank 1 only meets the barriers. NVIDIA GPUs only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.copy_engine_bench")
    p.add_argument("--mb", type=float, default=20.0)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--output_file", type=Path, default=None)
    args = p.parse_args(argv)
    from streamk_pgas import iris_ops
    from streamk_pgas.overlap.communication.copy_engine import Copy2D, CopySchedule, CudaEngine, WaitGeq

    nbytes = int(args.mb * 1e6) // 16384 * 16384
    shmem = iris_ops.iris(4 * nbytes + (64 << 20))
    rank, dev = shmem.get_rank(), shmem.get_device()
    if dev.type != "cuda":
        print("copy_engine_bench: needs an NVIDIA GPU", file=sys.stderr)
        return 2
    src = shmem.zeros(2 * nbytes, dtype=torch.uint8)
    dst = shmem.zeros(2 * nbytes, dtype=torch.uint8)
    word = torch.ones(1, dtype=torch.int32, device=dev)
    bases = shmem.get_heap_bases().tolist()

    def peer(t: torch.Tensor, p: int = 1) -> int:
        return t.data_ptr() - bases[rank] + bases[p]

    s, d, pd = src.data_ptr(), dst.data_ptr(), peer(dst)
    cases = {
        "peer_1d": [Copy2D(pd, nbytes, s, nbytes, nbytes, 1)],
        "peer_2d_4k": [Copy2D(pd, 8192, s, 8192, 4096, nbytes // 4096)],
        "peer_2d_16k": [Copy2D(pd, 16896, s, 16896, 16384, nbytes // 16384)],
        "peer_banded": [x for i in range(8) for x in (WaitGeq(word.data_ptr(), 1),
                        Copy2D(pd + i * nbytes // 8, nbytes, s + i * nbytes // 8, nbytes, nbytes // 8, 1))],
        "local_1d": [Copy2D(d, nbytes, s, nbytes, nbytes, 1)],
    }
    engine = CudaEngine()
    stream = torch.cuda.Stream(dev)
    out: dict[str, object] = {"bytes": nbytes, "device": torch.cuda.get_device_name(dev), "torch": torch.__version__}
    for name, ops in cases.items():
        sched = CopySchedule(ops, engine)
        times = []
        for i in range(args.iters + 3):
            shmem.barrier()
            if rank == 0:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(1_000_000)
                    a.record(stream)
                    sched(stream)
                    b.record(stream)
                b.synchronize()
                if i >= 3:
                    times.append(a.elapsed_time(b))
        if rank == 0:
            ms = statistics.median(times)
            out[name] = {"ms": ms, "GBps": nbytes / ms / 1e6}
    if rank == 0:  # host cost per operation, the device busy meanwhile
        small = [WaitGeq(word.data_ptr(), 1)] * 16
        copies = [Copy2D(pd, 4096, s, 4096, 4096, 1)] * 16
        for name, ops in (("host_wait_us", small), ("host_copy_us", copies)):
            sched = CopySchedule(ops, engine)
            with torch.cuda.stream(stream):
                torch.cuda._sleep(50_000_000)
                t0 = time.perf_counter()
                for _ in range(10):
                    sched(stream)
                out[name] = (time.perf_counter() - t0) / (10 * len(ops)) * 1e6
            stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        sched = CopySchedule(small, engine)
        with torch.cuda.graph(graph, stream=stream):
            sched(None)
        with torch.cuda.stream(stream):
            torch.cuda._sleep(50_000_000)
            t0 = time.perf_counter()
            for _ in range(10):
                graph.replay()
            out["host_graph_us"] = (time.perf_counter() - t0) / 10 * 1e6
        stream.synchronize()
        print(json.dumps(out, indent=1))
        if args.output_file:
            args.output_file.write_text(json.dumps(out, indent=1))
    shmem.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the copy-engine mode's operations cost on this machine: bandwidth of its copies and host time per call.

    mpirun -np 2 python -m tools.copy_engine_bench [--mb 20] [--iters 20] [--output_file ce.json]   (or -np 4)

Rank 0 times, with CUDA events on one stream (median of --iters, each after a drain and a barrier):
    peer_1d        one Copy2D of --mb MB into rank 1's heap, rows as wide as their pitch (a plain copy)
    peer_2d_4k     the same bytes as 4 KB rows with an 8 KB pitch on both sides (all_scatter's columns of C
                   at N/W = 2048 bf16)
    peer_2d_16k    16 KB rows, 16.5 KB pitch (all_gather_gemm's rows of A at K = 8256)
    peer_banded    peer_1d cut into 8 copies, each behind a satisfied WaitGeq (the schedule's shape)
    peer_pull_1d   one Copy2D of --mb MB from rank 1's heap into rank 0's (the copy engine reads the peer)
    local_1d       one Copy2D within rank 0's heap
    peer_split2/4  peer_1d cut into 2 / 4 copies side by side, one stream each (do more copy engines to one peer
                   move more?)
with 3 or more ranks, rank 0 alone (GB/s over all the bytes it moves):
    peers_serial   --mb MB into every peer, one copy after another on one stream
    peers_lanes    the same copies side by side, one stream each (forked and joined with events)
and every rank at once (each times its own copies; rank 0's figure is reported):
    ring_push      every rank --mb MB into rank - 1 (all_gather_gemm's slot 1: every link of a ring busy)
    ring_pull      every rank --mb MB from rank + 1
    ring_push_split2  ring_push with each copy cut into 2 side by side
and peer_1d, peer_pull_1d, ring_push, ring_pull again as *_gemm, with a --gemm^3 bf16 torch.matmul on another
stream of every copying rank meanwhile (the copy_engine mode's copies run beside its GEMM);
and the host's cost of queueing one operation (microseconds per call, the device kept busy by a spin):
    host_wait_us, host_copy_us, host_graph_us (a CUDA graph replay of 16 of them).
Other ranks meet the barriers (and copy in the ring cases). NVIDIA GPUs only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.copy_engine_bench")
    p.add_argument("--mb", type=float, default=20.0)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--output_file", type=Path, default=None)
    p.add_argument("--gemm", type=int, default=8192, help="N of the N^3 bf16 GEMM beside the *_gemm cases")
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

    world = shmem.get_num_ranks()
    s, d, pd = src.data_ptr(), dst.data_ptr(), peer(dst)
    one = lambda to, frm: Copy2D(to, nbytes, frm, nbytes, nbytes, 1)
    # name -> (lanes of operations, one stream each, on every rank that copies; whether every rank copies)
    cases: dict[str, tuple[list[list], bool]] = {
        "peer_1d": ([[one(pd, s)]], False),
        "peer_2d_4k": ([[Copy2D(pd, 8192, s, 8192, 4096, nbytes // 4096)]], False),
        "peer_2d_16k": ([[Copy2D(pd, 16896, s, 16896, 16384, nbytes // 16384)]], False),
        "peer_banded": ([[x for i in range(8) for x in (WaitGeq(word.data_ptr(), 1),
                          Copy2D(pd + i * nbytes // 8, nbytes, s + i * nbytes // 8, nbytes, nbytes // 8, 1))]], False),
        "peer_pull_1d": ([[one(d, peer(src))]], False),
        "local_1d": ([[one(d, s)]], False),
    }

    def split(to: int, frm: int, parts: int) -> list[list]:  # one copy cut into `parts` lanes, side by side
        size = nbytes // parts
        return [[Copy2D(to + i * size, size, frm + i * size, size, size, 1)] for i in range(parts)]

    cases["peer_split2"] = (split(pd, s, 2), False)
    cases["peer_split4"] = (split(pd, s, 4), False)
    if world >= 3:
        to_each = [one(peer(dst, q), s) for q in range(1, world)]
        cases["peers_serial"] = ([to_each], False)
        cases["peers_lanes"] = ([[x] for x in to_each], False)
        cases["ring_push"] = ([[one(peer(dst, (rank - 1) % world), s)]], True)
        cases["ring_pull"] = ([[one(d, peer(src, (rank + 1) % world))]], True)
        cases["ring_push_split2"] = (split(peer(dst, (rank - 1) % world), s, 2), True)
    # the same copies while a GEMM holds the SMs and memory (what the copy_engine mode sees)
    beside = {f"{name}_gemm": name for name in ("peer_1d", "peer_pull_1d", "ring_push", "ring_pull") if name in cases}
    cases.update({name: cases[plain] for name, plain in beside.items()})
    g = args.gemm
    ga, gb = (torch.randn(g, g, device=dev, dtype=torch.bfloat16) for _ in range(2))
    gc = torch.empty(g, g, device=dev, dtype=torch.bfloat16)
    gemm_stream = torch.cuda.Stream(dev)

    def gemm() -> None:
        with torch.cuda.stream(gemm_stream):
            torch.matmul(ga, gb, out=gc)

    engine = CudaEngine()
    streams = [torch.cuda.Stream(dev) for _ in range(max(4, world - 1))]
    out: dict[str, object] = {"bytes": nbytes, "world": world, "device": torch.cuda.get_device_name(dev),
                              "torch": torch.__version__}
    for name, (lanes, everyone) in cases.items():
        scheds = [CopySchedule(ops, engine) for ops in lanes]
        moved = sum(op.width * op.rows for ops in lanes for op in ops if isinstance(op, Copy2D))
        times = []
        for _ in range(args.iters + 3):
            shmem.barrier()
            if rank == 0 or everyone:
                times.append(_timed_lanes(scheds, streams, gemm if name in beside else None))
            torch.cuda.synchronize()
        if rank == 0:
            ms = statistics.median(times[3:])
            out[name] = {"ms": ms, "GBps": moved / ms / 1e6}
    stream = streams[0]
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


def _timed_lanes(scheds: list, streams: list, beside: Any = None) -> float:
    """ms from the start of the first lane to the end of the last: lane i on streams[i], forked from and joined into
    streams[0] with events, after a ~0.5 ms spin that lets the host queue everything first; `beside()` queues work
    on a stream of its own right after the spin (which holds one SM already, so the two run together)."""
    main = streams[0]
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(main):
        torch.cuda._sleep(1_000_000)
        if beside is not None:
            beside()
        a.record(main)
    for sched, st in zip(scheds[1:], streams[1:]):
        st.wait_event(a)
        sched(st)
    scheds[0](main)
    for st in streams[1:len(scheds)]:
        main.wait_stream(st)
    b.record(main)
    b.synchronize()
    return a.elapsed_time(b)


if __name__ == "__main__":
    sys.exit(main())

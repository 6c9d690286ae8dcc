#!/usr/bin/env python3
"""Stream-K GEMM overlapped with communication on a symmetric heap: flags -> config -> run -> validate -> log.

    mpirun -np 2 python benchmark.py --algorithm one_shot --mode fused --validate --benchmark

Under mpirun the ranks come from MPI; under torchrun from its environment; plain `python` is one
rank. With no GPU (or TRITON_INTERPRET=1) it runs on the CPU backend in Triton's interpreter at a
small default shape and says so. Rank 0 prints a summary and writes the JSON log (--output_file).
Exit codes: 0 ok, 1 validation failed or a kernel error, 2 a bad flag or environment value, an output file
that cannot be written, or a heap that does not fit (one line naming the flag, from rank 0, before any work).
--algorithm, --mode, --gemm_sms and the communication tile sizes take comma-separated lists: every
combination runs in the same launch (one log each), which is how SM-split sweeps are made.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

# Triton's interpreter must be chosen before triton is imported: with no GPU, use it.
if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch as _torch

        if not _torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    except ImportError:
        pass

import torch

from harness import runlog
from harness.config import (
    BenchConfig,
    ConfigError,
    DeviceFacts,
    check_environment,
    check_heap,
    check_outputs,
    expand_sweep,
    output_path,
    parse_config,
)
from harness.timing import METHOD as TIMING_METHOD
from harness.timing import queue_ahead, time_iterations
from harness.validate import describe_failure
from iris_ops.bootstrap import Bootstrap, get_bootstrap


def device_facts(boot: Bootstrap) -> DeviceFacts:
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        # The interpreter runs programs one after another: any count is "resident".
        return DeviceFacts(backend="cpu", sm_count=1024, shared_mem_per_program=1 << 30, name="cpu (interpreter)")
    n = torch.cuda.device_count()
    if boot.local_size > n:
        raise ConfigError("-np", f"{boot.local_size} ranks on this node but {n} GPU(s): start at most one rank per GPU")
    torch.cuda.set_device(boot.local_rank)
    props = torch.cuda.get_device_properties(boot.local_rank)
    smem = getattr(props, "shared_memory_per_block_optin", None) or 227 * 1024
    hip = bool(torch.version.hip)
    return DeviceFacts(backend="hip" if hip else "cuda", sm_count=props.multi_processor_count,
                       shared_mem_per_program=int(smem), name=props.name,
                       capability=0 if hip else props.major * 10 + props.minor, memory_bytes=props.total_memory)


def fill_heap_size(cfg: BenchConfig, world_size: int) -> None:
    from overlap.runner import heap_bytes_needed

    need = heap_bytes_needed(cfg, world_size)
    if "heap_size" in cfg.defaulted:
        cfg.heap_size = need + (1 << 20)
    elif cfg.heap_size < need:
        raise ConfigError("--heap_size", f"{cfg.algorithm} at {cfg.m}x{cfg.n}x{cfg.k} {cfg.datatype} needs at least "
                          f"{need} B of heap per rank, got {cfg.heap_size}")


def say(boot: Bootstrap, *msg: Any) -> None:
    if boot.rank == 0:
        print(*msg, flush=True)


def run(cfg: BenchConfig, boot: Bootstrap, shmem: Any, output_file: str | None) -> int:
    from iris_ops.device_barrier import DeviceBarrier
    from overlap.runner import OverlapRun

    shmem.reset_allocator()
    runner = OverlapRun(cfg, shmem)
    start_barrier = DeviceBarrier(shmem, cfg.timeout_s, max_stamps=1)
    runner.prepare()
    W = shmem.get_num_ranks()
    if cfg.cpu_small_default:
        say(boot, f"note: no GPU, so this runs on the CPU backend in Triton's interpreter at a small default shape "
                  f"({cfg.m}x{cfg.n}x{cfg.k} {cfg.datatype}, {cfg.total_sms} programs); pass -m/-n/-k to change it")
    say(boot, f"{cfg.algorithm} / {cfg.mode}: {cfg.m}x{cfg.n}x{cfg.k} {cfg.datatype}, world {W}, "
              f"gemm_sms {cfg.gemm_sms} of {cfg.total_sms}, tiles {runner.tiles} "
              f"({cfg.BLK_M}x{cfg.BLK_N}x{cfg.BLK_K}), backend {shmem.backend_name}")
    if cfg.debug:
        print(f"[rank {boot.rank}] {runner.info()}", flush=True)
    if not runner.on_gpu and cfg.algorithm == "all_reduce" and cfg.datatype == "fp16" and W > 1:
        say(boot, "note: Triton's CPU interpreter adds fp16 under a lock of its own process, so atomic adds from "
                  "several ranks can lose updates here; use --datatype fp32 on the CPU")

    def sync() -> None:
        if runner.on_gpu:
            torch.cuda.synchronize()

    status = 0
    validation: dict[str, Any] = {"enabled": cfg.validate, "passed": None}
    if cfg.validate:
        rounds = max(1, cfg.validate_iters)
        for i in range(rounds):
            runner.poison()
            sync()
            shmem.barrier()
            runner.step()
            sync()
            shmem.barrier()
            runner.check_errors()
            mine = runner.validate()
            everyone = shmem.allgather(mine)
            ok = all(v["passed"] for v in everyone)
            if not ok or i == rounds - 1:
                break
        validation = {"enabled": True, "passed": ok, "iterations": i + 1, "ranks": everyone}
        if ok:
            g = everyone[0]["global"]
            say(boot, f"validation passed on every rank ({i + 1} iteration(s)); global C rel err "
                      f"{g['rel_err']:.3g} (tolerance {g['tolerance']:g})")
        else:
            status = 1
            for r, v in enumerate(everyone):
                for part in ("global", "partial"):
                    if not v[part]["passed"]:
                        say(boot, f"VALIDATION FAILED: rank {r} {describe_failure(part, v[part])} "
                                  f"(iteration {i + 1})")

    timing: dict[str, Any] = {"iters": 0, "warmup": 0, "e2e_ms": None, "tflops": None, "kernels_ms": {}}
    components: dict[str, Any] = {}
    flops_per_rank = 2 * cfg.m * runner.local_n * runner.local_k
    if cfg.benchmark:
        barrier = shmem.barrier

        def start_sync(_it: int) -> None:  # the device-side barrier before each start event
            if cfg.start_sync == "device":
                start_barrier()

        timed = {"iters": cfg.iters, "warmup": cfg.warmup, "barrier": barrier, "use_events": runner.on_gpu,
                 "allgather": shmem.allgather, "start_sync": start_sync}
        e2e, kernels = time_iterations(runner.step, **timed)
        runner.check_errors()
        start_barrier.check()
        timing = runlog.timing_section(e2e, kernels, flops_per_rank, cfg.iters, cfg.warmup)
        timing["method"] = TIMING_METHOD
        timing["start_sync"] = cfg.start_sync
        if cfg.mode in ("two_streams", "fused"):
            _, g_alone = time_iterations(runner.gemm_alone, **timed)
            _, c_alone = time_iterations(runner.comm_alone, **timed)
            runner.check_errors()
            start_barrier.check()
            gm = runlog.summarize_ms(g_alone["gemm_alone"])["median"]
            cm = runlog.summarize_ms(c_alone["comm_alone"])["median"]
            bound = max(gm, cm)
            components = {"gemm_alone_ms": gm, "comm_alone_ms": cm, "overlap_bound_ms": bound,
                          "e2e_over_bound": timing["e2e_ms"] / bound if bound > 0 else None}
        say(boot, f"e2e median {timing['e2e_ms']:.4f} ms over {cfg.iters} iterations "
                  f"({timing['tflops'] or 0:.1f} TFLOP/s per GPU); kernels "
                  + ", ".join(f"{k} {v:.4f} ms" for k, v in timing["kernels_ms"].items()))
        if components:
            say(boot, f"overlap bound: GEMM alone on {cfg.gemm_sms} SMs {components['gemm_alone_ms']:.4f} ms, "
                      f"communication alone on {cfg.comm_sms} SMs {components['comm_alone_ms']:.4f} ms; "
                      f"e2e / bound = {components['e2e_over_bound']:.3f}")
    elif not cfg.validate:
        shmem.barrier()
        runner.step()
        sync()
        shmem.barrier()
        runner.check_errors()
        say(boot, "ran 1 iteration (add --validate and/or --benchmark)")

    trace_files: dict[str, str] = {}
    if cfg.trace_tiles:
        trace_files = write_trace(cfg, boot, shmem, runner, sync, output_file, start_barrier)

    if boot.rank == 0 and output_file:
        from harness.runlog import new_record, problem_sizes, write_record

        elem = torch.empty((), dtype=runner.dtype).element_size()
        sizes = problem_sizes(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, W, elem)
        sizes["tiles"] = runner.tiles
        record = new_record(producer="benchmark", algorithm=cfg.algorithm, implementation="streamk-pgas",
                            mode=cfg.mode, world_size=W, flags=cfg.as_flags(), sizes=sizes, timing=timing,
                            validation=validation,
                            extra={"components": components, "resources": runner.resource_usage(),
                                   "gemm": runner.info(), "trace_files": trace_files,
                                   "launcher": boot.launcher, "heap_backend": shmem.backend_name,
                                   "cpu_small_default": cfg.cpu_small_default})
        path = write_record(record, output_file)
        print(f"log: {path}", flush=True)
    shmem.barrier()
    return status


def write_trace(cfg: BenchConfig, boot: Bootstrap, shmem: Any, runner: Any, sync: Any,
                output_file: str | None, start_barrier: Any) -> dict[str, str]:
    """One more iteration with per-tile timestamps; rank 0 writes the timeline and the Perfetto trace."""
    runner.tracing = True
    runner.prepare()
    # One untraced-timing step with tracing on first: the traced kernels compile here, not between the
    # start barrier and the traced step (which would put the compile time into the timeline).
    sync()
    shmem.barrier()
    runner.step()
    sync()
    shmem.barrier()
    runner.check_errors()
    if runner.on_gpu:
        queue_ahead()  # as in the timed iterations: the traced step's launches are queued before it runs
    # The device barrier lines the ranks up; its exit stamp is each rank's time origin in the timeline
    # (the GPUs' clocks disagree by microseconds to hundreds of microseconds).
    start_barrier(slot=0, wait=cfg.start_sync == "device")
    runner.step()
    sync()
    runner.tracing = False
    shmem.barrier()
    runner.check_errors()
    mine = runner.trace_arrays()
    if cfg.start_sync == "device" and runner.on_gpu:
        mine["origin_ticks"] = int(start_barrier.stamps[0].item())
    mine.update(rank=boot.rank, world_size=shmem.get_num_ranks(), algorithm=cfg.algorithm, mode=cfg.mode,
                gemm_sms=runner.main.gemm_programs, comm_sms=runner.main.comm_programs or runner.comm_grid,
                num_tiles=runner.tiles, BLK_M=cfg.BLK_M, BLK_N=cfg.BLK_N, timer_rate_khz=shmem.wall_clock_rate(),
                device=torch.cuda.get_device_name() if runner.on_gpu else "cpu (interpreter)",
                datatype=cfg.datatype, m=cfg.m, n=cfg.n, k=cfg.k)
    everyone = shmem.allgather(mine)
    files: dict[str, str] = {}
    if boot.rank == 0:
        from harness.trace import write_traces

        stem = Path(output_file).with_suffix("") if output_file else Path(
            f"results/traces/{cfg.algorithm}_{cfg.mode}_{cfg.m}x{cfg.n}x{cfg.k}_{time.strftime('%Y%m%d-%H%M%S')}")
        timeline, chrome = write_traces(everyone, stem)
        files = {"timeline": str(timeline), "perfetto": str(chrome)}
        print(f"tile timeline: {timeline}; Perfetto trace (open in ui.perfetto.dev): {chrome}", flush=True)
    return files


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # MPI start-up first (bounded by IRIS_OPS_TIMEOUT_S, or its default while the value is refused below):
    # errors found after it reach every rank alike, and rank 0's line is printed before any rank exits.
    boot = get_bootstrap()
    if any(a in ("-h", "--help") for a in argv):
        from harness.config import build_parser

        if boot.rank == 0:
            build_parser().print_help()
        return 0
    try:
        backend = check_environment()
        facts = device_facts(boot)
        configs = [parse_config(a, facts, boot.world_size) for a in expand_sweep(argv)]
        for cfg in configs:
            fill_heap_size(cfg, boot.world_size)
        check_heap(max(configs, key=lambda c: c.heap_size), facts, backend, boot.local_size)
        outputs = [output_path(cfg.output_file, cfg, len(configs) > 1) for cfg in configs]
        problem = None
        if boot.rank == 0:  # rank 0 writes the logs: it checks they can be written, and tells the others
            try:
                check_outputs(outputs)
            except ConfigError as exc:
                problem = (exc.flag, exc.message)
        problem = boot.broadcast(problem)
        if problem:
            raise ConfigError(*problem)
    except ConfigError as exc:
        if boot.rank == 0:
            print(f"benchmark.py: error: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        import iris_ops

        shmem = iris_ops.iris(max(cfg.heap_size for cfg in configs))
        status = 0
        for cfg, output_file in zip(configs, outputs):
            status = max(status, run(cfg, boot, shmem, output_file))
        return status
    except Exception as exc:  # a kernel error or a lost rank: fail this rank, and the job, without hanging
        print(f"benchmark.py: rank {boot.rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if boot.world_size > 1:
            boot.abort(1)
        return 1


if __name__ == "__main__":
    sys.exit(main())

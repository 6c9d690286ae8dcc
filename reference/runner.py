"""Run one baseline: check it can run here, time it like benchmark.py, validate it, build its record.

Whether a variant runs is decided by all ranks together (`World.agree`), instead of leaving the other
ranks waiting in a collective: a variant this machine cannot run at all (an op torch lacks, symmetric
memory on the CPU) is skipped everywhere, with the reason in `skipped`; a variant that one rank tried to
set up and could not (an allocation failure, an error in its first step) failed everywhere, with the
error in `failed`, and makes `python -m reference` exit non-zero.
"""

from __future__ import annotations

import traceback
from typing import Any

import torch
import torch.distributed as dist

from streamk_pgas.harness.progress import Progress
from streamk_pgas.harness.runlog import new_record, rate_text, summarize_ms, timing_section
from streamk_pgas.harness.timing import (
    HOST_METHOD,
    LOOP_METHOD,
    CapturedStep,
    StepTimer,
    device_sync,
    host_us_per_call,
    time_iterations,
    time_loop,
)
from streamk_pgas.harness.timing import METHOD as TIMING_METHOD
from streamk_pgas.reference.config import RefConfig
from streamk_pgas.reference.inputs import compare
from streamk_pgas.reference.variants import VARIANTS, Prepared, Variant
from streamk_pgas.reference.world import World


def _sync(world: World) -> None:
    """Wait for this rank's device, bounded by --timeout_s (the world's watch)."""
    if world.device.type == "cuda":
        device_sync(world.watch)


def _try_prepare(variant: Variant, world: World, cfg: RefConfig) -> tuple[Prepared | None, str | None]:
    """Allocate, rendezvous and run one untimed step; the error text if that failed on this rank."""
    try:
        a, b = variant.inputs(cfg, world.world_size, world.rank, world.device)
        prepared = variant.prepare(world, cfg, a, b)
        prepared.step(StepTimer(use_events=False))
        _sync(world)
        return prepared, None
    except Exception as exc:  # reported as the variant's failure, with its reason
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return None, f"rank {world.rank}: {last}"


def _validation(variant: Variant, prepared: Prepared, world: World, cfg: RefConfig) -> dict[str, Any]:
    out = variant.as_output(prepared.output(), cfg)
    mine = compare(out, variant.expected(world, cfg), cfg.datatype)
    everyone = world.allgather(mine)
    rel = [r["rel_err"] for r in everyone]
    return {
        "enabled": True,
        "passed": all(r["passed"] for r in everyone),
        "rel_err": max(rel),
        "max_abs_err": max(r["max_abs_err"] for r in everyone),
        "tolerance": mine["tolerance"],
        "measure": "relative Frobenius error ||C - C64|| / ||C64|| against a float64 product of the same inputs",
        "per_rank": everyone,
    }


def _device_barrier(world: World) -> Any:
    """A one-element all-reduce on the device group (NCCL / RCCL / gloo): the current stream moves on
    only once every rank's stream has reached it, which lines up the ranks' start events."""
    token = torch.zeros(1, dtype=torch.float32, device=world.device)

    def start_sync(_it: int) -> None:
        dist.all_reduce(token, group=world.group)

    return start_sync


def _back_to_back(prepared: Prepared, world: World, cfg: RefConfig, timed: dict[str, Any]) -> dict[str, Any]:
    """The loop timings benchmark.py reports too: steps back to back (eager, and replayed from a CUDA graph with
    --graph), and the host's time per call with the device kept busy."""
    quiet = StepTimer(use_events=False)  # the step's spans become host timestamps: nothing on the device

    def call() -> None:
        prepared.step(quiet)

    loop = time_loop(call, **timed)
    host = host_us_per_call(call, calls=min(cfg.iters, 100), barrier=world.barrier, use_events=timed["use_events"],
                            watch=world.watch)
    out: dict[str, Any] = {"loop": summarize_ms(loop), "loop_method": LOOP_METHOD, "host_us": summarize_ms(host),
                           "host_method": HOST_METHOD, "graph_ms": None}
    out["loop_ms"] = out["loop"]["median"]
    out["host_us_per_step"] = out["host_us"]["median"]
    if cfg.graph and world.device.type == "cuda":
        try:
            graph = CapturedStep(call, world.watch)
        except Exception as exc:  # a variant that cannot be captured says why; the eager figures stand
            out["graph_skipped"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            _sync(world)
        else:
            out["graph"] = summarize_ms(time_loop(graph, **timed))
            out["graph_ms"] = out["graph"]["median"]
    return out


def _skipped_timing(cfg: RefConfig) -> dict[str, Any]:
    return {"iters": cfg.iters, "warmup": cfg.warmup, "e2e_ms": None, "tflops": None, "kernels_ms": {}}


def run_variant(key: str, world: World, cfg: RefConfig) -> dict[str, Any]:
    """Time (and validate) one variant on every rank; every rank returns the same record."""
    variant = VARIANTS[key]
    w = world.world_size
    sizes = variant.sizes(cfg, w)
    common = {
        "producer": "reference",
        "algorithm": variant.algorithm,
        "implementation": variant.implementation(world),
        "mode": None,
        "world_size": w,
        "flags": {**cfg.as_flags(), "variant": key},
        "sizes": sizes,
    }
    extra: dict[str, Any] = {
        "variant": key,
        "sharding": variant.sharding,
        "vendor_baseline": variant.vendor_baseline,
        "launcher": world.placement.launcher,
        "comm_library": world.comm_library,
        "skipped": None,
        "failed": None,
    }

    reason = world.agree(variant.unavailable(world, cfg))
    prepared = failure = None
    if reason is None:
        prepared, problem = _try_prepare(variant, world, cfg)
        failure = world.agree(problem)
    if reason is not None or failure is not None or prepared is None:
        extra["skipped"], extra["failed"] = reason, failure
        return new_record(**common, timing=_skipped_timing(cfg),
                          validation={"enabled": cfg.validate, "passed": None}, extra=extra)

    timed = {"iters": cfg.iters, "warmup": cfg.warmup, "barrier": world.barrier,
             "use_events": world.device.type == "cuda", "allgather": world.allgather, "watch": world.watch,
             "start_sync": _device_barrier(world) if cfg.start_sync == "device" and w > 1 else None}
    progress = Progress(f"{key} isolated steps", cfg.iters + cfg.warmup, enabled=world.rank == 0 and not cfg.quiet)
    e2e, kernels = time_iterations(prepared.step, progress=progress, **timed)
    # on the CPU no unstable-timing warning (torch and gloo there are a check, not a measurement; the log keeps it)
    timing = timing_section(e2e, kernels, sizes["flops_per_rank"], cfg.iters, cfg.warmup,
                            warn=None if world.device.type == "cuda" else False)
    timing["method"] = TIMING_METHOD
    timing["start_sync"] = cfg.start_sync
    timing.update(_back_to_back(prepared, world, cfg, timed))
    validation = _validation(variant, prepared, world, cfg) if cfg.validate else {"enabled": False, "passed": None}
    extra.update(prepared.extra)
    record = new_record(**common, timing=timing, validation=validation, extra=extra)
    del prepared
    if world.device.type == "cuda":
        torch.cuda.empty_cache()
    return record


def summary_line(record: dict[str, Any]) -> str:
    """One line per record for the terminal."""
    s = record["sizes"]
    head = (f"{record['variant']:<28} {record['implementation']:<42} {s['datatype']} "
            f"{s['m']}x{s['n']}x{s['k']} W={record['world_size']}")
    if record.get("skipped"):
        return f"{head}: skipped ({record['skipped']})"
    if record.get("failed"):
        return f"{head}: FAILED ({record['failed']})"
    t = record["timing"]
    kernels = ", ".join(f"{k} {v:.3f}" for k, v in t["kernels_ms"].items())
    line = f"{head}: {t['e2e_ms']:.3f} ms ({kernels}) {rate_text(t['tflops'])} per GPU"
    if t.get("loop_ms") is not None:
        graph = f", graph {t['graph_ms']:.3f}" if t.get("graph_ms") is not None else ""
        line += f"; back to back {t['loop_ms']:.3f} ms/step{graph}, host {t['host_us_per_step']:.1f} us/step"
    v = record["validation"]
    if v.get("enabled"):
        verdict = "passed" if v["passed"] else "FAILED"
        line += f", validation {verdict} (rel err {v['rel_err']:.2e}, tolerance {v['tolerance']:g})"
    return line

"""The kernels the compile check builds, per target: the one list of launches (phase 2 adds the op's here).

Every entry is a launch spec made the way the library makes the launch: the Stream-K GEMM's come from
stream_k.select.choose_gemm (config and plan for the target) and StreamKGemm.launch_spec on CPU tensors; the
device API's from small probe kernels (probes.py) over the operation x datatype matrix that the MPI tests run
(tests/mpi/device_cases.py); the device barrier's from its kernel's arguments as DeviceBarrier passes them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from iris_ops.device import TIMER_LOGICAL, default_timer_kind, spin_budget
from iris_ops.device_barrier import device_barrier_kernel
from stream_k.dtypes import torch_dtype
from stream_k.gemm import StreamKGemm
from stream_k.layout import padded_cols
from stream_k.select import choose_gemm, default_tma
from tools.compile_check import probes
from tools.compile_check.spec import LaunchSpec
from tools.compile_check.targets import Target

REPO = Path(__file__).resolve().parents[2]

GEMM_DTYPES = ("bf16", "fp16", "fp32", "int8")
# A few shapes that reach every kernel variant, on rows laid out as the op lays out its operands (padded to a
# multiple of 16 elements): full waves of large tiles (8192^3); a tensor-parallel shard whose K is ragged for 8-bit
# tiles (K % 128 = 64); one shape in each bucket of M that stream_k.select.shape_tile gives its own tile (256, 128,
# 64: the last one few tiles on many programs, where Stream-K splits K); K ragged for every tile (2000 x 3000 x 3000).
GEMM_SHAPES = ((8192, 8192, 8192), (4864, 4096, 8256), (256, 8192, 8192), (128, 8192, 8192), (64, 1280, 8192),
               (2000, 3000, 3000))
# The stand-alone GEMM on a caller's contiguous rows of 3000 elements (not a multiple of 16): TMA reads them from a
# staging copy, the pointer path as they are (no vectorised loads).
UNALIGNED_SHAPE = (2000, 3000, 3000)
# (schedule, Stream-K rounds) pairs fixed beside the model's own choice
GEMM_SCHEDULES = (("dp", 1), ("hybrid", 1), ("hybrid", 2), ("sk", 1), ("sk", 2))

DEVICE_DTYPES = {"int32": torch.int32, "int64": torch.int64, "fp16": torch.float16, "bf16": torch.bfloat16,
                 "fp32": torch.float32}
PROBE_BLOCK = 16
REMOTE_BLOCK = 256  # several elements per lane, so vectorised remote accesses show in the assembly
WORLD = 2  # probes act as rank 0 on rank 1's heap


@cache
def device_cases() -> ModuleType:
    """tests/mpi/device_cases.py: which datatypes each device-API operation supports (plain data)."""
    path = REPO / "tests" / "mpi" / "device_cases.py"
    spec = importlib.util.spec_from_file_location("_device_cases", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _matrix(rows: int, cols: int, dtype: torch.dtype, padded: bool) -> torch.Tensor:
    """A rows x cols row-major matrix, its row stride padded as stream_k.layout pads it (never written: the JIT
    looks at dtype, alignment and size only)."""
    return torch.empty((rows, padded_cols(cols) if padded else cols), dtype=dtype)[:, :cols]


def gemm_spec(target: Target, shape: tuple[int, int, int], dtype: str, *, tma: bool,
              fixed: dict[str, Any] | None = None, traced: bool = False, padded: bool = True) -> LaunchSpec:
    """The stand-alone Stream-K GEMM's launch on `target` for one shape, as choose_gemm plans it (`fixed`: the
    schedule / rounds forced, else the model's choice); `traced`: with tile flags and the per-tile trace; `padded`:
    rows padded as the op pads them. A default launch where `tma` is the library's default (select.default_tma)."""
    M, N, K = shape
    choice = choose_gemm(M, N, K, dtype, target.units, target.name, tma=tma, fixed=fixed)
    gemm = StreamKGemm(choice.plan, dtype, choice.config, device="cpu", arch=target.name)
    dt = torch_dtype(dtype)
    a, b, c = _matrix(M, K, dt, padded), _matrix(K, N, dt, padded), _matrix(M, N, gemm.out_dtype, padded)
    extra: dict[str, torch.Tensor] = {}
    if traced:
        extra = {"tile_flags": torch.zeros(choice.plan.num_tiles, dtype=torch.int32),
                 "gemm_trace": torch.zeros((choice.plan.num_tiles, 3), dtype=torch.int64)}
    launch = gemm.launch_spec(a, b, c, **extra)
    k, p, args = gemm.config, gemm.plan, launch.args
    unaligned = any(args[name] % 16 for name in ("stride_am", "stride_bk", "stride_cm"))
    config = (f"{dtype} {k.BLK_M}x{k.BLK_N}x{k.BLK_K}/s{k.num_stages}/w{k.num_warps}{'/tma' if k.tma else ''}"
              f" r{p.sk_rounds}{'' if p.even_k else ' ragged_k'}{' unaligned' if unaligned else ''}"
              f"{' ' + odd + '%16' if (odd := ''.join(d for d, v in zip('MNK', shape) if v % 16)) else ''}"
              f"{' traced' if traced else ''}")
    sched = choice.describe().split("/")[-2]
    return LaunchSpec.of(launch, config=config, group="gemm", default=tma == default_tma(target.name, dtype),
                         use=f"{M}x{N}x{K} {sched}{'' if fixed else ' (auto)'}{'' if padded else ' contiguous'}",
                         extra={"config": k.as_dict(), "plan": {"schedule": p.schedule, "sk_tiles": p.sk_tiles,
                                                                "sk_rounds": p.sk_rounds, "even_k": p.even_k}})


def gemm_specs(target: Target) -> Iterator[LaunchSpec]:
    """The GEMM for every datatype and shape: the model's choice and each schedule and round count fixed, through
    TMA and through pointers on targets that have TMA (the one the library does not take by default reported, not
    failed on); the traced launch (tile flags, timer); the stand-alone GEMM on unaligned contiguous rows."""
    tma_options = (True, False) if target.tma else (False,)
    for dtype in GEMM_DTYPES:
        for shape in GEMM_SHAPES:
            for tma in tma_options:
                yield gemm_spec(target, shape, dtype, tma=tma)
                for schedule, rounds in GEMM_SCHEDULES:
                    yield gemm_spec(target, shape, dtype, tma=tma, fixed={"schedule": schedule, "sk_rounds": rounds})
        yield gemm_spec(target, GEMM_SHAPES[0], dtype, tma=default_tma(target.name, dtype), traced=True)
        for tma in tma_options:
            yield gemm_spec(target, UNALIGNED_SHAPE, dtype, tma=tma, padded=False)


def device_api_specs(target: Target) -> Iterator[LaunchSpec]:
    """translate / load / store / get / put per datatype; every atomic per datatype with each memory semantics and
    scope; notify / notify_add / wait / wait_local / record_error per scope."""
    ops = device_cases().OPS
    bases = torch.zeros(WORLD, dtype=torch.int64)
    n = PROBE_BLOCK
    for name, dt in DEVICE_DTYPES.items():
        buf, src, out = torch.empty(3 * n, dtype=dt), torch.empty(2 * n, dtype=dt), torch.empty(3 * n, dtype=dt)
        yield LaunchSpec("rma_probe", name, probes.rma_probe,
                         {"buf": buf, "src": src, "out": out, "heap_bases": bases, "cur_rank": 0, "target_rank": 1,
                          "BLOCK": n}, {"num_warps": 1}, group="device_api", use="translate load store get put")
    for name, dt in DEVICE_DTYPES.items():
        if name not in ops["atomic_add"]:
            continue
        flags = {"BITWISE": name in ops["atomic_and"], "MINMAX": name in ops["atomic_min"],
                 "EXCHANGE": name in ops["atomic_xchg"], "CAS": name in ops["atomic_cas"]}
        which = ["add", "sub"] + [op for op, on in (("xchg", flags["EXCHANGE"]), ("and/or/xor", flags["BITWISE"]),
                                                    ("min/max", flags["MINMAX"]), ("cas", flags["CAS"])) if on]
        for sem in probes.SEMS:
            for scope in probes.SCOPES:
                args = {"buf": torch.empty(n, dtype=dt), "val": torch.empty(n, dtype=dt),
                        "cmp": torch.empty(n, dtype=dt), "out": torch.empty(9 * n, dtype=dt), "heap_bases": bases,
                        "cur_rank": 0, "target_rank": 1, **flags, "SEM": sem, "SCOPE": scope, "BLOCK": n}
                yield LaunchSpec("atomic_probe", f"{name} {sem}/{scope}", probes.atomic_probe, args,
                                 {"num_warps": 1}, group="device_api", use=" ".join(which))
    forbid = ((r"^\s*buffer_(load|store|atomic)\w*", "a remote access became a buffer instruction (32-bit offset "
               "from the argument; iris_ops.device.translate)"),) if target.amd else ()
    for scope in ("gpu", "sys"):
        args = {"buf": torch.empty(5 * REMOTE_BLOCK, dtype=torch.int32), "heap_bases": bases, "cur_rank": 0,
                "target_rank": 1, "SCOPE": scope, "BLOCK": REMOTE_BLOCK}
        yield LaunchSpec("remote_probe", f"int32 {scope}", probes.remote_probe, args, {"num_warps": 1},
                         group="device_api", use="remote load store atomics", forbid=forbid)
    for scope in ("gpu", "sys"):
        args = {"flags": torch.zeros(2, dtype=torch.int32), "errors": torch.zeros(1, dtype=torch.int32),
                "out": torch.zeros(1, dtype=torch.int32), "heap_bases": bases, "cur_rank": 0, "target_rank": 1,
                "value": 7, "max_spins": spin_budget(10.0), "SCOPE": scope}
        yield LaunchSpec("flag_probe", f"int32 {scope}", probes.flag_probe, args, {"num_warps": 1},
                         group="device_api", use="notify notify_add wait wait_local record_error")


def timer_specs(target: Target) -> Iterator[LaunchSpec]:
    """read_timer with the target's own clock and with the logical (interpreter) timer; the TMA fences."""
    for kind in dict.fromkeys((default_timer_kind(target.vendor_code), TIMER_LOGICAL)):
        args = {"clock": torch.zeros(1, dtype=torch.int64), "out": torch.zeros(1, dtype=torch.int64), "KIND": kind}
        yield LaunchSpec("timer_probe", f"kind {kind}", probes.timer_probe, args, {"num_warps": 1}, group="timer",
                         use="read_timer fence_proxy_async_global wait_bulk_stores")


def barrier_specs(target: Target) -> Iterator[LaunchSpec]:
    """device_barrier_kernel as DeviceBarrier launches it: a barrier, a barrier that stamps, a stamp alone."""
    for wait, stamped in ((True, False), (True, True), (False, True)):
        args = {"FLAGS": torch.zeros(WORLD, dtype=torch.int32), "epoch": 1,
                "heap_bases": torch.zeros(WORLD, dtype=torch.int64), "cur_rank": 0, "world_size": WORLD,
                "max_spins": spin_budget(30.0), "ERRORS": torch.zeros(1, dtype=torch.int32),
                "STAMPS": torch.zeros(4, dtype=torch.int64) if stamped else None, "slot": 0,
                "CLOCK": torch.zeros(1, dtype=torch.int64), "WAIT": wait,
                "TIMER": default_timer_kind(target.vendor_code)}
        use = "DeviceBarrier()" if wait else "DeviceBarrier(wait=False)"
        yield LaunchSpec("device_barrier_kernel", f"wait={wait} stamps={stamped}", device_barrier_kernel, args,
                         {"num_warps": 1}, group="barrier", use=use)


# group -> the launches it contributes on a target (the op's launches join here)
GROUPS: dict[str, Callable[[Target], Iterator[LaunchSpec]]] = {
    "gemm": gemm_specs,
    "device_api": device_api_specs,
    "timer": timer_specs,
    "barrier": barrier_specs,
}


def launch_specs(target: Target, groups: list[str] | None = None) -> Iterator[LaunchSpec]:
    """Every launch of the chosen groups (all by default) on `target`, one at a time (their CPU tensors are large
    and only their metadata matters: a caller keeps what it needs of each and lets the tensors go)."""
    for name in groups or list(GROUPS):
        yield from GROUPS[name](target)

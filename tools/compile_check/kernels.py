"""The kernels the compile check builds, per target: the one list of launches.

Every entry is a launch spec made the way the library makes the launch: the Stream-K GEMM's come from
stream_k.select.choose_gemm (config and plan for the target) and StreamKGemm.launch_spec on CPU tensors; the op's
from overlap.listing (the op planned for the target and a world size on a stand-in heap, every launch it makes
listed); the device API's from small probe kernels (probes.py) over the operation x datatype matrix that the MPI
tests run (tests/mpi/device_cases.py); the device barrier's from its kernel's arguments as DeviceBarrier passes them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from streamk_pgas.iris_ops.device import TIMER_LOGICAL, default_timer_kind, spin_budget
from streamk_pgas.iris_ops.device_barrier import device_barrier_kernel
from streamk_pgas.overlap.listing import LAUNCH_KINDS, every_launch, every_mode, op_for
from streamk_pgas.stream_k.dtypes import torch_dtype
from streamk_pgas.stream_k.gemm import StreamKGemm
from streamk_pgas.stream_k.kernel_args import unwrapped
from streamk_pgas.stream_k.layout import padded_cols
from streamk_pgas.stream_k.select import choose_gemm, default_tma
from streamk_pgas.tools.compile_check import probes
from streamk_pgas.tools.compile_check.spec import LaunchSpec
from streamk_pgas.tools.compile_check.targets import BuildTarget

REPO = Path(__file__).resolve().parents[2]

GEMM_DTYPES = ("bf16", "fp16", "fp32", "int8")
# A few shapes that reach every kernel variant, on rows laid out as the op lays out its operands (padded to a
# multiple of 16 elements): full waves of large tiles (8192^3); a tensor-parallel shard whose K is ragged for 8-bit
# tiles (K % 128 = 64); one shape in each bucket of M that stream_k.select.shape_tile gives its own tile (256, 128,
# 64: the last one few tiles on many programs, where Stream-K splits K); K ragged for every tile (2000 x 3000 x 3000).
GEMM_SHAPES = ((8192, 8192, 8192), (4864, 4096, 8256), (256, 8192, 8192), (128, 8192, 8192), (64, 1280, 8192),
               (2000, 3000, 3000), (1024, 5120, 8192))
# ... where bf16 / fp16 take split-K (64 x 1280), a 192-wide (2000 x 3000) and a 320-wide tile (1024 x 5120) on sm_90
# and sm_100; split-K is also built fixed, for every datatype, on the shape where it applies:
SPLITK_SHAPE = (64, 1280, 8192)
# The stand-alone GEMM on a caller's contiguous rows of 3000 elements (not a multiple of 16): TMA reads them from a
# staging copy, the pointer path as they are (no vectorised loads).
UNALIGNED_SHAPE = (2000, 3000, 3000)
# (schedule, Stream-K rounds) pairs fixed beside the model's own choice
GEMM_SCHEDULES = (("dp", 1), ("hybrid", 1), ("hybrid", 2), ("sk", 1), ("sk", 2))

# The op: one shape (the one its defaults were tuned on, 2 x H200), bf16; a step and the preload (group op), the
# benchmark's own kinds of step (group op_bench). World sizes (--worlds overrides): 1 (the GEMM alone) and 2 on every
# target, 8 on one target of each vendor (the per-peer code follows the world size, the ISA the target: each further
# world adds ~40 s of compiles to CI; sm_90 and sm_100 at world 4 spill, README "Targets")
OP_SHAPE = (4864, 4096, 8256)
OP_DATATYPE = "bf16"
OP_WORLDS = {"gfx942": (1, 2, 8), "gfx950": (1, 2), "sm90": (1, 2, 8), "sm100": (1, 2)}
OP_KINDS = ("step", "preload")
OP_BENCH_KINDS = tuple(k for k in LAUNCH_KINDS if k not in OP_KINDS)

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


def gemm_spec(target: BuildTarget, shape: tuple[int, int, int], dtype: str, *, tma: bool,
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
    unaligned = any(getattr(args["SIZES"], name) % 16 for name in ("stride_am", "stride_bk", "stride_cm"))
    config = (f"{dtype} {k.BLK_M}x{k.BLK_N}x{k.BLK_K}/s{k.num_stages}/w{k.num_warps}{'/tma' if k.tma else ''}"
              f" r{p.sk_rounds}{'' if p.even_k else ' ragged_k'}{' unaligned' if unaligned else ''}"
              f"{' ' + odd + '%16' if (odd := ''.join(d for d, v in zip('MNK', shape) if v % 16)) else ''}"
              f"{' traced' if traced else ''}")
    sched = choice.describe().split("/")[-2]
    return LaunchSpec.of(launch, config=config, group="gemm", default=tma == default_tma(target.name, dtype),
                         use=f"{M}x{N}x{K} {sched}{'' if fixed else ' (auto)'}{'' if padded else ' contiguous'}",
                         extra={"config": k.as_dict(), "plan": {"schedule": p.schedule, "sk_tiles": p.sk_tiles,
                                                                "sk_rounds": p.sk_rounds, "even_k": p.even_k,
                                                                "split_k": p.split_k}})


def gemm_specs(target: BuildTarget) -> Iterator[LaunchSpec]:
    """The GEMM's defaults: every datatype and shape with the model's choice, each schedule and round count fixed on
    the first shape, the traced launch (tile flags, timer) and the stand-alone GEMM on unaligned contiguous rows,
    each through the path the library takes by default (TMA or pointers, select.default_tma)."""
    for dtype in GEMM_DTYPES:
        tma = default_tma(target.name, dtype)
        for shape in GEMM_SHAPES:
            yield gemm_spec(target, shape, dtype, tma=tma)
        for schedule, rounds in GEMM_SCHEDULES:
            yield gemm_spec(target, GEMM_SHAPES[0], dtype, tma=tma, fixed={"schedule": schedule, "sk_rounds": rounds})
        yield gemm_spec(target, SPLITK_SHAPE, dtype, tma=tma, fixed={"schedule": "splitk"})
        yield gemm_spec(target, GEMM_SHAPES[0], dtype, tma=tma, traced=True)
        yield gemm_spec(target, UNALIGNED_SHAPE, dtype, tma=tma, padded=False)


def gemm_variant_specs(target: BuildTarget) -> Iterator[LaunchSpec]:
    """The rest of the GEMM's matrix (reported, not failed on where not a default): each schedule and round count
    fixed on the other shapes, and on targets with TMA every shape and schedule through the path the library does
    not take by default."""
    for dtype in GEMM_DTYPES:
        tma = default_tma(target.name, dtype)
        for shape in GEMM_SHAPES[1:]:
            for schedule, rounds in GEMM_SCHEDULES:
                yield gemm_spec(target, shape, dtype, tma=tma, fixed={"schedule": schedule, "sk_rounds": rounds})
        if not target.tma:
            continue
        for shape in GEMM_SHAPES:
            yield gemm_spec(target, shape, dtype, tma=not tma)
            for schedule, rounds in GEMM_SCHEDULES:
                yield gemm_spec(target, shape, dtype, tma=not tma, fixed={"schedule": schedule, "sk_rounds": rounds})
        yield gemm_spec(target, UNALIGNED_SHAPE, dtype, tma=not tma, padded=False)


def _gemm_label(dtype: str, args: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """A GEMM-bearing launch's tile, stages, warps, TMA, Stream-K rounds and K (from its argument groups)."""
    t, s = unwrapped(args["TILING"]), unwrapped(args["SCHEDULE"])
    return (f"{dtype} {t['BLK_M']}x{t['BLK_N']}x{t['BLK_K']}/s{options['num_stages']}/w{options['num_warps']}"
            f"{'/tma' if t['USE_TMA'] else ''} r{s['SK_ROUNDS']}{'' if t['EVEN_K'] else ' ragged_k'}")


def op_use(algorithm: str, mode: str, world: int, kind: str) -> str:
    """Where an op launch comes from: "all_reduce fused w2 step" (kind: overlap.listing.LAUNCH_KINDS)."""
    return f"{algorithm} {mode} w{world} {kind}"


def op_specs(target: BuildTarget, worlds: Sequence[int] | None = None, kinds: Sequence[str] = OP_KINDS
             ) -> Iterator[LaunchSpec]:
    """The launches of `kinds` (overlap.listing.LAUNCH_KINDS) that the op makes for every algorithm x mode the target
    runs, planned by the planner for the target on OP_SHAPE at each world size (default OP_WORLDS[target]; 1: the GEMM
    alone); all defaults."""
    m, n, k = OP_SHAPE
    for alg, mode, why in every_mode(target.device):
        if why is not None:  # not_built reports it
            continue
        for world in OP_WORLDS[target.name] if worlds is None else worlds:
            op = op_for(alg, mode, m, n, k, OP_DATATYPE, target.device, world_size=world)
            for kind, launch in every_launch(op, kinds):
                label = _gemm_label(OP_DATATYPE, launch.args, launch.options) if "TILING" in launch.args else \
                    OP_DATATYPE
                yield LaunchSpec.of(launch, config=f"{alg} {mode} world{world} {label}"
                                    f"{'' if kind in OP_KINDS else ' ' + kind}",
                                    group="op" if kind in OP_KINDS else "op_bench", use=op_use(alg, mode, world, kind),
                                    extra={"shape": [m, n, k], "plan": op.cfg.plan_info})


def not_built(target: BuildTarget, groups: Sequence[str]) -> list[str]:
    """The algorithm x modes whose launches the op groups leave out on `target` because it cannot run them, each
    with why: "all_scatter copy_engine: copy_engine is NVIDIA-only ..."."""
    if not {"op", "op_bench"} & set(groups):
        return []
    return [f"{alg} {mode}: {why}" for alg, mode, why in every_mode(target.device) if why is not None]


def op_bench_specs(target: BuildTarget, worlds: Sequence[int] | None = None) -> Iterator[LaunchSpec]:
    """The op's launches that only the benchmark makes (a traced step, the GEMM and the communication timed
    alone), as op_specs."""
    return op_specs(target, worlds, OP_BENCH_KINDS)


def device_api_specs(target: BuildTarget) -> Iterator[LaunchSpec]:
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


def timer_specs(target: BuildTarget) -> Iterator[LaunchSpec]:
    """read_timer with the target's own clock and with the logical (interpreter) timer; the TMA fences."""
    for kind in dict.fromkeys((default_timer_kind(target.vendor_code), TIMER_LOGICAL)):
        args = {"clock": torch.zeros(1, dtype=torch.int64), "out": torch.zeros(1, dtype=torch.int64), "KIND": kind}
        yield LaunchSpec("timer_probe", f"kind {kind}", probes.timer_probe, args, {"num_warps": 1}, group="timer",
                         use="read_timer fence_proxy_async_global wait_bulk_stores")


def barrier_specs(target: BuildTarget) -> Iterator[LaunchSpec]:
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


# group -> the launches it contributes on a target
GROUPS: dict[str, Callable[[BuildTarget], Iterator[LaunchSpec]]] = {
    "gemm": gemm_specs,
    "op": op_specs,
    "device_api": device_api_specs,
    "timer": timer_specs,
    "barrier": barrier_specs,
    "gemm_variants": gemm_variant_specs,
    "op_bench": op_bench_specs,
}
# what the check builds unless told (CI): every kernel in the configurations the library launches; the other groups
# widen the matrix (the GEMM's non-default paths and schedules, the benchmark's kinds of step)
DEFAULT_GROUPS = ("gemm", "op", "device_api", "timer", "barrier")


def launch_specs(target: BuildTarget, groups: list[str] | None = None, worlds: Sequence[int] | None = None
                 ) -> Iterator[LaunchSpec]:
    """Every launch of the chosen groups (DEFAULT_GROUPS by default) on `target`, the op's at world sizes `worlds`
    (default OP_WORLDS[target]), one at a time (their CPU tensors are large and only their metadata matters: a caller
    keeps what it needs of each and lets the tensors go)."""
    for name in groups or DEFAULT_GROUPS:
        yield from (op_specs(target, worlds) if name == "op" else op_bench_specs(target, worlds)
                    if name == "op_bench" else GROUPS[name](target))

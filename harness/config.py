"""benchmark.py's flags, their defaults, and every check made before a kernel starts.

One `BenchConfig` flows through the harness. `parse_config(argv, device_facts)` returns it, or
raises `ConfigError` naming the flag and what is valid; benchmark.py turns that into one line on
stderr and exit code 2 on every rank.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from harness.checks import (
    MAX_DIM,
    MAX_ELEMENTS,
    MAX_ITERS,
    MAX_SEED,
    MAX_TIMEOUT_S,
    ConfigError,
    OneLineParser,
    check_output_path,
    int_in,
    timeout_seconds,
)
from harness.dtypes import DATATYPES
from harness.timing import START_SYNCS
from overlap.planner import AUTO, MODES, has_mode
from stream_k.plan import SCHEDULE_CHOICES

__all__ = ["ConfigError"]  # re-exported: benchmark.py catches it from here

ALGORITHMS = ("all_reduce", "all_scatter", "one_shot", "all_gather_gemm", "gemm_reduce_scatter")
MODE_HELP = {
    "auto": "the planner's choice for this problem and device (overlap/planner.py; a --tune result if cached)",
    "bulk_sync": "GEMM on all SMs, then communication on all SMs (the baseline schedule)",
    "two_streams": "GEMM kernel on --gemm_sms SMs and communication kernel on the rest, on two streams",
    "fused": "one kernel; programs < --gemm_sms do GEMM tiles, the others communication tiles",
    "fused_sequential": "one kernel on all SMs; each GEMM program pushes its finished tiles to the peers "
    "from its epilogue (one_shot: publishes, then reduces after its GEMM work)",
    "copy_engine": "GEMM on all SMs; the copy engines move its finished rows (or A's rows) with no SM, "
    "waiting on its tile counts (all_scatter, all_gather_gemm, gemm_reduce_scatter)",
}

# The problem and run defaults. Everything that shapes the kernels (mode, SM split, tiles, stages, warps, TMA,
# Stream-K schedule and rounds, communication tile) is the planner's (overlap/planner.py) unless given.
CPU_DEFAULTS = {"m": 64, "n": 64, "k": 64, "iters": 3, "warmup": 1, "heap_size": 1 << 24, "datatype": "fp16"}
GPU_DEFAULTS = {"m": 8192, "n": 8192, "k": 8192, "iters": 50, "warmup": 10, "heap_size": 1 << 33, "datatype": "bf16"}
# Flags the planner fills when unset (the kernel's fields and --tma make up OverlapConfig.kernel).
PLANNED_FLAGS = ("mode", "total_sms", "gemm_sms", "sk_rounds", "schedule", "two_tiles", "COMMUNICATION_TILE_M",
                 "COMMUNICATION_TILE_N", "BLK_M", "BLK_N", "BLK_K", "num_stages", "num_warps", "tma")


@dataclass
class DeviceFacts:
    """What the checks need to know of the device: SMs and shared memory per program."""

    backend: str  # "cuda", "hip" or "cpu"
    sm_count: int
    shared_mem_per_program: int  # bytes a program may use
    name: str = ""
    capability: int = 0  # NVIDIA compute capability as major*10 + minor (90 on Hopper); 0 elsewhere
    memory_bytes: int = 0  # device memory (0: not known, e.g. the CPU backend, whose heap is in /dev/shm)


@dataclass
class BenchConfig:
    algorithm: str = "one_shot"
    mode: str = AUTO
    m: int = 8192
    n: int = 8192
    k: int = 8192
    datatype: str = "bf16"
    BLK_M: int = 128
    BLK_N: int = 256
    BLK_K: int = 64
    COMMUNICATION_TILE_M: int = 128
    COMMUNICATION_TILE_N: int = 256
    gsize_m: int = 8
    two_tiles: bool = True
    num_stages: int = 3
    num_warps: int = 8
    waves_per_eu: int = 0
    mfmaInstrSize: int = 16
    kpack: int = 2
    heap_size: int = 1 << 33
    gemm_sms: int = 112
    total_sms: int = 132
    communication_block_size: int = 256
    iters: int = 50
    warmup: int = 10
    debug: bool = False
    validate: bool = False
    validate_iters: int = 1
    benchmark: bool = False
    trace_tiles: bool = False
    graph: bool = False
    quiet: bool = False
    output_file: str | None = None
    seed: int = 0
    timeout_s: float = 30.0
    schedule: str = "auto"
    tma: str = "auto"
    gemm_joins_comm: bool = True
    start_sync: str = "device"
    sk_first: bool = False
    sk_rounds: int = 1
    use_tma: bool = False  # resolved from `tma` and the device
    # Filled in by parse_config: which values came from device defaults rather than the command line, and
    # the planner's account of the values it chose ({"source", "planned", "choice", "predicted_ms", ...}).
    defaulted: list[str] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)
    tune: int = 0  # --tune N: measure the planner's N best candidates, store the winner
    tuning_cache: str | None = None
    cpu_small_default: bool = False

    @property
    def comm_sms(self) -> int:
        return self.total_sms - self.gemm_sms

    def as_flags(self) -> dict[str, Any]:
        """The flags as a plain dict for the JSON log."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="benchmark.py",
        description="Stream-K GEMM overlapped with communication on a symmetric heap "
        "(run under mpirun -np N, torchrun, or plain python for one rank).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    a = p.add_argument
    a("--algorithm", default="one_shot", help=f"one of {', '.join(ALGORITHMS)}")
    a("--mode", default=AUTO, help="; ".join(f"{k}: {v}" for k, v in MODE_HELP.items()))
    dim = int_in(1, MAX_DIM)
    a("-m", type=dim, default=None, help="rows of A and C (default: 8192 on a GPU, 64 on the CPU)")
    a("-n", type=dim, default=None, help="columns of B and C")
    a("-k", type=dim, default=None, help="columns of A / rows of B (the reduction dimension)")
    a("--datatype", default=None, help=f"one of {', '.join(DATATYPES)} (default bf16 on a GPU, fp16 on the CPU)")
    a("--BLK_M", type=int, default=None, help="GEMM tile rows (power of two)")
    a("--BLK_N", type=int, default=None, help="GEMM tile columns (power of two)")
    a("--BLK_K", type=int, default=None, help="GEMM K step (power of two)")
    a("--COMMUNICATION_TILE_M", type=int, default=None, help="rows a communication step moves; divides BLK_M")
    a("--COMMUNICATION_TILE_N", type=int, default=None, help="columns a communication step moves; divides BLK_N")
    a("--gsize_m", type=int_in(1, 64), default=8,
      help="grouped tile order: tiles of this many rows are walked together")
    a("--two_tiles", default=None,
      help="with --schedule hybrid: Stream-K over the last partial wave plus one full wave (true), or over the last "
      "partial wave only (false); default: the planner's")
    a("--schedule", default=None,
      help="GEMM schedule: auto (the planner's choice of dp or hybrid by the shape), hybrid (DP waves + Stream-K), "
      "dp (data-parallel only), or sk (Stream-K only)")
    a("--gemm_joins_comm", default="true",
      help="fused and two_streams on a GPU: GEMM programs done with their tiles help move the rest (true/false)")
    a("--tma", default="auto",
      help="GEMM loads A and B with the tensor-memory accelerator (on/off; auto: on for NVIDIA sm_90+)")
    a("--num_stages", type=int, default=None, help="software-pipelining depth of the GEMM K loop")
    a("--num_warps", type=int, default=None, help="warps per program (GEMM and fused kernels)")
    a("--waves_per_eu", type=int_in(0, 16), default=0,
      help="AMD only: occupancy hint (accepted and reported unused on NVIDIA)")
    a("--mfmaInstrSize", type=int_in(0, 64), default=16, help="AMD only: matrix_instr_nonkdim")
    a("--kpack", type=int_in(1, 8), default=2, help="AMD only: K packing")
    a("--heap_size", type=int_in(1 << 20, 1 << 50), default=None,
      help="symmetric heap bytes per rank (default: what the problem needs)")
    a("--gemm_sms", type=int, default=None, help="programs (SMs) doing GEMM work; the rest communicate")
    a("--total_sms", type=int, default=None, help="programs in all (default: the device's SM count)")
    a("--communication_block_size", type=int, default=256,
      help="threads per communication program in the two-stream mode's communication kernel")
    a("--iters", type=int_in(1, MAX_ITERS), default=None, help="timed iterations (median reported)")
    a("--warmup", type=int_in(0, MAX_ITERS), default=None, help="untimed warm-up iterations")
    a("--seed", type=int_in(0, MAX_SEED), default=0, help="random seed of the inputs (same on every rank)")
    a("--timeout_s", type=timeout_seconds, default=30.0,
      help="a spin-wait gives up and the run fails after about this long")
    a("--debug", action="store_true", help="print per-rank details and check the error words after every iteration")
    a("--validate", action="store_true", help="check C and each rank's partial against torch on the same inputs")
    a("--validate_iters", type=int_in(1, MAX_ITERS), default=1,
      help="with --validate: besides one isolated step (outputs poisoned first), this many steps launched back to "
      "back with nothing between them, then C checked on every rank (and as many graph replays with --graph)")
    a("--benchmark", action="store_true", help="time the run (medians over --iters after --warmup)")
    a("--sk_first", default="false",
      help="each GEMM program runs its Stream-K share before its data-parallel tiles (true/false)")
    a("--sk_rounds", type=int, default=None,
      help="cut the GEMM's Stream-K tiles into this many rounds (1-4), the last one P / 2^(R-1) tiles cut into "
      "2^(R-1) pieces (one per program), so that few tiles complete together at the GEMM's end and the "
      "communication's tail after it is short (default on a GPU: 2 for all_reduce and all_scatter in "
      "two_streams and fused, else 1)")
    a("--start_sync", default="device",
      help="how timed iterations start together: device (a device-side barrier of all ranks' streams right "
      "before the start event) or host (a host barrier only; the devices then start up to tens of us apart)")
    a("--quiet", action="store_true", help="no progress lines on long runs (rank 0 prints one every ~10 s)")
    a("--graph", action="store_true",
      help="also capture one step in a CUDA graph (GPU only): replays are validated and timed back to back")
    a("--trace_tiles", action="store_true",
      help="record per-tile timestamps; writes a timeline JSON and a Perfetto trace")
    a("--output_file", default=None, help="JSON log path (rank 0 writes it)")
    a("--tune", type=int_in(0, 16), nargs="?", const=4, default=0,
      help="measure the planner's best N candidates (default 4) for the flags left unset, validated and timed back "
      "to back, and store the fastest in the tuning cache, which later runs without those flags read")
    a("--tuning_cache", default=None,
      help="the tuning cache file (default: $STREAMK_PGAS_TUNING_CACHE, else ~/.cache/streamk-pgas/tuning.json)")
    return p


SWEEPABLE = ("--algorithm", "--mode", "--gemm_sms", "--COMMUNICATION_TILE_M", "--COMMUNICATION_TILE_N", "--start_sync",
             "--sk_first", "--sk_rounds", "--schedule", "--two_tiles")


def expand_sweep(argv: list[str]) -> list[list[str]]:
    """Comma-separated values of the SWEEPABLE flags -> one argv per combination (in order).

    `--mode fused,two_streams --gemm_sms 100,116` gives four runs in one launch: the heap, the
    inputs' process and the compiled kernels are shared, so a sweep costs little more than its runs.
    """
    runs: list[list[str]] = [[]]
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag in SWEEPABLE and (eq or i + 1 < len(argv)):
            value = inline if eq else argv[i + 1]
            i += 1 if eq else 2
            choices = [v for v in value.split(",") if v != ""] or [value]
            runs = [[*r, flag, c] for r in runs for c in choices]
            continue
        runs = [[*r, arg] for r in runs]
        i += 1
    return runs


def output_path(template: str | None, cfg: BenchConfig, several: bool) -> str | None:
    """The log path of one run: `template` formatted with the config's fields (e.g. {algorithm},
    {mode}, {gemm_sms}); with several runs and no field in it, the run's name goes before the suffix."""
    if not template:
        return None
    if "{" in template:
        fields = cfg.as_flags()
        try:
            return template.format(**fields)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            what = f"unknown field {{{exc.args[0]}}}" if isinstance(exc, KeyError) else f"bad template ({exc})"
            raise ConfigError("--output_file", f"{what} in {template!r}; fields are the flags' names, e.g. "
                              "{algorithm}, {mode}, {gemm_sms}, {m}, {datatype}") from None
    if not several:
        return template
    stem, dot, suffix = template.rpartition(".")
    if not dot or "/" in suffix:
        stem, suffix = template, "json"
    tile = f"{cfg.COMMUNICATION_TILE_M}x{cfg.COMMUNICATION_TILE_N}"
    sync = "" if cfg.start_sync == "device" else f"_{cfg.start_sync}sync"
    order = "_skfirst" if cfg.sk_first else ""
    rounds = f"_r{cfg.sk_rounds}" if cfg.sk_rounds != 1 else ""
    # a schedule given on the command line (a sweep may give several) names the file; a planned one does not
    sched = "" if "schedule" in cfg.defaulted or cfg.schedule == "auto" else (
        f"_{cfg.schedule}" + (("2" if cfg.two_tiles else "1") if cfg.schedule == "hybrid" else ""))
    return f"{stem}_{cfg.algorithm}_{cfg.mode}_g{cfg.gemm_sms}_ct{tile}{order}{rounds}{sched}{sync}.{suffix}"


def _pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def _bool(flag: str, text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ConfigError(flag, f"must be true or false, got {text!r}")


def parse_config(argv: list[str] | None, device: DeviceFacts, world_size: int) -> BenchConfig:
    """Flags -> a checked BenchConfig. Raises ConfigError for the first bad flag."""
    parser = build_parser()
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        raise ConfigError(unknown[0], "unknown flag (see --help)")
    on_cpu = device.backend == "cpu"
    defaults = dict(CPU_DEFAULTS if on_cpu else GPU_DEFAULTS)
    values = vars(ns)
    cfg = BenchConfig()
    defaulted = []
    for f in dataclasses.fields(cfg):
        if f.name in ("defaulted", "cpu_small_default", "use_tma", "plan"):
            continue
        v = values.get(f.name)
        if v is None:
            if f.name in defaults:
                v = defaults[f.name]
                defaulted.append(f.name)
            elif f.name in PLANNED_FLAGS:
                continue  # planned below
            else:
                v = getattr(cfg, f.name)
        setattr(cfg, f.name, v)
    if values["two_tiles"] is not None:
        cfg.two_tiles = values["two_tiles"] = _bool("--two_tiles", values["two_tiles"])
    cfg.gemm_joins_comm = _bool("--gemm_joins_comm", values["gemm_joins_comm"])
    cfg.sk_first = _bool("--sk_first", values["sk_first"])
    if cfg.tma not in ("auto", "on", "off"):
        raise ConfigError("--tma", f"must be auto, on or off, got {cfg.tma!r}")
    tma_capable = device.backend == "cuda" and device.capability >= 90
    if cfg.tma == "on" and not tma_capable:
        where = device.name or device.backend
        raise ConfigError("--tma", f"on needs an NVIDIA GPU of compute capability 9.0+ (this is {where}); "
                          "use auto or off")
    if (cfg.algorithm in ALGORITHMS and cfg.datatype in DATATYPES and cfg.mode in (*MODES, AUTO)
            and (cfg.mode == AUTO or has_mode(cfg.algorithm, cfg.mode)) and cfg.schedule in SCHEDULE_CHOICES):
        apply_plan(cfg, values, device, world_size, defaulted)
    cfg.defaulted = defaulted
    cfg.cpu_small_default = on_cpu and all(x in defaulted for x in ("m", "n", "k"))
    check_config(cfg, device, world_size)
    output_path(cfg.output_file, cfg, several=False)  # a template with a bad field is refused here
    return cfg


def planner_target(device: DeviceFacts) -> Any:
    from overlap.planner import Target
    from stream_k.configs import current_arch

    if device.backend == "cpu":
        return Target("interpreter", "interpreter", device.sm_count, False)
    arch = f"sm{device.capability}" if device.backend == "cuda" else current_arch()
    return Target(device.name or device.backend, arch, device.sm_count, device.backend == "cuda" and
                  device.capability >= 90)


def fixed_from_flags(cfg: BenchConfig, values: dict[str, Any], target: Any) -> dict[str, Any]:
    """The OverlapConfig fields the command line fixes (a kernel field given fixes the whole GEMM config, the
    planner's default tile with the given parts replaced)."""
    from stream_k.configs import default_config

    given = {name for name in PLANNED_FLAGS if values.get(name) not in (None, AUTO)}
    fixed: dict[str, Any] = {}
    for name in ("mode", "total_sms", "gemm_sms", "sk_rounds", "schedule", "two_tiles"):
        if name in given:
            fixed[name] = values[name]
    if "COMMUNICATION_TILE_M" in given:
        fixed["comm_tile_m"] = values["COMMUNICATION_TILE_M"]
    if "COMMUNICATION_TILE_N" in given:
        fixed["comm_tile_n"] = values["COMMUNICATION_TILE_N"]
    kernel_flags = [n for n in ("BLK_M", "BLK_N", "BLK_K", "num_stages", "num_warps") if n in given]
    if kernel_flags or cfg.tma != "auto":
        base = default_config(cfg.datatype, target.arch).replace(tma=target.tma)
        fixed["kernel"] = base.replace(**{n: values[n] for n in kernel_flags},
                                       **({} if cfg.tma == "auto" else {"tma": cfg.tma == "on"}))
    return fixed


def apply_plan(cfg: BenchConfig, values: dict[str, Any], device: DeviceFacts, world_size: int,
               defaulted: list[str]) -> None:
    """Fill every flag left unset from the planner (overlap/planner.py), and record what it chose."""
    from overlap.planner import Problem, TuningCache, plan

    target = planner_target(device)
    fixed = fixed_from_flags(cfg, values, target)
    problem = Problem(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, world_size)
    chosen = plan(problem, target, fixed, TuningCache(cfg.tuning_cache))
    c = chosen.choice
    k = c.kernel
    cfg.mode, cfg.total_sms, cfg.gemm_sms, cfg.sk_rounds = c.mode, c.total_sms, c.gemm_sms, c.sk_rounds
    cfg.schedule, cfg.two_tiles = c.schedule, c.two_tiles
    cfg.COMMUNICATION_TILE_M, cfg.COMMUNICATION_TILE_N = c.comm_tile_m, c.comm_tile_n
    cfg.BLK_M, cfg.BLK_N, cfg.BLK_K = k.BLK_M, k.BLK_N, k.BLK_K
    cfg.num_stages, cfg.num_warps = k.num_stages, k.num_warps
    cfg.use_tma = k.tma
    cfg.plan = chosen.as_dict()
    defaulted.extend(name for name in PLANNED_FLAGS if values.get(name) in (None, AUTO) and name not in defaulted)


def planned_fields(cfg: BenchConfig) -> dict[str, Any]:
    """The config's values of the planner's fields (overlap.planner.PLANNED_FIELDS)."""
    from stream_k.configs import KernelConfig

    return {"mode": cfg.mode, "total_sms": cfg.total_sms, "gemm_sms": cfg.gemm_sms, "sk_rounds": cfg.sk_rounds,
            "schedule": cfg.schedule, "two_tiles": cfg.two_tiles,
            "comm_tile_m": cfg.COMMUNICATION_TILE_M, "comm_tile_n": cfg.COMMUNICATION_TILE_N,
            "kernel": KernelConfig(cfg.BLK_M, cfg.BLK_N, cfg.BLK_K, cfg.num_stages, cfg.num_warps, tma=cfg.use_tma)}


def tuning_configs(cfg: BenchConfig, device: DeviceFacts, world_size: int) -> list[BenchConfig]:
    """--tune N: one config per candidate the planner would measure (the given flags fixed), each validated and
    timed; benchmark.py stores the fastest in the tuning cache."""
    from overlap.planner import Problem, tune_candidates

    target = planner_target(device)
    planned = set(cfg.plan.get("planned", []))
    fixed = {name: v for name, v in planned_fields(cfg).items() if name not in planned}
    problem = Problem(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, world_size)
    out = []
    for cand in tune_candidates(problem, target, fixed, cfg.tune):
        c = dataclasses.replace(cfg, defaulted=list(cfg.defaulted))
        k = cand.kernel
        c.mode, c.total_sms, c.gemm_sms, c.sk_rounds = cand.mode, cand.total_sms, cand.gemm_sms, cand.sk_rounds
        c.schedule, c.two_tiles = cand.schedule, cand.two_tiles
        c.COMMUNICATION_TILE_M, c.COMMUNICATION_TILE_N = cand.comm_tile_m, cand.comm_tile_n
        c.BLK_M, c.BLK_N, c.BLK_K, c.num_stages, c.num_warps, c.use_tma = (k.BLK_M, k.BLK_N, k.BLK_K, k.num_stages,
                                                                          k.num_warps, k.tma)
        c.plan = {**cfg.plan, "source": "tune candidate", "choice": cand.describe(),
                  "predicted_ms": round(cand.predicted_ms, 4)}
        c.validate = c.benchmark = True
        check_config(c, device, world_size)
        out.append(c)
    return out


def check_config(cfg: BenchConfig, device: DeviceFacts, world_size: int) -> None:
    """Every refusal benchmark.py makes before launching anything."""
    if cfg.algorithm not in ALGORITHMS:
        raise ConfigError("--algorithm", f"must be one of {', '.join(ALGORITHMS)}, got {cfg.algorithm!r}")
    if cfg.mode not in (*MODES, AUTO):
        raise ConfigError("--mode", f"must be one of {AUTO}, {', '.join(MODES)}, got {cfg.mode!r}")
    if cfg.mode != AUTO and not has_mode(cfg.algorithm, cfg.mode):
        able = ", ".join(a for a in ALGORITHMS if has_mode(a, cfg.mode))
        raise ConfigError("--mode", f"{cfg.mode} is built for {able}, not {cfg.algorithm}")
    if cfg.datatype not in DATATYPES:
        raise ConfigError("--datatype", f"must be one of {', '.join(DATATYPES)}, got {cfg.datatype!r}")
    if cfg.schedule not in SCHEDULE_CHOICES:
        raise ConfigError("--schedule", f"must be one of {', '.join(SCHEDULE_CHOICES)}, got {cfg.schedule!r}")
    for flag, v in (("-m", cfg.m), ("-n", cfg.n), ("-k", cfg.k)):
        if v < 1:
            raise ConfigError(flag, f"must be >= 1, got {v}")
    from overlap.algorithms import ALGORITHMS as RECORDS

    rec = RECORDS[cfg.algorithm]
    if rec.split == "k" and cfg.k % world_size:
        raise ConfigError("-k", f"{cfg.algorithm} splits K over {world_size} ranks: must be a multiple of "
                          f"{world_size}, got {cfg.k}")
    if rec.split == "n" and cfg.n % world_size:
        raise ConfigError("-n", f"{cfg.algorithm} splits N over {world_size} ranks: must be a multiple of "
                          f"{world_size}, got {cfg.n}")
    if rec.splits_m() and cfg.m % world_size:
        raise ConfigError("-m", f"{cfg.algorithm} splits M over {world_size} ranks: must be a multiple of "
                          f"{world_size}, got {cfg.m}")
    local_k = rec.local_k(cfg.k, world_size)
    local_n = rec.local_n(cfg.n, world_size)
    for name, rows, cols in (("A", cfg.m, local_k), ("B", local_k, local_n), ("C", cfg.m, cfg.n)):
        if rows * cols > MAX_ELEMENTS:
            raise ConfigError("-m/-n/-k", f"{name} of each rank would be {rows} x {cols} = {rows * cols} elements; "
                              f"the kernels index with 32-bit offsets, so at most {MAX_ELEMENTS}")
    for flag, v in (("--BLK_M", cfg.BLK_M), ("--BLK_N", cfg.BLK_N), ("--BLK_K", cfg.BLK_K)):
        if not _pow2(v) or not 16 <= v <= 512:
            raise ConfigError(flag, f"must be a power of two in [16, 512], got {v}")
    for flag, v, blk, bname in (
        ("--COMMUNICATION_TILE_M", cfg.COMMUNICATION_TILE_M, cfg.BLK_M, "--BLK_M"),
        ("--COMMUNICATION_TILE_N", cfg.COMMUNICATION_TILE_N, cfg.BLK_N, "--BLK_N"),
    ):
        if not _pow2(v) or v > blk:
            raise ConfigError(flag, f"must be a power of two that divides {bname}={blk}, got {v}")
    if cfg.num_stages < 1 or cfg.num_stages > 8:
        raise ConfigError("--num_stages", f"must be in [1, 8], got {cfg.num_stages}")
    if cfg.num_warps not in (1, 2, 4, 8, 16):
        raise ConfigError("--num_warps", f"must be one of 1, 2, 4, 8, 16, got {cfg.num_warps}")
    if not _pow2(cfg.communication_block_size) or not 32 <= cfg.communication_block_size <= 1024:
        raise ConfigError("--communication_block_size",
                          f"must be a power of two in [32, 1024] (threads), got {cfg.communication_block_size}")
    if cfg.gsize_m < 1:
        raise ConfigError("--gsize_m", f"must be >= 1, got {cfg.gsize_m}")
    from stream_k.plan import MAX_SK_ROUNDS

    if cfg.mode == AUTO:
        raise ConfigError("--mode", "auto was not resolved (the planner needs a valid --algorithm and --datatype)")
    if not 1 <= cfg.sk_rounds <= MAX_SK_ROUNDS:
        raise ConfigError("--sk_rounds", f"must be in 1..{MAX_SK_ROUNDS}, got {cfg.sk_rounds}")
    if cfg.validate_iters < 1:
        raise ConfigError("--validate_iters", f"must be >= 1, got {cfg.validate_iters}")
    if cfg.datatype == "int8" and cfg.BLK_K < 32:
        raise ConfigError("--BLK_K", f"must be >= 32 for int8 inputs (tl.dot's minimum K), got {cfg.BLK_K}")
    if cfg.iters < 1:
        raise ConfigError("--iters", f"must be >= 1, got {cfg.iters}")
    if cfg.warmup < 0:
        raise ConfigError("--warmup", f"must be >= 0, got {cfg.warmup}")
    if cfg.start_sync not in START_SYNCS:
        raise ConfigError("--start_sync", f"must be one of {', '.join(START_SYNCS)}, got {cfg.start_sync!r}")
    if not 0 < cfg.timeout_s <= MAX_TIMEOUT_S:  # nan fails this too
        raise ConfigError("--timeout_s", f"must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {cfg.timeout_s}")
    # SM split. All programs of a launch must be resident at once (they wait on each other), so a
    # launch may not have more programs than the device has SMs.
    if not 1 <= cfg.total_sms <= device.sm_count:
        raise ConfigError("--total_sms", f"must be in [1, {device.sm_count}] (the device's SMs: every program "
                          f"must be resident, or waits could deadlock), got {cfg.total_sms}")
    if cfg.mode == "copy_engine":
        if cfg.gemm_sms != cfg.total_sms:
            raise ConfigError("--gemm_sms", f"copy_engine runs the GEMM on every SM: leave it unset or give "
                              f"--total_sms ({cfg.total_sms}), got {cfg.gemm_sms}")
    elif not 1 <= cfg.gemm_sms < cfg.total_sms:
        raise ConfigError("--gemm_sms", f"must be in [1, {cfg.total_sms - 1}] (below --total_sms={cfg.total_sms}, "
                          f"leaving SMs to communicate), got {cfg.gemm_sms}")
    # Shared memory of one GEMM program: the pipelined A and B tiles.
    elem = 4 if cfg.datatype == "fp32" else (1 if cfg.datatype == "int8" else 2)
    smem = (cfg.BLK_M * cfg.BLK_K + cfg.BLK_K * cfg.BLK_N) * elem * cfg.num_stages
    if device.backend != "cpu" and smem > device.shared_mem_per_program:
        raise ConfigError("--BLK_M/--BLK_N/--BLK_K/--num_stages",
                          f"tiles need ~{smem} B of shared memory per program, the device has "
                          f"{device.shared_mem_per_program} B: use smaller blocks or fewer stages")
    if device.backend == "cpu" and rec.zeroes_c and cfg.datatype == "bf16":
        raise ConfigError("--datatype", f"{cfg.algorithm} adds bf16 tiles atomically, which Triton's CPU interpreter "
                          "cannot do: use fp32 or fp16 on the CPU (bf16 runs on GPUs)")
    if cfg.heap_size < 1 << 20:
        raise ConfigError("--heap_size", f"must be at least 1 MiB, got {cfg.heap_size}")


def check_environment() -> str:
    """The environment variables the run reads, checked before any work: IRIS_OPS_TIMEOUT_S (a number
    of seconds) and IRIS_OPS_BACKEND (a known backend; a GPU one needs a GPU). Returns the heap
    backend; raises ConfigError naming the variable."""
    from iris_ops.backends import BACKENDS, choose_backend
    from iris_ops.bootstrap import TIMEOUT_ENV, timeout_from_env

    try:
        timeout_from_env()
    except ValueError as exc:
        raise ConfigError(TIMEOUT_ENV, str(exc).split(": ", 1)[-1]) from None
    try:
        backend = choose_backend()
    except ValueError:
        raise ConfigError("IRIS_OPS_BACKEND", f"must be one of auto, {', '.join(BACKENDS)}, "
                          f"got {os.environ.get('IRIS_OPS_BACKEND')!r}") from None
    if backend in ("cuda", "hip", "symm"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("IRIS_OPS_BACKEND", f"{backend} needs a GPU, and torch sees none; use shm")
    return backend


def check_heap(cfg: BenchConfig, device: DeviceFacts, backend: str, ranks_on_node: int) -> None:
    """Refuse a heap that cannot be had, with the sizes, before any is made: on the shm backend every
    rank of the node puts its heap in /dev/shm (a heap past its free space dies with SIGBUS when
    touched); on a GPU the heap must fit in the device's memory."""
    flag = "-m/-n/-k" if "heap_size" in cfg.defaulted else "--heap_size"
    if backend == "shm":
        from iris_ops.backends.shm import space_problem

        problem = space_problem(cfg.heap_size, ranks_on_node)
        if problem:
            raise ConfigError(flag, problem)
    elif device.memory_bytes and cfg.heap_size > device.memory_bytes:
        raise ConfigError(flag, f"a heap of {cfg.heap_size} B per rank does not fit in the {device.memory_bytes} B "
                          f"of {device.name or 'the GPU'}")


def check_outputs(paths: list[str | None]) -> None:
    """Every log path can be written (checked before any work), and no two runs write the same one."""
    seen: set[str] = set()
    for path in paths:
        if path is None:
            continue
        if path in seen:
            raise ConfigError("--output_file", f"two runs of this sweep would both write {path}: put the swept "
                              "flags in its name, e.g. 'runs/{algorithm}_{mode}_g{gemm_sms}.json'")
        seen.add(path)
        check_output_path("--output_file", path)

"""benchmark.py's flags, their defaults, and every check made before a kernel starts.

One `BenchConfig` flows through the harness: the run's own flags and the op's config (overlap.OverlapConfig,
`cfg.op`), planned once for the target (spec.Target) in `parse_config`; the fixture builds the op from exactly
that config. `OP_FLAGS` is the one table between the flags and the op config's fields: a flag given fixes its
field, `as_flags()` writes the resolved values back under the flags' names for the JSON log, and a refusal of the
op's checks (overlap.config.InvalidConfig) names the flag of its field. `parse_config(argv, target,
world_size)` returns the config, or raises `ConfigError` naming the flag and what is valid; benchmark.py turns
that into one line on stderr and exit code 2 on every rank.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamk_pgas import spec
from streamk_pgas.harness.checks import (
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
from streamk_pgas.harness.timing import START_SYNCS
from streamk_pgas.spec import AUTO, Target, schedule_label
from streamk_pgas.spec.modes import AUTO_HELP

__all__ = ["ConfigError"]  # re-exported: benchmark.py catches it from here

# The problem and run defaults. Everything that shapes the kernels (mode, SM split, tiles, stages, warps, TMA,
# Stream-K schedule and rounds, communication tile) is the planner's (overlap/planner.py) unless given.
# The CPU's: a shape the interpreter runs in seconds that every algorithm can split over 1 to 4 ranks (48 is a
# multiple of 1, 2, 3 and 4; another world size rounds it up, cpu_default_dim), in fp32, the datatype whose
# atomic adds the interpreter makes exact across processes (its fp16 adds can lose updates; bf16 has none); two
# timed steps (the interpreter's times say nothing of a GPU's: a CPU run checks that everything runs).
CPU_DEFAULTS = {"m": 48, "n": 48, "k": 48, "iters": 2, "warmup": 1, "heap_size": 1 << 24, "datatype": "fp32"}
GPU_DEFAULTS = {"m": 8192, "n": 8192, "k": 8192, "iters": 50, "warmup": 10, "heap_size": 1 << 33, "datatype": "bf16"}

# Flag -> the OverlapConfig field it sets ("kernel.X": a field of its GEMM config). --tma takes on/off/auto.
OP_FLAGS: dict[str, str] = {
    "algorithm": "algorithm", "mode": "mode", "m": "m", "n": "n", "k": "k", "datatype": "datatype",
    "total_sms": "total_sms", "gemm_sms": "gemm_sms", "COMMUNICATION_TILE_M": "comm_tile_m",
    "COMMUNICATION_TILE_N": "comm_tile_n", "communication_block_size": "comm_threads", "two_tiles": "two_tiles",
    "schedule": "schedule", "sk_first": "sk_first", "sk_rounds": "sk_rounds", "gemm_joins_comm": "gemm_joins_comm",
    "timeout_s": "timeout_s", "BLK_M": "kernel.BLK_M", "BLK_N": "kernel.BLK_N", "BLK_K": "kernel.BLK_K",
    "num_stages": "kernel.num_stages", "num_warps": "kernel.num_warps", "gsize_m": "kernel.gsize_m",
    "waves_per_eu": "kernel.waves_per_eu", "mfmaInstrSize": "kernel.matrix_instr_nonkdim", "kpack": "kernel.kpack",
    "tma": "kernel.tma",
}
BOOL_FLAGS = ("two_tiles", "sk_first", "gemm_joins_comm")


def flag_name(name: str) -> str:
    """"-m" for a one-letter flag, "--NAME" for the others."""
    return f"-{name}" if len(name) == 1 else f"--{name}"


def flag_of(field_name: str) -> str:
    """The flag that sets an OverlapConfig field (overlap.config.InvalidConfig.field)."""
    if field_name == "kernel":  # the GEMM tile's shared memory
        return "--BLK_M/--BLK_N/--BLK_K/--num_stages"
    for flag, path in OP_FLAGS.items():
        if path == field_name:
            return flag_name(flag)
    return field_name


@dataclass
class BenchConfig:
    op: Any  # overlap.OverlapConfig: the problem and every kernel choice, resolved (planned once)
    iters: int = 50
    warmup: int = 10
    heap_size: int = 1 << 33
    debug: bool = False
    validate: bool = False
    validate_iters: int = 1
    benchmark: bool = False
    trace_tiles: bool = False
    graph: bool = False
    quiet: bool = False
    output_file: str | None = None
    seed: int = 0
    start_sync: str = "device"
    tma: str = "auto"  # the flag as given; op.kernel.tma is what runs
    tune: int = 0  # --tune N: measure the planner's N best candidates, store the winner
    tuning_cache: str | None = None
    # which values came from defaults rather than the command line
    defaulted: list[str] = field(default_factory=list)
    cpu_small_default: bool = False

    # the problem, as the rest of the harness reads it
    @property
    def algorithm(self) -> str:
        return self.op.algorithm

    @property
    def mode(self) -> str:
        return self.op.mode

    @property
    def datatype(self) -> str:
        return self.op.datatype

    @property
    def m(self) -> int:
        return self.op.m

    @property
    def n(self) -> int:
        return self.op.n

    @property
    def k(self) -> int:
        return self.op.k

    @property
    def plan(self) -> dict[str, Any]:
        """The planner's account of the values it chose ({"source", "planned", "choice", "predicted_ms", ...})."""
        return self.op.plan_info or {}

    @property
    def comm_sms(self) -> int:
        return self.op.total_sms - self.op.gemm_sms

    def as_flags(self) -> dict[str, Any]:
        """Every flag's value (the op's resolved values under their flags' names) as a plain dict for the JSON log
        and for --output_file templates."""
        out: dict[str, Any] = {}
        for flag, path in OP_FLAGS.items():
            obj, _, name = ("kernel", "", path[7:]) if path.startswith("kernel.") else ("", "", path)
            out[flag] = getattr(self.op.kernel, name) if obj else getattr(self.op, name)
        out["tma"] = self.tma
        out["use_tma"] = self.op.kernel.tma
        for f in dataclasses.fields(self):
            if f.name != "op":
                out[f.name] = getattr(self, f.name)
        out["plan"] = self.plan
        return out


class DefaultsOnce(argparse.HelpFormatter):
    """--help with each default said once: argparse's "(default: X)" is added where the help does not say the
    default itself (a default of None is the planner's or the device's: the help says which)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def cpu_default_dim(name: str, world_size: int) -> int:
    """The CPU's default of -m, -n or -k at this world size: CPU_DEFAULTS's, rounded up to a multiple of the world
    size, so every algorithm can split it."""
    return -(-CPU_DEFAULTS[name] // world_size) * world_size


def _by_device(name: str) -> str:
    """The default of a flag whose default depends on the device (GPU_DEFAULTS, CPU_DEFAULTS)."""
    rounded = " (rounded up to a multiple of the ranks)" if name in ("m", "n", "k") else ""
    cpu = f"{CPU_DEFAULTS[name]} on the CPU{rounded}"
    return f"(default: {GPU_DEFAULTS[name]} on a GPU, {cpu})"


def build_parser(prog: str = "benchmark.py") -> argparse.ArgumentParser:
    from streamk_pgas.overlap.config import OverlapConfig

    op_default = {f.name: f.default for f in dataclasses.fields(OverlapConfig)}
    planned = "(default: the planner's)"
    p = OneLineParser(
        prog=prog,
        description="Stream-K GEMM overlapped with communication on a symmetric heap "
        "(run under mpirun -np N, torchrun, or plain python for one rank).",
        formatter_class=DefaultsOnce,
    )
    a = p.add_argument
    a("--nproc", type=int, default=None,
      help="start this many ranks on this machine and run on them: mpirun (with --allow-run-as-root as root, and "
      "--oversubscribe), else torchrun (default: none; under mpirun or torchrun each process is a rank, a plain "
      "process is one rank alone)")
    a("--algorithm", default="one_shot", help=f"one of {', '.join(spec.ALGORITHMS)}")
    a("--mode", default=AUTO, help="; ".join([f"{AUTO}: {AUTO_HELP}", *(f"{m.name}: {m.help}"
                                                                        for m in spec.MODES.values())]))
    dim = int_in(1, MAX_DIM)
    a("-m", type=dim, default=None, help=f"rows of A and C {_by_device('m')}")
    a("-n", type=dim, default=None, help=f"columns of B and C {_by_device('n')}")
    a("-k", type=dim, default=None, help=f"columns of A / rows of B, the reduction dimension {_by_device('k')}")
    a("--datatype", default=None, help=f"one of {', '.join(spec.DATATYPES)} {_by_device('datatype')}")
    a("--BLK_M", type=int, default=None, help=f"GEMM tile rows (power of two) {planned}")
    a("--BLK_N", type=int, default=None, help=f"GEMM tile columns (power of two) {planned}")
    a("--BLK_K", type=int, default=None, help=f"GEMM K step (power of two) {planned}")
    a("--COMMUNICATION_TILE_M", type=int, default=None, help=f"rows a communication step moves; divides BLK_M "
      f"{planned}")
    a("--COMMUNICATION_TILE_N", type=int, default=None, help=f"columns a communication step moves; divides BLK_N "
      f"{planned}")
    a("--gsize_m", type=int_in(1, 64), default=None,
      help=f"grouped tile order: tiles of this many rows are walked together {planned}")
    a("--two_tiles", default=None,
      help="with --schedule hybrid: Stream-K over the last partial wave plus one full wave (true), or over the last "
      f"partial wave only (false) {planned}")
    a("--schedule", default=None,
      help="GEMM schedule: auto (the planner's choice of dp or hybrid by the shape), hybrid (DP waves + Stream-K), "
      "dp (data-parallel only), or sk (Stream-K only) (default: auto)")
    a("--gemm_joins_comm", default=None,
      help="fused and two_streams on a GPU: GEMM programs done with their tiles help move the rest (true/false) "
      f"(default: {str(op_default['gemm_joins_comm']).lower()})")
    a("--tma", default="auto",
      help="GEMM loads A and B with the tensor-memory accelerator (on/off; auto: on for NVIDIA sm_90+)")
    a("--num_stages", type=int, default=None, help=f"software-pipelining depth of the GEMM K loop {planned}")
    a("--num_warps", type=int, default=None, help=f"warps per program (GEMM and fused kernels) {planned}")
    a("--waves_per_eu", type=int_in(0, 16), default=None,
      help=f"AMD only: occupancy hint (accepted and reported unused on NVIDIA) {planned}")
    a("--mfmaInstrSize", type=int_in(0, 64), default=None, help=f"AMD only: matrix_instr_nonkdim {planned}")
    a("--kpack", type=int_in(1, 8), default=None, help=f"AMD only: K packing {planned}")
    a("--heap_size", type=int_in(1 << 20, 1 << 50), default=None,
      help="symmetric heap bytes per rank (default: what the problem needs)")
    a("--gemm_sms", type=int, default=None, help=f"programs (SMs) doing GEMM work; the rest communicate {planned}")
    a("--total_sms", type=int, default=None, help="programs in all (default: the device's SM count)")
    a("--communication_block_size", type=int, default=None,
      help="threads per communication program in the two-stream mode's communication kernel "
      f"(default: {op_default['comm_threads']})")
    a("--iters", type=int_in(1, MAX_ITERS), default=None, help=f"timed iterations (median reported) "
      f"{_by_device('iters')}")
    a("--warmup", type=int_in(0, MAX_ITERS), default=None, help=f"untimed warm-up iterations {_by_device('warmup')}")
    a("--seed", type=int_in(0, MAX_SEED), default=0, help="random seed of the inputs (same on every rank)")
    a("--timeout_s", type=timeout_seconds, default=None,
      help="every wait for a peer gives up after this long and the run fails on every rank: the kernels' spin-waits "
      "(on the device's clock) and the host's barriers and exchanges (the ranks' launch waits at least 5 s): seconds "
      f"in (0, {MAX_TIMEOUT_S:g}] (default: {op_default['timeout_s']:g})")
    a("--debug", action="store_true", help="print per-rank details")
    a("--validate", action="store_true", help="check C and each rank's partial against torch on the same inputs")
    a("--validate_iters", type=int_in(1, MAX_ITERS), default=1,
      help="with --validate: besides one isolated step (outputs poisoned first), this many steps launched back to "
      "back with nothing between them, then C checked on every rank (and as many graph replays with --graph)")
    a("--benchmark", action="store_true", help="time the run (medians over --iters after --warmup)")
    a("--sk_first", default=None,
      help="each GEMM program runs its Stream-K share before its data-parallel tiles (true/false) "
      f"(default: {str(op_default['sk_first']).lower()})")
    a("--sk_rounds", type=int, default=None,
      help="cut the GEMM's Stream-K tiles into this many rounds (1-4), the last one P / 2^(R-1) tiles cut into "
      "2^(R-1) pieces (one per program), so that few tiles complete together at the GEMM's end and the "
      f"communication's tail after it is short {planned}")
    a("--start_sync", default="device",
      help="how timed iterations start together: device (a device-side barrier of all ranks' streams right "
      "before the start event) or host (a host barrier only; the devices then start up to tens of us apart)")
    a("--quiet", action="store_true", help="no progress lines on long runs (rank 0 prints one every ~10 s)")
    a("--graph", action="store_true",
      help="also capture one step in a CUDA graph (GPU only): replays are validated and timed back to back")
    a("--trace_tiles", action="store_true",
      help="record per-tile timestamps; writes a timeline JSON and a Perfetto trace beside --output_file")
    a("--output_file", default=None, help="JSON log path, written by rank 0 (default: none)")
    a("--tune", type=int_in(1, 16), nargs="?", const=4, default=0,
      help="measure the planner's best N candidates (4 when N is left out) for the flags left unset, validated and "
      "timed back to back, and store the fastest in the tuning cache, which later runs without those flags read "
      "(default: off: leave the flag out; GPU only)")
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
    """The log path of one run: `template` formatted with the config's flags (e.g. {algorithm}, {mode},
    {gemm_sms}); with several runs and no field in it, the run's name goes before the suffix."""
    if not template:
        return None
    flags = cfg.as_flags()
    if "{" in template:
        try:
            return template.format(**flags)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            what = f"unknown field {{{exc.args[0]}}}" if isinstance(exc, KeyError) else f"bad template ({exc})"
            raise ConfigError("--output_file", f"{what} in {template!r}; fields are the flags' names, e.g. "
                              "{algorithm}, {mode}, {gemm_sms}, {m}, {datatype}") from None
    if not several:
        return template
    stem, dot, suffix = template.rpartition(".")
    if not dot or "/" in suffix:
        stem, suffix = template, "json"
    tile = f"{flags['COMMUNICATION_TILE_M']}x{flags['COMMUNICATION_TILE_N']}"
    sync = "" if cfg.start_sync == "device" else f"_{cfg.start_sync}sync"
    order = "_skfirst" if flags["sk_first"] else ""
    rounds = f"_r{flags['sk_rounds']}" if flags["sk_rounds"] != 1 else ""
    # a schedule given on the command line (a sweep may give several) names the file; a planned one does not
    sched = "" if "schedule" in cfg.defaulted or flags["schedule"] == AUTO else (
        f"_{schedule_label(flags['schedule'], flags['two_tiles'])}")
    return (f"{stem}_{cfg.algorithm}_{cfg.mode}_g{flags['gemm_sms']}_ct{tile}{order}{rounds}{sched}{sync}"
            f".{suffix}")


def _bool(flag: str, text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ConfigError(flag, f"must be true or false, got {text!r}")


def op_fields(values: dict[str, Any], target: Target, datatype: str) -> dict[str, Any]:
    """The OverlapConfig fields the command line fixes: a flag given fixes its field; a kernel flag given fixes the
    whole GEMM config, the target's default tile with the given parts replaced."""
    from streamk_pgas.stream_k.configs import default_config
    from streamk_pgas.stream_k.select import default_tma

    fields: dict[str, Any] = {}
    kernel: dict[str, Any] = {}
    for flag, path in OP_FLAGS.items():
        v = values.get(flag)
        if v is None or (flag == "tma" and v == AUTO):
            continue
        if flag in BOOL_FLAGS:
            v = _bool(flag_name(flag), v)
        if flag == "tma":
            v = v == "on"
        if path.startswith("kernel."):
            kernel[path[7:]] = v
        else:
            fields[path] = v
    if kernel:
        base = default_config(datatype, target.arch).replace(tma=default_tma(target.arch, datatype))
        fields["kernel"] = base.replace(**kernel)
    return fields


def parse_config(argv: list[str] | None, target: Target, world_size: int) -> BenchConfig:
    """Flags -> a checked BenchConfig, its op config planned for `target`. Raises ConfigError for the first bad
    flag."""
    from streamk_pgas.overlap.config import InvalidConfig, OverlapConfig, check_names
    from streamk_pgas.overlap.planner import CACHE_ENV, TuningCache
    from streamk_pgas.overlap.resolution import resolve_config

    parser = build_parser()
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        raise ConfigError(unknown[0], "unknown flag (see --help)")
    defaults = dict(CPU_DEFAULTS if target.interpreted else GPU_DEFAULTS)
    if target.interpreted:
        defaults.update({d: cpu_default_dim(d, world_size) for d in ("m", "n", "k")})
    values = vars(ns)
    defaulted = [name for name in defaults if values.get(name) is None]
    values.update({name: defaults[name] for name in defaulted})
    defaulted += [flag for flag in OP_FLAGS if values.get(flag) in (None, AUTO) and flag not in defaulted]
    for flag in ("output_file", "tuning_cache"):
        if values[flag] == "":
            raise ConfigError(f"--{flag}", "is empty: give a path, or leave the flag out"
                              + (" for no log" if flag == "output_file" else " for the default cache"))
    if values["tune"] and target.interpreted:
        raise ConfigError("--tune", "measures the planner's candidates on a GPU; on the CPU the planner takes its one "
                          "interpreter config and never reads the tuning cache")
    if values["tma"] not in ("auto", "on", "off"):
        raise ConfigError("--tma", f"must be auto, on or off, got {values['tma']!r}")
    if values["tma"] == "on" and not target.tma:
        raise ConfigError("--tma", f"on needs an NVIDIA GPU of compute capability 9.0+ (this is {target.name}); "
                          "use auto or off")
    run = {f.name: values[f.name] for f in dataclasses.fields(BenchConfig)
           if f.name in values and values[f.name] is not None and f.name != "tma"}
    cache = TuningCache(values["tuning_cache"])
    cache_flag = "--tuning_cache" if values["tuning_cache"] or not os.environ.get(CACHE_ENV) else CACHE_ENV
    try:
        fields = op_fields(values, target, values["datatype"])
        op = OverlapConfig(**fields)
        check_names(op)
        check_sizes(op, world_size)
        cache.entries()  # a file that is not a tuning cache is refused now, not ignored (or overwritten by --tune)
        op = resolve_config(op, target, world_size, cache)
    except InvalidConfig as exc:
        raise ConfigError(cache_flag if exc.field == "tuning_cache" else flag_of(exc.field), exc.message) from None
    cfg = BenchConfig(op=op, tma=values["tma"], defaulted=defaulted, **run)
    cfg.cpu_small_default = target.interpreted and all(x in defaulted for x in ("m", "n", "k"))
    check_run(cfg)
    if cfg.tune:  # where the winner will be stored: checked before the candidates are measured
        check_output_path(cache_flag, cache.path)
    output_path(cfg.output_file, cfg, several=False)  # a template with a bad field is refused here
    return cfg


def check_sizes(op: Any, world_size: int) -> None:
    """Each rank's A, B and C fit the kernels' 32-bit offsets."""
    fam = spec.ALGORITHMS[op.algorithm].family
    (am, ak), (bk, bn), (cm, cn) = (fam.a_shape(op.m, op.k, world_size), fam.b_shape(op.k, op.n, world_size),
                                    (op.m, op.n))
    for name, rows, cols in (("A", am, ak), ("B", bk, bn), ("C", cm, cn)):
        if rows * cols > MAX_ELEMENTS:
            raise ConfigError("-m/-n/-k", f"{name} of each rank would be {rows} x {cols} = {rows * cols} elements; "
                              f"the kernels index with 32-bit offsets, so at most {MAX_ELEMENTS}")


def check_run(cfg: BenchConfig) -> None:
    """The run's own flags (the op's are checked by overlap.config)."""
    if cfg.validate_iters < 1:
        raise ConfigError("--validate_iters", f"must be >= 1, got {cfg.validate_iters}")
    if cfg.iters < 1:
        raise ConfigError("--iters", f"must be >= 1, got {cfg.iters}")
    if cfg.warmup < 0:
        raise ConfigError("--warmup", f"must be >= 0, got {cfg.warmup}")
    if cfg.start_sync not in START_SYNCS:
        raise ConfigError("--start_sync", f"must be one of {', '.join(START_SYNCS)}, got {cfg.start_sync!r}")
    if cfg.heap_size < 1 << 20:
        raise ConfigError("--heap_size", f"must be at least 1 MiB, got {cfg.heap_size}")


def tuning_configs(cfg: BenchConfig, target: Target, world_size: int) -> list[BenchConfig]:
    """--tune N: one config per candidate the planner would measure (the given flags fixed), each validated and
    timed; benchmark.py stores the fastest in the tuning cache."""
    from streamk_pgas.overlap.config import PLANNED_FIELDS
    from streamk_pgas.overlap.planner import Problem, tune_candidates

    planned = set(cfg.plan.get("planned", []))
    fixed = {name: getattr(cfg.op, name) for name in PLANNED_FIELDS if name not in planned}
    problem = Problem(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, world_size)
    out = []
    for cand in tune_candidates(problem, target, fixed, cfg.tune):
        info = {**cfg.plan, "source": "tune candidate", "choice": cand.describe(),
                "predicted_ms": round(cand.predicted_ms, 4)}
        op = dataclasses.replace(cfg.op, **cand.fields(), plan_info=info)
        out.append(dataclasses.replace(cfg, op=op, defaulted=list(cfg.defaulted), validate=True, benchmark=True))
    return out


# Variables of the scripts (scripts/env.sh: where its venv lives), not read by Python.
SCRIPT_VARIABLES = ("STREAMK_PGAS_VENV",)


def check_environment() -> str:
    """Every environment variable the run reads, checked before any work: iris_ops's (iris_ops.env.check: the
    IRIS_OPS_* variables, STREAMK_PGAS_SHARE_GPU), the 0/1 switches STREAMK_PGAS_FAST_LAUNCH,
    STREAMK_PGAS_STEP_GRAPH, STREAMK_PGAS_CE_PULL and STREAMK_PGAS_CE_A_COLUMNS, and no STREAMK_PGAS_* name that
    nothing reads (a misspelt one would be ignored).
    Returns the heap backend (a GPU one needs a GPU); raises ConfigError naming the variable."""
    from streamk_pgas.harness.sysinfo import COMMIT_ENV
    from streamk_pgas.iris_ops import env
    from streamk_pgas.iris_ops.backends import choose_backend
    from streamk_pgas.overlap.copy_steps import CE_A_COLUMNS_ENV, CE_PULL_ENV, ce_a_columns_setting, ce_pulls_a
    from streamk_pgas.overlap.planner import CACHE_ENV
    from streamk_pgas.overlap.step import STEP_GRAPH_ENV, step_graph_enabled
    from streamk_pgas.stream_k.launch import FAST_LAUNCH_ENV, fast_launch_enabled

    known = (env.SHARE_GPU_ENV, FAST_LAUNCH_ENV, STEP_GRAPH_ENV, CE_PULL_ENV, CE_A_COLUMNS_ENV, CACHE_ENV, COMMIT_ENV,
             *SCRIPT_VARIABLES)
    for name in sorted(os.environ):
        if name.startswith("STREAMK_PGAS_") and name not in known:
            raise ConfigError(name, f"unknown variable; the project reads {', '.join(sorted(known))}")
    env.check()
    if os.environ.get(env.INTERPRET_ENV) == "0":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(env.INTERPRET_ENV, "0 compiles the kernels for a GPU, and torch sees none: leave it "
                              "unset (the kernels then run in Triton's interpreter on the CPU) or set it to 1")
    backend = choose_backend()
    env.check(backend)  # the shm backend's default folder too
    fast_launch_enabled()
    step_graph_enabled()
    ce_pulls_a()
    ce_a_columns_setting()
    if backend in ("cuda", "hip", "symm"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(env.BACKEND_ENV, f"{backend} needs a GPU, and torch sees none; use shm")
    return backend


def check_heap(cfg: BenchConfig, target: Target, backend: str, ranks_on_node: int) -> None:
    """Refuse a heap that cannot be had, with the sizes, before any is made: on the shm backend every
    rank of the node puts its heap in /dev/shm (a heap past its free space dies with SIGBUS when
    touched); on a GPU the heap must fit in the device's memory."""
    flag = "-m/-n/-k" if "heap_size" in cfg.defaulted else "--heap_size"
    if backend == "shm":
        from streamk_pgas.iris_ops.backends.shm import space_problem

        problem = space_problem(cfg.heap_size, ranks_on_node)
        if problem:
            raise ConfigError(flag, problem)
    elif target.memory and cfg.heap_size > target.memory:
        raise ConfigError(flag, f"a heap of {cfg.heap_size} B per rank does not fit in the {target.memory} B "
                          f"of {target.name}")


def trace_stem(cfg: BenchConfig, output_file: str | None) -> Path:
    """Where --trace_tiles writes (harness.trace.trace_paths of it): beside the log, else under results/traces/."""
    if output_file:
        return Path(output_file).with_suffix("")
    return Path(f"results/traces/{cfg.algorithm}_{cfg.mode}_{cfg.m}x{cfg.n}x{cfg.k}_"
                f"{time.strftime('%Y%m%d-%H%M%S')}")


def check_outputs(paths: list[str | None], traces: list[Path | None] | None = None) -> None:
    """Every log path and every trace file (checked before any work) can be written, and no two runs write the
    same one."""
    from streamk_pgas.harness.trace import trace_paths

    seen: set[str] = set()
    files = [("--output_file", p) for p in paths if p is not None]
    files += [("--trace_tiles", str(f)) for stem in traces or [] if stem is not None for f in trace_paths(stem)]
    for flag, path in files:
        if path in seen:
            raise ConfigError(flag, f"two runs of this sweep would both write {path}: put the swept flags in "
                              "--output_file's name, e.g. 'runs/{algorithm}_{mode}_g{gemm_sms}.json'")
        seen.add(path)
        check_output_path(flag, path)

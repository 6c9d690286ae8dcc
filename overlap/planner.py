"""The one place that chooses the op's defaults: for a problem (algorithm, M, N, K, dtype, world size) on a
device it picks the mode, the SM split, the GEMM tile, stages and warps, TMA, the Stream-K schedule (data-parallel
or Stream-K on the leftover tiles) and rounds, and the communication tile. Explicit values win: the planner only
fills what the caller left unset, and says which values it planned (`Plan.planned`) and where they came from
(`Plan.source`: a tuning-cache entry, the cost model, or the interpreter's fixed small config).

The cost model ranks candidates by a predicted step time built from rates: the GEMM's throughput per SM times
the critical path of its Stream-K plan in MAC iterations plus the fix-up (stream_k.plan.StreamKPlan.cost_iters),
the communication's bytes per program and the link's ceiling, a fixed cost per step for the end-of-step peer
barrier. The rates are the measured facts of 2 x H200 (results/README.md, README "Facts"): cuBLAS-level
TFLOP/s for the TMA Stream-K kernel, remote reads ~140 GB/s from 16 programs and ~300 GB/s at most, remote
stores ~360 GB/s at most. It is a ranking model, not a promise: `benchmark.py --tune` measures the best few
candidates on the machine and stores the winner in the tuning cache (`TuningCache`), which later plans read.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overlap.algorithms import ALGORITHMS
from stream_k.configs import KernelConfig, default_config
from stream_k.plan import StreamKPlan, plan_streamk
from stream_k.tiles import num_tiles

MODES = ("bulk_sync", "two_streams", "fused", "fused_sequential", "copy_engine")
OVERLAPPED_MODES = ("two_streams", "fused")
AUTO = "auto"
# What the planner fills when unset (the names of OverlapConfig's fields).
PLANNED_FIELDS = ("mode", "total_sms", "gemm_sms", "kernel", "sk_rounds", "schedule", "two_tiles", "comm_tile_m",
                  "comm_tile_n")
CACHE_ENV = "STREAMK_PGAS_TUNING_CACHE"

# ---- rates (per device family) -------------------------------------------------------------------------

# Dense GEMM TFLOP/s of the whole device for the default tile on full waves (TMA Stream-K reaches cuBLAS: 679-708
# bf16 on an H200; a 128 x 256 x 64 MAC iteration took 0.65-0.80 us on the grid shards, 0.76 on average: 720
# TFLOP/s, session 7); other tiles scale by the efficiency kernel_candidates gives them.
GEMM_TFLOPS = {
    "sm90": {"bf16": 720.0, "fp16": 690.0, "fp32": 300.0, "int8": 1300.0},
    "other": {"bf16": 250.0, "fp16": 250.0, "fp32": 40.0, "int8": 500.0},
}
# A GEMM on fewer programs than SMs runs each MAC iteration faster (more power and memory bandwidth per SM): on
# one H200 (session 7, 7 shards x 5 schedules) the median iteration took 0.711 / 0.735 / 0.743 us on 116 / 124 / 132
# programs, about (programs / SMs) ** 0.35.
SM_SCALING = 0.35
# Communication per program (GB/s) and the link's ceiling per rank (GB/s). one_shot reads remote tiles
# (its communication alone on 14 programs moved a 4864 x 4096 bf16 partial in 0.176 ms: ~16 GB/s per
# program), all_scatter stores them (no reply to wait for), all_reduce adds them atomically.
# all_gather_gemm's pushes of A's rows: 40 MB in 0.58 ms from 12 programs, 0.16 ms from 132 (4864 x 4096 x 8256
# on 2 x H200); gemm_reduce_scatter's atomic adds: 20 MB in 0.24 ms from 8 programs.
PER_PROGRAM_GBS = {"one_shot": 16.0, "all_scatter": 22.0, "all_reduce": 14.0, "all_gather_gemm": 6.0,
                   "gemm_reduce_scatter": 10.0}
LINK_GBS = {"one_shot": 300.0, "all_scatter": 360.0, "all_reduce": 300.0, "all_gather_gemm": 250.0,
            "gemm_reduce_scatter": 300.0}
# The same work from a GEMM program's epilogue (fused_sequential), which stalls that program: all_reduce
# 0.477 ms against a 0.242 ms GEMM at 4864 x 4096 x 8256 on 2 x H200 (~2.6 GB/s per program, its own C
# included); all_scatter 0.272 ms (~5 GB/s).
EPILOGUE_GBS = {"all_reduce": 2.6, "all_scatter": 5.0, "gemm_reduce_scatter": 2.6}
# Communication programs inside the fused kernel run with the GEMM's warps and registers: one_shot's reads
# were ~10% slower there than in two_streams' kernel of their own (1.24-1.27x its bound against 1.09-1.15x).
FUSED_COMM_EFFICIENCY = {"one_shot": 0.7}
LOCAL_GBS = 3000.0  # device memory, for the share of the communication that stays on this rank
STEP_US = {"sync": 6.0, "launch": 3.0, "two_streams": 5.0}  # peer barrier; a second kernel; the stream fork
COMM_RESERVES = (4, 8, 12, 16, 20, 24, 32, 48)  # SMs tried for communication in the overlapped modes
# copy_engine: peer copies by the copy engines (~395 GB/s one way between 2 H200s over NVLink, no SM), local
# device-to-device copies, and the bands the schedule cuts a region into (overlap.copy_steps.BANDS)
CE_PEER_GBS = 390.0
CE_LOCAL_GBS = 1500.0
CE_BANDS = 8
CE_OP_US = 1.5  # the device's cost of one stream operation (a wait, a copy's start)
# What the copy-engine steps measured beyond this model on 2 x H200 (0.10-0.15 ms at 4864 x 4096 x 8256, 8192^3,
# 16384 x 8192 x 8192 and 8192 x 8192 x 28672, one wait per tile row, no graph): the GEMM slowed by the copies'
# memory traffic, the last copies. Remeasure with the band counts and the replayed schedule.
CE_FIXED_MS = 0.1


def has_mode(algorithm: str, mode: str) -> bool:
    """Whether `mode` is built for `algorithm` (copy_engine is not, for all_reduce and one_shot)."""
    return mode != "copy_engine" or ALGORITHMS[algorithm].copy_schedule is not None


def _arch_family(arch: str) -> str:
    return "sm90" if arch.startswith("sm") and arch[2:].isdigit() and int(arch[2:]) >= 90 else "other"


@dataclass(frozen=True)
class Problem:
    algorithm: str
    m: int
    n: int
    k: int
    datatype: str
    world_size: int

    def zeroes_own_share(self) -> bool:
        """Whether the algorithm adds into a C it zeroes first, its own share included (atomic reductions)."""
        return self.algorithm in ("all_reduce", "gemm_reduce_scatter")

    def local(self) -> tuple[int, int, int]:
        """(M, N, K) of this rank's GEMM."""
        w = self.world_size
        if self.algorithm in ("all_scatter", "all_gather_gemm"):
            return self.m, self.n // w, self.k
        return self.m, self.n, self.k // w


@dataclass(frozen=True)
class Target:
    """The device as the planner sees it."""

    name: str  # e.g. "NVIDIA H200"; "interpreter" on the CPU
    arch: str  # stream_k.configs.current_arch(): "sm90", "gfx942", "interpreter", ...
    sms: int
    tma: bool  # NVIDIA sm_90+: the GEMM loads A and B through tensor descriptors

    @property
    def interpreted(self) -> bool:
        return self.arch in ("interpreter", "cpu")

    @classmethod
    def of(cls, device: Any) -> Target:
        """The target for a torch.device (the interpreter for the CPU)."""
        import torch

        if getattr(device, "type", device) != "cuda":
            return cls("interpreter", "interpreter", 4, False)
        props = torch.cuda.get_device_properties(device)
        hip = torch.version.hip is not None
        arch = str(getattr(props, "gcnArchName", "gfx")).split(":")[0] if hip else f"sm{props.major}{props.minor}"
        return cls(props.name, arch, props.multi_processor_count, not hip and props.major >= 9)


@dataclass(frozen=True)
class Candidate:
    mode: str
    total_sms: int
    gemm_sms: int
    kernel: KernelConfig
    sk_rounds: int
    comm_tile_m: int
    comm_tile_n: int
    # the GEMM's Stream-K schedule (stream_k.plan); these defaults are what every run used before the planner
    # chose them, so a tuning-cache entry from then is read as what it measured
    schedule: str = "hybrid"
    two_tiles: bool = True
    predicted_ms: float = 0.0

    def fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PLANNED_FIELDS}

    def describe(self) -> str:
        k = self.kernel
        sched = self.schedule + ("" if self.schedule != "hybrid" else " two_tiles" if self.two_tiles else " one_tile")
        return (f"{self.mode} gemm_sms {self.gemm_sms}/{self.total_sms} tile {k.BLK_M}x{k.BLK_N}x{k.BLK_K} "
                f"s{k.num_stages} w{k.num_warps}{' tma' if k.tma else ''} {sched} sk_rounds {self.sk_rounds} "
                f"comm {self.comm_tile_m}x{self.comm_tile_n}")


@dataclass
class Plan:
    choice: Candidate
    planned: list[str]  # the fields the planner filled (the rest were given)
    source: str  # "cache", "model" or "interpreter"
    ranked: list[Candidate] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        c = self.choice
        return {"source": self.source, "planned": self.planned, "choice": c.describe(),
                "predicted_ms": round(c.predicted_ms, 4) if c.predicted_ms else None,
                "runner_up": [x.describe() for x in self.ranked[1:3]]}


# ---- candidates ---------------------------------------------------------------------------------------

def kernel_candidates(datatype: str, target: Target) -> list[tuple[KernelConfig, float]]:
    """GEMM configs worth trying, with their efficiency relative to the device's default tile."""
    base = default_config(datatype, target.arch).replace(tma=target.tma)
    out = [(base, 1.0)]
    if not target.interpreted and base.BLK_N > 128:
        # a narrower tile doubles the tile count: it wins only where that fills a wave the default tile leaves
        # half empty. On one H200 (session 7, data-parallel on 132 SMs) its MAC iterations ran at 0.73-0.93 of
        # the default tile's rate per FLOP (median ~0.87), and it was the best tile at 512 x 4096 x 8192 (64
        # tiles of 128 x 256): 0.87x cuBLAS against 0.85x for the default tile cut in two pieces
        out.append((base.replace(BLK_N=128, num_stages=4 if datatype in ("bf16", "fp16") else base.num_stages),
                    0.85))
    return out


def schedule_options(fixed: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(schedule, two_tiles) pairs to rank: what is fixed, the rest open. Unfixed, data-parallel and the one-tile
    hybrid (the two-tile hybrid only when two_tiles=True is given: stream_k.plan's docstring says why it is not
    chosen); a fixed hybrid with two_tiles open ranks both of its variants."""
    schedules = [fixed["schedule"]] if "schedule" in fixed else ["dp", "hybrid"]
    if "two_tiles" in fixed:
        return [(s, fixed["two_tiles"]) for s in schedules]
    if "schedule" in fixed:
        return [(s, two) for s in schedules for two in ((False, True) if s == "hybrid" else (False,))]
    return [(s, False) for s in schedules]


def gemm_plan(p: Problem, kernel: KernelConfig, programs: int, rounds: int, schedule: str,
              two_tiles: bool) -> StreamKPlan:
    m, n, k = p.local()
    return plan_streamk(m, n, k, kernel.BLK_M, kernel.BLK_N, kernel.BLK_K, programs, gsize_m=kernel.gsize_m,
                        schedule=schedule, two_tiles=two_tiles, sk_rounds=rounds)


def _gemm_ms(p: Problem, target: Target, kernel: KernelConfig, eff: float, plan: StreamKPlan) -> float:
    """The GEMM's time: the plan's cost in MAC iterations (critical path + fix-up) at the device's rate per SM."""
    per_sm = GEMM_TFLOPS[_arch_family(target.arch)].get(p.datatype, 250.0) * 1e12 / max(1, target.sms)
    iteration_ms = 2.0 * kernel.BLK_M * kernel.BLK_N * kernel.BLK_K / (per_sm * eff) * 1e3
    iteration_ms *= (plan.num_programs / max(1, target.sms)) ** SM_SCALING
    return plan.cost_iters() * iteration_ms + 0.004


def comm_bytes(p: Problem, out_elem: int) -> tuple[float, float]:
    """(bytes this rank moves to or from peers, bytes it moves locally) per step."""
    m, n, w = p.m, p.n, p.world_size
    if p.algorithm == "all_scatter":
        return (w - 1) * m * (n // w) * out_elem, 0.0
    if p.algorithm == "all_gather_gemm":  # A's rows, in A's dtype
        in_elem = 4 if p.datatype == "fp32" else (1 if p.datatype == "int8" else 2)
        return (w - 1) * (m // w) * p.k * in_elem, (m // w) * p.k * in_elem
    if p.algorithm == "gemm_reduce_scatter":  # each tile added into the rank that owns its rows
        return (w - 1) * m * n * out_elem / w, m * n * out_elem / w
    return (w - 1) * m * n * out_elem, m * n * out_elem  # all_reduce adds, one_shot reads: every rank's tile


def _comm_rate(p: Problem, programs: int, efficiency: float = 1.0) -> float:
    """Bytes per ms that `programs` communication programs move to or from peers."""
    if programs <= 0:
        return 1e-9
    return min(LINK_GBS[p.algorithm], programs * PER_PROGRAM_GBS[p.algorithm] * efficiency) * 1e6


def predict_ms(p: Problem, target: Target, c: Candidate, eff: float) -> float:
    """The cost model's step time for candidate `c` (see the module's docstring)."""
    out_elem = 4 if p.datatype in ("fp32", "int8") else 2
    remote, local = comm_bytes(p, out_elem)
    local_ms = local / (LOCAL_GBS * 1e6)
    sync = STEP_US["sync"] / 1e3 if p.world_size > 1 else 0.001
    T, G, kc = c.total_sms, c.gemm_sms, c.kernel
    m, n, _ = p.local()
    tiles = num_tiles(m, n, kc.BLK_M, kc.BLK_N)
    tile_remote = remote / max(1, tiles)
    # the GEMM runs on every program except in the overlapped modes, which give it G
    gplan = gemm_plan(p, kc, G if c.mode in OVERLAPPED_MODES else T, c.sk_rounds, c.schedule, c.two_tiles)
    g = _gemm_ms(p, target, kc, eff, gplan)
    if c.mode == "copy_engine":
        return _copy_engine_ms(p, g, remote, local, out_elem) + sync
    if c.mode == "bulk_sync":
        return g + remote / _comm_rate(p, T) + local_ms + sync + STEP_US["launch"] / 1e3
    if c.mode == "fused_sequential":
        if p.algorithm not in EPILOGUE_GBS:  # one_shot: publish from the epilogue, reduce after the GEMM work
            return g + remote / _comm_rate(p, T) + local_ms + sync
        # each program pushes its own tiles (all_reduce: into every rank's C, its own included) between tiles
        per_tile = tile_remote + (local / max(1, tiles) if p.zeroes_own_share() else 0.0)
        stall = -(-tiles // T) * per_tile / (EPILOGUE_GBS[p.algorithm] * 1e6)
        zero = local_ms + STEP_US["launch"] / 1e3 if p.zeroes_own_share() else 0.0
        return max(g + stall, remote / (LINK_GBS[p.algorithm] * 1e6)) + zero + sync
    # fused / two_streams: communication programs follow the GEMM's tiles; GEMM programs join when done
    fused_eff = FUSED_COMM_EFFICIENCY.get(p.algorithm, 1.0) if c.mode == "fused" else 1.0
    extra = STEP_US["two_streams"] / 1e3 if c.mode == "two_streams" else 0.0
    if p.algorithm == "all_gather_gemm":  # the other way round: the GEMM waits for the rows the programs push
        return max(g, remote / _comm_rate(p, T - G, fused_eff)) + g / p.world_size + local_ms + sync + extra
    first = g / max(1.0, tiles / G)  # the first wave of tiles is ready
    during = _comm_rate(p, T - G, fused_eff) * max(0.0, g - first)
    rest = max(0.0, remote - during) / _comm_rate(p, T, fused_eff)
    tail = gplan.final_tiles() * tile_remote / _comm_rate(p, T, fused_eff)
    return g + rest + tail + local_ms + sync + extra


def _copy_engine_ms(p: Problem, g: float, remote: float, local: float, out_elem: int) -> float:
    """copy_engine's step: the GEMM on every SM, the copy engines behind it (overlap.copy_steps)."""
    peer = CE_PEER_GBS * 1e6
    ops = CE_OP_US / 1e3 * CE_BANDS * max(1, p.world_size - 1)
    if p.algorithm == "all_gather_gemm":  # slot j of A arrives after the own copy and j peer shards
        w = p.world_size
        t = local / (CE_LOCAL_GBS * 1e6) / CE_BANDS  # the first chunk of the own rows
        ready = local / (CE_LOCAL_GBS * 1e6)
        for j in range(1, w):
            avail = ready + j * remote / max(1, w - 1) / peer
            t = max(t + g / w, avail)
        return t + g / w + ops + CE_FIXED_MS
    # scatter / reduce_rows: bands follow the GEMM's rows; the last band's copy is not hidden
    tail = remote / peer / CE_BANDS
    add = 3 * local / (LOCAL_GBS * 1e6) if p.algorithm == "gemm_reduce_scatter" else 0.0
    return max(g, remote / peer) + tail + add + ops + CE_FIXED_MS


def given(fixed: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields a caller fixed: those not None (and a mode or schedule other than "auto")."""
    return {k: v for k, v in (fixed or {}).items()
            if v is not None and not (k in ("mode", "schedule") and v == AUTO)}


def rank_candidates(p: Problem, target: Target, fixed: Mapping[str, Any] | None = None) -> list[Candidate]:
    """Every candidate that agrees with the fixed fields, best predicted first."""
    fixed = given(fixed)
    T = fixed.get("total_sms", target.sms)
    modes = [fixed["mode"]] if "mode" in fixed else [m for m in MODES if has_mode(p.algorithm, m)]
    kernels = [(fixed["kernel"], 1.0)] if "kernel" in fixed else kernel_candidates(p.datatype, target)
    out: list[Candidate] = []
    for mode in modes:
        for kernel, eff in kernels:
            if "gemm_sms" in fixed:
                splits = [fixed["gemm_sms"]]
            elif mode in OVERLAPPED_MODES:
                splits = [T - c for c in COMM_RESERVES if 1 <= T - c < T]
            elif mode == "copy_engine":
                splits = [T]  # the GEMM keeps every SM
            else:
                splits = [max(1, T - 16)]  # unused by these modes (they run every program as both)
            for g, (schedule, two_tiles) in itertools.product(splits, schedule_options(fixed)):
                # rounds cut Stream-K tiles: none to cut in a data-parallel plan
                rounds_options = [fixed["sk_rounds"]] if "sk_rounds" in fixed else (
                    [1, 2] if p.algorithm != "one_shot" and schedule != "dp" else [1])
                for rounds in rounds_options:
                    c = Candidate(mode, T, g, kernel, rounds, fixed.get("comm_tile_m", kernel.BLK_M),
                                  fixed.get("comm_tile_n", kernel.BLK_N), schedule, two_tiles)
                    out.append(dataclasses.replace(c, predicted_ms=predict_ms(p, target, c, eff)))
    out.sort(key=lambda c: c.predicted_ms)
    return out


def interpreter_choice(p: Problem, fixed: Mapping[str, Any]) -> Candidate:
    """On the CPU the interpreter's time says nothing of a GPU's: one small fixed config (fused, 4 programs)."""
    kernel = fixed.get("kernel") or default_config(p.datatype, "interpreter")
    total = fixed.get("total_sms") or 4
    mode = fixed.get("mode") if fixed.get("mode") not in (None, AUTO) else "fused"
    gemm = fixed.get("gemm_sms") or (total if mode == "copy_engine" else max(1, total // 2))
    # the two-tile hybrid: Stream-K and its fix-up on the most tiles, so the CPU tests exercise them
    return Candidate(mode, total, gemm, kernel, fixed.get("sk_rounds") or 1,
                     fixed.get("comm_tile_m") or min(16, kernel.BLK_M), fixed.get("comm_tile_n") or kernel.BLK_N,
                     fixed.get("schedule", "hybrid"), fixed.get("two_tiles", True))


def plan(p: Problem, target: Target, fixed: Mapping[str, Any] | None = None,
         cache: TuningCache | None = None) -> Plan:
    """The values for every field of PLANNED_FIELDS: the fixed ones as given, the rest planned."""
    fixed = given(fixed)
    planned = [f for f in PLANNED_FIELDS if f not in fixed]
    if target.interpreted:
        return Plan(interpreter_choice(p, fixed), planned, "interpreter")
    ranked = rank_candidates(p, target, fixed)
    if cache is not None:
        hit = cache.lookup(p, target)
        if hit is not None and all(hit.fields()[f] == v for f, v in fixed.items() if f in PLANNED_FIELDS):
            return Plan(hit, planned, "cache", [hit, *ranked])
    return Plan(ranked[0], planned, "model", ranked)


def tune_candidates(p: Problem, target: Target, fixed: Mapping[str, Any] | None = None,
                    count: int = 4) -> list[Candidate]:
    """The few candidates --tune measures: the model's best, then the best of each other mode, then of each
    other tile width, then the runners-up in the model's order (so the model's blind spots get measured)."""
    ranked = rank_candidates(p, target, fixed)
    picked: list[Candidate] = []
    for key in (lambda c: c.mode, lambda c: (c.mode, c.kernel.BLK_N), lambda c: id(c)):
        seen = {key(c) for c in picked}
        for c in ranked:
            if key(c) not in seen and c not in picked:
                seen.add(key(c))
                picked.append(c)
    return picked[:count]


# ---- the tuning cache -----------------------------------------------------------------------------------

def default_cache_path() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamk-pgas" / "tuning.json"


class TuningCache:
    """Measured winners, kept across runs in one JSON file, keyed by the problem and the device (and the
    Triton version, whose code generation changes the answer). Written atomically (rename)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()

    @staticmethod
    def key(p: Problem, target: Target) -> str:
        import triton

        return (f"{p.algorithm}|{p.m}x{p.n}x{p.k}|{p.datatype}|w{p.world_size}|{target.name}|{target.sms}sm|"
                f"triton{triton.__version__}")

    def entries(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def lookup(self, p: Problem, target: Target) -> Candidate | None:
        entry = self.entries().get(self.key(p, target))
        if not isinstance(entry, dict):
            return None
        try:
            f = dict(entry["fields"])
            f["kernel"] = KernelConfig(**f["kernel"])
            return Candidate(**f, predicted_ms=0.0)
        except (KeyError, TypeError, ValueError):
            return None  # an entry from another version of the fields: ignored, re-tuned later

    def store(self, p: Problem, target: Target, winner: Candidate, measured_ms: float,
              tried: list[dict[str, Any]]) -> None:
        data = self.entries()
        fields = winner.fields()
        fields["kernel"] = winner.kernel.as_dict()
        data[self.key(p, target)] = {"fields": fields, "measured_ms": measured_ms, "tried": tried,
                                     "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(self.path)

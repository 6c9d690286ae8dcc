"""The GEMM's choices for a shape, in one place: kernel config (tile, stages, warps, TMA) and Stream-K plan,
ranked by a time model. `StreamKGemm.create`, `matmul` and the op's planner all ask here.

    choice = choose_gemm(M, N, K, "bf16", num_programs=132, arch="sm90")
    choice.config, choice.plan, choice.time_us, choice.source

`fixed` holds what the caller decided (any of: config, schedule, two_tiles, sk_rounds, sk_first, split_k); the
rest is chosen: the tile by the shape (`shape_tile`, a rule measured per bucket of M, and on sm_90 tiles whose
width is 3 or 5 times a power of two where their count fills whole waves: `wave_tiles`), TMA where the GPU has
it, the schedule (data-parallel, Stream-K on the leftover tiles, split-K) by the plan's cost. `gemm_candidates`
returns every candidate ranked (the planner walks them when it also varies the program count). `op_tiles=True`
keeps to what the op's fused kernels run: power-of-two tiles, schedules dp / hybrid / sk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamk_pgas.spec import schedule_label, sm90_or_newer
from streamk_pgas.stream_k.configs import KernelConfig, default_config
from streamk_pgas.stream_k.plan import AUTO_SCHEDULE, StreamKPlan, plan_streamk
from streamk_pgas.stream_k.roofline import gemm_bytes
from streamk_pgas.stream_k.tiles import width_parts

# Dense GEMM TFLOP/s of the whole device for the default tile on full waves (TMA Stream-K reaches cuBLAS: 679-708
# bf16 on an H200; a 128 x 256 x 64 MAC iteration took 0.65-0.80 us on the grid shards, 0.76 on average: 720
# TFLOP/s); other tiles scale by the efficiency kernel_candidates gives them.
GEMM_TFLOPS = {
    "sm90": {"bf16": 720.0, "fp16": 690.0, "fp32": 300.0, "int8": 1300.0},
    "other": {"bf16": 250.0, "fp16": 250.0, "fp32": 40.0, "int8": 500.0},
}
# A GEMM on fewer programs than SMs runs each MAC iteration faster (more power and memory bandwidth per SM): on
# one H200 (7 shards x 5 schedules) the median iteration took 0.711 / 0.735 / 0.743 us on 116 / 124 / 132
# programs, about (programs / SMs) ** 0.35.
SM_SCALING = 0.35
LAUNCH_US = 4.0  # a launch's fixed cost on the device
# A memory-bound GEMM streams at the device's bandwidth once this share of the SMs is busy (fewer stream slower, in
# proportion): on one H100 64x5120x8192 ran fastest data-parallel on 80 of 132 SMs (64 x 64 tiles, 0.61 of the
# SMs: 33.4 us, 76% of the roofline, against 36-39 us for split-K and the hybrid on all 132; results/README.md
# "Small-M schedules by the model").
STREAM_SMS_SHARE = 0.6
# shape_tile: the least share of a wave that 128 x 256 tiles must fill to be chosen over 128 x 128 (M > 256).
# Measured on one H200 (results/README.md "The GEMM alone on the tp suite": both tiles on every M > 256 shape of
# the tp suite): wide won at 96 and more tiles on 132 SMs (1000x3000, 512x8192, 1024x5120...), narrow at 80 and fewer
# (512x5120, 2048x1280, 1024x1280, 512x1280).
WIDE_TILE_FILL = 0.66
# Device-memory bandwidth a memory-bound GEMM reaches (TB/s): ~3.3 on one H200 at M = 64 (cuBLAS and ours, with
# a plain read at 4.1-4.2 and the datasheet's 4.8).
GEMM_TB_S = {"sm90": 3.3, "other": 1.5}


def arch_family(arch: str) -> str:
    """"sm90" for NVIDIA sm_90 and newer, "other" for the rest."""
    return "sm90" if sm90_or_newer(arch) else "other"


def interpreted(arch: str) -> bool:
    return arch in ("interpreter", "cpu")


@dataclass(frozen=True)
class GemmChoice:
    """One way to run an M x N x K GEMM: its kernel config, its Stream-K plan, the model's time."""

    config: KernelConfig
    plan: StreamKPlan
    time_us: float
    source: str  # "model" (ranked by gemm_time_us), "given" (every choice fixed by the caller)

    def describe(self) -> str:
        k, p = self.config, self.plan
        sched = schedule_label(p.schedule, p.two_tiles)
        sched += str(p.split_k) if p.split_k else ""
        return (f"{k.BLK_M}x{k.BLK_N}x{k.BLK_K}/s{k.num_stages}/w{k.num_warps}{'/tma' if k.tma else ''}/{sched}"
                f"/r{p.sk_rounds}")


def default_tma(arch: str, dtype: str) -> bool:
    """Whether A and B go through the copy engine (TMA) by default: bf16 / fp16 on NVIDIA sm_90 and newer, the
    measured ones. int8 and fp32 go through pointers: their defaults' TMA builds compile, but have not been timed."""
    return arch_family(arch) == "sm90" and dtype in ("bf16", "fp16")


# The sm_90 bf16 / fp16 tiles, smallest first: (BLK_M, BLK_N, BLK_K, stages, warps). 128 x 128 x 64 takes 5 stages
# (160 KiB): on one H100 it ran 1.5-7% faster than with 4 on six of seven shapes of M = 256-2048 (M = 256: 5-7%)
# and 2% slower on one (results/README.md "Small-M schedules by the model").
SM90_TILES = ((64, 64, 128, 6, 4), (64, 128, 128, 4, 4), (128, 128, 64, 5, 8), (128, 256, 64, 3, 8))
# shape_tile steps down to the next smaller tile while a tile has fewer tiles than this share of the programs: a
# Stream-K tile split over more than about two programs costs more in its fix-up (the last piece sums every other
# piece's partial) than the larger tile's faster MAC loop gains. Measured on one H200 (candidate sweeps 4 and 5,
# results/README.md "The GEMM alone on the tp suite"):
# 128x1280 64x64 0.88x cuBLAS vs 64x128 0.80x; 256x1280 64x64 0.71x, 64x128 0.69x vs 128x128 0.65x; 512x1280
# 64x128 0.71x vs 128x128 0.68x; and 80 tiles or more kept their tile (1024x1280, 128x5120, 256x5120).
SPLIT_TILE_FILL = 0.5


def shape_tile(M: int, N: int, dtype: str, arch: str, num_programs: int) -> KernelConfig:
    """The tile for an M x N output on `arch` (stream_k.configs' default where no measured rule applies).

    Measured rule (NVIDIA sm_90, bf16 / fp16; tools.gemm_sweep on the tp suite, one H200, results/README.md): a
    small M makes the GEMM a stream of B, read once, by tiles as tall as M and narrow enough to give every SM
    work: M <= 64 -> 64 x 64 x 128 (6 stages, 4 warps), M <= 128 -> 64 x 128 x 128 (4 stages), M <= 256 ->
    128 x 128 x 64 (5 stages, 8 warps); a larger M -> 128 x 256 x 64 (3 stages, 8 warps), or 128 x 128 when the
    128 x 256 tiles would fill less than WIDE_TILE_FILL of one wave of programs (the wide tile's faster MAC loop
    pays for the SMs it leaves idle down to about that fill: 96 tiles on 132 SMs ran faster wide, 80 narrow).
    Then, while the output has fewer than SPLIT_TILE_FILL * num_programs tiles, the next smaller tile of
    SM90_TILES."""
    base = default_config(dtype, arch)
    if arch_family(arch) != "sm90" or dtype not in ("bf16", "fp16"):
        return base
    if M <= 64:
        i = 0
    elif M <= 128:
        i = 1
    elif M <= 256 or -(-M // 128) * -(-N // 256) < WIDE_TILE_FILL * num_programs:
        i = 2
    else:
        i = 3
    while i > 0 and tile_count(M, N, SM90_TILES[i]) < SPLIT_TILE_FILL * num_programs:
        i -= 1
    bm, bn, bk, stages, warps = SM90_TILES[i]
    return base.replace(BLK_M=bm, BLK_N=bn, BLK_K=bk, num_stages=stages, num_warps=warps)


# Tiles that fill whole waves (sm_90 bf16 / fp16, TMA, data-parallel): 128 rows by a width that need not be a power
# of two (stream_k.tiles.width_parts), the widths cuBLAS picks for the same reason (results/README.md
# "The GEMM alone on the tp suite": 320 x 128 at 1024x5120 and 4096x1280, 192 x 128 at 1000x3000, 160 x 256 at
# 1000x5000). (BLK_M, BLK_N, BLK_K, stages, warps); the largest that fit shared memory without spilling.
WAVE_TILES = ((128, 320, 64, 3, 8), (128, 192, 64, 4, 8), (128, 160, 64, 4, 8))
WAVE_TILE_MIN_M = 257  # M <= 256 keeps shape_tile's small-M tiles
# Per-MAC rate of a tile relative to 128 x 256, from the bytes its K step moves through L2 per MAC: tile area over
# perimeter, to the power L2_EXPONENT (128 x 128 ran at ~0.90 of 128 x 256 on the large tp shapes: gemm-candidates
# sweeps 1 and 5), times TWO_BLOCKS[narrower block's width] for a tile of two column blocks (two MMAs per K step, A
# read twice; a 32-wide MMA is the slow one). Measured on one H100 (results/README.md "Wave tiles and split-K"): 128x320
# ran at the model's time or better, 128x192 within 8%, 128x160 ~15% slower than 0.98 would say.
L2_EXPONENT = 0.37
TWO_BLOCKS = {16: 0.75, 32: 0.85, 64: 0.98, 128: 0.98}


def tile_efficiency(blk_m: int, blk_n: int) -> float:
    """The model's per-MAC rate of a blk_m x blk_n tile relative to 128 x 256 (at most 1)."""
    ref = 128 * 256 / (128 + 256)
    eff = min(1.0, (blk_m * blk_n / (blk_m + blk_n) / ref) ** L2_EXPONENT)
    narrow = width_parts(blk_n)[1]
    return eff * (TWO_BLOCKS.get(narrow, 0.98) if narrow else 1.0)


def wave_tiles(M: int, N: int, dtype: str, arch: str) -> list[KernelConfig]:
    """The WAVE_TILES candidates for an M x N output (none off sm_90 bf16 / fp16, or for M < WAVE_TILE_MIN_M)."""
    if arch_family(arch) != "sm90" or dtype not in ("bf16", "fp16") or M < WAVE_TILE_MIN_M:
        return []
    base = default_config(dtype, arch)
    return [base.replace(BLK_M=bm, BLK_N=bn, BLK_K=bk, num_stages=st, num_warps=w) for bm, bn, bk, st, w in WAVE_TILES]


def tile_count(M: int, N: int, tile: tuple[int, ...]) -> int:
    """Output tiles of an M x N output in tiles of tile[0] x tile[1]."""
    return -(-M // tile[0]) * -(-N // tile[1])


ALL_SCHEDULES = ("dp", "hybrid", "sk", "splitk")


def tiles_measured(arch: str, dtype: str) -> bool:
    """Where the model may choose split-K and tiles other than the bucket's: sm_90 bf16 / fp16, where they were
    measured (elsewhere the schedule is dp or hybrid, the tile shape_tile's, unless the caller fixes them)."""
    return arch_family(arch) == "sm90" and dtype in ("bf16", "fp16")


def kernel_candidates(M: int, N: int, dtype: str, arch: str, tma: bool, num_programs: int,
                      op_tiles: bool = False) -> list[tuple[KernelConfig, float, tuple[str, ...]]]:
    """GEMM configs to rank for an M x N output on `arch`: (config, efficiency relative to the arch's rate, the
    schedules it may take). The bucket's tile (shape_tile) with every schedule; not op_tiles, where tiles_measured:
    the other SM90_TILES with split-K, and (TMA) the wave tiles, data-parallel."""
    base = shape_tile(M, N, dtype, arch, num_programs).replace(tma=tma)
    measured = tiles_measured(arch, dtype)
    # the op's planner weighs the GEMM's time against communication with the rate it was fitted with (1.0)
    out = [(base, tile_efficiency(base.BLK_M, base.BLK_N) if measured and not op_tiles else 1.0, ALL_SCHEDULES)]
    if op_tiles or not measured:
        return out
    if tile_count(M, N, (base.BLK_M, base.BLK_N)) < SPLITK_BELOW * num_programs:  # the bucket's tiles leave SMs idle
        for bm, bn, bk, stages, warps in SM90_TILES:
            if (bm, bn, bk) != (base.BLK_M, base.BLK_N, base.BLK_K):
                cfg = base.replace(BLK_M=bm, BLK_N=bn, BLK_K=bk, num_stages=stages, num_warps=warps)
                out.append((cfg, tile_efficiency(bm, bn), ("splitk",)))
    if tma:
        out += [(c.replace(tma=tma), tile_efficiency(c.BLK_M, c.BLK_N), ("dp",)) for c in wave_tiles(M, N, dtype, arch)]
    return out


def schedule_options(fixed: Mapping[str, Any], op_tiles: bool = False) -> list[tuple[str, bool]]:
    """(schedule, two_tiles) pairs to rank: what is fixed, the rest open. Unfixed, data-parallel, the one-tile
    hybrid and (not op_tiles) split-K (the two-tile hybrid only when two_tiles=True is given: stream_k.plan's
    docstring says why it is not chosen); a fixed hybrid with two_tiles open ranks both of its variants."""
    schedule = fixed.get("schedule", AUTO_SCHEDULE)
    opened = ["dp", "hybrid"] if op_tiles else ["dp", "hybrid", "splitk"]
    schedules = opened if schedule == AUTO_SCHEDULE else [schedule]
    if "two_tiles" in fixed and fixed["two_tiles"] is not None:
        return [(s, bool(fixed["two_tiles"])) for s in schedules]
    if schedule != AUTO_SCHEDULE:
        return [(s, two) for s in schedules for two in ((False, True) if s == "hybrid" else (False,))]
    return [(s, False) for s in schedules]


# Split-K (one piece per program): the last piece to arrive reads the tile's S partials at about this rate (one SM
# reading from L2), after a fixed cost (store, count, epilogue). Fitted on one H100 (results/README.md "Wave tiles and
# split-K": 19 split-K runs of 4 tiles at S = 3..26, model / measured 0.8-1.1): S x the partial's bytes sets how far
# S may go.
FIXUP_BYTES_PER_US = 50e3
SPLITK_BASE_US = 2.0
SPLITK_MAX = 8  # pieces per tile the candidates go up to (S = 13 and 26 ran 1.7-4x slower than S = 3)
# Split-K is a candidate where the bucket's tile gives fewer tiles than this share of the programs: at 80 of 132
# and fewer it gained 5-36% on one H100; at 128 of 132 (256x8192x14336) split-K of 128x256 ran 4% slower than dp
# (results/README.md "Wave tiles and split-K").
SPLITK_BELOW = 0.75


def gemm_time_us(plan: StreamKPlan, config: KernelConfig, dtype: str, arch: str, sms: int,
                 efficiency: float = 1.0) -> float:
    """The model's time of the GEMM alone, plus a launch: the plan's cost in MAC iterations (critical path + fix-up)
    at the device's rate per SM, or the bytes it must move at the bandwidth a GEMM reaches, whichever is longer,
    then the fix-up, which follows the K loops. The bytes are streamed by the busy programs (the work over the
    busiest program's share): fewer than STREAM_SMS_SHARE of the SMs stream slower, in proportion. Split-K: one
    piece's K loop (or the bytes), then its fix-up by bytes (FIXUP_BYTES_PER_US, SPLITK_BASE_US)."""
    per_sm = GEMM_TFLOPS[arch_family(arch)].get(dtype, 250.0) * 1e12 / max(1, sms)
    iteration_us = 2.0 * config.BLK_M * config.BLK_N * config.BLK_K / (per_sm * efficiency) * 1e6
    iteration_us *= (plan.num_programs / max(1, sms)) ** SM_SCALING
    busy_sms = plan.num_tiles * plan.iters_per_tile / max(1, plan.max_iters_per_program())
    stream_us = gemm_bytes(plan.M, plan.N, plan.K, dtype) / (GEMM_TB_S[arch_family(arch)] * 1e6)
    memory_us = stream_us * max(1.0, STREAM_SMS_SHARE * sms / busy_sms)
    if plan.split_k:
        fixup_us = plan.split_k * plan.BLK_M * plan.BLK_N * 4 / FIXUP_BYTES_PER_US + SPLITK_BASE_US
        return max(plan.max_iters_per_program() * iteration_us, memory_us) + fixup_us + LAUNCH_US
    fixup_us = plan.fixup_iters() * iteration_us  # after the K loops: not hidden under the memory time
    return max(plan.cost_iters() * iteration_us - fixup_us, memory_us) + fixup_us + LAUNCH_US


def gemm_candidates(M: int, N: int, K: int, dtype: str, num_programs: int, arch: str, *, sms: int | None = None,
                    tma: bool | None = None, fixed: Mapping[str, Any] | None = None,
                    op_tiles: bool = False) -> list[GemmChoice]:
    """Every candidate for the shape on num_programs programs (of `sms` on the device), fastest first (op_tiles: the
    module docstring)."""
    fixed = {k: v for k, v in (fixed or {}).items() if v is not None}
    tma = default_tma(arch, dtype) if tma is None else tma
    if "config" in fixed:
        kernels = [(fixed["config"], 1.0, ALL_SCHEDULES)]
    else:
        kernels = kernel_candidates(M, N, dtype, arch, tma, num_programs, op_tiles)
    rounds = fixed.get("sk_rounds", 1)
    sk_first = fixed.get("sk_first", False)
    sms = sms if sms is not None else num_programs
    source = "given" if "config" in fixed and fixed.get("schedule", AUTO_SCHEDULE) != AUTO_SCHEDULE else "model"
    out = []
    for (cfg, eff, allowed) in kernels:
        options = [(s, two) for s, two in schedule_options(fixed, op_tiles) if s in allowed]
        auto = fixed.get("schedule", AUTO_SCHEDULE) == AUTO_SCHEDULE
        if auto and not tiles_measured(arch, dtype):
            options = [(s, two) for s, two in options if s != "splitk"]
        if auto and any(s == "splitk" for s, _ in options) and splittable(M, N, K, cfg, num_programs):
            # split-K, where it applies, instead of the hybrid: measured faster on every such tp shape but one (a
            # tie), one H100 (results/README.md "Wave tiles and split-K"); the hybrid's model is optimistic there
            options = [(s, two) for s, two in options if s != "hybrid"]
        for schedule, two_tiles in options:
            if schedule == "splitk":
                for s in split_options(M, N, K, cfg, num_programs, fixed.get("split_k")):
                    plan = plan_streamk(M, N, K, cfg.BLK_M, cfg.BLK_N, cfg.BLK_K, num_programs, gsize_m=cfg.gsize_m,
                                        schedule="splitk", split_k=s)
                    out.append(GemmChoice(cfg, plan, gemm_time_us(plan, cfg, dtype, arch, sms, eff), source))
                continue
            if width_parts(cfg.BLK_N)[1] and schedule != "dp":  # such tiles run data-parallel only (stream_k.plan)
                continue
            plan = plan_streamk(M, N, K, cfg.BLK_M, cfg.BLK_N, cfg.BLK_K, num_programs, gsize_m=cfg.gsize_m,
                                schedule=schedule, two_tiles=two_tiles, sk_rounds=rounds, sk_first=sk_first)
            out.append(GemmChoice(cfg, plan, gemm_time_us(plan, cfg, dtype, arch, sms, eff), source))
    # a stable sort: on a tie the earlier candidate (the default tile, data-parallel) wins
    return sorted(out, key=lambda c: c.time_us)


def split_options(M: int, N: int, K: int, cfg: KernelConfig, num_programs: int,
                  split_k: int | None = None) -> list[int]:
    """The pieces per tile split-K may take for this tile: `split_k` if given and it fits, else from enough to keep
    half the programs busy (at least 2) to SPLITK_MAX, as far as the programs and the K steps allow (none if two
    pieces per tile do not fit)."""
    if width_parts(cfg.BLK_N)[1]:
        return []
    tiles = tile_count(M, N, (cfg.BLK_M, cfg.BLK_N))
    most = min(num_programs // tiles, -(-K // cfg.BLK_K))
    if split_k is not None:
        return [split_k] if 2 <= split_k <= most else []
    return list(range(max(2, -(-num_programs // (2 * tiles))), min(most, SPLITK_MAX) + 1))


def splittable(M: int, N: int, K: int, cfg: KernelConfig, num_programs: int, split_k: int | None = None) -> bool:
    """Whether split-K applies: at least two pieces per tile fit the programs and the K steps (and split_k, if
    given, does)."""
    return bool(split_options(M, N, K, cfg, num_programs, split_k))


def choose_gemm(M: int, N: int, K: int, dtype: str, num_programs: int, arch: str, *, sms: int | None = None,
                tma: bool | None = None, fixed: Mapping[str, Any] | None = None,
                op_tiles: bool = False) -> GemmChoice:
    """The best candidate (gemm_candidates' first)."""
    return gemm_candidates(M, N, K, dtype, num_programs, arch, sms=sms, tma=tma, fixed=fixed, op_tiles=op_tiles)[0]

"""A config made whole: `resolve_config` fills what is left unset from the planner (overlap.planner) for a target
and world size, then checks the whole (`check_resolved`: the config's own checks, overlap.config, and the mode's,
overlap.modes); `heap_bytes` sizes one op's symmetric heap. A bad value raises overlap.config.InvalidConfig."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms import ALGORITHMS
from streamk_pgas.overlap.buffers import heap_bytes as _heap_bytes
from streamk_pgas.overlap.config import (
    PLANNED_FIELDS,
    InvalidConfig,
    OverlapConfig,
    check_given,
    check_names,
    check_split,
    pow2,
)
from streamk_pgas.overlap.modes import MODE_STEPS
from streamk_pgas.overlap.planner import Problem, TuningCache, plan
from streamk_pgas.overlap.target import device_target
from streamk_pgas.spec import AUTO, Target

# A mode asked for whose predicted step is more than this many times the best mode's gets a note saying so and why
# (plan_info["slow_mode"]: benchmark.py prints it, OverlapOp warns).
SLOW_MODE = 1.5


def resolve_config(cfg: OverlapConfig, target: Target | Any, world_size: int = 1,
                   cache: TuningCache | None = None) -> OverlapConfig:
    """A copy of `cfg` with every unset field (and mode / schedule "auto") planned for its problem on `target` (a
    spec.Target, or a torch.device: its target) with overlap.planner (`cache`: its tuning cache), checked. The
    fields given are kept. A resolved config comes back as it is: the planner runs once per config."""
    check_names(cfg)
    if cfg.resolved:
        return cfg
    if not isinstance(target, Target):
        target = device_target(target if getattr(target, "type", target) == "cuda" else None)
    if cfg.algorithm not in spec.ALGORITHMS:  # a family: its algorithm of the shortest predicted step
        return _resolve_family(cfg, target, world_size, cache)
    fixed = {name: getattr(cfg, name) for name in PLANNED_FIELDS}
    problem = Problem(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, world_size)
    check_split(cfg, world_size)
    check_given(cfg)
    cache = cache if cache is not None else TuningCache()
    chosen = plan(problem, target, fixed, cache)
    info = chosen.as_dict()
    if cfg.mode != AUTO and world_size > 1 and chosen.choice.predicted_ms:
        try:  # the best mode with the same fields fixed (none, where some mode refuses one of them)
            best = plan(problem, target, {**fixed, "mode": AUTO}, cache).choice
        except InvalidConfig:
            best = chosen.choice
        if best.predicted_ms and chosen.choice.predicted_ms > SLOW_MODE * best.predicted_ms:
            info["slow_mode"] = (f"--mode {cfg.mode}: the planner predicts {chosen.choice.predicted_ms:.3f} ms a step "
                                 f"here, {chosen.choice.predicted_ms / best.predicted_ms:.1f}x its best mode "
                                 f"({best.mode}, {best.predicted_ms:.3f} ms): {MODE_STEPS[cfg.mode].slow_because}")
    out = dataclasses.replace(cfg, **chosen.choice.fields(), plan_info=info)
    check_resolved(out, world_size, target)
    return out


def _resolve_family(cfg: OverlapConfig, target: Target, world_size: int, cache: TuningCache | None) -> OverlapConfig:
    """Each algorithm of the family that has the mode asked for, resolved; the one the planner predicts the
    shortest step for (the first where nothing is predicted: the interpreter, a tuning-cache entry)."""
    options = [resolve_config(dataclasses.replace(cfg, algorithm=name), target, world_size, cache)
               for name in spec.family_algorithms(cfg.algorithm)
               if cfg.mode == AUTO or spec.ALGORITHMS[name].has_mode(cfg.mode)]
    best = min(options, key=lambda c: (c.plan_info or {}).get("predicted_ms") or math.inf)
    assert best.plan_info is not None
    best.plan_info["family"] = {"asked": cfg.algorithm, "predicted_ms": {
        c.algorithm: (c.plan_info or {}).get("predicted_ms") for c in options}}
    return best


def heap_bytes(cfg: OverlapConfig, world_size: int) -> int:
    """Bytes of symmetric heap one op allocates on each rank (an upper bound while the GEMM tile is unplanned)."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: must be a positive integer (the ranks), got {world_size!r}")
    check_names(cfg)
    if cfg.algorithm not in spec.ALGORITHMS:  # a family: enough for any of its algorithms
        return max(heap_bytes(dataclasses.replace(cfg, algorithm=name), world_size)
                   for name in spec.family_algorithms(cfg.algorithm))
    blk_m, blk_n = (cfg.kernel.BLK_M, cfg.kernel.BLK_N) if cfg.kernel else (16, 16)
    copies = cfg.mode == AUTO or MODE_STEPS[cfg.mode].copies  # auto: enough for any mode the planner may pick
    return _heap_bytes(ALGORITHMS[cfg.algorithm], cfg.m, cfg.n, cfg.k, cfg.datatype, world_size, blk_m, blk_n,
                       copies)


def check_resolved(cfg: OverlapConfig, world: int, target: Target) -> None:
    """Every refusal of a resolved config before anything is allocated or launched on `target`."""
    check_names(cfg)
    check_split(cfg, world)
    check_given(cfg)
    kc, total = cfg.kernel, cfg.total_sms
    if kc is None or total is None or cfg.gemm_sms is None or cfg.comm_tile_m is None or cfg.comm_tile_n is None \
            or cfg.sk_rounds is None or cfg.mode == AUTO:
        raise InvalidConfig("mode", "the config is not resolved (resolve_config plans what is unset)")
    for name, v, blk in (("comm_tile_m", cfg.comm_tile_m, kc.BLK_M), ("comm_tile_n", cfg.comm_tile_n, kc.BLK_N)):
        if not pow2(v) or v > blk:
            raise InvalidConfig(name, f"{name} must be a power of two that divides the GEMM tile ({blk}), got {v}")
    if not pow2(cfg.comm_threads) or not 32 <= cfg.comm_threads <= 1024:
        raise InvalidConfig("comm_threads", f"comm_threads must be a power of two in [32, 1024], got "
                                            f"{cfg.comm_threads}")
    # All programs of a launch must be resident at once (they wait on each other).
    if not 1 <= total <= target.max_programs:
        raise InvalidConfig("total_sms", f"total_sms must be in [1, {target.max_programs}] (the device's SMs: every "
                                         f"program must be resident, or waits could deadlock), got {total}")
    steps = MODE_STEPS[cfg.mode]
    if (why := steps.unavailable(target)) is not None:
        raise InvalidConfig("mode", why)
    steps.check(cfg, world, target)
    # NVIDIA's software pipeline keeps num_stages A and B tiles in shared memory (AMD's keeps one stage there)
    elem = spec.DATATYPES[cfg.datatype].bytes
    smem = (kc.BLK_M * kc.BLK_K + kc.BLK_K * kc.BLK_N) * elem * kc.num_stages
    if target.backend == "cuda" and target.shared_mem and smem > target.shared_mem:
        raise InvalidConfig("kernel", f"tiles need ~{smem} B of shared memory per program, {target.name} has "
                                      f"{target.shared_mem} B: use smaller blocks or fewer stages")
    if kc.tma and not target.tma:
        raise InvalidConfig("kernel.tma", f"tma needs an NVIDIA GPU of compute capability 9.0+ ({target.name} is "
                                          f"not one)")

"""The op's configuration: the problem (algorithm, shape, datatype) and every choice that fixes its kernels.
`resolve` fills what is left unset from the planner (overlap.planner) for a target and world size, then checks
the whole (`check`): a bad value raises `InvalidConfig`, a ValueError naming the field and what is valid."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import spec
from overlap.algorithms import ALGORITHMS
from overlap.buffers import heap_bytes as _heap_bytes
from spec import AUTO, SCHEDULE_CHOICES, Target
from stream_k.configs import KernelConfig
from stream_k.plan import MAX_SK_ROUNDS


class InvalidConfig(ValueError):
    """A bad configuration value: `field` names it (an OverlapConfig field, "kernel.BLK_M", or a dimension "m")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class OverlapConfig:
    """Everything that fixes the kernels of one op. `resolve` fills the None fields (and "auto") by planning."""

    algorithm: str
    m: int
    n: int
    k: int
    datatype: str = "bf16"
    mode: str = AUTO  # a mode (spec.MODES), or "auto": the planner's choice
    total_sms: int | None = None  # programs in all (the device's SM count)
    gemm_sms: int | None = None  # programs doing GEMM work while there are peers; the rest communicate
    kernel: KernelConfig | None = None  # GEMM tile, stages, warps, TMA
    comm_tile_m: int | None = None  # the block a communication step moves (planned: overlap.planner.comm_tile)
    comm_tile_n: int | None = None
    comm_threads: int = 256  # threads per program of the separate communication kernel
    two_tiles: bool | None = None  # with schedule hybrid: Stream-K on one more full wave of tiles (planned)
    schedule: str = AUTO  # the GEMM's Stream-K schedule (spec.SCHEDULES), or "auto": planned
    sk_first: bool = False
    sk_rounds: int | None = None
    gemm_joins_comm: bool = True
    timeout_s: float = 30.0
    # Filled by resolve: what the planner chose ({"source", "planned", "choice", ...}); not part of equality.
    plan_info: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def resolved(self) -> bool:
        return self.plan_info is not None

    def resolve(self, target: Target | Any, world_size: int = 1, cache: Any = None) -> OverlapConfig:
        """A copy with every unset field (and mode / schedule "auto") planned for this problem on `target` (a
        spec.Target, or a torch.device: its target) with overlap.planner (`cache`: its tuning cache), checked. The
        fields given are kept. A resolved config comes back as it is: the planner runs once per config."""
        check_names(self)
        if self.resolved:
            return self
        if not isinstance(target, Target):
            from overlap.target import device_target

            target = device_target(target if getattr(target, "type", target) == "cuda" else None)
        if self.algorithm not in spec.ALGORITHMS:  # a family: its algorithm of the shortest predicted step
            return self._resolve_family(target, world_size, cache)
        from overlap.planner import Problem, TuningCache, plan

        fixed = {name: getattr(self, name) for name in PLANNED_FIELDS}
        problem = Problem(self.algorithm, self.m, self.n, self.k, self.datatype, world_size)
        check_split(self, world_size)
        check_given(self)
        chosen = plan(problem, target, fixed, cache if cache is not None else TuningCache())
        out = dataclasses.replace(self, **chosen.choice.fields(), plan_info=chosen.as_dict())
        check(out, world_size, target)
        return out


    def _resolve_family(self, target: Target, world_size: int, cache: Any) -> OverlapConfig:
        """Each algorithm of the family that has the mode asked for, resolved; the one the planner predicts the
        shortest step for (the first where nothing is predicted: the interpreter, a tuning-cache entry)."""
        options = [dataclasses.replace(self, algorithm=name).resolve(target, world_size, cache)
                   for name in spec.family_algorithms(self.algorithm)
                   if self.mode == AUTO or spec.ALGORITHMS[name].has_mode(self.mode)]
        best = min(options, key=lambda c: (c.plan_info or {}).get("predicted_ms") or math.inf)
        assert best.plan_info is not None
        best.plan_info["family"] = {"asked": self.algorithm, "predicted_ms": {
            c.algorithm: (c.plan_info or {}).get("predicted_ms") for c in options}}
        return best


# What the planner fills when unset (OverlapConfig's field names).
PLANNED_FIELDS = ("mode", "total_sms", "gemm_sms", "kernel", "sk_rounds", "schedule", "two_tiles", "comm_tile_m",
                  "comm_tile_n")


def heap_bytes(cfg: OverlapConfig, world_size: int) -> int:
    """Bytes of symmetric heap one op allocates on each rank (an upper bound while the GEMM tile is unplanned)."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: must be a positive integer (the ranks), got {world_size!r}")
    check_names(cfg)
    if cfg.algorithm not in spec.ALGORITHMS:  # a family: enough for any of its algorithms
        return max(heap_bytes(dataclasses.replace(cfg, algorithm=name), world_size)
                   for name in spec.family_algorithms(cfg.algorithm))
    blk_m, blk_n = (cfg.kernel.BLK_M, cfg.kernel.BLK_N) if cfg.kernel else (16, 16)
    from overlap.modes import MODE_STEPS

    copies = cfg.mode == AUTO or MODE_STEPS[cfg.mode].copies  # auto: enough for any mode the planner may pick
    return _heap_bytes(ALGORITHMS[cfg.algorithm], cfg.m, cfg.n, cfg.k, cfg.datatype, world_size, blk_m, blk_n,
                       copies)


# ---- checks ---------------------------------------------------------------------------------------------

_INTS = ("m", "n", "k", "comm_threads")  # OverlapConfig's integer fields; the optional ones may be None
_OPTIONAL_INTS = ("total_sms", "gemm_sms", "comm_tile_m", "comm_tile_n", "sk_rounds")
_BOOLS = ("sk_first", "gemm_joins_comm")  # two_tiles may be None too


def check_types(cfg: OverlapConfig) -> None:
    """Every field has its type (a string for a number would fail later with an error naming no field), and the
    wait timeout is a finite number of seconds > 0."""
    for name in (*_INTS, *_OPTIONAL_INTS):
        v = getattr(cfg, name)
        if (v is not None or name in _INTS) and (isinstance(v, bool) or not isinstance(v, int)):
            raise InvalidConfig(name, f"{name} must be an integer, got {v!r} ({type(v).__name__})")
    for name in (*_BOOLS, "two_tiles"):
        v = getattr(cfg, name)
        if not isinstance(v, bool) and not (v is None and name == "two_tiles"):
            raise InvalidConfig(name, f"{name} must be True or False, got {v!r}")
    t = cfg.timeout_s
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf:
        raise InvalidConfig("timeout_s", f"timeout_s must be a positive, finite number of seconds, got {t!r}")
    if cfg.kernel is not None and not isinstance(cfg.kernel, KernelConfig):
        raise InvalidConfig("kernel", f"kernel must be a stream_k.KernelConfig or None, got {cfg.kernel!r}")


def check_names(cfg: OverlapConfig) -> None:
    """Every field has its type (check_types); the algorithm, mode, datatype and schedule are known, and the mode
    is built for the algorithm."""
    check_types(cfg)
    families = [f for f in spec.FAMILIES if len(spec.family_algorithms(f)) > 1]
    if cfg.algorithm not in spec.ALGORITHMS and cfg.algorithm not in families:
        raise InvalidConfig("algorithm", f"algorithm must be one of {', '.join(spec.ALGORITHMS)}, or a family whose "
                                         f"algorithms the planner chooses from ({', '.join(families)}), got "
                                         f"{cfg.algorithm!r}")
    if cfg.mode != AUTO and cfg.mode not in spec.MODES:
        raise InvalidConfig("mode", f"mode must be one of {AUTO}, {', '.join(spec.MODES)}, got {cfg.mode!r}")
    names = (cfg.algorithm,) if cfg.algorithm in spec.ALGORITHMS else spec.family_algorithms(cfg.algorithm)
    if cfg.mode != AUTO and not any(spec.ALGORITHMS[a].has_mode(cfg.mode) for a in names):
        able = ", ".join(a.name for a in spec.ALGORITHMS.values() if a.has_mode(cfg.mode))
        raise InvalidConfig("mode", f"mode {cfg.mode} is built for {able}, not {cfg.algorithm}")
    if cfg.datatype not in spec.DATATYPES:
        raise InvalidConfig("datatype", f"datatype must be one of {', '.join(spec.DATATYPES)}, got {cfg.datatype!r}")
    if cfg.schedule not in SCHEDULE_CHOICES:
        raise InvalidConfig("schedule", f"schedule must be one of {', '.join(SCHEDULE_CHOICES)}, got "
                                        f"{cfg.schedule!r}")


def check_split(cfg: OverlapConfig, world: int) -> None:
    """Every dimension is positive and every dimension the algorithm splits divides by the world size."""
    for dim in ("m", "n", "k"):
        if getattr(cfg, dim) < 1:
            raise InvalidConfig(dim, f"{dim.upper()} must be >= 1, got {getattr(cfg, dim)}")
    dim = spec.ALGORITHMS[cfg.algorithm].family.unsplittable(cfg.m, cfg.n, cfg.k, world)
    if dim is not None:
        raise InvalidConfig(dim, f"{cfg.algorithm} splits {dim.upper()} over {world} ranks: must be a multiple of "
                                 f"{world}, got {getattr(cfg, dim)}")


def _pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def check_kernel(kc: KernelConfig, datatype: str) -> None:
    """The GEMM config's own ranges."""
    for name in ("BLK_M", "BLK_N", "BLK_K"):
        v = getattr(kc, name)
        if not _pow2(v) or not 16 <= v <= 512:
            raise InvalidConfig(f"kernel.{name}", f"{name} must be a power of two in [16, 512], got {v}")
    if not 1 <= kc.num_stages <= 8:
        raise InvalidConfig("kernel.num_stages", f"num_stages must be in [1, 8], got {kc.num_stages}")
    if kc.num_warps not in (1, 2, 4, 8, 16):
        raise InvalidConfig("kernel.num_warps", f"num_warps must be one of 1, 2, 4, 8, 16, got {kc.num_warps}")
    if kc.gsize_m < 1:
        raise InvalidConfig("kernel.gsize_m", f"gsize_m must be >= 1, got {kc.gsize_m}")
    if datatype == "int8" and kc.BLK_K < 32:
        raise InvalidConfig("kernel.BLK_K", f"BLK_K must be >= 32 for int8 inputs (tl.dot's minimum K), got "
                                            f"{kc.BLK_K}")


def check_given(cfg: OverlapConfig) -> None:
    """What can be checked of the fields given, before the planner fills the rest."""
    if cfg.kernel is not None:
        check_kernel(cfg.kernel, cfg.datatype)
    if cfg.sk_rounds is not None and not 1 <= cfg.sk_rounds <= MAX_SK_ROUNDS:
        raise InvalidConfig("sk_rounds", f"sk_rounds must be in 1..{MAX_SK_ROUNDS}, got {cfg.sk_rounds}")
    for name in ("total_sms", "gemm_sms", "comm_tile_m", "comm_tile_n"):
        v = getattr(cfg, name)
        if v is not None and v < 1:
            raise InvalidConfig(name, f"{name} must be >= 1, got {v}")


def check(cfg: OverlapConfig, world: int, target: Target) -> None:
    """Every refusal of a resolved config before anything is allocated or launched on `target`."""
    check_names(cfg)
    check_split(cfg, world)
    check_given(cfg)
    kc, total = cfg.kernel, cfg.total_sms
    if kc is None or total is None or cfg.gemm_sms is None or cfg.comm_tile_m is None or cfg.comm_tile_n is None \
            or cfg.sk_rounds is None or cfg.mode == AUTO:
        raise InvalidConfig("mode", "the config is not resolved (OverlapConfig.resolve plans what is unset)")
    for name, v, blk in (("comm_tile_m", cfg.comm_tile_m, kc.BLK_M), ("comm_tile_n", cfg.comm_tile_n, kc.BLK_N)):
        if not _pow2(v) or v > blk:
            raise InvalidConfig(name, f"{name} must be a power of two that divides the GEMM tile ({blk}), got {v}")
    if not _pow2(cfg.comm_threads) or not 32 <= cfg.comm_threads <= 1024:
        raise InvalidConfig("comm_threads", f"comm_threads must be a power of two in [32, 1024], got "
                                            f"{cfg.comm_threads}")
    # All programs of a launch must be resident at once (they wait on each other).
    if not 1 <= total <= target.max_programs:
        raise InvalidConfig("total_sms", f"total_sms must be in [1, {target.max_programs}] (the device's SMs: every "
                                         f"program must be resident, or waits could deadlock), got {total}")
    from overlap.modes import MODE_STEPS

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

"""The op's configuration: the problem (algorithm, shape, datatype) and every choice that fixes its kernels, and
the checks of its fields that need nothing but the config: a bad value raises `InvalidConfig`, a ValueError
naming the field and what is valid. It imports nothing of the op, so every module of the op may use it; a config
is planned and checked as a whole above the planner and the modes (overlap.resolution)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from streamk_pgas import spec
from streamk_pgas.spec import AUTO, SCHEDULE_CHOICES
from streamk_pgas.stream_k.configs import KernelConfig
from streamk_pgas.stream_k.plan import MAX_SK_ROUNDS


class SlowModeWarning(UserWarning):
    """A mode asked for that the planner predicts far behind the best mode for the problem (the message says how
    far and why)."""


class InvalidConfig(ValueError):
    """A bad configuration value: `field` names it (an OverlapConfig field, "kernel.BLK_M", or a dimension "m")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class OverlapConfig:
    """Everything that fixes the kernels of one op. overlap.resolution.resolve_config fills the None fields (and
    "auto") by planning."""

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


# What the planner fills when unset (OverlapConfig's field names).
PLANNED_FIELDS = ("mode", "total_sms", "gemm_sms", "kernel", "sk_rounds", "schedule", "two_tiles", "comm_tile_m",
                  "comm_tile_n")


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


def pow2(x: int) -> bool:
    """x is a power of two (1 included)."""
    return x > 0 and (x & (x - 1)) == 0


def check_kernel(kc: KernelConfig, datatype: str) -> None:
    """The GEMM config's own ranges."""
    for name in ("BLK_M", "BLK_N", "BLK_K"):
        v = getattr(kc, name)
        if not pow2(v) or not 16 <= v <= 512:
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

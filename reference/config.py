"""The reference's command line: collectives, their variants, flags, and every check made before start.

Pure Python (torch is not imported here), so run.sh's help, results/sweep.py and the argument
checks stay fast. `parse_config(argv, world_size)` returns a `RefConfig` or raises `ConfigError`
naming the flag and its valid range; `check_before_start` adds what needs the file system or the
device (output paths that cannot be written, --device cuda without a GPU). `python -m reference`
prints either as one line on stderr (rank 0 only) and exits with code 2 on every rank, before any
process group exists.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamk_pgas import spec
from streamk_pgas.harness.checks import (
    MAX_DIM,
    MAX_ITERS,
    MAX_SEED,
    ConfigError,
    OneLineParser,
    check_output_path,
    int_in,
    timeout_seconds,
)
from streamk_pgas.harness.config import DefaultsOnce
from streamk_pgas.harness.timing import START_SYNCS

# Variant key -> what it runs (spec.BASELINES). Every variant writes one record.
VARIANT_HELP: dict[str, str] = {key: b.text for key, b in spec.BASELINES.items()}

# --collective value -> the variants it runs: each one alone, torch's two symmetric-memory all-reduces, the
# equal-output peers of each of our algorithms whose name no variant has (the baselines of its family), every
# variant.
COLLECTIVES: dict[str, tuple[str, ...]] = {
    **{key: (key,) for key in spec.BASELINES},
    "symm_mem_all_reduce": ("symm_mem_two_shot", "symm_mem_one_shot"),
    **{name: spec.peers(alg.family.name) for name, alg in spec.ALGORITHMS.items() if name not in spec.BASELINES},
    "all": tuple(spec.BASELINES),
}

# Variant -> the dimensions that are split over the world (each must be a multiple of the world size).
SPLIT_DIMS: dict[str, tuple[str, ...]] = {key: b.family.split_dims() for key, b in spec.BASELINES.items()}

GATHER_LAYOUTS = ("row_major", "rank_blocked")

# The problem when -m/-n/-k/--datatype are left out: benchmark.py's on the same device (harness.config): 8192^3 bf16
# on a GPU; on the CPU (torch and gloo) its small shape, rounded up to a multiple of the ranks, in fp32.
GPU_PROBLEM = {"m": 8192, "n": 8192, "k": 8192, "datatype": "bf16"}


def on_gpu(device: str) -> bool:
    """Whether --device means a GPU (auto: torch sees one; torch is imported only then)."""
    if device != "auto":
        return device == "cuda"
    import torch

    return torch.cuda.is_available()


def default_problem(device: str, world_size: int) -> dict[str, Any]:
    """-m, -n, -k and --datatype when left out, for --device on `world_size` ranks."""
    if on_gpu(device):
        return dict(GPU_PROBLEM)
    from streamk_pgas.harness.config import CPU_DEFAULTS, cpu_default_dim

    return {**{d: cpu_default_dim(d, world_size) for d in ("m", "n", "k")}, "datatype": CPU_DEFAULTS["datatype"]}


@dataclass
class RefConfig:
    collective: str = "all_reduce"
    m: int = 8192
    n: int = 8192
    k: int = 8192
    datatype: str = "bf16"
    iters: int = 50
    warmup: int = 10
    validate: bool = False
    output_file: str | None = None
    output_dir: str | None = None
    seed: int = 0
    timeout_s: float = 300.0
    device: str = "auto"
    gather_layout: str = "row_major"
    start_sync: str = "device"
    graph: bool = False
    quiet: bool = False

    @property
    def variants(self) -> tuple[str, ...]:
        return COLLECTIVES[self.collective]

    def as_flags(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python -m reference",
        description="Vendor-library baselines of the distributed GEMMs (torch.distributed: NCCL on NVIDIA, "
        "RCCL on AMD, gloo on the CPU), timed and logged like benchmark.py. Run under mpirun or torchrun.",
        epilog="collectives: " + "; ".join(
            f"{c} = {', '.join(v)}" if c == "all" or len(v) > 1 else f"{c}: {VARIANT_HELP[v[0]]}"
            for c, v in COLLECTIVES.items()
        ),
        formatter_class=DefaultsOnce,
    )
    a = p.add_argument
    a("--collective", default="all_reduce", choices=tuple(COLLECTIVES), help="which baseline(s) to run")
    dim = int_in(1, MAX_DIM)  # cuBLAS / hipBLAS take 32-bit dimensions
    by_device = "(default: 8192 on a GPU; on the CPU 48, rounded up to a multiple of the ranks)"
    a("-m", "--m", dest="m", type=dim, default=None, help=f"rows of A and C {by_device}")
    a("-n", "--n", dest="n", type=dim, default=None, help=f"columns of B and C {by_device}")
    a("-k", "--k", dest="k", type=dim, default=None, help=f"columns of A / rows of B {by_device}")
    a("--datatype", default=None, choices=tuple(spec.DATATYPES),
      help="input datatype (int8 accumulates into int32) (default: bf16 on a GPU, fp32 on the CPU)")
    a("--iters", type=int_in(1, MAX_ITERS), default=50, help="timed iterations (medians are reported)")
    a("--warmup", type=int_in(0, MAX_ITERS), default=10, help="untimed warm-up iterations (NCCL warm-up included)")
    a("--validate", action="store_true", help="compare with a float64 product of the same inputs")
    a("--output_file", default=None, help="JSON log path (rank 0 writes it; with several variants, "
      "each gets '.<variant>' before the suffix)")
    a("--output_dir", default=None,
      help="folder for one JSON log per variant, named ref_<variant>_<datatype>_<M>x<N>x<K>_w<world size>.json")
    a("--seed", type=int_in(0, MAX_SEED), default=0, help="inputs of rank r come from seed + 1 + r (shared: seed)")
    a("--timeout_s", type=timeout_seconds, default=300.0,
      help="process-group init and every collective give up after this many seconds (on a GPU: a device that "
      "completes no work for this long ends the rank)")
    a("--device", default="auto", choices=("auto", "cuda", "cpu"), help="auto: the GPU if torch sees one")
    a("--gather_layout", default="row_major", choices=GATHER_LAYOUTS,
      help="all_gather: row_major ends with a contiguous M x N C (the gathered [W, M, N/W] blocks are "
      "transposed into it, timed as 'layout'); rank_blocked stops at the [W, M, N/W] buffer")
    a("--quiet", action="store_true", help="no progress lines on long runs (rank 0 prints one every ~10 s)")
    a("--graph", action="store_true",
      help="also capture one step in a CUDA graph (GPU only) and time its replays back to back")
    a("--start_sync", default="device", choices=START_SYNCS,
      help="how timed iterations start together: device (a one-element all-reduce on the device group right "
      "before the start event, so every rank's stream starts together) or host (a host barrier only)")
    return p


def check_config(cfg: RefConfig, world_size: int) -> None:
    """Refusals that need the world size (all flag types and ranges were checked by the parser)."""
    for flag in ("output_file", "output_dir"):
        if getattr(cfg, flag) == "":
            raise ConfigError(f"--{flag}", "is empty: give a path, or leave the flag out")
    if cfg.output_file and cfg.output_dir:
        raise ConfigError("--output_file", "give either --output_file or --output_dir, not both")
    for variant in cfg.variants:
        for dim in SPLIT_DIMS[variant]:
            value = getattr(cfg, dim)
            if value % world_size:
                raise ConfigError(
                    f"-{dim}",
                    f"{variant} splits {dim.upper()} over {world_size} ranks: must be a positive multiple of "
                    f"{world_size}, got {value}",
                )


def parse_config(argv: list[str] | None, world_size: int) -> RefConfig:
    """Flags -> a checked RefConfig. Raises ConfigError naming the first bad flag."""
    ns = build_parser().parse_args(argv)
    values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(RefConfig)}
    if any(values[d] is None for d in GPU_PROBLEM):
        problem = default_problem(values["device"], world_size)
        values.update({d: problem[d] for d in GPU_PROBLEM if values[d] is None})
    cfg = RefConfig(**values)
    check_config(cfg, world_size)
    return cfg


def default_log_name(variant: str, datatype: str, m: int, n: int, k: int, world_size: int) -> str:
    """File name of one variant's record in --output_dir (results/sweep.py predicts it for resuming)."""
    return f"ref_{variant}_{datatype}_{m}x{n}x{k}_w{world_size}.json"


def output_paths(cfg: RefConfig, world_size: int) -> dict[str, Path | None]:
    """Where each variant's record goes (None: not written)."""
    out: dict[str, Path | None] = {}
    for variant in cfg.variants:
        if cfg.output_dir:
            out[variant] = Path(cfg.output_dir) / default_log_name(
                variant, cfg.datatype, cfg.m, cfg.n, cfg.k, world_size)
        elif cfg.output_file:
            path = Path(cfg.output_file)
            out[variant] = path if len(cfg.variants) == 1 else path.with_name(f"{path.stem}.{variant}{path.suffix}")
        else:
            out[variant] = None
    return out


def check_before_start(cfg: RefConfig, world_size: int) -> None:
    """What parse_config cannot see from the flags alone, checked before any work: every log can be
    written (no part of the path is a file, the nearest existing folder takes a new file), and
    --device cuda has a GPU (torch is imported only then)."""
    if cfg.output_dir:
        check_output_path("--output_dir", cfg.output_dir, directory=True)
    elif cfg.output_file:
        for path in output_paths(cfg, world_size).values():
            if path is not None:
                check_output_path("--output_file", path)
    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("--device", "cuda: torch sees no GPU on this machine; use auto or cpu")

"""The JSON run log: one object per run, written by rank 0 of benchmark.py and of reference/.

Both producers fill the same schema (`SCHEMA`), so results/plot.py reads them side by side.
`check_record` is the schema's single definition of what a valid record holds; tests use it.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from streamk_pgas import spec
from streamk_pgas.harness import sysinfo
from streamk_pgas.iris_ops.bootstrap import launcher_rank

SCHEMA = "streamk-pgas/run-log/1"

# key -> type(s) every record has at top level.
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": str,
    "producer": str,          # "benchmark" (this project) or "reference" (vendor library)
    "algorithm": str,         # an algorithm of spec.ALGORITHMS, or a baseline's collective (spec.BASELINES)
    "implementation": str,    # e.g. "streamk-pgas", "cublas+nccl", "torch-symm-mem"
    "mode": (str, type(None)),  # overlap mode for benchmark.py; None for references
    "world_size": int,
    "flags": dict,
    "sizes": dict,
    "device": dict,
    "software": dict,
    "git": dict,
    "timing": dict,
    "validation": dict,
    "timestamp": str,
}
SIZE_KEYS = ("m", "n", "k", "datatype", "local_m", "local_n", "local_k", "flops", "comm_bytes")
TIMING_KEYS = ("iters", "warmup", "e2e_ms", "tflops", "kernels_ms")
VALIDATION_KEYS = ("enabled", "passed")


def problem_sizes(family: spec.Family, m: int, n: int, k: int, datatype: str, world_size: int) -> dict[str, Any]:
    """Global and per-rank sizes of C = A @ B sharded over the world as the family shards it (spec.sharding), as
    every producer reports them: local_m x local_n x local_k is each rank's GEMM, comm_bytes the object each
    rank contributes to the collective (its partial, its block of C, or its rows of A)."""
    dt = spec.DATATYPES[datatype]
    local_m, local_n, local_k = family.gemm_shape(m, n, k, world_size)
    return {
        "m": m, "n": n, "k": k, "datatype": datatype,
        "local_m": local_m, "local_n": local_n, "local_k": local_k,
        "flops": 2 * m * n * k,                      # the whole distributed product
        "flops_per_rank": 2 * local_m * local_n * local_k,
        "comm_bytes": family.payload_bytes(m, n, k, world_size, dt.bytes, dt.output_bytes),
    }


def summarize_ms(samples: list[float]) -> dict[str, float]:
    """Median and spread of per-iteration times in milliseconds."""
    if not samples:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "p10": float("nan"),
                "p90": float("nan"), "count": 0}
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p * (len(ordered) - 1))))]

    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1],
            "p10": pct(0.10), "p90": pct(0.90), "count": len(ordered)}


def flops_unit(tflops: list[float]) -> tuple[float, str]:
    """(scale, unit) for rates given in TFLOP/s: the largest unit in which the largest finite value is at least 1
    (a CPU's 1.3e-06 TFLOP/s reads as 1.3 MFLOP/s)."""
    top = max((v for v in tflops if v is not None and math.isfinite(v)), default=1.0)
    for scale, unit in ((1.0, "TFLOP/s"), (1e3, "GFLOP/s"), (1e6, "MFLOP/s"), (1e9, "kFLOP/s")):
        if top * scale >= 1:
            return scale, unit
    return 1e12, "FLOP/s"


def rate_text(tflops: float | None) -> str:
    """A per-GPU rate for a terminal line, three significant digits in the unit that reads (never 0.0 TFLOP/s)."""
    if tflops is None or not math.isfinite(tflops) or tflops <= 0:
        return "n/a FLOP/s"
    scale, unit = flops_unit([tflops])
    return f"{tflops * scale:.3g} {unit}"


# A run whose end-to-end p90 / p10 exceeds this is flagged `unstable`: its median may not be representative.
UNSTABLE_SPREAD = 1.10


def spread(stats: dict[str, float]) -> float | None:
    """p90 / p10 of a summarize_ms result (None without samples or with p10 <= 0)."""
    p10, p90 = stats.get("p10"), stats.get("p90")
    if not stats.get("count") or p10 is None or p90 is None or not p10 > 0:
        return None
    return p90 / p10


def timing_section(
    e2e_samples_ms: list[float],
    kernel_samples_ms: dict[str, list[float]],
    flops_per_rank: int,
    iters: int,
    warmup: int,
    warn: bool | None = None,
) -> dict[str, Any]:
    """Medians end to end and per kernel; TFLOP/s is the per-GPU rate (work per rank / e2e median).

    The spread of the end-to-end times is recorded too: `e2e_p10_ms`, `e2e_p90_ms`, `e2e_p90_over_p10`,
    and `unstable` (p90 / p10 > UNSTABLE_SPREAD). An unstable run is reported with one line on stderr,
    by rank 0 (warn=None: the launcher's rank 0; True / False: always / never)."""
    e2e = summarize_ms(e2e_samples_ms)
    tflops = flops_per_rank / (e2e["median"] * 1e-3) / 1e12 if e2e["count"] and e2e["median"] > 0 else None
    ratio = spread(e2e)
    unstable = ratio is not None and ratio > UNSTABLE_SPREAD
    if unstable and (warn if warn is not None else launcher_rank() == 0):
        print(f"warning: unstable timing: end-to-end p90 / p10 = {ratio:.3f} (> {UNSTABLE_SPREAD:.2f}; p10 "
              f"{e2e['p10']:.4f} ms, p90 {e2e['p90']:.4f} ms over {e2e['count']} iterations): the median "
              f"{e2e['median']:.4f} ms may not be representative", file=sys.stderr, flush=True)
    return {
        "iters": iters,
        "warmup": warmup,
        "e2e_ms": e2e["median"],
        "e2e_stats": e2e,
        "e2e_p10_ms": e2e["p10"] if e2e["count"] else None,
        "e2e_p90_ms": e2e["p90"] if e2e["count"] else None,
        "e2e_p90_over_p10": ratio,
        "unstable": unstable,
        "unstable_threshold": UNSTABLE_SPREAD,
        "tflops": tflops,
        "kernels_ms": {name: summarize_ms(s)["median"] for name, s in kernel_samples_ms.items()},
        "kernels_stats": {name: summarize_ms(s) for name, s in kernel_samples_ms.items()},
    }


def new_record(
    *,
    producer: str,
    algorithm: str,
    implementation: str,
    mode: str | None,
    world_size: int,
    flags: dict[str, Any],
    sizes: dict[str, Any],
    timing: dict[str, Any],
    validation: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "producer": producer,
        "algorithm": algorithm,
        "implementation": implementation,
        "mode": mode,
        "world_size": world_size,
        "flags": flags,
        "sizes": sizes,
        "device": sysinfo.device_info(),
        "software": sysinfo.software_versions(),
        "git": sysinfo.git_info(),
        "environment": sysinfo.nvlink_env(),
        "timing": timing,
        "validation": validation,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if extra:
        record.update(extra)
    return record


def check_record(record: dict[str, Any]) -> list[str]:
    """Every way `record` departs from the schema (empty list: valid)."""
    problems = []
    for key, types in REQUIRED.items():
        if key not in record:
            problems.append(f"missing key {key!r}")
        elif not isinstance(record[key], types):
            problems.append(f"{key!r} has type {type(record[key]).__name__}")
    if record.get("schema") != SCHEMA:
        problems.append(f"schema is {record.get('schema')!r}, expected {SCHEMA!r}")
    for section, keys in (("sizes", SIZE_KEYS), ("timing", TIMING_KEYS), ("validation", VALIDATION_KEYS)):
        sub = record.get(section)
        if isinstance(sub, dict):
            problems += [f"missing {section}.{k}" for k in keys if k not in sub]
    return problems


def strict(obj: Any, where: str = "", found: list[str] | None = None) -> Any:
    """`obj` with every NaN or infinite float replaced by None (strict JSON has neither), the dotted paths of
    those values appended to `found`."""
    if isinstance(obj, float) and not math.isfinite(obj):
        if found is not None:
            found.append(where)
        return None
    if isinstance(obj, dict):
        return {k: strict(v, f"{where}.{k}" if where else str(k), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def to_json(record: dict[str, Any]) -> str:
    """The record as strict JSON (any parser reads it): a NaN or infinite value is written as null and its path
    listed under "nonfinite"."""
    found: list[str] = []
    clean = strict(json.loads(json.dumps(record, default=_json_default)), found=found)
    if found:
        clean["nonfinite"] = found
    return json.dumps(clean, indent=2, sort_keys=False, allow_nan=False) + "\n"


def write_record(record: dict[str, Any], path: str | Path) -> Path:
    """Write one record as pretty, strict JSON (to_json); parent folders are created. Returns the path written;
    an OSError names it."""
    problems = check_record(record)
    if problems:
        raise ValueError("run log does not match its schema: " + "; ".join(problems))
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_json(record))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write the run log {path}: {exc.strerror}") from None
    return path


def read_records(paths: list[str | Path]) -> list[dict[str, Any]]:
    """All run-log records in the given files and folders (folders are searched recursively)."""
    records = []
    for p in map(Path, paths):
        files = sorted(p.rglob("*.json")) if p.is_dir() else [p]
        for f in files:
            try:
                obj = json.loads(f.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(obj, dict) and obj.get("schema") == SCHEMA:
                obj["_path"] = str(f)
                records.append(obj)
    return records


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:
        pass
    return str(obj)

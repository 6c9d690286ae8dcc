"""How far the GEMM's time model (stream_k.select) is from measured sweeps: per shape, the candidate the model ranks
first among those a sweep timed, against the fastest one measured.

    python -m tools.gemm_model_check results/logs/h100x1/explore-2329a3d/a.csv results/logs/h100x1/gemm-wave-*/?.csv

Reads `tools.gemm_sweep` CSVs (one or more; rows of one shape may come from several files), takes every timed
candidate row (its `chosen` tile, `schedule`, `loop_ms`), plans it again for the CSV's shape on --programs
programs and asks `stream_k.select.gemm_time_us` for its time. Prints per shape the best measured candidate, the
model's pick and what the pick measured; then the geomean over shapes of (the pick's time / the best time): 1.0
means the model picks the fastest candidate everywhere. Compare the model's constants on the sweeps they were fitted
on and on new ones before changing them.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from streamk_pgas.harness.checks import ConfigError, OneLineParser
from streamk_pgas.stream_k.configs import default_config
from streamk_pgas.stream_k.plan import plan_streamk
from streamk_pgas.stream_k.select import gemm_time_us, tile_efficiency, tiles_measured
from streamk_pgas.tools.gemm_sweep import GemmCandidate, parse_candidate


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = OneLineParser(prog="python -m tools.gemm_model_check",
                       description="The GEMM model's pick against the fastest measured candidate per shape.")
    ap.add_argument("csv", nargs="+", help="tools.gemm_sweep CSV files")
    ap.add_argument("--arch", default="sm90", help="the arch the sweeps ran on (default sm90)")
    ap.add_argument("--datatype", default="bf16", help="the sweeps' datatype (default bf16)")
    ap.add_argument("--programs", type=int, default=132, help="programs the sweeps ran on (default 132)")
    args = ap.parse_args(argv)
    for f in args.csv:
        if not Path(f).is_file():
            raise ConfigError("csv", f"no such file: {f}")
    if args.programs < 1:
        raise ConfigError("--programs", f"must be >= 1; got {args.programs}")
    return args


def candidate_rows(paths: list[str]) -> list[dict[str, Any]]:
    """Every timed row that is not cuBLAS, once per (shape, tile, schedule)."""
    import pandas as pd

    rows = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    rows = rows[(rows["candidate"] != "cublas") & rows["loop_ms"].notna() & rows["chosen"].notna()]
    rows = rows.drop_duplicates(["shape", "chosen", "schedule"])
    return rows.to_dict("records")


def model_us(row: dict[str, Any], dtype: str, arch: str, programs: int) -> float:
    """The model's time of the row's tile and schedule (`chosen`: BMxBNxBK/sS/wW[/tma]; `schedule` as the sweep
    writes it: dp, hybrid1, hybrid2, sk, splitkS) for the row's shape, planned as the sweep plans its candidates."""
    M, N, K = (int(x) for x in str(row["shape"]).split("x"))
    parts = str(row["chosen"]).split("/")
    cand = parse_candidate("/".join([*parts[:3], str(row["schedule"])]))
    assert isinstance(cand, GemmCandidate)
    cfg = default_config(dtype, arch).replace(BLK_M=cand.blk_m, BLK_N=cand.blk_n, BLK_K=cand.blk_k,
                                             num_stages=cand.stages, num_warps=cand.warps, tma="tma" in parts)
    plan = plan_streamk(M, N, K, cand.blk_m, cand.blk_n, cand.blk_k, programs, gsize_m=cfg.gsize_m,
                        **cand.plan_args())
    eff = tile_efficiency(cand.blk_m, cand.blk_n) if tiles_measured(arch, dtype) else 1.0  # as select rates it
    return gemm_time_us(plan, cfg, dtype, arch, programs, eff)


def compare(rows: list[dict[str, Any]], dtype: str, arch: str, programs: int) -> tuple[list[str], float]:
    """Per shape one line (best measured, the model's pick and what it measured) and the geomean regret."""
    by_shape: dict[str, list[tuple[float, float, dict[str, Any]]]] = {}
    for r in rows:
        by_shape.setdefault(str(r["shape"]), []).append((model_us(r, dtype, arch, programs), r["loop_ms"] * 1e3, r))
    lines, regret = [], []
    for shape, cands in by_shape.items():
        pick = min(cands, key=lambda c: c[0])
        best = min(cands, key=lambda c: c[1])
        regret.append(pick[1] / best[1])
        mark = "" if pick[1] <= best[1] * 1.03 else "  <- more than 3% off"
        lines.append(f"{shape:>16} best {best[2]['chosen']}/{best[2]['schedule']} {best[1]:7.1f} us "
                     f"(model {best[0]:6.1f}); model's pick {pick[2]['chosen']}/{pick[2]['schedule']} "
                     f"{pick[1]:7.1f} us (model {pick[0]:6.1f}){mark}")
    return lines, math.exp(sum(math.log(x) for x in regret) / len(regret)) if regret else float("nan")


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except ConfigError as e:
        print(f"gemm_model_check: error: {e}", file=sys.stderr)
        return 2
    rows = candidate_rows(args.csv)
    if not rows:
        print(f"no timed candidate rows in {', '.join(args.csv)}", file=sys.stderr)
        return 1
    lines, regret = compare(rows, args.datatype, args.arch, args.programs)
    print("\n".join(lines))
    print(f"{len(lines)} shapes: the model's pick takes {regret:.4f}x the best measured candidate's time (geomean)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

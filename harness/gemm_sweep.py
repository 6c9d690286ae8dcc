"""GEMM candidates per shape beside cuBLAS, on one GPU: which tile, Stream-K schedule and rounds win where.

    python -m harness.gemm_sweep --shapes 512x8192x4096,4096x4096x28672 --csv out.csv
    python -m harness.gemm_sweep --shapes 1024x4096x8192 --candidates 128x256x64/s3/w8/hybrid/r1,128x256x64/s3/w8/dp

A candidate is `BMxBNxBK/sSTAGES/wWARPS/SCHEDULE[/rROUNDS]`, SCHEDULE one of auto (StreamKGemm's default: dp
or hybrid1, whichever stream_k.plan's cost model ranks first), hybrid (DP waves plus a Stream-K share of one to
two tiles per program: the default before session 7), hybrid1 (hybrid with a share of the leftover tiles only),
dp, sk. The row's `schedule` column names the plan that ran. Every candidate of a shape runs on the same random
inputs (never zeros), TMA on (the GPU default), checked against torch.matmul; cuBLAS is timed before and after
the candidates and its median over both is the baseline. Times are triton.testing.do_bench medians (L2 flushed
before each run: an isolated call, which on a small shape counts host launch time the device waits on), and
back to back (`loop_ms`: LOOP_MS of calls queued with nothing between them, device events around them, the
median of LOOP_REPEATS such loops: the device's time, what a model's loop sees). The table printed at the end
(and --csv) is what stream_k.plan's schedule cost (`StreamKPlan.cost_iters`) and overlap.planner's GEMM rates
are calibrated on (results/README.md, session 7).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness import runlog, sysinfo
from harness.checks import ConfigError, OneLineParser
from harness.dtypes import DATATYPES, random_inputs
from harness.gemm_bench import _reference, _rel_error, _time, parse_shapes
from stream_k.configs import default_config
from stream_k.gemm import StreamKGemm, default_device, default_num_programs
from stream_k.layout import padded_copy
from stream_k.plan import MAX_SK_ROUNDS

SCHEDULE_NAMES = ("auto", "hybrid", "hybrid1", "dp", "sk")
DEFAULT_CANDIDATES = (
    "128x256x64/s3/w8/hybrid/r1,128x256x64/s3/w8/hybrid/r2,128x256x64/s3/w8/hybrid1/r1,128x256x64/s3/w8/dp,"
    "128x128x64/s4/w8/hybrid/r1,128x128x64/s4/w8/dp,64x256x64/s4/w4/hybrid/r1,64x256x64/s4/w4/dp"
)


def _fail(flag: str, message: str) -> None:
    raise ConfigError(flag, message)


@dataclass(frozen=True)
class GemmCandidate:
    blk_m: int
    blk_n: int
    blk_k: int
    stages: int
    warps: int
    schedule: str  # one of SCHEDULE_NAMES
    rounds: int = 1

    @property
    def name(self) -> str:
        return (f"{self.blk_m}x{self.blk_n}x{self.blk_k}/s{self.stages}/w{self.warps}/{self.schedule}"
                f"/r{self.rounds}")

    def plan_args(self) -> dict[str, Any]:
        """StreamKGemm.create's schedule arguments."""
        return {"schedule": "hybrid" if self.schedule == "hybrid1" else self.schedule,
                "two_tiles": self.schedule != "hybrid1", "sk_rounds": self.rounds}


def parse_candidate(text: str) -> GemmCandidate:
    """`BMxBNxBK/sS/wW/SCHEDULE[/rR]` -> GemmCandidate; ValueError with the reason otherwise."""
    parts = text.split("/")
    if len(parts) not in (4, 5):
        raise ValueError(f"must be BMxBNxBK/sS/wW/SCHEDULE[/rR]; got {text!r}")
    dims = parts[0].lower().split("x")
    if len(dims) != 3 or not all(d.isdigit() and int(d) >= 16 and int(d) & (int(d) - 1) == 0 for d in dims):
        raise ValueError(f"tile must be three powers of two >= 16 (e.g. 128x256x64); got {parts[0]!r}")
    if not (parts[1][:1] == "s" and parts[1][1:].isdigit() and 1 <= int(parts[1][1:]) <= 8):
        raise ValueError(f"stages must be s1..s8; got {parts[1]!r}")
    if not (parts[2][:1] == "w" and parts[2][1:] in ("1", "2", "4", "8", "16")):
        raise ValueError(f"warps must be w1, w2, w4, w8 or w16; got {parts[2]!r}")
    if parts[3] not in SCHEDULE_NAMES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULE_NAMES)}; got {parts[3]!r}")
    rounds = 1
    if len(parts) == 5:
        r = parts[4]
        if not (r[:1] == "r" and r[1:].isdigit() and 1 <= int(r[1:]) <= MAX_SK_ROUNDS):
            raise ValueError(f"rounds must be r1..r{MAX_SK_ROUNDS}; got {r!r}")
        rounds = int(r[1:])
    m, n, k = (int(d) for d in dims)
    return GemmCandidate(m, n, k, int(parts[1][1:]), int(parts[2][1:]), parts[3], rounds)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = OneLineParser(prog="python -m harness.gemm_sweep",
                       description="GEMM tile / schedule / rounds candidates per shape beside cuBLAS, on one GPU.")
    ap.add_argument("--shapes", required=True, help="MxNxK list")
    ap.add_argument("--candidates", default=DEFAULT_CANDIDATES,
                    help="comma list of BMxBNxBK/sS/wW/SCHEDULE[/rR] (SCHEDULE: auto, hybrid, hybrid1, dp, sk)")
    ap.add_argument("--datatype", default="bf16", help=f"one of {', '.join(DATATYPES)}")
    ap.add_argument("--num_programs", type=int, default=None, help="programs (SMs); default all SMs")
    ap.add_argument("--tma", default="auto", help="auto (on where the GPU has it), true, false")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up: ms on a GPU (default 25), runs on CPU (1)")
    ap.add_argument("--rep", type=int, default=None, help="timed: ms on a GPU (default 100), runs on CPU (1)")
    ap.add_argument("--csv", default="", help="write the rows here (pandas CSV)")
    args = ap.parse_args(argv)
    if args.datatype not in DATATYPES:
        _fail("--datatype", f"must be one of {', '.join(DATATYPES)}; got {args.datatype!r}")
    if args.num_programs is not None and not 1 <= args.num_programs <= 65535:
        _fail("--num_programs", f"must be in [1, 65535]; got {args.num_programs}")
    if args.tma not in ("auto", "true", "false"):
        _fail("--tma", f"must be auto, true or false; got {args.tma!r}")
    for name, lo in (("warmup", 0), ("rep", 1)):
        v = getattr(args, name)
        if v is not None and v < lo:
            _fail(f"--{name}", f"must be >= {lo}; got {v}")
    args.shape_list = parse_shapes(args.shapes)
    try:
        args.candidate_list = [parse_candidate(c) for c in args.candidates.split(",") if c]
    except ValueError as e:
        _fail("--candidates", str(e))
    if not args.candidate_list:
        _fail("--candidates", "must name at least one candidate")
    return args


LOOP_MS = 20.0  # device time one back-to-back loop spans
LOOP_REPEATS = 5


def _loop_ms(fn: Any, estimate_ms: float, gpu: bool) -> float:
    """Milliseconds per call of `fn` launched back to back (NaN off the GPU, where it would time the host)."""
    if not gpu:
        return float("nan")
    steps = max(10, int(LOOP_MS / max(estimate_ms, 1e-3)))
    out = []
    for _ in range(LOOP_REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / steps)
    return runlog.summarize_ms(out)["median"]


def _sweep_shape(args: argparse.Namespace, shape: tuple[int, int, int], gen: torch.Generator, device: torch.device,
                 programs: int, tma: bool, warmup: int, rep: int) -> list[dict[str, Any]]:
    """The cuBLAS row and one row per candidate for one shape (inputs made and freed here)."""
    m, n, k = shape
    gpu = device.type == "cuda"
    a = random_inputs((m, k), args.datatype, gen, device)
    b = random_inputs((k, n), args.datatype, gen, device)
    ref = _reference(a, b, args.datatype)
    pa, pb = padded_copy(a), padded_copy(b)
    flops = 2.0 * m * n * k
    cublas = _time(lambda: _reference(a, b, args.datatype), warmup, rep, gpu)
    cublas_loop = [_loop_ms(lambda: _reference(a, b, args.datatype), min(cublas), gpu)]
    base = default_config(args.datatype)
    rows = []
    for cand in args.candidate_list:
        cfg = base.replace(BLK_M=cand.blk_m, BLK_N=cand.blk_n, BLK_K=cand.blk_k, num_stages=cand.stages,
                           num_warps=cand.warps, tma=tma)
        row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "m": m, "n": n, "k": k, "candidate": cand.name}
        try:
            gemm = StreamKGemm.create(m, n, k, args.datatype, programs, config=cfg, device=device,
                                      **cand.plan_args())
            c = torch.empty((m, n), dtype=gemm.out_dtype, device=device)
            samples = _time(lambda g=gemm, c=c: g(pa, pb, c), warmup, rep, gpu)
            loop = _loop_ms(lambda g=gemm, c=c: g(pa, pb, c), min(samples), gpu)
            gemm.check_errors()
            stats = runlog.summarize_ms(samples)
            usage = gemm.resource_usage() or {}
            row.update(ms=stats["median"], p10_ms=stats["p10"], p90_ms=stats["p90"], loop_ms=loop,
                       tflops=flops / stats["median"] / 1e9, rel_error=_rel_error(c, ref),
                       tiles=gemm.plan.num_tiles, sk_tiles=gemm.plan.sk_tiles,
                       schedule=gemm.plan.schedule + ("" if gemm.plan.schedule != "hybrid" else
                                                      "2" if gemm.plan.two_tiles else "1"),
                       registers=usage.get("registers"), spills=usage.get("spills"), error="")
        except Exception as e:  # a tile that does not fit (shared memory, registers) is a row, not a stop
            row.update(ms=float("nan"), error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
        rows.append(row)
    cublas += _time(lambda: _reference(a, b, args.datatype), warmup, rep, gpu)
    cublas_loop.append(_loop_ms(lambda: _reference(a, b, args.datatype), min(cublas), gpu))
    cb = runlog.summarize_ms(cublas)
    cb_loop = min(cublas_loop)  # the better of the two loops, before and after the candidates
    for row in rows:
        row["cublas_ms"] = cb["median"]
        row["cublas_loop_ms"] = cb_loop
        row["vs_cublas"] = cb["median"] / row["ms"] if row["ms"] == row["ms"] else float("nan")
        row["vs_cublas_loop"] = cb_loop / row.get("loop_ms", float("nan"))
    head = {"shape": f"{m}x{n}x{k}", "m": m, "n": n, "k": k, "candidate": "cublas", "ms": cb["median"],
            "p10_ms": cb["p10"], "p90_ms": cb["p90"], "loop_ms": cb_loop, "tflops": flops / cb["median"] / 1e9,
            "cublas_ms": cb["median"], "cublas_loop_ms": cb_loop, "vs_cublas": 1.0, "vs_cublas_loop": 1.0,
            "error": ""}
    return [head, *rows]


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per (shape, candidate), plus the cuBLAS row of each shape (candidate "cublas"); with --csv the
    file is rewritten after every shape, so a run stopped by a time limit keeps the shapes it finished."""
    device = default_device()
    gpu = device.type == "cuda"
    programs = args.num_programs or default_num_programs(device)
    tma = gpu and torch.cuda.get_device_capability(device)[0] >= 9 if args.tma == "auto" else args.tma == "true"
    warmup = args.warmup if args.warmup is not None else (25 if gpu else 1)
    rep = args.rep if args.rep is not None else (100 if gpu else 1)
    gen = torch.Generator().manual_seed(0)
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for si, shape in enumerate(args.shape_list):
        shape_rows = _sweep_shape(args, shape, gen, device, programs, tma, warmup, rep)
        rows.extend(shape_rows)
        ok = [r for r in shape_rows[1:] if r["ms"] == r["ms"]]
        best = max(ok, key=lambda r: r["vs_cublas"], default=None)
        print(f"[{time.time() - t0:6.1f}s] {si + 1}/{len(args.shape_list)} {shape_rows[0]['shape']}: cuBLAS "
              f"{shape_rows[0]['ms']:.4f} ms; best {best['candidate'] if best else '-'} "
              f"{best['vs_cublas'] if best else float('nan'):.3f}x", flush=True)
        if args.csv:
            write_csv(rows, Path(args.csv))
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """Shape x candidate tables of vs_cublas, isolated and back to back (> 1: faster than cuBLAS), and the best
    candidate per shape (back to back where measured)."""
    import pandas as pd

    df = pd.DataFrame([r for r in rows if r["candidate"] != "cublas"])
    table = df.pivot_table(index="shape", columns="candidate", values="vs_cublas", sort=False)
    lines = ["isolated (do_bench):", table.round(3).to_string()]
    if df["vs_cublas_loop"].notna().any():
        table = df.pivot_table(index="shape", columns="candidate", values="vs_cublas_loop", sort=False)
        lines += ["", "back to back:", table.round(3).to_string()]
    best = table.idxmax(axis=1)
    lines += ["", "best per shape:"]
    lines += [f"  {s}: {best[s]} {table.loc[s, best[s]]:.3f}x" for s in table.index]
    bad = df[df["error"].astype(bool)] if "error" in df else df.iloc[:0]
    for _, r in bad.iterrows():
        lines.append(f"  failed: {r['shape']} {r['candidate']}: {r['error']}")
    wrong = df[(df["rel_error"] > 2e-2)] if "rel_error" in df else df.iloc[:0]
    for _, r in wrong.iterrows():
        lines.append(f"  WRONG RESULT: {r['shape']} {r['candidate']} rel error {r['rel_error']:.2e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except ConfigError as exc:  # one line naming the flag
        print(f"harness.gemm_sweep: error: {exc}", file=sys.stderr)
        return 2
    if args.csv:  # what ran where, first: a run cut short by a time limit keeps it
        path = Path(args.csv)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"device": sysinfo.device_info(), "software": sysinfo.software_versions(), "git": sysinfo.git_info(),
                "argv": sys.argv[1:]}
        path.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    rows = run(args)
    print(report(rows))
    if args.csv:
        print(f"wrote {args.csv}")
    bad = [r for r in rows if r.get("rel_error", 0.0) > 2e-2]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

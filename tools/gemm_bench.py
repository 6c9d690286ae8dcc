"""Single-GPU benchmark: Stream-K TFLOP/s beside cuBLAS (torch.matmul), same inputs, same run.

    python -m tools.gemm_bench                                   # defaults below, all SMs, bf16
    python -m tools.gemm_bench --shapes 8192x8192x8192 --datatype fp16 --num_programs 120
    TRITON_INTERPRET=1 python -m tools.gemm_bench                # tiny shapes on the CPU interpreter

Default shapes: 8192x8192x8192 and 4864x4096x8256 with --schedule (default auto, StreamKGemm's: dp or the
one-tile hybrid by the shape; the table shows which, e.g. auto:dp), plus a shape whose tile count is
num_programs + 1 (the worst case for data-parallel: a second wave of one tile), run with schedule "hybrid" and
"dp" on the same kernel. Inputs are random (never zeros). Times are medians after warm-up, from
triton.testing.do_bench (L2 flushed before every run) on a GPU, from the host clock in the interpreter.
Every run is checked against torch.matmul and written as one JSON record (harness.runlog) to
--output_dir.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

from streamk_pgas import spec
from streamk_pgas.harness import runlog
from streamk_pgas.harness.dtypes import random_inputs
from streamk_pgas.harness.timing import sample_ms
from streamk_pgas.iris_ops.env import interpreted
from streamk_pgas.spec import DATATYPES
from streamk_pgas.stream_k.configs import default_config
from streamk_pgas.stream_k.gemm import StreamKGemm, default_device, default_num_programs
from streamk_pgas.stream_k.layout import padded_copy
from streamk_pgas.stream_k.plan import AUTO_SCHEDULE, SCHEDULE_CHOICES

INTERPRET = interpreted()
GPU_SHAPES = "8192x8192x8192,4864x4096x8256"
CPU_SHAPES = "64x64x64,72x40x56"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        sys.stderr.write(f"tools.gemm_bench: error: {message}\n")
        sys.exit(2)


def _fail(flag: str, message: str) -> None:
    sys.stderr.write(f"tools.gemm_bench: error: {flag} {message}\n")
    sys.exit(2)


def parse_shapes(text: str, flag: str = "--shapes") -> list[tuple[int, int, int]]:
    shapes = []
    for item in filter(None, text.split(",")):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) >= 1 for p in parts):
            _fail(flag, f"must be MxNxK[,MxNxK...] with integers >= 1; got {item!r}")
        m, n, k = (int(p) for p in parts)
        shapes.append((m, n, k))
    if not shapes:
        _fail(flag, "must name at least one MxNxK shape")
    return shapes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = _Parser(description="Stream-K GEMM vs cuBLAS (torch.matmul) on one GPU.")
    ap.add_argument("--shapes", default=None, help=f"MxNxK list (default {GPU_SHAPES}; interpreter: {CPU_SHAPES})")
    ap.add_argument("--datatype", default="bf16", help=f"one of {', '.join(DATATYPES)}")
    ap.add_argument("--num_programs", type=int, default=None, help="programs (SMs) for Stream-K; default all SMs")
    ap.add_argument("--schedule", default=AUTO_SCHEDULE,
                    help=f"one of {', '.join(SCHEDULE_CHOICES)} for --shapes (auto: StreamKGemm's default, "
                    "dp or the one-tile hybrid by the shape)")
    ap.add_argument("--also_dp", action="store_true", help="also run schedule dp on --shapes")
    ap.add_argument("--sk_rounds", type=int, default=1, help="Stream-K rounds (1-4, plan.round_bounds) for --shapes")
    ap.add_argument("--plus_one", type=int, default=1, help="1: add the tiles = programs + 1 shape (0: skip)")
    ap.add_argument("--plus_one_k", type=int, default=None, help="K of that shape (default 8192; interpreter 64)")
    for name in ("blk_m", "blk_n", "blk_k", "num_stages", "num_warps", "gsize_m"):
        ap.add_argument(f"--{name}", type=int, default=None, help="override the default config")
    ap.add_argument("--input_precision", default=None, help="fp32 only: ieee (default), tf32, tf32x3")
    ap.add_argument("--variants", default="ptr", help="comma list of ptr (pointer loads), tma (tensor descriptors)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up: ms on a GPU (default 100), runs on CPU (1)")
    ap.add_argument("--rep", type=int, default=None, help="timed: ms on a GPU (default 500), runs on CPU (2)")
    ap.add_argument("--timeout_s", type=float, default=10.0, help="fix-up wait timeout, seconds")
    ap.add_argument("--output_dir", default="results/logs/stream_k", help="where JSON records go ('' for none)")
    args = ap.parse_args(argv)

    if args.datatype not in DATATYPES:
        _fail("--datatype", f"must be one of {', '.join(DATATYPES)}; got {args.datatype!r}")
    if args.schedule not in SCHEDULE_CHOICES:
        _fail("--schedule", f"must be one of {', '.join(SCHEDULE_CHOICES)}; got {args.schedule!r}")
    if args.num_programs is not None and not 1 <= args.num_programs <= 65535:
        _fail("--num_programs", f"must be in [1, 65535]; got {args.num_programs}")
    for name in ("blk_m", "blk_n", "blk_k"):
        v = getattr(args, name)
        if v is not None and (v < 16 or v > 512 or v & (v - 1)):
            _fail(f"--{name}", f"must be a power of two in [16, 512]; got {v}")
    if args.datatype == "int8" and args.blk_k is not None and args.blk_k < 32:
        _fail("--blk_k", f"must be >= 32 for int8; got {args.blk_k}")
    if args.num_stages is not None and not 1 <= args.num_stages <= 8:
        _fail("--num_stages", f"must be in [1, 8]; got {args.num_stages}")
    if args.num_warps is not None and args.num_warps not in (1, 2, 4, 8, 16):
        _fail("--num_warps", f"must be one of 1, 2, 4, 8, 16; got {args.num_warps}")
    if args.gsize_m is not None and not 1 <= args.gsize_m <= 64:
        _fail("--gsize_m", f"must be in [1, 64]; got {args.gsize_m}")
    from streamk_pgas.stream_k.plan import MAX_SK_ROUNDS

    if not 1 <= args.sk_rounds <= MAX_SK_ROUNDS:
        _fail("--sk_rounds", f"must be in [1, {MAX_SK_ROUNDS}]; got {args.sk_rounds}")
    if args.input_precision not in (None, "ieee", "tf32", "tf32x3"):
        _fail("--input_precision", f"must be one of ieee, tf32, tf32x3; got {args.input_precision!r}")
    args.variant_list = [v for v in args.variants.split(",") if v]
    if not args.variant_list or any(v not in ("ptr", "tma") for v in args.variant_list):
        _fail("--variants", f"must be a comma list of ptr, tma; got {args.variants!r}")
    if args.plus_one not in (0, 1):
        _fail("--plus_one", f"must be 0 or 1; got {args.plus_one}")
    if args.plus_one_k is not None and args.plus_one_k < 1:
        _fail("--plus_one_k", f"must be >= 1; got {args.plus_one_k}")
    for name, lo in (("warmup", 0), ("rep", 1)):
        v = getattr(args, name)
        if v is not None and v < lo:
            _fail(f"--{name}", f"must be >= {lo}; got {v}")
    if not args.timeout_s > 0:
        _fail("--timeout_s", f"must be > 0; got {args.timeout_s}")
    args.shape_list = parse_shapes(args.shapes or (CPU_SHAPES if INTERPRET else GPU_SHAPES))
    return args


def plus_one_shape(programs: int, blk_m: int, blk_n: int, k: int) -> tuple[int, int, int]:
    """M x N x K with exactly programs + 1 tiles, as square in tiles as the factors of programs + 1 allow."""
    tiles = programs + 1
    tm = max(d for d in range(1, int(tiles**0.5) + 1) if tiles % d == 0)
    return tm * blk_m, (tiles // tm) * blk_n, k


def _reference(a: torch.Tensor, b: torch.Tensor, name: str) -> torch.Tensor:
    if name == "int8":
        if a.is_cuda:
            return torch._int_mm(a, b)
        return (a.to(torch.int32) @ b.to(torch.int32))
    return torch.matmul(a, b)


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    o, r = out.double(), ref.double()
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def _config(args: argparse.Namespace):
    cfg = default_config(args.datatype)
    changes: dict[str, Any] = {}
    for flag, field in (("blk_m", "BLK_M"), ("blk_n", "BLK_N"), ("blk_k", "BLK_K"), ("num_stages", "num_stages"),
                        ("num_warps", "num_warps"), ("gsize_m", "gsize_m"), ("input_precision", "input_precision")):
        if getattr(args, flag) is not None:
            changes[field] = getattr(args, flag)
    return cfg.replace(**changes) if changes else cfg


def _record(args, impl: str, shape, schedule: str | None, samples: list[float], warmup: int, rel: float,
            extra: dict[str, Any]) -> dict[str, Any]:
    m, n, k = shape
    sizes = runlog.problem_sizes(spec.FAMILIES["gemm"], m, n, k, args.datatype, 1)
    timing = runlog.timing_section(samples, {"gemm": samples}, sizes["flops_per_rank"], len(samples), warmup)
    tol = 0.0 if args.datatype == "int8" else (1e-4 if args.datatype == "fp32" else 2e-2)
    flags = {"m": m, "n": n, "k": k, "datatype": args.datatype, "schedule": schedule,
             "num_programs": extra.get("num_programs"), "tma": impl.endswith("-tma"), "timeout_s": args.timeout_s,
             "sk_rounds": extra.get("sk_rounds")}
    return runlog.new_record(producer="benchmark", algorithm="gemm", implementation=impl, mode=None, world_size=1,
                             flags=flags, sizes=sizes, timing=timing,
                             validation={"enabled": True, "passed": rel <= tol, "rel_error": rel,
                                         "tolerance": tol, "reference": "torch.matmul"},
                             extra=extra)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    device = default_device()
    gpu = device.type == "cuda"
    programs = args.num_programs or default_num_programs(device)
    cfg = _config(args)
    warmup = args.warmup if args.warmup is not None else (100 if gpu else 1)
    rep = args.rep if args.rep is not None else (500 if gpu else 2)
    base_impl = "cublas" if gpu and not getattr(torch.version, "hip", None) else ("hipblaslt" if gpu else "torch-cpu")

    jobs: list[tuple[tuple[int, int, int], list[str]]] = []
    for shape in args.shape_list:
        jobs.append((shape, [args.schedule] + (["dp"] if args.also_dp and args.schedule != "dp" else [])))
    if args.plus_one:
        k1 = args.plus_one_k or (8192 if gpu else 64)
        jobs.append((plus_one_shape(programs, cfg.BLK_M, cfg.BLK_N, k1), ["hybrid", "dp"]))

    gen = torch.Generator().manual_seed(0)
    records = []
    print(f"device {torch.cuda.get_device_name(device) if gpu else 'cpu (interpreter)'}, {args.datatype}, "
          f"{programs} programs, blocks {cfg.BLK_M}x{cfg.BLK_N}x{cfg.BLK_K}, {cfg.num_stages} stages, "
          f"{cfg.num_warps} warps")
    print(f"{'shape':>20} {'impl':>12} {'schedule':>8} {'tiles':>6} {'sk':>5} {'ms':>9} {'TFLOP/s':>8} "
          f"{'vs base':>8} {'rel err':>9}")
    for shape, schedules in jobs:
        m, n, k = shape
        a = random_inputs((m, k), args.datatype, gen, device)
        b = random_inputs((k, n), args.datatype, gen, device)
        flops = 2 * m * n * k
        ref = _reference(a, b, args.datatype)
        base_samples = sample_ms(lambda a=a, b=b: _reference(a, b, args.datatype), warmup, rep, gpu)
        base_ms = runlog.summarize_ms(base_samples)["median"]
        rows = [(base_impl, "-", None, None, base_samples, 0.0, {"num_programs": None})]
        for variant, schedule in [(v, s) for v in args.variant_list for s in schedules]:
            vcfg = cfg.replace(tma=variant == "tma")
            gemm = StreamKGemm.create(m, n, k, args.datatype, programs, config=vcfg, schedule=schedule,
                                      sk_rounds=args.sk_rounds if shape in args.shape_list else 1,
                                      device=device, timeout_s=args.timeout_s)
            c = torch.empty((m, n), dtype=gemm.out_dtype, device=device)
            # cuBLAS reads the plain contiguous inputs; ours read them with padded rows when a row is not a
            # multiple of 16 elements (the layout OverlapOp's own buffers have), the same values
            pa, pb = padded_copy(a), padded_copy(b)
            samples = sample_ms(lambda g=gemm, a=pa, b=pb, c=c: g(a, b, c), warmup, rep, gpu)
            gemm.check_errors()
            rel = _rel_error(c, ref)
            ms = runlog.summarize_ms(samples)["median"]
            extra = {"num_programs": programs, "sk_rounds": gemm.plan.sk_rounds, "stream_k": gemm.info(),
                     "resource_usage": gemm.resource_usage(),
                     "baseline": base_impl, "baseline_ms": base_ms, "vs_baseline": base_ms / ms}
            impl = "stream-k" if variant == "ptr" else "stream-k-tma"
            label = schedule if schedule != AUTO_SCHEDULE else f"auto:{gemm.plan.schedule}"
            rows.append((impl, label, gemm.plan.num_tiles, gemm.plan.sk_tiles, samples, rel, extra))
        for impl, schedule, tiles, sk, samples, rel, extra in rows:
            ms = runlog.summarize_ms(samples)["median"]
            print(f"{f'{m}x{n}x{k}':>20} {impl:>12} {schedule:>8} {tiles if tiles is not None else '-':>6} "
                  f"{sk if sk is not None else '-':>5} {ms:9.4f} {flops / ms / 1e9:8.1f} {base_ms / ms:8.3f} "
                  f"{rel:9.2e}")
            records.append(_record(args, impl, shape, None if schedule == "-" else schedule, samples, warmup, rel,
                                   extra))
        by = {(r[0], r[1]): runlog.summarize_ms(r[4])["median"] for r in rows[1:]}
        for impl in ("stream-k", "stream-k-tma"):
            if (impl, "dp") in by and (impl, "hybrid") in by:
                print(f"{'':>20} {impl}: hybrid is {by[(impl, 'dp')] / by[(impl, 'hybrid')]:.3f}x dp")
    if args.output_dir:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = Path(args.output_dir)
        for i, rec in enumerate(records):
            f = rec["flags"]
            name = (f"gemm_{rec['implementation']}_{f['schedule'] or 'ref'}_{f['m']}x{f['n']}x{f['k']}_"
                    f"{f['datatype']}_{stamp}_{i}.json")
            runlog.write_record(rec, out / name)
        print(f"wrote {len(records)} records to {out}")
    return records


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    records = run(args)
    return 0 if all(r["validation"]["passed"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())

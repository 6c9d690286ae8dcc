"""The GEMM beside cuBLAS (torch.matmul) per shape on one GPU: a suite of shapes, candidates per shape, the roofline.

    python -m tools.gemm_sweep --suite tp --csv out/tp.csv            # StreamKGemm's defaults on the tp suite
    python -m tools.gemm_sweep --shapes 512x8192x4096 --candidates default,128x256x64/s3/w8/dp,64x128x64/s6/w4/sk

A candidate is `default` (what `StreamKGemm.create` chooses for the shape: stream_k.select) or
`BMxBNxBK/sSTAGES/wWARPS/SCHEDULE[/rROUNDS]`, SCHEDULE one of auto (the model's pick of dp and hybrid1 for that
tile), hybrid or hybrid2 (DP waves plus a Stream-K share of one to two tiles per program), hybrid1 (hybrid over the
leftover tiles only), dp, sk, splitk or splitkS (split-K, S pieces per tile; plain splitk: as many as the programs
allow); BN may be 3 or 5 times a power of two (a tile of two column blocks, dp only); fixed candidates use TMA where the
GPU has it. A suite is a file of `M N K` lines
(tools/suites/NAME.txt, or a path).

Every candidate of a shape reads the same random inputs (never zeros), the user's own contiguous tensors (no
padded copies), and is validated against an fp32 product of them (output poisoned first). cuBLAS is timed before
and after the candidates. Three timings per row:
- `ms`: triton.testing.do_bench's median (L2 flushed before each run: an isolated call, host launch included);
- `loop_ms`: calls queued back to back, rotating over enough input sets that they do not fit in L2 together (the
  weights of a model's layers come from device memory), device events around LOOP_MS of them, the median of
  LOOP_REPEATS loops: what a model's loop sees;
- `graph_ms`: the same calls captured in one CUDA graph and replayed (no host launch cost at all).
`roofline_ms` is max(FLOPs / peak, bytes / HBM bandwidth) with the device's datasheet peaks (stream_k.roofline);
`pct_roofline` = roofline_ms / loop_ms. The bandwidth a plain read reaches on the device (torch.sum over 2 GiB, the
median of 5) is measured once and written in the .meta.json (`read_tb_s`): the datasheet's is not reached. The
summary gives, per candidate, the geomean of cuBLAS's back-to-back time over ours and the shapes below 0.95x; --png
draws the ratio per shape and both % of roofline. Exit code 1 when a result was wrong or the default could not run
on a shape (a listed candidate that does not apply or fit is reported as not run), 2 for a bad flag, else 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from streamk_pgas.harness import runlog, sysinfo
from streamk_pgas.harness.checks import ConfigError, OneLineParser
from streamk_pgas.harness.dtypes import random_inputs
from streamk_pgas.harness.timing import sample_ms
from streamk_pgas.spec import DATATYPES, parse_schedule_label, schedule_label, sm90_or_newer
from streamk_pgas.stream_k.configs import current_arch
from streamk_pgas.stream_k.gemm import StreamKGemm, default_device, default_num_programs
from streamk_pgas.stream_k.layout import padded_copy
from streamk_pgas.stream_k.plan import MAX_SK_ROUNDS
from streamk_pgas.stream_k.roofline import device_peaks, gemm_bytes, roofline_us
from streamk_pgas.stream_k.tiles import width_parts

SCHEDULE_NAMES = ("auto", "hybrid", "hybrid1", "hybrid2", "dp", "sk", "splitk")
DEFAULT = "default"
SUITES = Path(__file__).resolve().parent / "suites"
LOOP_MS = 20.0  # device time one back-to-back loop spans
LOOP_REPEATS = 5
CACHE_MULTIPLE = 2.5  # input sets rotate until they hold this many times the L2's size
MAX_SETS = 16
TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 1e-4, "int8": 0.0}


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
    programs: int = 1  # programs per SM
    padded: bool = False  # read copies of A and B with rows padded to 128 bytes (the copy not timed: a diagnosis)
    split_k: int | None = None  # splitk: pieces per tile (None: as many as the programs allow)

    @property
    def name(self) -> str:
        return (f"{self.blk_m}x{self.blk_n}x{self.blk_k}/s{self.stages}/w{self.warps}/{self.schedule}"
                f"{self.split_k or ''}/r{self.rounds}{f'/x{self.programs}' if self.programs > 1 else ''}"
                f"{'/pad' if self.padded else ''}")

    def plan_args(self) -> dict[str, Any]:
        """StreamKGemm.create's schedule arguments."""
        schedule, two_tiles = parse_schedule_label(self.schedule)
        return {"schedule": schedule, "two_tiles": two_tiles, "sk_rounds": self.rounds, "split_k": self.split_k}


def parse_candidate(text: str) -> GemmCandidate | str:
    """`default`, or `BMxBNxBK/sS/wW/SCHEDULE[/rR][/xP][/pad]` (P programs per SM; pad: on padded copies of A and
    B, the copy not timed) -> GemmCandidate; ValueError with the reason otherwise."""
    if text == DEFAULT:
        return DEFAULT
    parts = text.split("/")
    padded = parts[-1] == "pad"
    if padded:
        parts.pop()
    per_sm = 1
    if parts[-1][:1] == "x":
        if not (parts[-1][1:].isdigit() and 1 <= int(parts[-1][1:]) <= 4):
            raise ValueError(f"programs per SM must be x1..x4; got {parts[-1]!r}")
        per_sm = int(parts.pop()[1:])
    if len(parts) not in (4, 5):
        raise ValueError(f"must be {DEFAULT} or BMxBNxBK/sS/wW/SCHEDULE[/rR][/xP]; got {text!r}")
    dims = parts[0].lower().split("x")
    if len(dims) != 3 or not all(d.isdigit() and int(d) >= 16 and int(d) & (int(d) - 1) == 0 for d in dims[::2]):
        raise ValueError(f"tile must be BMxBNxBK, BM and BK powers of two >= 16 (e.g. 128x256x64); got {parts[0]!r}")
    try:
        width_parts(int(dims[1]) if dims[1].isdigit() else -1)
    except ValueError as e:
        raise ValueError(f"tile {parts[0]!r}: {e}") from None
    if not (parts[1][:1] == "s" and parts[1][1:].isdigit() and 1 <= int(parts[1][1:]) <= 8):
        raise ValueError(f"stages must be s1..s8; got {parts[1]!r}")
    if not (parts[2][:1] == "w" and parts[2][1:] in ("1", "2", "4", "8", "16")):
        raise ValueError(f"warps must be w1, w2, w4, w8 or w16; got {parts[2]!r}")
    split_k = None
    if parts[3].startswith("splitk") and parts[3][6:].isdigit():
        split_k = int(parts[3][6:])
        parts[3] = "splitk"
    if parts[3] not in SCHEDULE_NAMES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULE_NAMES)} (or splitkS); got {parts[3]!r}")
    rounds = 1
    if len(parts) == 5:
        r = parts[4]
        if not (r[:1] == "r" and r[1:].isdigit() and 1 <= int(r[1:]) <= MAX_SK_ROUNDS):
            raise ValueError(f"rounds must be r1..r{MAX_SK_ROUNDS}; got {r!r}")
        rounds = int(r[1:])
    m, n, k = (int(d) for d in dims)
    return GemmCandidate(m, n, k, int(parts[1][1:]), int(parts[2][1:]), parts[3], rounds, per_sm, padded, split_k)


def candidate_name(cand: GemmCandidate | str) -> str:
    return cand if isinstance(cand, str) else cand.name


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """`MxNxK[,MxNxK...]` -> shapes; ConfigError naming --shapes otherwise."""
    shapes = []
    for item in filter(None, text.split(",")):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) >= 1 for p in parts):
            _fail("--shapes", f"must be MxNxK[,MxNxK...] with integers >= 1; got {item!r}")
        shapes.append((int(parts[0]), int(parts[1]), int(parts[2])))
    if not shapes:
        _fail("--shapes", "must name at least one MxNxK shape")
    return shapes


def load_suite(name: str) -> list[tuple[int, int, int]]:
    """The shapes of suite `name` (tools/suites/NAME.txt) or of the file at path `name`: `M N K` per line."""
    path = SUITES / f"{name}.txt"
    if not path.is_file():
        path = Path(name)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SUITES.glob("*.txt")))
        _fail("--suite", f"must be one of {known} or a file of 'M N K' lines; got {name!r}")
    shapes = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#")[0].split()
        if not words:
            continue
        if len(words) != 3 or not all(w.isdigit() and int(w) >= 1 for w in words):
            _fail("--suite", f"{path}:{i}: must be 'M N K' with integers >= 1; got {line.strip()!r}")
        shapes.append((int(words[0]), int(words[1]), int(words[2])))
    if not shapes:
        _fail("--suite", f"{path} holds no shape")
    return shapes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = OneLineParser(prog="python -m tools.gemm_sweep",
                       description="The GEMM's candidates per shape beside cuBLAS, on one GPU, with the roofline.")
    ap.add_argument("--shapes", default=None, help="MxNxK list")
    ap.add_argument("--suite", default=None, help="a suite name (tools/suites/NAME.txt: tp) or a file of 'M N K'")
    ap.add_argument("--candidates", default=DEFAULT,
                    help=f"comma list of {DEFAULT} and BMxBNxBK/sS/wW/SCHEDULE[/rR][/xP] "
                    "(SCHEDULE: auto, hybrid, hybrid1, dp, sk) (default: default)")
    ap.add_argument("--datatype", default="bf16", help=f"one of {', '.join(DATATYPES)}")
    ap.add_argument("--num_programs", type=int, default=None, help="programs (SMs); default all SMs")
    ap.add_argument("--tma", default="auto", help="fixed candidates: auto (on where the GPU has it), true, false")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up: ms on a GPU (default 10), runs on CPU (1)")
    ap.add_argument("--rep", type=int, default=None, help="timed: ms on a GPU (default 40), runs on CPU (1)")
    ap.add_argument("--graph", default="true", help="also time CUDA-graph replays: true, false")
    ap.add_argument("--csv", default="", help="write the rows here (pandas CSV); a .meta.json goes beside it")
    ap.add_argument("--png", default="", help="draw the ratio and the %% of roofline per shape here")
    args = ap.parse_args(argv)
    if args.datatype not in DATATYPES:
        _fail("--datatype", f"must be one of {', '.join(DATATYPES)}; got {args.datatype!r}")
    if args.num_programs is not None and not 1 <= args.num_programs <= 65535:
        _fail("--num_programs", f"must be in [1, 65535]; got {args.num_programs}")
    if args.tma not in ("auto", "true", "false"):
        _fail("--tma", f"must be auto, true or false; got {args.tma!r}")
    if args.graph not in ("true", "false"):
        _fail("--graph", f"must be true or false; got {args.graph!r}")
    for name, lo in (("warmup", 0), ("rep", 1)):
        v = getattr(args, name)
        if v is not None and v < lo:
            _fail(f"--{name}", f"must be >= {lo}; got {v}")
    if (args.shapes is None) == (args.suite is None):
        _fail("--shapes", "give exactly one of --shapes and --suite")
    args.shape_list = parse_shapes(args.shapes) if args.shapes is not None else load_suite(args.suite)
    try:
        args.candidate_list = [parse_candidate(c) for c in args.candidates.split(",") if c]
    except ValueError as e:
        _fail("--candidates", str(e))
    if not args.candidate_list:
        _fail("--candidates", "must name at least one candidate")
    for path in (args.csv, args.png):
        if path and Path(path).is_dir():
            _fail("--csv" if path == args.csv else "--png", f"is a folder: {path}")
    return args


# ---- timing ----------------------------------------------------------------------------------------------

def _loop_ms(calls: list[Any], estimate_ms: float, gpu: bool) -> float:
    """Milliseconds per call of `calls` (rotating) launched back to back (NaN off the GPU)."""
    if not gpu:
        return float("nan")
    steps = max(2 * len(calls), int(LOOP_MS / max(estimate_ms, 1e-3)))
    out = []
    for _ in range(LOOP_REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for i in range(steps):
            calls[i % len(calls)]()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / steps)
    return runlog.summarize_ms(out)["median"]


def _graph_ms(calls: list[Any], estimate_ms: float, gpu: bool) -> float:
    """Milliseconds per call of `calls` (rotating) captured in one CUDA graph and replayed (NaN off the GPU)."""
    if not gpu:
        return float("nan")
    steps = max(2 * len(calls), min(2000, int(LOOP_MS / max(estimate_ms, 1e-3))))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream, as torch's capture recipe asks
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(steps):
            calls[i % len(calls)]()
    out = []
    for _ in range(LOOP_REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / steps)
    del graph
    return runlog.summarize_ms(out)["median"]


def read_bandwidth_tb_s() -> float:
    """TB/s of a plain read of 2 GiB (torch.sum in fp32 over bf16), the median of 5 (NaN off the GPU)."""
    if not torch.cuda.is_available():
        return float("nan")
    x = torch.ones(2**30, dtype=torch.bfloat16, device="cuda")
    torch.sum(x, dtype=torch.float32)
    out = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.sum(x, dtype=torch.float32)
        end.record()
        end.synchronize()
        out.append(x.numel() * x.element_size() / (start.elapsed_time(end) * 1e-3) / 1e12)
    del x
    return runlog.summarize_ms(out)["median"]


def _timings(calls: list[Any], warmup: int, rep: int, gpu: bool, graph: bool) -> dict[str, float]:
    samples = sample_ms(calls[0], warmup, rep, gpu)
    stats = runlog.summarize_ms(samples)
    loop = _loop_ms(calls, stats["min"], gpu)
    return {"ms": stats["median"], "p10_ms": stats["p10"], "p90_ms": stats["p90"], "loop_ms": loop,
            "graph_ms": _graph_ms(calls, loop, gpu) if graph else float("nan")}


# ---- one shape -------------------------------------------------------------------------------------------

def _reference(a: torch.Tensor, b: torch.Tensor, name: str) -> torch.Tensor:
    """What a user calls: torch.matmul (torch._int_mm for int8 on a GPU)."""
    if name == "int8":
        return torch._int_mm(a, b) if a.is_cuda else a.to(torch.int32) @ b.to(torch.int32)
    return torch.matmul(a, b)


def _exact(a: torch.Tensor, b: torch.Tensor, name: str) -> torch.Tensor:
    """The product in fp32 (int64 for int8): what both are checked against."""
    if name == "int8":
        return (a.to(torch.int64).cpu() @ b.to(torch.int64).cpu()).to(a.device)
    return torch.matmul(a.float(), b.float())


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.double() - ref.double()).norm()
    return float(diff / ref.double().norm().clamp_min(1e-30)) if torch.isfinite(out).all() else float("inf")


def _input_sets(shape: tuple[int, int, int], dtype: str, gen: torch.Generator, device: torch.device,
                gpu: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Enough (A, B) pairs that, rotated, they do not stay in the L2 (one on the CPU)."""
    m, n, k = shape
    sets = 1
    if gpu:
        l2 = sysinfo.device_info().get("l2_bytes") or 50 * 2**20
        sets = min(MAX_SETS, max(1, math.ceil(CACHE_MULTIPLE * l2 / gemm_bytes(m, n, k, dtype))))
    return [(random_inputs((m, k), dtype, gen, device), random_inputs((k, n), dtype, gen, device))
            for _ in range(sets)]


def _make_gemm(cand: GemmCandidate | str, shape: tuple[int, int, int], dtype: str, programs: int, tma: bool,
               device: torch.device) -> StreamKGemm:
    m, n, k = shape
    if cand == DEFAULT:
        return StreamKGemm.create(m, n, k, dtype, programs, device=device)
    from streamk_pgas.stream_k.configs import default_config

    cfg = default_config(dtype).replace(BLK_M=cand.blk_m, BLK_N=cand.blk_n, BLK_K=cand.blk_k,
                                        num_stages=cand.stages, num_warps=cand.warps, tma=tma)
    return StreamKGemm.create(m, n, k, dtype, programs * cand.programs, config=cfg, device=device,
                              **cand.plan_args())


def _sweep_shape(args: argparse.Namespace, shape: tuple[int, int, int], gen: torch.Generator, device: torch.device,
                 programs: int, tma: bool, warmup: int, rep: int) -> list[dict[str, Any]]:
    """The cuBLAS row and one row per candidate for one shape (inputs made and freed here)."""
    m, n, k = shape
    gpu = device.type == "cuda"
    graph = gpu and args.graph == "true"
    dt = args.datatype
    sets = _input_sets(shape, dt, gen, device, gpu)
    exact = _exact(*sets[0], dt)
    flops = 2.0 * m * n * k
    peaks = device_peaks(sysinfo.device_info().get("name", "")) if gpu else None
    roof = roofline_us(m, n, k, dt, peaks) / 1e3 if peaks else float("nan")
    base = {"shape": f"{m}x{n}x{k}", "m": m, "n": n, "k": k, "sets": len(sets), "roofline_ms": roof}
    tol = TOLERANCE[dt]

    cublas_calls = [lambda a=a, b=b: _reference(a, b, dt) for a, b in sets]
    cublas = [_timings(cublas_calls, warmup, rep, gpu, graph)]
    cublas_err = _rel_error(_reference(*sets[0], dt), exact)
    rows = []
    for cand in args.candidate_list:
        row: dict[str, Any] = {**base, "candidate": candidate_name(cand)}
        try:
            gemm = _make_gemm(cand, shape, dt, programs, tma, device)
            outs = [torch.empty((m, n), dtype=gemm.out_dtype, device=device) for _ in sets]
            inputs = [(padded_copy(a), padded_copy(b)) if getattr(cand, "padded", False) else (a, b) for a, b in sets]
            calls = [lambda g=gemm, a=a, b=b, c=c: g(a, b, c) for (a, b), c in zip(inputs, outs)]
            if outs[0].is_floating_point():
                outs[0].fill_(float("nan"))  # poisoned: every element must be written
            calls[0]()
            gemm.check_errors()
            rel = _rel_error(outs[0], exact)
            row.update(_timings(calls, warmup, rep, gpu, graph))
            gemm.check_errors()
            usage = gemm.resource_usage() or {}
            cfg, plan = gemm.config, gemm.plan
            row.update(tflops=flops / row["loop_ms"] / 1e9 if gpu else flops / row["ms"] / 1e9,
                       rel_error=rel, passed=rel <= tol, chosen=f"{cfg.BLK_M}x{cfg.BLK_N}x{cfg.BLK_K}/s{cfg.num_stages}"
                       f"/w{cfg.num_warps}{'/tma' if cfg.tma else ''}", tiles=plan.num_tiles, sk_tiles=plan.sk_tiles,
                       schedule=schedule_label(plan.schedule, plan.two_tiles)
                       + (str(plan.split_k) if plan.split_k else ""),
                       registers=usage.get("registers"), spills=usage.get("spills"), error="")
            del gemm, outs, calls
        except Exception as e:  # a tile that does not fit (shared memory, registers) is a row, not a stop
            row.update(ms=float("nan"), loop_ms=float("nan"), passed=False,
                       error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
        rows.append(row)
    cublas.append(_timings(cublas_calls, warmup, rep, gpu, graph))
    best = {key: min(t[key] for t in cublas) for key in ("ms", "loop_ms", "graph_ms")}  # cuBLAS's better run
    head = {**base, "candidate": "cublas", **cublas[0], **best, "tflops": flops / best["loop_ms"] / 1e9,
            "rel_error": cublas_err, "passed": True, "error": ""}
    for row in [head, *rows]:
        for key in ("ms", "loop_ms", "graph_ms"):
            row[f"cublas_{key}"] = best[key]
            row[f"vs_cublas{key[:-3] and '_' + key[:-3]}"] = best[key] / row.get(key, float("nan"))
        row["pct_roofline"] = row["roofline_ms"] / row.get("loop_ms", float("nan"))
        row["cublas_pct_roofline"] = row["roofline_ms"] / best["loop_ms"]
    return [head, *rows]


# ---- output ----------------------------------------------------------------------------------------------

def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def _geomean(values: list[float]) -> float:
    ok = [v for v in values if v == v and v > 0]
    return math.exp(sum(math.log(v) for v in ok) / len(ok)) if ok else float("nan")


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per candidate: geomean / min of cuBLAS's back-to-back time over ours (isolated where not timed back to
    back), the shapes below 0.95x, the showcase shapes (cuBLAS under 40% of the roofline) below 1.5x, the shapes
    whose result was wrong (`failed`) and those the candidate does not apply to or could not run (`not_run`)."""
    key = "vs_cublas_loop" if any(r.get("loop_ms", float("nan")) == r.get("loop_ms") for r in rows) else "vs_cublas"
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["candidate"] for r in rows if r["candidate"] != "cublas"):
        mine = [r for r in rows if r["candidate"] == name]
        ratios = [r.get(key, float("nan")) for r in mine]
        showcase = [r for r in mine if r.get("cublas_pct_roofline", 1.0) < 0.40]
        out[name] = {"metric": key, "shapes": len(mine), "geomean": _geomean(ratios),
                     "min": min((v for v in ratios if v == v), default=float("nan")),
                     "at_least_1": sum(1 for v in ratios if v >= 1.0),
                     "below_0.95": [r["shape"] for r in mine if not r.get(key, 0.0) >= 0.95],
                     "showcase": [r["shape"] for r in showcase],
                     "showcase_below_1.5": [r["shape"] for r in showcase if not r.get(key, 0.0) >= 1.5],
                     "failed": [r["shape"] for r in mine if not r.get("passed") and not r.get("error")],
                     "not_run": [r["shape"] for r in mine if r.get("error")]}
    return out


def report(rows: list[dict[str, Any]]) -> str:
    """Per shape and candidate: times, ratios, % of roofline; then the summary per candidate."""
    lines = [f"{'shape':>18} {'candidate':>28} {'chosen':>22} {'sched':>7} {'loop ms':>9} {'graph ms':>9} "
             f"{'vs cuBLAS':>9} {'(graph)':>8} {'%roof':>6} {'cuBLAS %roof':>12} {'rel err':>8}"]
    for r in rows:
        if r["candidate"] == "cublas":
            continue
        if r.get("error"):
            lines.append(f"{r['shape']:>18} {r['candidate']:>28} failed: {r['error']}")
            continue
        lines.append(f"{r['shape']:>18} {r['candidate']:>28} {r.get('chosen', ''):>22} {r.get('schedule', ''):>7} "
                     f"{r['loop_ms']:9.4f} {r['graph_ms']:9.4f} {r['vs_cublas_loop']:9.3f} "
                     f"{r['vs_cublas_graph']:8.3f} {100 * r['pct_roofline']:5.1f}% "
                     f"{100 * r['cublas_pct_roofline']:11.1f}% {r['rel_error']:8.1e}")
    lines.append("")
    for name, s in summary(rows).items():
        lines.append(f"{name}: geomean {s['geomean']:.3f}x cuBLAS ({s['metric']}), min {s['min']:.3f}, "
                     f">= 1.0x on {s['at_least_1']}/{s['shapes']}; below 0.95x: {', '.join(s['below_0.95']) or '-'}; "
                     f"showcase (cuBLAS < 40% roofline) below 1.5x: {', '.join(s['showcase_below_1.5']) or '-'} "
                     f"of {', '.join(s['showcase']) or '-'}; wrong: {', '.join(s['failed']) or '-'}"
                     + (f"; not run: {', '.join(s['not_run'])}" if s["not_run"] else ""))
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Two panels per candidate row set: cuBLAS time / ours per shape (back to back), % of the roofline of both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours = [r for r in rows if r["candidate"] not in ("cublas",) and not r.get("error")]
    names = list(dict.fromkeys(r["candidate"] for r in ours))
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.42 * len(shapes) + 2), 8), sharex=True)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        by = {r["shape"]: r for r in ours if r["candidate"] == name}
        xs = [j + i * width for j, s in enumerate(shapes) if s in by]
        ax1.bar(xs, [by[s]["vs_cublas_loop"] for s in shapes if s in by], width, label=name)
        ax2.bar(xs, [100 * by[s]["pct_roofline"] for s in shapes if s in by], width, label=f"{name}")
    cub = {r["shape"]: r for r in rows if r["candidate"] == "cublas"}
    ax2.plot([j + 0.4 - width / 2 for j in range(len(shapes))], [100 * cub[s]["pct_roofline"] for s in shapes],
             "k_", markersize=14, mew=2, label="cuBLAS", linestyle="none")
    ax1.axhline(1.0, color="k", lw=0.8)
    ax1.set_ylabel("cuBLAS time / ours (back to back)")
    ax2.set_ylabel("% of roofline")
    ax1.set_title(title)
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    ax2.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))], shapes, rotation=70, fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per (shape, candidate), plus the cuBLAS row of each shape (candidate "cublas"); with --csv the
    file is rewritten after every shape, so a run stopped by a time limit keeps the shapes it finished."""
    device = default_device()
    gpu = device.type == "cuda"
    programs = args.num_programs or default_num_programs(device)
    tma = gpu and sm90_or_newer(current_arch()) if args.tma == "auto" else args.tma == "true"
    warmup = args.warmup if args.warmup is not None else (10 if gpu else 1)
    rep = args.rep if args.rep is not None else (40 if gpu else 1)
    gen = torch.Generator(device="cuda" if gpu else "cpu").manual_seed(0)
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for si, shape in enumerate(args.shape_list):
        shape_rows = _sweep_shape(args, shape, gen, device, programs, tma, warmup, rep)
        rows.extend(shape_rows)
        ok = [r for r in shape_rows[1:] if not r.get("error")]
        best = max(ok, key=lambda r: r.get("vs_cublas_loop", 0.0) if gpu else r["vs_cublas"], default=None)
        print(f"[{time.time() - t0:6.1f}s] {si + 1}/{len(args.shape_list)} {shape_rows[0]['shape']}: cuBLAS "
              f"{shape_rows[0]['loop_ms']:.4f} ms back to back; best {best['candidate'] if best else '-'} "
              f"{best['vs_cublas_loop'] if best else float('nan'):.3f}x", flush=True)
        if args.csv:
            write_csv(rows, Path(args.csv))
        if gpu:
            torch.cuda.empty_cache()
    return rows


def exit_code(rows: list[dict[str, Any]]) -> int:
    """1 if a result was wrong, or the default (what a user runs) could not run on a shape; else 0. A listed candidate
    that does not apply to a shape or does not fit the device (its row's `error`) is reported as not run, not
    failed: a sweep lists candidates for many shapes at once."""
    wrong = any(not r.get("passed") and not r.get("error") for r in rows)
    default_missing = any(r.get("error") for r in rows if r["candidate"] in (DEFAULT, "cublas"))
    return 1 if wrong or default_missing else 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except ConfigError as exc:  # one line naming the flag
        print(f"tools.gemm_sweep: error: {exc}", file=sys.stderr)
        return 2
    meta = {"device": sysinfo.device_info(), "software": sysinfo.software_versions(), "git": sysinfo.git_info(),
            "argv": sys.argv[1:] if argv is None else argv, "read_tb_s": read_bandwidth_tb_s()}
    print(f"plain read: {meta['read_tb_s']:.2f} TB/s")
    if args.csv:  # what ran where, first: a run cut short by a time limit keeps it
        path = Path(args.csv)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    rows = run(args)
    print(report(rows))
    if args.csv:
        path = Path(args.csv)
        meta["summary"] = summary(rows)
        path.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
        print(f"wrote {args.csv}")
    if args.png:
        name = meta["device"].get("name", "cpu")
        commit = (meta["git"].get("commit") or "unknown")[:7]
        plot(rows, Path(args.png), f"{args.suite or 'shapes'} on {name}, {args.datatype}, commit {commit}")
        print(f"wrote {args.png}")
    return exit_code(rows)


if __name__ == "__main__":
    sys.exit(main())

"""Which kernels torch.matmul (cuBLAS / cuBLASLt) runs for each shape of a suite, and for how long: the vendor's
own choice of tile, cluster and split-K per shape (its kernel names carry them), beside the tile our GEMM chooses.

    python -m tools.cublas_kernels --suite tp --csv out/cublas_kernels.csv

Each shape is run a few times under torch.profiler on one pair of random contiguous inputs; a row per kernel that
ran in the profiled calls (a split-K reduction shows up as a second kernel), with its mean device time.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from typing import Any

import torch

from streamk_pgas.harness.checks import ConfigError, OneLineParser
from streamk_pgas.harness.dtypes import random_inputs
from streamk_pgas.spec import DATATYPES
from streamk_pgas.stream_k.configs import current_arch
from streamk_pgas.stream_k.gemm import default_num_programs
from streamk_pgas.stream_k.select import choose_gemm
from streamk_pgas.tools.gemm_sweep import load_suite, parse_shapes

CALLS = 5


def kernels_of(m: int, n: int, k: int, dtype: str, gen: torch.Generator) -> list[tuple[str, float]]:
    """(kernel name, mean device µs per call) for torch.matmul on m x k @ k x n, in launch order."""
    device = torch.device("cuda")
    a = random_inputs((m, k), dtype, gen, device)
    b = random_inputs((k, n), dtype, gen, device)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(CALLS):
            torch.matmul(a, b)
        torch.cuda.synchronize()
    total: dict[str, float] = defaultdict(float)
    order: list[str] = []
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if ev.name not in total:
            order.append(ev.name)
        total[ev.name] += ev.device_time
    return [(name, total[name] / CALLS) for name in order]


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m tools.cublas_kernels",
                       description="The kernels torch.matmul runs per shape (names and device time), on one GPU.")
    ap.add_argument("--suite", default=None, help="a suite name (tools/suites/NAME.txt) or a file of 'M N K'")
    ap.add_argument("--shapes", default=None, help="MxNxK[,MxNxK...] instead of a suite")
    ap.add_argument("--datatype", default="bf16", choices=[d for d in DATATYPES if d in ("bf16", "fp16")])
    ap.add_argument("--csv", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    try:
        if (args.suite is None) == (args.shapes is None):
            raise ConfigError("--suite/--shapes", "give exactly one of them")
        shapes = load_suite(args.suite) if args.suite else parse_shapes(args.shapes)
    except ConfigError as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"{ap.prog}: error: needs a CUDA GPU (cuBLAS's kernels are what it lists)", file=sys.stderr)
        return 2
    gen = torch.Generator(device="cuda").manual_seed(0)
    programs = default_num_programs()
    arch = current_arch()
    rows: list[dict[str, Any]] = []
    for m, n, k in shapes:
        ours = choose_gemm(m, n, k, args.datatype, programs, arch).describe()
        for i, (name, us) in enumerate(kernels_of(m, n, k, args.datatype, gen)):
            rows.append({"shape": f"{m}x{n}x{k}", "m": m, "n": n, "k": k, "index": i, "us": round(us, 2),
                         "kernel": name, "ours": ours})
            print(f"{m}x{n}x{k:<8} {us:8.1f} us  {name[:110]}  | ours {ours}", flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

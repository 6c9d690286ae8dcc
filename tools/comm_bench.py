"""The reduce family's communication alone, as nccl-tests measures a collective, beside NCCL's all-reduce and torch
symmetric memory's one-shot and two-shot all-reduce on the same bytes, in the same call.

    mpirun -np 4 python -m tools.comm_bench                                  # |C| 1 MiB .. 1 GiB, powers of 4
    mpirun -np 4 python -m tools.comm_bench --sizes 1MiB,64MiB --programs 32,128 \\
        --csv cb.csv --json cb.json --png cb.png
    TRITON_INTERPRET=1 mpirun -np 2 python -m tools.comm_bench --sizes 8KiB --datatype fp32   # the CPU (gloo)

What runs, for each |C| (bytes of C, `--datatype` elements; C is M x N, rows of 8192 elements, of fewer for a small C):
- ours (`--algorithms`, all_reduce and one_shot): the op's communication step alone (OverlapOp step kind
  "comm_alone") on `--programs` programs: every rank's partial (on the heap, filled once with seeded random
  data) reduced into every rank's C, every tile taken as ready; the step starts with every rank's arrival (no
  rank reads a peer before it is there) and ends with the op's step barrier, as a stand-alone collective must.
- nccl: torch.distributed.all_reduce of a C-sized tensor, in place (gloo on the CPU).
- symm_mem_one_shot / symm_mem_two_shot: torch.ops.symm_mem.one_shot_all_reduce_out and two_shot_all_reduce_
  on a symmetric-memory buffer (GPUs only; NVLink multicast stays off).

Timing (harness.timing.time_loop, what a model sees): after `--warmup` calls, `--iters` calls back to back
between two device events, the slowest rank's time over the call count; the median of 5 such loops, each after
a host barrier and a device-side barrier of every rank's stream (iris_ops.DeviceBarrier). On GPUs also from CUDA
graphs (`--graph 1`, the default there): GRAPH_CALLS calls captured in one graph (harness.timing.CapturedStep),
the replays timed the same way, per call: the device's time without the host's launch cost, which at small |C|
can exceed a call's device time (a capture that fails is one line naming the implementation, its time left empty).
Reported as nccl-tests defines it: algbw = |C| / time, busbw = algbw * 2(W-1)/W (an all-reduce's bus bandwidth,
whatever its algorithm); in the table a graph-replay time follows a "g".

Validation, once per size and implementation before timing: each rank's input is seeded random data; ours must
give C equal bit for bit to the sum of every rank's input added in rank order in fp32 (its promise), the
references within the datatype's tolerance. Exit 1 if any check fails, 2 for a bad flag.

Output: a table on rank 0 (busbw in GB/s, the best of --programs for ours), and with --csv / --json / --png
every row, the run's device and software, and busbw against |C| drawn per implementation.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from streamk_pgas import spec
from streamk_pgas.harness.checks import TOLERANCE, ConfigError, OneLineParser

ALGORITHMS = ("all_reduce", "one_shot")  # the reduce family: C on every rank, from every rank's partial
REFERENCES = ("nccl", "symm_mem_one_shot", "symm_mem_two_shot")
GPU_SIZES = tuple(1 << s for s in range(20, 31, 2))  # 1 MiB .. 1 GiB
CPU_SIZES = (1 << 13,)
GRAPH_CALLS = 10  # calls captured in one CUDA graph for the graph-replay time
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "kb": 1 << 10, "mib": 1 << 20, "mb": 1 << 20, "gib": 1 << 30, "gb": 1 << 30}


def parse_size(text: str) -> int:
    """'64MiB', '1GiB', '8KiB', '4096' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"expected a size such as 4096, 8KiB, 64MiB or 1GiB, got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def human(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def c_shape(nbytes: int, elem: int) -> tuple[int, int]:
    """C's M x N for |C| = nbytes: rows of 8192 elements, or for a small C at least 64 rows (of >= 16 elements)."""
    elems = max(1, nbytes // elem)
    n = min(8192, max(16, elems // 64), elems)
    return max(1, elems // n), n


def bus_factor(world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor."""
    return 2 * (world - 1) / world


def seeded_input(rank: int, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def rank_order_sum(world: int, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Every rank's input added in rank order in fp32, then rounded to the datatype: what ours must give, bit for
    bit."""
    acc = seeded_input(0, shape, dtype, device).float()
    for r in range(1, world):
        acc += seeded_input(r, shape, dtype, device).float()
    return acc.to(dtype)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        from streamk_pgas import iris_ops
        from streamk_pgas.iris_ops.device_barrier import DeviceBarrier
        from streamk_pgas.overlap import OverlapOp
        from streamk_pgas.reference.world import init_world

        self.args = args
        self.dtype = spec.datatype(args.datatype)
        self.tdtype = getattr(torch, self.dtype.torch_name)
        sizes = args.sizes
        need = max(OverlapOp.heap_bytes(alg, *c_shape(s, self.dtype.output_bytes), 64, args.datatype, 1,
                                        mode="fused") for s in sizes for alg in args.algorithms)
        self.shmem = iris_ops.iris(2 * need + (1 << 26))
        self.rank, self.world = self.shmem.get_rank(), self.shmem.get_num_ranks()
        self.device = self.shmem.get_device()
        self.gpu = self.device.type == "cuda"
        self.world_pg = init_world("cuda" if self.gpu else "cpu", args.timeout_s)
        self.barrier_dev = DeviceBarrier(self.shmem, args.timeout_s)
        self.rows: list[dict[str, Any]] = []
        self.failures = 0

    # ---- timing and checks ------------------------------------------------------------------------------
    def time(self, call: Any, what: str = "") -> dict[str, float | None]:
        """Back to back (median, min, max ms a call) and, on GPUs with --graph 1, from graph replays (graph_ms)."""
        per_call = self._loop(call, 1)
        times: dict[str, float | None] = {"median_ms": per_call[len(per_call) // 2], "min_ms": per_call[0],
                                          "max_ms": per_call[-1], "graph_ms": None}
        if self.gpu and self.args.graph:
            from streamk_pgas.harness.timing import CapturedStep

            try:
                graph = CapturedStep(call, calls=GRAPH_CALLS)
            except Exception as exc:  # a capture the implementation does not support: its graph time left empty
                self.say(f"note: {what}: no graph-replay time ({type(exc).__name__}: {str(exc)[:120]})")
                torch.cuda.synchronize()
                return times
            replays = self._loop(graph, GRAPH_CALLS)
            times["graph_ms"] = replays[len(replays) // 2]
        return times

    def _loop(self, call: Any, calls_each: int) -> list[float]:
        """Sorted ms per call of `call` (which makes `calls_each` calls), back to back (harness.timing.time_loop)."""
        from streamk_pgas.harness.timing import time_loop

        iters = max(1, self.args.iters // calls_each)
        per = time_loop(call, iters=iters, warmup=max(1, self.args.warmup // calls_each), barrier=self.shmem.barrier,
                        use_events=self.gpu, allgather=self.shmem.allgather,
                        start_sync=(lambda _i: self.barrier_dev()) if self.gpu else None,
                        repeats=5 if self.gpu else 2)
        return sorted(x / calls_each for x in per)

    def agree(self, ok: bool, what: str) -> bool:
        """Every rank's check result; a failure is one line on rank 0 naming the ranks."""
        everyone = self.shmem.allgather(bool(ok))
        bad = [r for r, v in enumerate(everyone) if not v]
        if bad:
            self.failures += 1
            self.say(f"CHECK FAILED: {what} on rank(s) {bad}")
        return not bad

    def say(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def record(self, impl: str, algorithm: str, nbytes: int, programs: int | None, times: dict[str, float | None],
               valid: bool, note: str = "") -> None:
        median, graph = times["median_ms"], times["graph_ms"]
        assert median is not None and times["min_ms"] is not None and times["max_ms"] is not None
        algbw = nbytes / (median / 1e3) / 1e9
        graph_bus = nbytes / (graph / 1e3) / 1e9 * bus_factor(self.world) if graph else None
        self.rows.append({"implementation": impl, "algorithm": algorithm, "bytes": nbytes, "programs": programs,
                          "world_size": self.world, "datatype": self.args.datatype,
                          "time_us": median * 1e3, "min_us": times["min_ms"] * 1e3,
                          "max_us": times["max_ms"] * 1e3, "algbw_gbs": algbw,
                          "busbw_gbs": algbw * bus_factor(self.world),
                          "graph_us": graph * 1e3 if graph else None, "graph_busbw_gbs": graph_bus,
                          "validated": valid, "note": note})

    # ---- ours ---------------------------------------------------------------------------------------------
    def ours(self, alg: str, nbytes: int) -> None:
        for programs in self.args.programs:
            self.shmem.reset_allocator()
            self._ours_on(alg, nbytes, programs)
            self.shmem.barrier()

    def _ours_on(self, alg: str, nbytes: int, programs: int) -> None:
        from streamk_pgas.overlap import OverlapOp
        from streamk_pgas.overlap.config import SlowModeWarning

        m, n = c_shape(nbytes, self.dtype.output_bytes)
        with warnings.catch_warnings():  # the op's steps with its one-program GEMM never run here: nothing to warn of
            warnings.simplefilter("ignore", SlowModeWarning)
            op = OverlapOp.create(self.shmem, alg, m, n, 64 * self.world, self.args.datatype, "fused",
                                  total_sms=programs + 1, gemm_sms=1, timeout_s=self.args.timeout_s)
        for plane in op.buffers.partial_planes:  # every step's plane holds the same partial
            plane.copy_(seeded_input(self.rank, (m, n), self.tdtype, self.device))
        step = op.step_for("comm_alone")
        self.shmem.barrier()
        op.run(step)
        op.check_errors()
        want = rank_order_sum(self.world, (m, n), self.tdtype, self.device)
        valid = self.agree(torch.equal(op.c.contiguous(), want),
                           f"{alg} on {programs} programs, |C| {human(nbytes)}: C is not the rank-order sum")
        times = self.time(lambda: op.run(step), f"{alg} on {programs} programs")
        op.check_errors()
        self.record("streamk-pgas", alg, nbytes, programs, times, valid)

    # ---- the references -----------------------------------------------------------------------------------
    def reference(self, name: str, nbytes: int) -> None:
        import torch.distributed as dist

        m, n = c_shape(nbytes, self.dtype.output_bytes)
        mine = seeded_input(self.rank, (m, n), self.tdtype, self.device)
        if name == "nccl":
            buf = mine.clone()
            dist.all_reduce(buf)
            out, call = buf, (lambda: dist.all_reduce(buf))
            impl = self.world_pg.comm_library
        else:
            if not self.gpu:
                return
            import torch.distributed._symmetric_memory as symm_mem

            buf = symm_mem.empty(m, n, dtype=self.tdtype, device=self.device)
            symm_mem.rendezvous(buf, self.world_pg.group)
            group = self.world_pg.group.group_name
            buf.copy_(mine)
            torch.cuda.synchronize()
            self.shmem.barrier()
            if name == "symm_mem_one_shot":
                res = torch.empty_like(buf)
                torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", group, res)
                out, call = res, (lambda: torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", group, res))
            else:
                torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)
                out, call = buf, (lambda: torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group))
            impl = "torch-" + name.replace("_", "-")
        if self.gpu:
            torch.cuda.synchronize()
        want = rank_order_sum(self.world, (m, n), self.tdtype, self.device).float()
        err = float(torch.linalg.norm(out.float() - want) / torch.linalg.norm(want))
        valid = self.agree(err <= TOLERANCE[self.args.datatype], f"{name}, |C| {human(nbytes)}: error {err:.3g}")
        times = self.time(call, impl)
        self.record(impl, "all_reduce", nbytes, None, times, valid)
        self.shmem.barrier()

    # ---- the run ----------------------------------------------------------------------------------------
    def run(self) -> None:
        for nbytes in self.args.sizes:
            for alg in self.args.algorithms:
                self.ours(alg, nbytes)
            for ref in self.args.references:
                self.reference(ref, nbytes)
            self.say(self.table_line(nbytes))

    def columns(self) -> list[tuple[str, str]]:
        """(implementation, algorithm) pairs in table order."""
        seen: list[tuple[str, str]] = []
        for r in self.rows:
            key = (r["implementation"], r["algorithm"])
            if key not in seen:
                seen.append(key)
        return seen

    def best(self, impl: str, alg: str, nbytes: int) -> dict[str, Any] | None:
        rows = [r for r in self.rows if (r["implementation"], r["algorithm"], r["bytes"]) == (impl, alg, nbytes)]
        return min(rows, key=lambda r: r["time_us"]) if rows else None

    def table_line(self, nbytes: int) -> str:
        cells = []
        for impl, alg in self.columns():
            r = self.best(impl, alg, nbytes)
            if r is None:
                cells.append(f"{'-':>26}")
                continue
            p = f" p{r['programs']}" if r["programs"] else ""
            g = f" g{r['graph_us']:.1f}" if r["graph_us"] else ""
            cells.append(f"{r['time_us']:9.1f}us{g} {r['busbw_gbs']:6.1f}GB/s{p:>5}")
        return f"{human(nbytes):>8} | " + " | ".join(cells)

    def header(self) -> str:
        names = [f"{(alg if impl == 'streamk-pgas' else impl)[:26]:>26}" for impl, alg in self.columns()]
        return f"{'|C|':>8} | " + " | ".join(names)

    def write(self) -> None:
        a = self.args
        if a.csv:
            Path(a.csv).parent.mkdir(parents=True, exist_ok=True)
            with open(a.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(self.rows[0]))
                w.writeheader()
                w.writerows(self.rows)
        if a.json:
            from streamk_pgas.harness.sysinfo import device_info, git_info, software_versions

            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps({
                "tool": "tools.comm_bench", "world_size": self.world, "datatype": a.datatype,
                "iters": a.iters, "warmup": a.warmup, "device": device_info(), "git": git_info(),
                "software": software_versions(), "env": {k: v for k, v in os.environ.items()
                                                         if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))},
                "rows": self.rows}, indent=1, default=str) + "\n")
        if a.png:
            self.plot(Path(a.png))

    def plot(self, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
        for impl, alg in self.columns():
            pts = [(s, self.best(impl, alg, s)) for s in self.args.sizes]
            pts = [(s, r["busbw_gbs"]) for s, r in pts if r is not None]
            label = f"streamk-pgas {alg} (best of {','.join(map(str, self.args.programs))} programs)" \
                if impl == "streamk-pgas" else impl
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(self.args.sizes, [human(s) for s in self.args.sizes])
        ax.set_xlabel("|C| (bytes of the all-reduced tensor)")
        ax.set_ylabel("bus bandwidth (GB/s, nccl-tests' definition)")
        where = "CPU interpreter and gloo: not GPU figures" if not self.gpu else torch.cuda.get_device_name()
        ax.set_title(f"all-reduce alone, {self.world} ranks, {self.args.datatype} ({where})", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from streamk_pgas.iris_ops.env import interpreted, use_interpreter_without_gpu

    use_interpreter_without_gpu()
    on_cpu = interpreted()

    def sizes(text: str) -> list[int]:
        return [parse_size(x) for x in text.split(",") if x]

    def ints(text: str) -> list[int]:
        try:
            vals = [int(x) for x in text.split(",") if x]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not vals or any(v < 1 or v > 1024 for v in vals):
            raise argparse.ArgumentTypeError(f"each must be in [1, 1024], got {text!r}")
        return vals

    def names(valid: tuple[str, ...]) -> Any:
        def parse(text: str) -> list[str]:
            vals = [x for x in text.split(",") if x]
            bad = [x for x in vals if x not in valid]
            if bad:
                raise argparse.ArgumentTypeError(f"each must be one of {', '.join(valid)}, got {bad[0]!r}")
            return vals
        return parse

    ap = OneLineParser(prog="python -m tools.comm_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=sizes, default=list(CPU_SIZES if on_cpu else GPU_SIZES),
                    help="bytes of C, comma-separated (1MiB..1GiB in powers of 4 on a GPU; 8KiB on the CPU)")
    ap.add_argument("--algorithms", type=names(ALGORITHMS), default=list(ALGORITHMS))
    ap.add_argument("--references", type=names(REFERENCES), default=list(REFERENCES),
                    help="symm_mem_* run on GPUs only")
    ap.add_argument("--programs", type=ints, default=[2] if on_cpu else [32, 64, 128],
                    help="communication programs of ours, comma-separated (the best is tabled)")
    ap.add_argument("--datatype", default="fp32" if on_cpu else "bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--iters", type=int, default=1 if on_cpu else 20)
    ap.add_argument("--warmup", type=int, default=1 if on_cpu else 5)
    ap.add_argument("--graph", type=int, choices=(0, 1), default=0 if on_cpu else 1,
                    help="1: also time each implementation from CUDA graph replays (GPUs; default 1 there)")
    ap.add_argument("--timeout_s", type=float, default=30.0)
    ap.add_argument("--csv", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--png", default="")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        raise ConfigError("--iters", "must be >= 1 (and --warmup >= 0)")
    if not 0 < args.timeout_s <= 86400:
        raise ConfigError("--timeout_s", f"must be in (0, 86400], got {args.timeout_s}")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except ConfigError as exc:
        print(f"comm_bench: error: {exc}", file=sys.stderr)
        return 2
    bench = Bench(args)
    bench.say(f"all-reduce alone on {bench.world} ranks, {args.datatype}, device {bench.device}; busbw = |C|/t * "
              f"2(W-1)/W; ours: the best of {args.programs} programs")
    bench.run()
    bench.say(bench.header())
    for nbytes in args.sizes:
        bench.say(bench.table_line(nbytes))
    if bench.rank == 0 and bench.rows:
        bench.write()
    bench.shmem.barrier()
    bench.world_pg.close()
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())

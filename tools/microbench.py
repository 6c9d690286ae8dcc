"""Micro-benchmark of the symmetric heap: remote read / write bandwidth and flag round-trip latency.

Usage (one rank per GPU; ranks 0 and 1 take part, any others only meet at the barriers):

    mpirun -np 2 python -m tools.microbench                                  # 1 MB ... 1 GB, powers of 4
    mpirun -np 2 python -m tools.microbench --sizes 1MB,64MB,1GB --programs 32 --output_file mb.json
    TRITON_INTERPRET=1 mpirun -np 2 python -m tools.microbench --sizes 4KB,16KB   # CPU smoke test

What it measures, each after `--warmup` untimed iterations, as the median of `--iters`, with every
rank drained and met at a barrier before each iteration. GPU times come from CUDA events around
the launch, with a ~0.5 ms spin kernel queued ahead so that they measure execution, not the host's
launch latency (CPU: the host clock):

- remote_read: a persistent Triton kernel on rank 0 (`--programs` programs, default one per SM)
  loads rank 1's buffer through `iris_ops.load` (pointer translation by heap bases) in contiguous
  blocks of `--block` int32 elements (default 8192 = 32 KB in flight per program and iteration,
  16-byte vector accesses; halved down to 1024 for small sizes so every program gets a block) and
  stores it into a local buffer. `--hoist_translate` translates the base pointer once per program
  instead of per block, to compare.
- remote_write: the same kernel shape storing a local buffer into rank 1's heap through
  `iris_ops.store`.
- torch_copy: for comparison, `torch` copying the same bytes through a tensor that views rank 1's
  heap at its mapped address (`__cuda_array_interface__` on the GPU; torch places the view on the
  device CUDA reports for the pointer, the peer GPU, so `copy_` is torch's cross-device peer copy;
  a memcpy on the CPU backend). Reported as unavailable, with the reason, if the view fails.
- flag_roundtrip: rank 0 `notify`s rank 1's flag and `wait`s on its own, rank 1 waits then notifies
  back, `--rounds` times in one launch per rank; flags carry epochs, so nothing is reset between
  launches. On NVIDIA the time comes from %globaltimer inside rank 0's kernel, from the end of the
  first round to the last (launch skew between the ranks is excluded); elsewhere from the host
  clock around the launch (interpreter: not a latency, only a smoke test).

Options: --sizes (1MB..1GB in powers of 4 on a GPU; 4KB,16KB on the CPU), --programs, --block,
--num_warps (8), --hoist_translate, --iters (20), --warmup (5), --rounds (1000), --peer (1),
--skip_torch, --skip_roundtrip, --output_file. Each rank's heap holds two buffers of the largest size.

Bandwidth is bytes / median time (GB/s = 1e9 B/s), one direction (rank 1 -> rank 0 for reads).
Every transfer is validated against regenerated random data; the exit code is 1 if any check fails.
Targets on 2 x H200: read and write >= 90% of the torch peer copy, round trip <= 5 us.

Output: a table on rank 0, and with `--output_file F` one JSON object (schema
"streamk-pgas/microbench/1", its own: harness.runlog's records describe GEMM runs) holding the
flags, device/software/git info and a list of results, each with algorithm ("remote_read",
"remote_write", "flag_roundtrip"), implementation ("iris_ops" or "torch_copy"), bytes, median_ms,
timing stats, gbps (or roundtrip_us) and its validation.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

from streamk_pgas import iris_ops
from streamk_pgas.harness import sysinfo
from streamk_pgas.harness.runlog import summarize_ms
from streamk_pgas.iris_ops.env import interpreted, on_gpu

SCHEMA = "streamk-pgas/microbench/1"
INTERPRET = interpreted()
ELEM = torch.int32
ELEM_BYTES = 4
TARGET_FRACTION = 0.90
TARGET_ROUNDTRIP_US = 5.0
SLEEP_CYCLES = 1_000_000  # ~0.5 ms of GPU spin ahead of each timed launch


# ---------------------------------------------------------------------------------------------
# Kernels


@triton.jit
def remote_read_kernel(dst, src, n_elements, cur_rank, peer, heap_bases,
                       BLOCK: tl.constexpr, EVEN: tl.constexpr, HOIST: tl.constexpr):
    """dst[:n] (local) = peer's src[:n], persistent over blocks of BLOCK elements."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    num_blocks = tl.cdiv(n_elements, BLOCK)
    if HOIST:
        remote = iris_ops.translate(src, cur_rank, peer, heap_bases)
    else:
        remote = src
    for blk in range(pid, num_blocks, nprog):
        offs = blk * BLOCK + tl.arange(0, BLOCK)  # int32: sizes below 8 GB
        if EVEN:
            if HOIST:
                x = tl.load(remote + offs)
            else:
                x = iris_ops.load(src + offs, cur_rank, peer, heap_bases)
            tl.store(dst + offs, x)
        else:
            mask = offs < n_elements
            if HOIST:
                x = tl.load(remote + offs, mask=mask)
            else:
                x = iris_ops.load(src + offs, cur_rank, peer, heap_bases, mask=mask)
            tl.store(dst + offs, x, mask=mask)


@triton.jit
def remote_write_kernel(dst, src, n_elements, cur_rank, peer, heap_bases,
                        BLOCK: tl.constexpr, EVEN: tl.constexpr, HOIST: tl.constexpr):
    """peer's dst[:n] = src[:n] (local), persistent over blocks of BLOCK elements."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    num_blocks = tl.cdiv(n_elements, BLOCK)
    if HOIST:
        remote = iris_ops.translate(dst, cur_rank, peer, heap_bases)
    else:
        remote = dst
    for blk in range(pid, num_blocks, nprog):
        offs = blk * BLOCK + tl.arange(0, BLOCK)  # int32: sizes below 8 GB
        if EVEN:
            x = tl.load(src + offs)
            if HOIST:
                tl.store(remote + offs, x)
            else:
                iris_ops.store(dst + offs, x, cur_rank, peer, heap_bases)
        else:
            mask = offs < n_elements
            x = tl.load(src + offs, mask=mask)
            if HOIST:
                tl.store(remote + offs, x, mask=mask)
            else:
                iris_ops.store(dst + offs, x, cur_rank, peer, heap_bases, mask=mask)


@triton.jit
def _one_round(flag, epoch, cur_rank, peer, heap_bases, max_spins, IS_PING: tl.constexpr):
    if IS_PING:
        iris_ops.notify(flag, epoch, cur_rank, peer, heap_bases)
        reached = iris_ops.wait(flag, epoch, cur_rank, cur_rank, heap_bases, max_spins)
    else:
        reached = iris_ops.wait(flag, epoch, cur_rank, cur_rank, heap_bases, max_spins)
        iris_ops.notify(flag, epoch, cur_rank, peer, heap_bases)
    return reached.to(tl.int32)


@triton.jit
def pingpong_kernel(flag, out, clock, cur_rank, peer, heap_bases, base_epoch, rounds, max_spins,
                    IS_PING: tl.constexpr, KIND: tl.constexpr):
    """`rounds` round trips; out = [time after round 1, time after the last round, all waits succeeded]."""
    ok = _one_round(flag, base_epoch + 1, cur_rank, peer, heap_bases, max_spins, IS_PING)
    t1 = iris_ops.read_timer(clock, KIND)
    for r in range(2, rounds + 1):
        ok = ok & _one_round(flag, base_epoch + r, cur_rank, peer, heap_bases, max_spins, IS_PING)
    t2 = iris_ops.read_timer(clock, KIND)
    tl.store(out + 0, t1.to(tl.int64))
    tl.store(out + 1, t2.to(tl.int64))
    tl.store(out + 2, ok.to(tl.int64))


# ---------------------------------------------------------------------------------------------
# Helpers


def parse_size(text: str) -> int:
    """'4KB', '1MB', '1GB' (powers of 1024) or plain bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?B?|B)?\s*", text, flags=re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot parse size {text!r} (use e.g. 4KB, 1MB, 1GB)")
    scale = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[(m.group(2) or "").upper()[:1]]
    size = int(m.group(1)) * scale
    if size <= 0 or size % ELEM_BYTES or size > (4 << 30):
        raise argparse.ArgumentTypeError(f"size {text!r} must be a multiple of {ELEM_BYTES} bytes in (0, 4GB]")
    return size


def human(nbytes: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


class _CudaMemory:
    """Exposes raw device memory to torch.as_tensor (a view, no copy)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2, "strides": None,
        }


def peer_view(address: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """A tensor over `nbytes` of memory mapped at `address` in this process (e.g. a peer's heap)."""
    if device.type == "cuda":
        # Left on the device CUDA reports for the pointer (asking for another would copy).
        return torch.as_tensor(_CudaMemory(address, nbytes)).view(ELEM)
    buf = (ctypes.c_uint8 * nbytes).from_address(address)
    return torch.frombuffer(buf, dtype=torch.uint8).view(ELEM)


def random_fill(n: int, seed: int, device: torch.device) -> torch.Tensor:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return torch.randint(-(2**31), 2**31 - 1, (n,), generator=gen, dtype=ELEM, device=device)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        max_bytes = max(args.sizes)
        self.sh = iris_ops.iris(2 * max_bytes + (4 << 20))
        self.rank = self.sh.get_rank()
        self.world = self.sh.get_num_ranks()
        if self.world < 2:
            raise SystemExit("tools.microbench needs at least 2 ranks: mpirun -np 2 python -m tools.microbench")
        self.peer = args.peer
        if not 1 <= self.peer < self.world:
            raise SystemExit(f"--peer must be a rank in 1..{self.world - 1}")
        self.device = self.sh.get_device()
        self.gpu = self.device.type == "cuda"
        n_max = max_bytes // ELEM_BYTES
        self.a = self.sh.zeros(n_max, dtype=ELEM)  # rank 0's local side
        self.b = self.sh.zeros(n_max, dtype=ELEM)  # the peer's side (symmetric: same offset everywhere)
        self.flag = self.sh.zeros(1, dtype=torch.int32)
        self.clock = self.sh.zeros(1, dtype=torch.int64)
        self.bases = [int(x) for x in self.sh.get_heap_bases().cpu().tolist()]
        self.programs = args.programs or (self.sh.get_cu_count() if self.gpu else 2)
        self.block = args.block or (8192 if self.gpu else 256)
        self.results: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self._peer_b: torch.Tensor | None = None
        self.peer_view_error: str | None = None
        if self.rank == 0 and not args.skip_torch:
            try:
                offset = self.b.data_ptr() - self.bases[0]
                self._peer_b = peer_view(self.bases[self.peer] + offset, max_bytes, self.device)
            except Exception as exc:
                self.peer_view_error = f"{type(exc).__name__}: {exc}"

    # -- plumbing ----------------------------------------------------------------------------------
    def time(self, step_on_rank0: Any, everyone: Any = None) -> list[float]:
        """Per-iteration milliseconds of rank 0's step (or of `everyone` run on all ranks), as rank 0 saw them.

        Before each iteration every rank drains its device and meets the others. On the GPU a short
        spin kernel (torch.cuda._sleep) is queued ahead of the start event, so the launches being timed
        are queued behind it and the events measure GPU execution, not the host's launch latency.
        """
        samples: list[float] = []
        error: str | None = None
        step = everyone if everyone is not None else (step_on_rank0 if self.rank == 0 else None)

        def run() -> None:
            nonlocal error
            if step is None or error is not None:
                return
            try:
                step()
            except Exception as exc:  # keep meeting the other ranks; raise everywhere afterwards
                error = f"rank {self.rank}: {type(exc).__name__}: {exc}"

        for it in range(self.args.warmup + self.args.iters):
            self.sh.barrier()
            if self.gpu:
                if hasattr(torch.cuda, "_sleep"):
                    torch.cuda._sleep(SLEEP_CYCLES)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                run()
                ms = (time.perf_counter() - t0) * 1e3
            if it >= self.args.warmup:
                samples.append(ms)
        errors = [e for e in self.sh.allgather(error) if e]
        if errors:
            raise RuntimeError("; ".join(errors))
        return self.sh.broadcast(samples, source_rank=0)

    def check(self, what: str, ok_here: bool) -> bool:
        """All ranks agree on a validation (each knows only its own part)."""
        ok = all(self.sh.allgather(bool(ok_here)))
        if not ok:
            self.failures.append(what)
        return ok

    def record(self, algorithm: str, implementation: str, nbytes: int, samples: list[float] | None,
               passed: bool | None, note: str | None = None, **extra: Any) -> None:
        stats = summarize_ms(samples) if samples else None
        median = stats["median"] if stats else None
        row: dict[str, Any] = {
            "algorithm": algorithm, "implementation": implementation, "bytes": nbytes,
            "median_ms": median, "stats": stats,
            "gbps": nbytes / (median * 1e-3) / 1e9 if median and algorithm != "flag_roundtrip" else None,
            "validation": {"enabled": passed is not None, "passed": passed},
        }
        if note:
            row["note"] = note
        row.update(extra)
        self.results.append(row)

    def shape(self, n: int) -> tuple[int, int]:
        """(block, programs) for n elements: the default block halves (not below 1024) until every program
        has a block, so that small transfers still spread over all programs."""
        block = self.block
        if not self.args.block:
            while block > 1024 and triton.cdiv(n, block) < self.programs:
                block //= 2
        return block, max(1, min(self.programs, triton.cdiv(n, block)))

    def launch(self, kernel: Any, dst: torch.Tensor, src: torch.Tensor, n: int) -> None:
        block, programs = self.shape(n)
        kernel[(programs,)](dst, src, n, 0, self.peer, self.sh.get_heap_bases(), BLOCK=block,
                            EVEN=n % block == 0, HOIST=self.args.hoist_translate, num_warps=self.args.num_warps)

    # -- measurements ------------------------------------------------------------------------------
    def bandwidth(self, nbytes: int) -> None:
        n = nbytes // ELEM_BYTES
        a, b = self.a[:n], self.b[:n]
        seed_read, seed_write = 1000 + n, 2000 + n
        peer_b = self._peer_b[:n] if self._peer_b is not None else None

        # remote read: rank 0 pulls the peer's b into its a
        if self.rank == self.peer:
            b.copy_(random_fill(n, seed_read, self.device))
        a.zero_()
        samples = self.time(lambda: self.launch(remote_read_kernel, a, b, n))
        ok = True if self.rank != 0 else torch.equal(a, random_fill(n, seed_read, self.device))
        block, programs = self.shape(n)
        self.record("remote_read", "iris_ops", nbytes, samples, self.check(f"remote_read {human(nbytes)}", ok),
                    block_elements=block, programs=programs)
        self.torch_copy("remote_read", nbytes, n, lambda: a.copy_(peer_b) if peer_b is not None else None,
                        lambda: a.zero_(), lambda: torch.equal(a, random_fill(n, seed_read, self.device)), 0)

        # remote write: rank 0 pushes fresh data from its a into the peer's b
        if self.rank == 0:
            a.copy_(random_fill(n, seed_write, self.device))
        b.zero_()
        samples = self.time(lambda: self.launch(remote_write_kernel, b, a, n))
        ok = True if self.rank != self.peer else torch.equal(b, random_fill(n, seed_write, self.device))
        self.record("remote_write", "iris_ops", nbytes, samples, self.check(f"remote_write {human(nbytes)}", ok),
                    block_elements=block, programs=programs)
        self.torch_copy("remote_write", nbytes, n, lambda: peer_b.copy_(a) if peer_b is not None else None,
                        lambda: b.zero_(), lambda: torch.equal(b, random_fill(n, seed_write, self.device)),
                        self.peer)

    def torch_copy(self, algorithm: str, nbytes: int, n: int, copy: Any, reset: Any, verify: Any,
                   verifier: int) -> None:
        available = all(self.sh.allgather(self._peer_b is not None or self.rank != 0))
        if not available:
            note = "skipped (--skip_torch)" if self.args.skip_torch else f"no peer view: {self.peer_view_error}"
            self.record(algorithm, "torch_copy", nbytes, None, None, note=note)
            return
        reset()
        try:
            samples = self.time(copy)
        except RuntimeError as exc:  # raised on every rank alike; a failed peer copy must not end the run
            self.record(algorithm, "torch_copy", nbytes, None, None, note=f"failed: {exc}")
            return
        ok = verify() if self.rank == verifier else True
        note = None
        if self._peer_b is not None:
            note = f"peer view on {self._peer_b.device}"
        self.record(algorithm, "torch_copy", nbytes, samples,
                    self.check(f"torch {algorithm} {human(nbytes)}", ok), note=note)

    def roundtrip(self) -> None:
        rounds = self.args.rounds or (1000 if self.gpu else 4)
        kind = iris_ops.default_timer_kind()
        max_spins = iris_ops.spin_budget(10.0) if not INTERPRET else 20_000
        total = self.args.warmup + self.args.iters
        out = self.sh.zeros((total, 3), dtype=torch.int64)
        self.flag.zero_()
        self.sh.barrier()
        it = {"n": 0}
        active = self.rank in (0, self.peer)
        partner = self.peer if self.rank == 0 else 0

        def both() -> None:
            k = it["n"]
            it["n"] += 1
            if active:
                pingpong_kernel[(1,)](self.flag, out[k], self.clock, self.rank, partner, self.sh.get_heap_bases(),
                                      k * rounds, rounds, max_spins, IS_PING=self.rank == 0, KIND=kind, num_warps=1)

        samples = self.time(None, everyone=both)
        res = out.cpu()
        ok = bool(res[:, 2].eq(1).all()) if active else True
        passed = self.check("flag_roundtrip: a wait timed out", ok)
        timer = "host"
        per_rt_ms = [s / rounds for s in samples]
        if kind == iris_ops.TIMER_GLOBALTIMER and rounds > 1:
            timer = "globaltimer"
            if self.rank == 0:
                ns = (res[self.args.warmup :, 1] - res[self.args.warmup :, 0]).double() / (rounds - 1)
                per_rt_ms = [v * 1e-6 for v in ns.tolist()]
            per_rt_ms = self.sh.broadcast(per_rt_ms, source_rank=0)
        stats = summarize_ms(per_rt_ms)
        self.record("flag_roundtrip", "iris_ops", 4, per_rt_ms, passed, rounds=rounds, timer=timer,
                    roundtrip_us=stats["median"] * 1e3)

    # -- report ------------------------------------------------------------------------------------
    def report(self) -> None:
        if self.rank != 0:
            return
        print(f"tools.microbench: {self.world} ranks, rank 0 <-> rank {self.peer}, device {self.device}, "
              f"up to {self.programs} programs x {self.block} int32, {self.args.num_warps} warps, "
              f"{'hoisted translate' if self.args.hoist_translate else 'iris_ops.load/store per block'}; "
              f"median of {self.args.iters} after {self.args.warmup} warm-up")
        by = {(r["algorithm"], r["implementation"], r["bytes"]): r for r in self.results}

        def gbps(alg: str, impl: str, nb: int) -> float | None:
            r = by.get((alg, impl, nb))
            return r["gbps"] if r else None

        def fmt(x: float | None) -> str:
            return f"{x:10.4g}" if x is not None else f"{'n/a':>10s}"

        header = (f"{'size':>8s} | {'read':>10s} {'torch':>10s} {'ratio':>6s} | "
                  f"{'write':>10s} {'torch':>10s} {'ratio':>6s}   (GB/s)")
        print(header)
        print("-" * len(header))
        for nb in self.args.sizes:
            cells = []
            for alg in ("remote_read", "remote_write"):
                mine, ref = gbps(alg, "iris_ops", nb), gbps(alg, "torch_copy", nb)
                ratio = f"{mine / ref:6.2f}" if mine and ref else f"{'':6s}"
                cells.append(f"{fmt(mine)} {fmt(ref)} {ratio}")
            print(f"{human(nb):>8s} | {cells[0]} | {cells[1]}")
        for r in self.results:
            if r["algorithm"] == "flag_roundtrip":
                print(f"flag round trip: {r['roundtrip_us']:.2f} us median over {r['stats']['count']} "
                      f"launches of {r['rounds']} rounds ({r['timer']} timer)")
        for r in self.results:
            if r.get("note") and r["implementation"] == "torch_copy" and not r["median_ms"]:
                print(f"torch copy {r['algorithm']} {human(r['bytes'])}: {r['note']}")
                break
        print("validation: " + ("passed" if not self.failures else "FAILED: " + "; ".join(self.failures)), flush=True)

    def write(self, path: Path) -> None:
        if self.rank != 0:
            return
        record = {
            "schema": SCHEMA,
            "producer": "microbench",
            "world_size": self.world,
            "ranks": {"local": 0, "peer": self.peer},
            "flags": {k: v for k, v in vars(self.args).items() if k != "output_file"},
            "kernel": {"programs": self.programs, "block_elements": self.block, "element": "int32",
                       "num_warps": self.args.num_warps, "hoist_translate": self.args.hoist_translate},
            "backend": self.sh.backend_name,
            "interpreter": INTERPRET,
            "device": sysinfo.device_info(self.device if self.gpu else None),
            "software": sysinfo.software_versions(),
            "git": sysinfo.git_info(),
            "targets": {"fraction_of_torch_copy": TARGET_FRACTION, "roundtrip_us": TARGET_ROUNDTRIP_US},
            "results": self.results,
            "validation": {"passed": not self.failures, "failures": self.failures},
            "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2, default=str) + "\n")
        print(f"wrote {path}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.microbench",
                                description="Remote read/write bandwidth and flag round trip on the symmetric heap.")
    p.add_argument("--sizes", default=None,
                   help="comma-separated transfer sizes, e.g. 1MB,4MB,1GB (default: 1MB..1GB in powers of 4 on a GPU, "
                        "4KB,16KB under the interpreter)")
    p.add_argument("--programs", type=int, default=0, help="programs of the copy kernels (default: one per SM)")
    p.add_argument("--block", type=int, default=0,
                   help="int32 elements per program iteration (default 8192; 256 on CPU)")
    p.add_argument("--num_warps", type=int, default=8)
    p.add_argument("--hoist_translate", action="store_true",
                   help="translate the base pointer once per program instead of calling iris_ops.load/store per block")
    p.add_argument("--iters", type=int, default=0, help="timed iterations (default 20; 3 under the interpreter)")
    p.add_argument("--warmup", type=int, default=-1,
                   help="untimed iterations first (default 5; 1 under the interpreter)")
    p.add_argument("--rounds", type=int, default=0, help="round trips per ping-pong launch (default 1000; 4 on CPU)")
    p.add_argument("--peer", type=int, default=1, help="the rank rank 0 reads from and writes to")
    p.add_argument("--skip_torch", action="store_true", help="do not measure the torch copy")
    p.add_argument("--skip_roundtrip", action="store_true")
    p.add_argument("--output_file", type=Path, default=None, help="write the JSON record here (rank 0)")
    args = p.parse_args(argv)
    gpu = on_gpu()
    default_sizes = [1 << (20 + 2 * k) for k in range(6)] if gpu else [4 << 10, 16 << 10]
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()] if args.sizes else default_sizes
    args.iters = args.iters or (20 if gpu else 3)
    args.warmup = args.warmup if args.warmup >= 0 else (5 if gpu else 1)
    if args.block and args.block & (args.block - 1):
        p.error("--block must be a power of 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    for nbytes in args.sizes:
        bench.bandwidth(nbytes)
    if not args.skip_roundtrip:
        bench.roundtrip()
    bench.report()
    if args.output_file is not None:
        bench.write(args.output_file)
    bench.sh.barrier()
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())

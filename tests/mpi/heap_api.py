"""The iris_ops host API on every rank of an MPI job.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/heap_api.py --json results.json

Each rank runs the checks below and rank 0 writes one JSON summary:
    {"world_size": W, "backend": str, "heap_files": [path per rank] (shm), "checks": {name: {"ok": bool,
     "errors": [str, ...]}}}
tests/test_iris_heap.py turns each check into a test.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from mpi_checks import merge_checks, run_checks

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.bootstrap import get_bootstrap

CHECKS: list[str] = [
    "world",
    "heap_bases",
    "constructors",
    "symmetric_offsets",
    "translate_host",
    "barrier",
    "broadcast",
    "allgather",
    "cu_count",
    "wall_clock_rate",
    "memory_error",
    "placement",
    "heap_file_unlinked",
]


def read_mapped(address: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """A CPU copy of `nbytes` at `address` as mapped in this process (a peer's heap, say).

    On a GPU the copy is made in this rank's own CUDA context. (A tensor made from the address would be placed
    on the device that owns the memory, the peer's, and copied in a context of that device, which a heap of
    torch symmetric memory does not grant access to: the peer's mapping is made for this rank's device only.)"""
    if device.type == "cuda":
        from streamk_pgas.iris_ops.backends.cuda_ipc import check, cuda_modules

        driver, _ = cuda_modules()
        torch.cuda.synchronize(device)
        buf = bytearray(nbytes)
        host = (ctypes.c_char * nbytes).from_buffer(buf)
        check(driver.cuMemcpyDtoH(ctypes.addressof(host), driver.CUdeviceptr(address), nbytes),
              f"cuMemcpyDtoH from {address:#x}")
        return torch.frombuffer(buf, dtype=torch.uint8)
    return torch.frombuffer(bytearray(ctypes.string_at(address, nbytes)), dtype=torch.uint8)


class Checker:
    def __init__(self, sh: Any) -> None:
        self.sh = sh
        self.me = sh.get_rank()
        self.w = sh.get_num_ranks()
        self.dev = sh.get_device()
        self.errors: list[str] = []

    def expect(self, cond: bool, text: str) -> None:
        if not cond:
            self.errors.append(text)

    def offset(self, t: torch.Tensor) -> int:
        return t.data_ptr() - self.sh.memory_pool.data_ptr()

    # -- checks ------------------------------------------------------------------------------------
    def world(self) -> None:
        boot = get_bootstrap()
        self.expect(boot.launcher == "mpi", f"launcher {boot.launcher!r}, expected 'mpi'")
        env_rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMIX_RANK"))
        env_size = os.environ.get("OMPI_COMM_WORLD_SIZE")
        if env_rank is not None:
            self.expect(self.me == int(env_rank), f"get_rank {self.me} but the launcher says {env_rank}")
        if env_size is not None:
            self.expect(self.w == int(env_size), f"get_num_ranks {self.w} but the launcher says {env_size}")
        ranks = self.sh.allgather(self.me)
        self.expect(sorted(ranks) == list(range(self.w)), f"ranks over the world: {ranks}")

    def heap_bases(self) -> None:
        hb = self.sh.get_heap_bases()
        self.expect(hb.dtype == torch.int64 and hb.shape == (self.w,), f"heap_bases {hb.dtype} {tuple(hb.shape)}")
        self.expect(hb.device == self.dev, f"heap_bases on {hb.device}, heap on {self.dev}")
        bases = [int(b) for b in hb.cpu().tolist()]
        self.expect(bases[self.me] == self.sh.memory_pool.data_ptr(), "heap_bases[me] is not this rank's heap")
        self.expect(len(set(bases)) == self.w, f"heap bases are not distinct in this process: {bases}")
        self.expect(all((b - bases[0]) % 1024 == 0 for b in bases), f"bases not 1 KiB apart: {bases}")
        views = self.sh.allgather(bases)
        if self.sh.backend_name == "shm" and self.w > 1:
            # each process maps every heap at addresses of its own: translation is exercised for real
            self.expect(len({tuple(v) for v in views}) == self.w, f"ranks share heap-base views: {views}")

    def constructors(self) -> None:
        sh, dev = self.sh, self.dev
        made: dict[str, torch.Tensor] = {}
        made["zeros"] = sh.zeros(3, 5, dtype=torch.float16)
        made["ones"] = sh.ones((4, 2), dtype=torch.int32)
        made["empty"] = sh.empty(7, dtype=torch.bfloat16)
        made["full"] = sh.full((2, 3), 7)
        made["randn"] = sh.randn(64, 8)
        made["uniform"] = sh.uniform((256,), -2.0, 3.0)
        made["randint"] = sh.randint(5, 17, (300,), dtype=torch.int32)
        made["arange"] = sh.arange(3, 40, 4)
        made["linspace"] = sh.linspace(-1.0, 1.0, 9)
        made["zeros_like"] = sh.zeros_like(made["randint"])
        made["rand"] = sh.rand(10, 10, dtype=torch.float64)
        expect_shape = {"zeros": (3, 5), "ones": (4, 2), "empty": (7,), "full": (2, 3), "randn": (64, 8),
                        "uniform": (256,), "randint": (300,), "arange": (10,), "linspace": (9,),
                        "zeros_like": (300,), "rand": (10, 10)}
        expect_dtype = {"zeros": torch.float16, "ones": torch.int32, "empty": torch.bfloat16, "full": torch.int64,
                        "randn": torch.float32, "uniform": torch.float32, "randint": torch.int32,
                        "arange": torch.int64, "linspace": torch.float32, "zeros_like": torch.int32,
                        "rand": torch.float64}
        for name, t in made.items():
            self.expect(tuple(t.shape) == expect_shape[name], f"{name}: shape {tuple(t.shape)}")
            self.expect(t.dtype == expect_dtype[name], f"{name}: dtype {t.dtype}")
            self.expect(t.device == dev, f"{name}: on {t.device}")
            self.expect(sh.on_heap(t), f"{name}: not on the heap")
            self.expect(self.offset(t) % 1024 == 0, f"{name}: offset {self.offset(t)} not 1 KiB aligned")
        c = {k: v.cpu() for k, v in made.items()}
        self.expect(bool((c["zeros"] == 0).all()), "zeros are not 0")
        self.expect(bool((c["ones"] == 1).all()), "ones are not 1")
        self.expect(bool((c["full"] == 7).all()), "full is not 7")
        r = c["randn"]
        self.expect(bool(r.isfinite().all()) and abs(float(r.mean())) < 0.3 and 0.7 < float(r.std()) < 1.3,
                    f"randn mean {float(r.mean()):.3f} std {float(r.std()):.3f}")
        u = c["uniform"]
        self.expect(bool(((u >= -2) & (u < 3)).all()) and float(u.max() - u.min()) > 3, "uniform outside [-2, 3)")
        ri = c["randint"]
        self.expect(bool(((ri >= 5) & (ri < 17)).all()) and len(set(ri.tolist())) > 6, "randint outside [5, 17)")
        self.expect(c["arange"].tolist() == list(range(3, 40, 4)), f"arange {c['arange'].tolist()}")
        self.expect(torch.allclose(c["linspace"], torch.linspace(-1, 1, 9)), "linspace values")
        self.expect(bool((c["zeros_like"] == 0).all()), "zeros_like is not 0")
        ra = c["rand"]
        self.expect(bool(((ra >= 0) & (ra < 1)).all()) and ra.unique().numel() > 50, "rand outside [0, 1)")

    def symmetric_offsets(self) -> None:
        sh = self.sh
        # Different ranks ask for the same sequence of sizes (with different values) ...
        ts = [sh.zeros(1000 + 3 * self.w, dtype=torch.float32), sh.full((17,), self.me, dtype=torch.int64),
              sh.randn(5, 5, dtype=torch.float16), sh.arange(2049), sh.ones(1, dtype=torch.int8)]
        offsets = [self.offset(t) for t in ts]
        everyone = sh.allgather(offsets)
        self.expect(all(o == offsets for o in everyone), f"offsets differ between ranks: {everyone}")
        self.expect(offsets == sorted(offsets) and len(set(offsets)) == len(offsets), f"offsets {offsets}")

    def translate_host(self) -> None:
        """What a peer wrote into its tensor is at heap_bases[peer] + (my tensor's offset) in this process."""
        sh = self.sh
        x = sh.arange(256, dtype=torch.int32)
        x += self.me * 1000
        sh.barrier()
        bases = [int(b) for b in sh.get_heap_bases().cpu().tolist()]
        for p in range(self.w):
            raw = read_mapped(bases[p] + self.offset(x), x.numel() * 4, self.dev).view(torch.int32)
            expected = torch.arange(256, dtype=torch.int32) + p * 1000
            self.expect(torch.equal(raw, expected), f"rank {p}'s tensor through its mapping: {raw[:4].tolist()}...")
        sh.barrier()

    def barrier(self) -> None:
        """Rank 0 writes late; after the barrier every rank must see it through the mapping."""
        sh = self.sh
        y = sh.zeros(4, dtype=torch.int32)
        sh.barrier()
        if self.me == 0:
            time.sleep(0.3)
            y.fill_(42)
        sh.barrier()
        base0 = int(sh.get_heap_bases()[0])
        raw = read_mapped(base0 + self.offset(y), 16, self.dev).view(torch.int32).tolist()
        self.expect(raw == [42] * 4, f"after the barrier rank 0's value reads {raw}")
        sh.barrier(timeout_s=30)

    def broadcast(self) -> None:
        sh = self.sh
        for src in range(self.w):
            obj = sh.broadcast({"from": src, "payload": [src, "x" * src]} if self.me == src else None, source_rank=src)
            self.expect(obj == {"from": src, "payload": [src, "x" * src]}, f"broadcast from {src}: {obj}")
        scalar = sh.broadcast(3.5 if self.me == 0 else None, 0)
        self.expect(scalar == 3.5, f"scalar broadcast {scalar}")
        t = sh.broadcast_tensor(torch.arange(6.0) * (self.w - 1) if self.me == self.w - 1 else torch.zeros(6),
                                source_rank=self.w - 1)
        self.expect(t.device == self.dev and torch.equal(t.cpu(), torch.arange(6.0) * (self.w - 1)),
                    f"broadcast_tensor {t}")

    def allgather(self) -> None:
        got = self.sh.allgather(("r", self.me, [self.me] * self.me))
        self.expect(got == [("r", r, [r] * r) for r in range(self.w)], f"allgather {got}")

    def cu_count(self) -> None:
        n = self.sh.get_cu_count()
        if self.dev.type == "cuda":
            expected = torch.cuda.get_device_properties(self.dev).multi_processor_count
        else:
            expected = os.cpu_count() or 1
        self.expect(isinstance(n, int) and n == expected and n >= 1, f"get_cu_count {n}, expected {expected}")

    def wall_clock_rate(self) -> None:
        rate = self.sh.wall_clock_rate()
        expected = {"shm": 1, "cuda": 1_000_000}.get(self.sh.backend_name)
        self.expect(isinstance(rate, int) and rate > 0, f"wall_clock_rate {rate!r}")
        if expected is not None:
            self.expect(rate == expected, f"wall_clock_rate {rate} on {self.sh.backend_name}, expected {expected}")

    def memory_error(self) -> None:
        sh = self.sh
        free = sh.free_bytes
        before = sh.heap_offset
        want = free // 4 + 1  # int32 elements: 4 * want bytes > free
        try:
            sh.zeros(want, dtype=torch.int32)
            self.errors.append(f"allocating {4 * want} B with {free} B free did not raise")
        except MemoryError as exc:
            msg = str(exc)
            self.expect(str(4 * want) in msg and str(free) in msg, f"MemoryError {msg!r} lacks {4 * want} / {free}")
        self.expect(sh.heap_offset == before, "a failed allocation moved the allocator")
        t = sh.zeros(8, dtype=torch.int32)  # still symmetric afterwards
        offs = sh.allgather(self.offset(t))
        self.expect(len(set(offs)) == 1, f"offsets after a failed allocation: {offs}")

    def placement(self) -> None:
        sh = self.sh
        outside = torch.zeros(16, device=self.dev)
        try:
            sh.require_on_heap(outside, "outside")
            self.errors.append("require_on_heap accepted a tensor allocated by torch")
        except iris_ops.HeapPlacementError as exc:
            self.expect("outside" in str(exc) and "symmetric heap" in str(exc), f"message {exc}")
        sh.require_on_heap(sh.zeros(16), "inside")

    def heap_file_unlinked(self) -> None:
        path = getattr(self.sh._backend, "path", None)
        if path is not None:
            self.expect(not Path(path).exists(), f"{path} still exists after every rank mapped it")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--verbose", action="store_true", help="each rank names each check as it starts")
    args = parser.parse_args()
    sh = iris_ops.iris(4 << 20)
    checker = Checker(sh)
    mine = run_checks(checker, CHECKS, sh.barrier, tb_limit=3, verbose=args.verbose)
    path = getattr(sh._backend, "path", None)
    everyone = sh.allgather((mine, str(path) if path is not None else None))
    if checker.me == 0:
        summary = {
            "world_size": checker.w,
            "backend": sh.backend_name,
            "heap_files": [e[1] for e in everyone if e[1]],
            "checks": merge_checks([e[0] for e in everyone], CHECKS),
        }
        args.json.write_text(json.dumps(summary, indent=1))
        for name, res in summary["checks"].items():
            print(f"{name:22s} {'ok' if res['ok'] else 'FAILED'}")
            for err in res["errors"][:4]:
                print("    " + err)
    sh.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())

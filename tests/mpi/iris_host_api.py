"""Iris's host API on every rank of an MPI job, written as an Iris program would (`import iris_ops as iris`).

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/iris_host_api.py --json results.json

Each rank runs the checks below; rank 0 writes {"world_size": W, "checks": {name: {"ok": bool, "errors":
[...]}}}. The logging lines it prints are checked by tests/test_iris_host_api.py from the job's output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from mpi_checks import merge_checks, run_checks

import iris_ops as iris

CHECKS = [
    "world_and_broadcast",
    "constructor_defaults",
    "logging",
    "wall_clock_rate",
    "do_bench_orders_ranks",
    "memset_seen_by_peer",
    "deallocate_keeps_symmetry",
]

N_WARMUP, N_REPEAT = 2, 3


@triton.jit
def add_one_to_peer(counter_ptr, scratch_ptr, cur_rank, peer, heap_bases, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ones = tl.full([BLOCK], 1, dtype=tl.int32)
    iris.atomic_add(counter_ptr + offs, ones, cur_rank, peer, heap_bases)
    iris.atomic_add(scratch_ptr + offs, ones, cur_rank, peer, heap_bases)


@triton.jit
def read_from_peer(buf_ptr, out_ptr, n, cur_rank, peer, heap_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    values = iris.load(buf_ptr + offs, cur_rank, peer, heap_bases, mask=mask)
    tl.store(out_ptr + offs, values, mask=mask)


class Checker:
    def __init__(self, shmem: iris.Iris) -> None:
        self.shmem = shmem
        self.me = shmem.get_rank()
        self.w = shmem.get_num_ranks()
        self.peer = (self.me + 1) % self.w
        self.errors: list[str] = []

    def expect(self, cond: bool, text: str) -> None:
        if not cond:
            self.errors.append(text)

    def world_and_broadcast(self) -> None:
        sh = self.shmem
        self.expect(sh.comm is not None and sh.comm.Get_rank() == self.me, "Iris.comm is not the MPI communicator")
        value = {"from": 1, "data": [1, 2, 3]} if self.me == 1 else None
        got = sh.broadcast(value, 1)  # Iris's positional (value, source_rank)
        self.expect(got == {"from": 1, "data": [1, 2, 3]}, f"broadcast from rank 1 gave {got!r}")
        t = sh.broadcast_tensor(torch.arange(4) * 10 if self.me == 0 else torch.zeros(4, dtype=torch.int64))
        self.expect(t.cpu().tolist() == [0, 10, 20, 30], f"broadcast_tensor gave {t.tolist()}")

    def constructor_defaults(self) -> None:
        sh = self.shmem
        made = {"zeros": sh.zeros(4), "ones": sh.ones(3), "empty": sh.empty(2), "randn": sh.randn(5),
                "full": sh.full((2,), 3), "arange": sh.arange(6), "linspace": sh.linspace(0, 1, 4),
                "randint": sh.randint(0, 9, (8,)), "uniform": sh.uniform(8)}
        dtypes = {k: t.dtype for k, t in made.items()}
        want = {"zeros": torch.float32, "ones": torch.float32, "empty": torch.float32, "randn": torch.float32,
                "full": torch.int64, "arange": torch.int64, "linspace": torch.float32, "randint": torch.int64,
                "uniform": torch.float32}
        self.expect(dtypes == want, f"dtypes {dtypes}")
        offsets = [t.data_ptr() - sh.memory_pool.data_ptr() for t in made.values()]
        everyone = sh.allgather(offsets)
        self.expect(all(o == everyone[0] for o in everyone), f"offsets differ between ranks: {everyone}")

    def logging(self) -> None:
        sh = self.shmem
        sh.log(f"log from rank {self.me}")
        sh.log_stats(f"stats from rank {self.me}: 1.25 ms")
        sh.log_debug(f"log_debug hidden by default from rank {self.me}")
        sh.info(f"info from rank {self.me}")
        if self.me == 0:
            sh.log("only rank 0 says this")
        iris.set_logger_level(iris.DEBUG)
        sh.log_debug(f"debug on after set_logger_level from rank {self.me}")
        iris.set_logger_level(iris.INFO)
        sys.stdout.flush()
        sys.stderr.flush()

    def wall_clock_rate(self) -> None:
        sh = self.shmem
        expected = 1 if sh.get_device().type == "cpu" else 1_000_000
        rates = [sh.wall_clock_rate(r) for r in range(self.w)]
        self.expect(rates == [expected] * self.w, f"wall_clock_rate per rank {rates}, expected {expected}")
        try:
            sh.wall_clock_rate(self.w)
            self.errors.append(f"wall_clock_rate({self.w}) with {self.w} ranks did not raise")
        except ValueError:
            pass

    def do_bench_orders_ranks(self) -> None:
        """Each run: barrier, preamble (zero my scratch), barrier, fn (add 1 to the peer's counter and scratch).
        With Iris's barrier placement the peer's add always lands after my zeroing, so each scratch ends at
        exactly 1, and each counter counts every call of fn: 1 + n_warmup + n_repeat."""
        sh = self.shmem
        counter = sh.zeros(16, dtype=torch.int32)
        scratch = sh.zeros(16, dtype=torch.int32)
        calls = {"barrier": 0, "preamble": 0}

        def barrier() -> None:
            calls["barrier"] += 1
            sh.barrier()

        def preamble() -> None:
            calls["preamble"] += 1
            scratch.zero_()

        def fn() -> None:
            add_one_to_peer[(1,)](counter, scratch, self.me, self.peer, sh.get_heap_bases(), BLOCK=16)

        ms = iris.do_bench(fn, barrier, preamble, n_warmup=N_WARMUP, n_repeat=N_REPEAT)
        sh.barrier()
        self.expect(isinstance(ms, float) and ms >= 0, f"do_bench returned {ms!r}")
        self.expect(calls == {"barrier": 2 + 2 * (N_WARMUP + N_REPEAT) + 1, "preamble": 1 + N_WARMUP + N_REPEAT},
                    f"calls {calls}")
        runs = 1 + N_WARMUP + N_REPEAT
        self.expect(counter.cpu().tolist() == [runs] * 16, f"counter {counter.cpu().tolist()}, expected {runs}")
        self.expect(scratch.cpu().tolist() == [1] * 16, f"scratch {scratch.cpu().tolist()}, expected all 1")

    def memset_seen_by_peer(self) -> None:
        sh = self.shmem
        n = 1500
        buf = sh.zeros(n, dtype=torch.int32)
        out = sh.zeros(n, dtype=torch.int32)
        iris.memset_tensor(buf, 100 + self.me)
        sh.barrier()
        read_from_peer[(triton.cdiv(n, 512),)](buf, out, n, self.me, self.peer, sh.get_heap_bases(), BLOCK=512)
        sh.barrier()
        got = out.cpu()
        self.expect(bool((got == 100 + self.peer).all()), f"read {got.unique().tolist()} from rank {self.peer}, "
                                                           f"expected {100 + self.peer}")

    def deallocate_keeps_symmetry(self) -> None:
        sh = self.shmem
        t = sh.ones(10)
        before = sh.heap_offset
        sh.deallocate(t)
        self.expect(sh.heap_offset == before, "deallocate moved the allocator")
        nxt = sh.zeros(3)
        offs = sh.allgather(nxt.data_ptr() - sh.memory_pool.data_ptr())
        self.expect(len(set(offs)) == 1, f"offsets after deallocate differ: {offs}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    shmem = iris.iris(8 << 20)
    checker = Checker(shmem)
    mine = run_checks(checker, CHECKS, shmem.barrier, tb_limit=4)
    everyone: list[Any] = shmem.allgather(mine)
    if checker.me == 0:
        summary = {
            "world_size": checker.w,
            "backend": shmem.backend_name,
            "checks": merge_checks(everyone, CHECKS),
        }
        args.json.write_text(json.dumps(summary, indent=1))
    shmem.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())

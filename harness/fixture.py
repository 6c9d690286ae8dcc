"""What only the benchmark does around the op: draw the inputs, poison the outputs, validate, trace.

`OverlapFixture(cfg, shmem)` builds the library op (overlap.OverlapOp) from benchmark.py's flags,
draws the same seeded global A and B on every rank, writes this rank's shards into the op's input
buffers, and offers validation against float64 torch and the per-tile traces. The launches and their
state belong to the op; nothing here launches a kernel except through it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from harness.config import BenchConfig
from harness.dtypes import random_inputs
from harness.validate import compare_tiles, reference_product
from iris_ops import Iris
from overlap.op import OverlapConfig, OverlapOp, heap_bytes
from stream_k import KernelConfig


def op_config(cfg: BenchConfig) -> OverlapConfig:
    """The op's config from benchmark.py's flags (every value already resolved by harness.config)."""
    kernel = KernelConfig(BLK_M=cfg.BLK_M, BLK_N=cfg.BLK_N, BLK_K=cfg.BLK_K, num_stages=cfg.num_stages,
                          num_warps=cfg.num_warps, gsize_m=cfg.gsize_m, waves_per_eu=cfg.waves_per_eu,
                          matrix_instr_nonkdim=cfg.mfmaInstrSize, kpack=cfg.kpack, tma=cfg.use_tma)
    return OverlapConfig(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, cfg.mode, total_sms=cfg.total_sms,
                         gemm_sms=cfg.gemm_sms, kernel=kernel, comm_tile_m=cfg.COMMUNICATION_TILE_M,
                         comm_tile_n=cfg.COMMUNICATION_TILE_N, comm_threads=cfg.communication_block_size,
                         two_tiles=cfg.two_tiles, schedule=cfg.schedule, sk_first=cfg.sk_first,
                         sk_rounds=cfg.sk_rounds, gemm_joins_comm=cfg.gemm_joins_comm, timeout_s=cfg.timeout_s)


def heap_bytes_needed(cfg: BenchConfig, world_size: int) -> int:
    """Bytes of symmetric heap the run allocates (checked before the heap is created)."""
    return heap_bytes(op_config(cfg), world_size)


class OverlapFixture:
    def __init__(self, cfg: BenchConfig, shmem: Iris) -> None:
        self.cfg = cfg
        self.op = OverlapOp(op_config(cfg), shmem)
        op = self.op
        self.on_gpu = op.on_gpu
        self.tiles = op.tiles
        self.local_k, self.local_n = op.local_k, op.local_n
        self.tracing = False  # set for the one traced iteration, so timed iterations carry no timer reads
        # Inputs: the same global A and B on every rank (same seed), each rank keeps its shard in the op's buffers.
        gen = torch.Generator(device=op.device).manual_seed(cfg.seed)
        self.a_full = random_inputs((cfg.m, cfg.k), cfg.datatype, gen, op.device)
        self.b_full = random_inputs((cfg.k, cfg.n), cfg.datatype, gen, op.device)
        r = op.rank
        if op.alg.gathers_a:  # A row-sharded, B column-sharded
            op.a.copy_(self.a_full[r * op.local_m:(r + 1) * op.local_m, :])
            op.b.copy_(self.b_full[:, r * self.local_n:(r + 1) * self.local_n])
        elif op.alg.split == "n":
            op.a.copy_(self.a_full)
            op.b.copy_(self.b_full[:, r * self.local_n:(r + 1) * self.local_n])
        else:
            op.a.copy_(self.a_full[:, r * self.local_k:(r + 1) * self.local_k])
            op.b.copy_(self.b_full[r * self.local_k:(r + 1) * self.local_k, :])
        self._refs: tuple[torch.Tensor, torch.Tensor] | None = None

    # ---- launches (through the op) -----------------------------------------------------------------

    def step(self, timer: Any = None) -> None:
        self.op.step(timer, traced=self.tracing)

    def gemm_alone(self, timer: Any) -> None:
        self.op.gemm_alone(timer)

    def comm_alone(self, timer: Any) -> None:
        self.op.comm_alone(timer)

    def prepare(self) -> None:
        """Bind (and, for two_streams, preload) the next step's kernels: every rank together, untimed."""
        self.op.prepare(traced=self.tracing)

    def check_errors(self) -> None:
        self.op.check_errors()

    # ---- checks -----------------------------------------------------------------------------------

    def poison(self) -> None:
        """Fill every output with a sentinel so that an unwritten or stale element fails validation."""
        op = self.op
        bad = float("nan") if op.out_dtype.is_floating_point else -(2**31) + 7
        op.heap_c.fill_(bad)  # C's storage (padded rows), or the wide C of unaligned all_scatter
        if op.wide_c:
            op.c.fill_(bad)  # then C is a buffer of its own
        if op.partial is not None:
            op.partial.fill_(bad)

    def validate(self) -> dict[str, Any]:
        """C on this rank (the whole product, or this rank's part of it for all_gather_gemm and
        gemm_reduce_scatter) and this rank's own share, against float64 products of the same inputs."""
        cfg, op = self.cfg, self.op
        if self._refs is None:  # computed once: --validate_iters validates many iterations against them
            full = reference_product(self.a_full, self.b_full)
            local = None if op.gemm_out is op.c else reference_product(op.a, op.b)
            self._refs = (op.alg.shard_of(full, op.rank, op.world), local)
        ref_c, ref_local = self._refs
        result: dict[str, Any] = {"global": compare_tiles(op.c, ref_c, cfg.datatype, cfg.BLK_M, cfg.BLK_N,
                                                          cfg.gsize_m)}
        if ref_local is None:
            result["partial"] = {"passed": True, "skipped": f"{cfg.algorithm}: the GEMM writes C itself"}
        elif op.sequential and op.alg.zeroes_c:
            result["partial"] = {"passed": True, "skipped": f"fused_sequential {cfg.algorithm} adds tiles straight "
                                 "into the ranks' C; no partial is stored"}
        else:
            result["partial"] = compare_tiles(op.gemm_out, ref_local, cfg.datatype, cfg.BLK_M, cfg.BLK_N,
                                              cfg.gsize_m)
        result["passed"] = bool(result["global"]["passed"] and result["partial"]["passed"])
        return result

    def trace_arrays(self) -> dict[str, Any]:
        """Host copies of the per-tile timestamps of the last traced iteration."""
        op = self.op
        if op.gemm_trace is None or op.comm_trace is None:
            return {}
        return {"gemm": op.gemm_trace.cpu().numpy(), "comm": op.comm_trace.cpu().numpy()}

    def resource_usage(self) -> dict[str, Any]:
        """Registers, spills and shared memory of each compiled kernel (empty in the interpreter)."""
        usage = {}
        for name, k in self.op.compiled_kernels().items():
            with contextlib.suppress(Exception):
                k._init_handles()
            usage[name] = {"registers": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                           "shared_bytes": getattr(k.metadata, "shared", None),
                           "num_warps": getattr(k.metadata, "num_warps", None)}
        return usage

    def info(self) -> dict[str, Any]:
        return self.op.info()

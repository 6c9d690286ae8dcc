"""One distributed GEMM + communication problem on the symmetric heap, run in any overlap mode.

`OverlapRun(cfg, shmem)` draws the inputs (the same seeded A and B on every rank, each rank taking
its shard), allocates the heap buffers its algorithm needs, plans the Stream-K GEMM for the
program counts its mode uses, and then offers:

    step(timer)        one iteration (what the benchmark times), kernels launched on the device
    validate()         the global C and this rank's partial against float64 torch references
    check_errors()     raise if any spin-wait in any kernel timed out
    time_components()  GEMM alone on its SMs and communication alone on its SMs (the overlap bound)
    trace_arrays()     per-tile timestamps of the last iteration (--trace_tiles)

Buffers per algorithm (H: on the heap, reached by peers):
    all_scatter  C [M, N] (H); the GEMM writes C[:, r*N/W:(r+1)*N/W]; tiles are copied to every peer's C.
    all_reduce   partial [M, N]; C [M, N] (H), zeroed each iteration (by the communication programs as they
                 start; by the host in fused_sequential), tiles atomically added on every rank.
    one_shot     partial [M, N] (H), read by every peer; C [M, N] (local result); ready counters (H).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from harness.config import BenchConfig
from harness.dtypes import output_dtype, random_inputs, torch_dtype
from harness.timing import StepTimer
from harness.validate import compare_tiles, reference_product
from iris_ops import Iris, decode_error
from iris_ops.all_reduce import all_reduce_push_epilogue, all_reduce_tile
from iris_ops.all_scatter import all_scatter_push_epilogue, all_scatter_tile
from iris_ops.device import ARCH
from iris_ops.one_shot import one_shot_publish_epilogue, one_shot_tile
from iris_ops.tiles import num_tiles
from overlap.kernels import comm_kernel, overlap_kernel, signal_zeroed
from stream_k import KernelConfig, StreamKGemm, plan_streamk
from stream_k.kernel import store_and_signal

ALIGN = 1024
INTERPRETED = ARCH == 0


def heap_bytes_needed(cfg: BenchConfig, world_size: int) -> int:
    """Bytes of symmetric heap the run allocates (checked before the heap is created)."""
    out_elem = torch.empty((), dtype=output_dtype(cfg.datatype)).element_size()
    mn = cfg.m * cfg.n * out_elem
    tiles_n = cfg.n // world_size if cfg.algorithm == "all_scatter" else cfg.n
    tiles = num_tiles(cfg.m, tiles_n, cfg.BLK_M, cfg.BLK_N)

    def up(x: int) -> int:
        return max(ALIGN, -(-x // ALIGN) * ALIGN)

    total = up(mn) + up(tiles * 4) + up(64 * 4) + up(world_size * 4)  # ..., zeroed words, DeviceBarrier flags
    if cfg.algorithm in ("all_reduce", "one_shot"):
        total += up(mn)
    return total


_CHECKED_LAUNCHES: set[tuple[str, frozenset[str]]] = set()


def _check_arguments(kernel: Any, args: dict[str, Any]) -> None:
    """Every argument named and none left over. Triton's interpreter ignores an unknown keyword that the
    compiled launch rejects, so the CPU runs check here what the GPU would. A kernel and set of names
    checked once is not checked again (launches inside timed loops repeat the same names)."""
    key = (kernel.fn.__name__, frozenset(args))
    if key in _CHECKED_LAUNCHES:
        return
    names = list(kernel.arg_names)
    unknown = sorted(set(args) - set(names))
    missing = [n for n in names if n not in args]
    if unknown or missing:
        raise TypeError(f"{kernel.fn.__name__}: unknown arguments {unknown}, missing {missing}")
    _CHECKED_LAUNCHES.add(key)


@dataclass
class Launch:
    """What one program-count variant of the GEMM needs: its StreamKGemm and grid."""

    gemm: StreamKGemm
    gemm_programs: int
    comm_programs: int


class OverlapRun:
    def __init__(self, cfg: BenchConfig, shmem: Iris) -> None:
        self.cfg = cfg
        self.shmem = shmem
        self.rank = shmem.get_rank()
        self.world = shmem.get_num_ranks()
        self.device = shmem.get_device()
        self.on_gpu = self.device.type == "cuda"
        self.dtype = torch_dtype(cfg.datatype)
        self.out_dtype = output_dtype(cfg.datatype)
        self.epoch = 0
        W, r = self.world, self.rank
        M, N, K = cfg.m, cfg.n, cfg.k
        self.local_k = K // W if cfg.algorithm in ("all_reduce", "one_shot") else K
        self.local_n = N // W if cfg.algorithm == "all_scatter" else N

        # Inputs: the same global A and B on every rank (same seed), each rank keeps its shard.
        gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.a_full = random_inputs((M, K), cfg.datatype, gen, self.device)
        self.b_full = random_inputs((K, N), cfg.datatype, gen, self.device)
        if cfg.algorithm == "all_scatter":
            self.a = self.a_full
            self.b = self.b_full[:, r * self.local_n:(r + 1) * self.local_n].contiguous()
        else:
            self.a = self.a_full[:, r * self.local_k:(r + 1) * self.local_k].contiguous()
            self.b = self.b_full[r * self.local_k:(r + 1) * self.local_k, :].contiguous()

        # Heap buffers (every rank allocates the same sequence, so offsets match).
        self.c = shmem.zeros(M, N, dtype=self.out_dtype)
        self.partial = shmem.zeros(M, N, dtype=self.out_dtype) if cfg.algorithm != "all_scatter" else None
        self.tiles = num_tiles(M, self.local_n, cfg.BLK_M, cfg.BLK_N)
        self.ready = shmem.zeros(self.tiles, dtype=torch.int32)
        self.zeroed = shmem.zeros(64, dtype=torch.int32)
        self.zero_epoch = 0  # the value ZEROED words carry for the latest zeroing of C
        self.zero_count = torch.zeros(1, dtype=torch.int32, device=self.device)  # zeroing parts done (tickets)
        self.zero_tickets = 0
        if cfg.algorithm == "all_scatter":
            self.gemm_out = self.c[:, r * self.local_n:(r + 1) * self.local_n]
        else:
            self.gemm_out = self.partial
        self.gemm_trace = self.comm_trace = None
        self.tracing = False  # set for the one traced iteration, so timed iterations carry no timer reads
        if cfg.trace_tiles:
            self.gemm_trace = torch.zeros(self.tiles, 3, dtype=torch.int64, device=self.device)
            self.comm_trace = torch.zeros(self.tiles, 5, dtype=torch.int64, device=self.device)

        # GEMM variants by program count.
        kcfg = KernelConfig(BLK_M=cfg.BLK_M, BLK_N=cfg.BLK_N, BLK_K=cfg.BLK_K, num_stages=cfg.num_stages,
                            num_warps=cfg.num_warps, gsize_m=cfg.gsize_m, waves_per_eu=cfg.waves_per_eu,
                            matrix_instr_nonkdim=cfg.mfmaInstrSize, kpack=cfg.kpack, tma=cfg.use_tma)
        self._gemms: dict[int, StreamKGemm] = {}

        def gemm_for(programs: int) -> StreamKGemm:
            if programs not in self._gemms:
                plan = plan_streamk(M, self.local_n, self.local_k, cfg.BLK_M, cfg.BLK_N, cfg.BLK_K, programs,
                                    gsize_m=cfg.gsize_m, two_tiles=cfg.two_tiles, schedule=cfg.schedule,
                                    sk_first=cfg.sk_first, sk_rounds=cfg.sk_rounds)
                self._gemms[programs] = StreamKGemm(plan, cfg.datatype, kcfg, device=self.device,
                                                    timeout_s=cfg.timeout_s)
            return self._gemms[programs]

        T, G = cfg.total_sms, cfg.gemm_sms
        mode = cfg.mode
        if mode == "bulk_sync":
            self.main = Launch(gemm_for(T), T, 0)
            self.comm_grid = T
        elif mode == "two_streams":
            self.main = Launch(gemm_for(G), G, 0)
            self.comm_grid = T - G
        elif mode == "fused":
            self.main = Launch(gemm_for(G), G, T - G)
            self.comm_grid = 0
        else:  # fused_sequential
            self.main = Launch(gemm_for(T), T, 0)
            self.comm_grid = 0
        # Communication alone / GEMM alone use the split the overlapped modes use.
        self.alone = Launch(gemm_for(G), G, 0)
        self.errors = self.main.gemm.errors
        self.comm_stream = torch.cuda.Stream(self.device) if self.on_gpu and mode == "two_streams" else None
        self._compiled: dict[str, Any] = {}
        self._refs: tuple[torch.Tensor, torch.Tensor] | None = None
        self.sequential = mode == "fused_sequential"
        # Tile tickets for dynamic claiming (int32: wraps only after ~2^31 tickets, far beyond any run).
        self.claims = torch.zeros(1, dtype=torch.int32, device=self.device)
        self.claims_used = 0
        self._preloaded: set[bool] = set()  # tracing states whose two_streams kernels are loaded
        # GEMM programs join the communication when done with their tiles (GPU only: in the interpreter
        # programs run one after another, so an early program would wait on a later one's tile).
        self.join = cfg.gemm_joins_comm and not INTERPRETED and mode in ("fused", "two_streams")

    # ---- per-algorithm pieces ---------------------------------------------------------------------

    def _epilogue(self) -> Any:
        alg = self.cfg.algorithm
        if alg == "one_shot":
            return one_shot_publish_epilogue
        if self.sequential:
            return all_scatter_push_epilogue if alg == "all_scatter" else all_reduce_push_epilogue
        return store_and_signal

    def _gemm_target(self) -> torch.Tensor:
        """Where the GEMM epilogue writes: all_reduce fused_sequential adds straight into C."""
        if self.sequential and self.cfg.algorithm == "all_reduce":
            return self.c
        return self.gemm_out

    def _comm_args(self) -> dict[str, Any]:
        cfg, alg = self.cfg, self.cfg.algorithm
        src = self.gemm_out
        dst = self.gemm_out if alg == "all_scatter" else self.c
        tile_fn = {"all_scatter": all_scatter_tile, "all_reduce": all_reduce_tile, "one_shot": one_shot_tile}[alg]
        return {
            "SRC": src, "DST": dst, "CM": cfg.m, "CN": self.local_n,
            "stride_sm": src.stride(0), "stride_sn": src.stride(1),
            "stride_dm": dst.stride(0), "stride_dn": dst.stride(1),
            "READY": self.ready,
            # Tickets follow the order the GEMM completes tiles in: its Stream-K tiles first with --sk_first.
            "claim_rotate": self.main.gemm.plan.dp_tiles if cfg.sk_first else 0,
            "ready_target": self.epoch * (self.world if alg == "one_shot" else 1),
            "COMM_TRACE": self.comm_trace if self.tracing else None,
            "ZEROED": self.zeroed, "zero_epoch": self.zero_epoch, "ZERO_COUNT": self.zero_count,
            "TILE_FN": tile_fn, "READY_SCOPE": "sys" if alg == "one_shot" else "gpu",
            "CTM": cfg.COMMUNICATION_TILE_M, "CTN": cfg.COMMUNICATION_TILE_N,
        }

    # ---- launches ---------------------------------------------------------------------------------

    def _claims_for(self, participants: int) -> int:
        """Where this launch's tile tickets start: every participant takes tiles until one claim fails,
        so a launch consumes n_tiles + participants tickets."""
        base = self.claims_used
        self.claims_used += self.tiles + participants
        return base

    def _zeroing(self, programs: int) -> dict[str, Any]:
        """Kernel arguments for a launch whose communication programs zero all_reduce's C first."""
        if self.cfg.algorithm != "all_reduce" or programs == 0:
            return {"ZERO_C": False, "zero_base": 0, "zero_programs": 0}
        if not self.c.is_contiguous() or self.c.numel() >= 2**31:
            raise ValueError("in-kernel zeroing needs a contiguous C of fewer than 2**31 elements")
        parts = 1 if INTERPRETED else programs
        base = self.zero_tickets
        self.zero_tickets += parts
        return {"ZERO_C": True, "zero_base": base, "zero_programs": parts}

    def _launch_gemm(self, launch: Launch, *, comm_programs: int = 0, join: bool = False,
                     claim_base: int | None = None) -> None:
        """The overlap kernel: GEMM programs, `comm_programs` communication programs after them, and with
        `join` the GEMM programs moving tiles too once their GEMM work is done (tickets from claim_base)."""
        g = launch.gemm
        args = g.launch_args(self.a, self.b, self._gemm_target(), tile_flags=self.ready,
                             gemm_trace=self.gemm_trace if self.tracing else None, epilogue=self._epilogue(),
                             heap_bases=self.shmem.get_heap_bases(), cur_rank=self.rank, world_size=self.world,
                             epoch=self.epoch)
        is_ar = self.cfg.algorithm == "all_reduce"
        args.update(self._comm_args())
        args.update(
            gemm_programs=launch.gemm_programs, comm_programs=comm_programs,
            CLAIM=self.claims if claim_base is not None else None, claim_base=claim_base or 0,
            COMM_AFTER_GEMM=join,
            GEMM_WAITS_ZEROED=self.sequential and is_ar,
            COMM_WAITS_ZEROED=is_ar and (comm_programs > 0 or join),
        )
        args.update(self._zeroing(comm_programs))
        grid = (launch.gemm_programs + comm_programs,)
        _check_arguments(overlap_kernel, args)
        k = overlap_kernel[grid](**args, **g.launch_options())
        self._keep("overlap_kernel", k)

    def _launch_comm(self, programs: int, claim_base: int | None = None) -> None:
        g = self.main.gemm
        args = self._comm_args()
        args.update(max_spins=g.max_spins, ERRORS=self.errors, CLOCK=g.clock,
                    heap_bases=self.shmem.get_heap_bases(), cur_rank=self.rank, world_size=self.world,
                    CLAIM=self.claims if claim_base is not None else None, claim_base=claim_base or 0,
                    BLK_M=self.cfg.BLK_M, BLK_N=self.cfg.BLK_N, GSIZE_M=self.cfg.gsize_m, TIMER=g.timer_kind,
                    COMM_WAITS_ZEROED=self.cfg.algorithm == "all_reduce")
        args.update(self._zeroing(programs))
        _check_arguments(comm_kernel, args)
        k = comm_kernel[(programs,)](**args, num_warps=max(1, self.cfg.communication_block_size // 32))
        self._keep("comm_kernel", k)

    def _zero_and_signal(self) -> None:
        """fused_sequential all_reduce: zero C on the host's stream, then tell every peer it may add into it."""
        self.c.zero_()
        signal_zeroed[(1,)](self.zeroed, self.zero_epoch, self.shmem.get_heap_bases(), self.rank, self.world)

    def _keep(self, name: str, compiled: Any) -> None:
        if compiled is not None and hasattr(compiled, "metadata") and name not in self._compiled:
            self._compiled[name] = compiled

    def step(self, timer: StepTimer | None = None) -> None:
        """One iteration in the configured mode (kernels are launched, not waited for)."""
        self.epoch += 1
        self.zero_epoch += 1  # every launch of this step zeroes / waits for all_reduce's C at this value
        timer = timer or StepTimer(use_events=False)
        cfg, main = self.cfg, self.main
        is_ar = cfg.algorithm == "all_reduce"
        mode = cfg.mode
        join = self.join
        if mode == "two_streams":
            self.prepare()  # no-op once done; benchmark.py calls it before anything is timed
            claim = self._claims_for(self.comm_grid + (main.gemm_programs if join else 0))
            if self.comm_stream is not None:
                stream = torch.cuda.current_stream(self.device)
                self.comm_stream.wait_stream(stream)
                with timer.span("gemm", stream):
                    self._launch_gemm(main, join=join, claim_base=claim if join else None)
                with timer.span("comm", self.comm_stream), torch.cuda.stream(self.comm_stream):
                    self._launch_comm(self.comm_grid, claim)
                stream.wait_stream(self.comm_stream)
                return
            # No GPU: one kernel after the other (the interpreter has no streams).
            with timer.span("gemm"):
                self._launch_gemm(main)
            with timer.span("comm"):
                self._launch_comm(self.comm_grid, claim)
            return
        if is_ar and self.sequential:
            with timer.span("zero"):
                self._zero_and_signal()
        if mode == "bulk_sync":
            with timer.span("gemm"):
                self._launch_gemm(main)
            with timer.span("comm"):
                self._launch_comm(self.comm_grid)
        elif mode == "fused":
            claim = self._claims_for(main.comm_programs + (main.gemm_programs if join else 0))
            with timer.span("fused"):
                self._launch_gemm(main, comm_programs=main.comm_programs, join=join, claim_base=claim)
        else:  # fused_sequential
            with timer.span("fused"):
                if cfg.algorithm != "one_shot":
                    self._launch_gemm(main)  # the epilogue pushes every tile
                elif not INTERPRETED:
                    self._launch_gemm(main, join=True, claim_base=self._claims_for(main.gemm_programs))
                else:
                    # The interpreter runs programs one after another: a program would wait forever for a
                    # tile of a later one, so there the reduce phase is a second launch over as many programs.
                    self._launch_gemm(main)
                    self._launch_comm(main.gemm_programs, self._claims_for(main.gemm_programs))

    def prepare(self) -> None:
        """Make the next step safe to launch (all ranks call it together, outside timed regions)."""
        if self.comm_stream is not None and self.tracing not in self._preloaded:
            self._preload_two_streams()

    def _preload_two_streams(self) -> None:
        """Run this variant's two_streams kernels once, one after the other on one stream.

        CUDA loads a kernel lazily at its first launch, and that load may wait for the device to go
        idle. In two_streams the GEMM kernel waits for work of the communication stream (and the
        communication kernel for the GEMM's tiles), so a first launch there could deadlock (seen on
        2 x H200 as a hang). Run in sequence, each kernel finishes on its own: the GEMM's joining
        programs move every tile and the communication kernel finds none left (or moves all of them
        when GEMM programs do not join)."""
        self.epoch += 1
        self.zero_epoch += 1
        claim = self._claims_for(self.comm_grid + (self.main.gemm_programs if self.join else 0))
        if self.cfg.algorithm == "all_reduce":
            # The joining GEMM programs wait for C to be zeroed, which the communication kernel (queued after
            # the GEMM here) would do: zero it from the host first. (The communication kernel zeroes it again.)
            self._zero_and_signal()
        self._launch_gemm(self.main, join=self.join, claim_base=claim if self.join else None)
        self._launch_comm(self.comm_grid, claim)
        torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        self.check_errors()
        self._preloaded.add(self.tracing)

    # ---- components of the overlap bound ---------------------------------------------------------

    def gemm_alone(self, timer: StepTimer) -> None:
        """The GEMM on --gemm_sms programs with nothing else running."""
        self.epoch += 1
        with timer.span("gemm_alone"):
            self._launch_gemm(self.alone)

    def comm_alone(self, timer: StepTimer) -> None:
        """Communication on the other programs, every tile already ready (same epoch as the last GEMM);
        all_reduce's zeroing of C belongs to the communication side (its programs zero C as they start)."""
        self.zero_epoch += 1
        with timer.span("comm_alone"):
            self._launch_comm(self.cfg.total_sms - self.cfg.gemm_sms)

    # ---- checks -----------------------------------------------------------------------------------

    def check_errors(self) -> None:
        code = int(self.errors.item())
        if code:
            self.errors.zero_()
            raise RuntimeError(f"rank {self.rank}: {decode_error(code)} "
                               f"(a spin-wait gave up after ~{self.cfg.timeout_s:g} s)")

    def poison(self) -> None:
        """Fill every output with a sentinel so that an unwritten or stale element fails validation."""
        bad = float("nan") if self.out_dtype.is_floating_point else -(2**31) + 7
        self.c.fill_(bad)
        if self.partial is not None:
            self.partial.fill_(bad)

    def validate(self) -> dict[str, Any]:
        """Global C (on this rank) and this rank's own share, against float64 products of the same inputs."""
        cfg = self.cfg
        if self._refs is None:  # computed once: --validate_iters validates many iterations against them
            self._refs = (reference_product(self.a_full, self.b_full), reference_product(self.a, self.b))
        ref_c, ref_local = self._refs
        result: dict[str, Any] = {"global": compare_tiles(self.c, ref_c, cfg.datatype, cfg.BLK_M, cfg.BLK_N,
                                                          cfg.gsize_m)}
        if cfg.algorithm == "all_scatter":
            result["partial"] = compare_tiles(self.gemm_out, ref_local, cfg.datatype, cfg.BLK_M, cfg.BLK_N,
                                              cfg.gsize_m)
        elif self.sequential and cfg.algorithm == "all_reduce":
            result["partial"] = {"passed": True, "skipped": "fused_sequential all_reduce adds tiles straight "
                                 "into every rank's C; no partial is stored"}
        else:
            result["partial"] = compare_tiles(self.partial, ref_local, cfg.datatype, cfg.BLK_M, cfg.BLK_N,
                                              cfg.gsize_m)
        result["passed"] = bool(result["global"]["passed"] and result["partial"]["passed"])
        return result

    def trace_arrays(self) -> dict[str, Any]:
        """Host copies of the per-tile timestamps of the last iteration."""
        out: dict[str, Any] = {}
        if self.gemm_trace is not None:
            out["gemm"] = self.gemm_trace.cpu().numpy()
            out["comm"] = self.comm_trace.cpu().numpy()
        return out

    def resource_usage(self) -> dict[str, Any]:
        """Registers, spills and shared memory of each compiled kernel (empty in the interpreter)."""
        usage = {}
        for name, k in self._compiled.items():
            with contextlib.suppress(Exception):
                k._init_handles()
            usage[name] = {"registers": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                           "shared_bytes": getattr(k.metadata, "shared", None),
                           "num_warps": getattr(k.metadata, "num_warps", None)}
        return usage

    def info(self) -> dict[str, Any]:
        g = self.main.gemm
        return {"gemm_plan": g.plan.as_dict(), "gemm_config": g.config.as_dict(),
                "unused_options": g.unused_options, "tiles": self.tiles, "gemm_programs": self.main.gemm_programs,
                "comm_programs": self.main.comm_programs or self.comm_grid, "timer_kind": g.timer_kind}


"""The overlapped GEMM as a library op: built once for a problem, then called like a matmul, step after step.

    import iris_ops
    from overlap import OverlapOp

    shmem = iris_ops.iris(OverlapOp.heap_bytes("all_reduce", 4096, 8192, 8192, "bf16", world_size))
    op = OverlapOp.create(shmem, "all_reduce", 4096, 8192, 8192, "bf16")   # every rank, same arguments
    a, b = op.a, op.b                      # this rank's shards (M x K/W and K/W x N here); or your own tensors
    c = op(a, b)                           # the whole C on every rank, queued on the current stream

Every rank builds the op with the same arguments and calls it the same number of times (it is a
collective). A call queues the step's kernels on the current stream and returns the op's C buffer
(the same tensor every call, overwritten by the next call: clone it to keep it). Stream semantics:
when a rank's stream reaches the end of a step, that rank's C is final, every peer's contribution
included, and the next step may be queued at once, with no host barrier; work queued on the
stream between two steps may read or write C. A step can be captured in a CUDA graph
(`torch.cuda.graph`) after one eager call, and replayed.

A and B may be the op's own buffers (`op.a`, `op.b`: write your data into them, no copy is made)
or any tensors of the right shape, dtype and device; the launch arguments for a pair of input
buffers are bound once and reused while the same buffers come back, so a step costs the host one or
two kernel launches. A tensor whose rows are not row-major with a stride that is a multiple of 16
elements (or not 16-byte aligned) is copied into a padded staging buffer of the op first (one device
copy, queued on the current stream; op.a / op.b are not touched).

Any shape the split allows runs on the fast paths. A buffer whose row length is not a multiple of 16
elements gets a padded row stride (the next multiple of 64; `stream_k.layout.padded_cols`), so that TMA descriptors
and vector loads stay legal: `op.a`, `op.b` and, for all_reduce and one_shot, C are then views with
`stride(0) > shape[1]`. all_scatter with N/W not a multiple of 16 gives each rank's columns a padded
block in a wider heap buffer (`op.heap_c`) and copies them into a contiguous `op.c` at the end of
the step (one device copy of C).

Shards, for W ranks and rank r (the algorithm's split):
    all_reduce, one_shot   A[:, r*K/W:(r+1)*K/W] (M x K/W) and B[r*K/W:(r+1)*K/W, :] (K/W x N); C = A @ B
    all_scatter            A (M x K, whole) and B[:, r*N/W:(r+1)*N/W] (K x N/W); C = A @ B
    all_gather_gemm        A[r*M/W:(r+1)*M/W, :] (M/W x K) and B[:, r*N/W:(r+1)*N/W] (K x N/W);
                           C = (A @ B)[:, r*N/W:(r+1)*N/W] (M x N/W)
    gemm_reduce_scatter    as all_reduce; C = (A @ B)[r*M/W:(r+1)*M/W, :] (M/W x N)
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from iris_ops import Iris, decode_error
from iris_ops.device import ARCH
from overlap.algorithms import ALGORITHMS, Algorithm
from overlap.communication.copy_engine import CopySchedule, band_counts, make_engine, store_and_count
from overlap.copy_steps import reduce_rows_post, row_bands, schedule_ops
from overlap.kernels import (
    announce_kernel,
    ce_finish_kernel,
    ce_start_kernel,
    comm_kernel,
    control_words,
    overlap_kernel,
    zero_and_announce_kernel,
)
from overlap.planner import AUTO, MODES, PLANNED_FIELDS, Problem, Target, TuningCache, has_mode, plan
from stream_k import KernelConfig, StreamKGemm, plan_streamk
from stream_k.gemm import DTYPES, dtype_name, output_dtype
from stream_k.launch import BoundLaunch
from stream_k.layout import aligned_rows, padded_cols, padded_zeros
from stream_k.tiles import num_tiles

INTERPRETED = ARCH == 0
_ALIGN = 1024
# A step on two streams queues its launches, a fork and a join: copy_engine's (a start kernel, the GEMM, the copy
# schedule) ~40-60 us of host time, two_streams' ~15-25 (one H200, sessions 4 and 7). From its
# STEP_GRAPH_AFTER-th call on, the op replays such a step from one CUDA graph captured on the spot (the same
# capture as a caller's own, which the graph validation runs check); STREAMK_PGAS_STEP_GRAPH=0 turns that off.
STEP_GRAPH = os.environ.get("STREAMK_PGAS_STEP_GRAPH", "1") != "0"
STEP_GRAPH_AFTER = 2


def c_layout(alg: Algorithm, m: int, n: int, world: int) -> tuple[int, int, int]:
    """(rows, columns of the heap buffer that holds C, column block of each rank in it): all_scatter whose N/W
    is not a multiple of 16 gets one padded block per rank ("wide C"); otherwise C's row stride is padded."""
    local_n = alg.local_n(n, world)
    if alg.output == "full" and alg.split == "n" and padded_cols(local_n) != local_n:
        return m, world * padded_cols(local_n), padded_cols(local_n)
    rows, cols = alg.c_shape(m, n, world)
    return rows, padded_cols(cols), local_n


@dataclass(frozen=True)
class OverlapConfig:
    """Everything that fixes the kernels of one op. `resolve` fills the None fields from the defaults."""

    algorithm: str
    m: int
    n: int
    k: int
    datatype: str = "bf16"
    mode: str = AUTO  # a mode, or "auto": the planner's choice
    total_sms: int | None = None  # programs in all (the device's SM count)
    gemm_sms: int | None = None  # programs doing GEMM work; the rest communicate
    kernel: KernelConfig | None = None  # GEMM tile, stages, warps, TMA
    comm_tile_m: int | None = None  # the block a communication step moves (a whole GEMM tile)
    comm_tile_n: int | None = None
    comm_threads: int = 256  # threads per program of the separate communication kernel
    two_tiles: bool | None = None  # with schedule hybrid: Stream-K on one more full wave of tiles (planned)
    schedule: str = AUTO  # the GEMM's Stream-K schedule (stream_k.plan.SCHEDULES), or "auto": planned
    sk_first: bool = False
    sk_rounds: int | None = None
    gemm_joins_comm: bool = True
    timeout_s: float = 30.0
    # Filled by resolve: what the planner chose ({"source", "planned", "choice", ...}); not part of equality.
    plan_info: dict[str, Any] | None = field(default=None, compare=False)

    def resolve(self, device: torch.device, world_size: int = 1, cache: TuningCache | None = None) -> OverlapConfig:
        """A copy with every None field (and mode "auto") filled in by the planner (overlap.planner) for this
        problem on `device` (the interpreter on the CPU); the fields given are kept."""
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {self.algorithm!r}")
        if self.mode not in (*MODES, AUTO):
            raise ValueError(f"mode must be one of {', '.join(MODES)} or {AUTO}; got {self.mode!r}")
        if self.mode != AUTO and not has_mode(self.algorithm, self.mode):
            raise ValueError(f"mode {self.mode} is not built for {self.algorithm}; it is for "
                             + ", ".join(a for a in ALGORITHMS if has_mode(a, self.mode)))
        if self.plan_info is not None:
            return self
        fixed = {name: getattr(self, name) for name in PLANNED_FIELDS}
        problem = Problem(self.algorithm, self.m, self.n, self.k, dtype_name(self.datatype), world_size)
        chosen = plan(problem, Target.of(device), fixed, cache if cache is not None else TuningCache())
        return dataclasses.replace(self, **chosen.choice.fields(), plan_info=chosen.as_dict())


def heap_bytes(cfg: OverlapConfig, world_size: int) -> int:
    """Bytes of symmetric heap one op allocates on each rank."""
    alg = ALGORITHMS[cfg.algorithm]
    blk_m, blk_n = (cfg.kernel.BLK_M, cfg.kernel.BLK_N) if cfg.kernel else (16, 16)  # unplanned: an upper bound
    out_elem = torch.empty((), dtype=output_dtype(cfg.datatype)).element_size()

    def up(x: int) -> int:
        return max(_ALIGN, -(-x // _ALIGN) * _ALIGN)

    tiles = num_tiles(cfg.m, alg.local_n(cfg.n, world_size), blk_m, blk_n)
    rows, c_cols, _ = c_layout(alg, cfg.m, cfg.n, world_size)
    total = up(rows * c_cols * out_elem) + up(tiles * alg.ready_sources(world_size) * 4)
    total += up(control_words(world_size) * 4)
    if alg.copy_schedule == "reduce_rows" and cfg.mode in ("copy_engine", AUTO):  # RECV: a slot per sender
        total += up(cfg.m * padded_cols(cfg.n) * out_elem)
    if alg.gathers_a:  # the gathered A and its row-ready words
        in_elem = torch.empty((), dtype=DTYPES[dtype_name(cfg.datatype)]).element_size()
        total += up(cfg.m * padded_cols(cfg.k) * in_elem) + up(_a_ready_words(cfg.m, blk_m, world_size) * 4)
    return total + (up(cfg.m * padded_cols(cfg.n) * out_elem) if alg.partial_buffer else 0)


def _a_ready_words(m: int, blk_m: int, world_size: int) -> int:
    """all-gather row-ready words: one per (slot, row block) of the gathered A."""
    return world_size * -(-m // blk_m)


@dataclass
class _Step:
    """The launches of one kind of step, in order: host-side actions, launches on the current stream (in
    named groups: the spans of the isolated timing), and one launch on the communication stream."""

    pre: list[BoundLaunch] = field(default_factory=list)  # queued on the current stream first
    main: list[tuple[str, list[BoundLaunch]]] = field(default_factory=list)
    side: BoundLaunch | None = None  # two_streams on a GPU: the communication kernel
    side_name: str = "comm"
    post: list[Any] = field(default_factory=list)  # queued on the current stream last (wide C -> C)
    side_first: bool = False  # the main launches wait on the side one (all_gather_gemm): run in order, it goes first
    pre_name: str = "zero"  # the spans of `pre` and `post` in the isolated timing
    post_name: str = "compact"
    # two streams on a GPU: the whole step replayed from one CUDA graph (op.STEP_GRAPH), after `runs` calls
    replay: bool = False
    runs: int = 0
    graph: Any = None

    def launches(self) -> list[BoundLaunch]:
        side = [self.side] if self.side is not None else []
        main = [x for _, group in self.main for x in group]
        return [*self.pre, *side, *main] if self.side_first else [*self.pre, *main, *side]


class OverlapOp:
    """One distributed GEMM + communication problem, built once on a heap, called step after step."""

    def __init__(self, cfg: OverlapConfig, shmem: Iris) -> None:
        self.shmem = shmem
        self.rank = shmem.get_rank()
        self.world = shmem.get_num_ranks()
        self.device = shmem.get_device()
        self.on_gpu = self.device.type == "cuda"
        cfg = cfg.resolve(self.device, self.world)
        self.cfg = cfg
        self.alg: Algorithm = ALGORITHMS[cfg.algorithm]
        self.dtype = DTYPES[dtype_name(cfg.datatype)]
        self.out_dtype = output_dtype(cfg.datatype)
        W, r, alg, kc = self.world, self.rank, self.alg, cfg.kernel
        assert kc is not None and cfg.total_sms is not None and cfg.gemm_sms is not None
        M, N, K = cfg.m, cfg.n, cfg.k
        split_dim = K if alg.split == "k" else N
        if split_dim % W:
            raise ValueError(f"{cfg.algorithm} splits {'K' if alg.split == 'k' else 'N'} = {split_dim} over "
                             f"{W} ranks: it must be a multiple of {W}")
        if alg.splits_m() and M % W:
            raise ValueError(f"{cfg.algorithm} splits M = {M} over {W} ranks: it must be a multiple of {W}")
        if not 1 <= cfg.gemm_sms < cfg.total_sms and cfg.mode in ("two_streams", "fused"):
            raise ValueError(f"gemm_sms must be in [1, {cfg.total_sms - 1}]; got {cfg.gemm_sms}")
        self.local_k = alg.local_k(K, W)
        self.local_n = alg.local_n(N, W)
        self.local_m = alg.local_m(M, W)
        self.mode = cfg.mode
        self.sequential = cfg.mode == "fused_sequential"

        # This rank's input buffers (a plain device allocation: only this rank reads them), rows padded.
        self.a = padded_zeros(self.local_m, self.local_k, self.dtype, self.device)
        self.b = padded_zeros(self.local_k, self.local_n, self.dtype, self.device)
        # Heap buffers (every rank allocates the same sequence, so offsets match).
        need = heap_bytes(cfg, W)
        free = shmem.free_bytes
        if need > free:
            raise MemoryError(f"OverlapOp needs {need} B of symmetric heap per rank; {free} B are free")
        rows, c_cols, block = c_layout(alg, M, N, W)
        c_width = alg.c_shape(M, N, W)[1]
        self.heap_c = shmem.zeros(rows, c_cols, dtype=self.out_dtype)  # C, or the wide C of unaligned all_scatter
        self.wide_c = block != self.local_n
        self.c = (torch.zeros((M, N), dtype=self.out_dtype, device=self.device) if self.wide_c
                  else self.heap_c[:, :c_width])
        self.partial = shmem.zeros(M, padded_cols(N), dtype=self.out_dtype)[:, :N] if alg.partial_buffer else None
        self.tiles = num_tiles(M, self.local_n, kc.BLK_M, kc.BLK_N)
        self.ready = shmem.zeros(self.tiles * alg.ready_sources(W), dtype=torch.int32)
        self.ctrl = shmem.zeros(control_words(W), dtype=torch.int32)
        # all_gather_gemm: the gathered A (the GEMM's A) and its row-ready words, on the heap (peers push into them).
        self.ag = shmem.zeros(M, padded_cols(K), dtype=self.dtype)[:, :K] if alg.gathers_a else None
        self.a_ready = (shmem.zeros(_a_ready_words(M, kc.BLK_M, W), dtype=torch.int32) if alg.gathers_a
                        else None)
        if alg.output == "cols":
            self.gemm_out = self.c
        elif alg.split == "n":
            self.gemm_out = self.heap_c[:, r * block:r * block + self.local_n]
        else:
            self.gemm_out = self.partial
        # copy_engine: finished tiles per row of tiles (counted by the GEMM, read by the copy engine), RECV for
        # gemm_reduce_scatter (on the heap: peers copy into it), FILL for all_gather_gemm's ready words.
        n_rb = -(-M // kc.BLK_M)
        copy_kind = alg.copy_schedule if cfg.mode == "copy_engine" else None
        # (band map, then the band counts: copy_engine.band_counts; as long as the tile flags at least, which the
        # GEMM's checks ask of its flags)
        self._counts_init = (torch.tensor(band_counts(row_bands(copy_kind, n_rb, W), n_rb, max(2 * n_rb, self.tiles)),
                                          dtype=torch.int32) if copy_kind in ("scatter", "reduce_rows") else None)
        self.counts = self._counts_init.to(self.device) if self._counts_init is not None else None
        self.tiles_per_row = -(-self.local_n // kc.BLK_N)
        self.recv = (shmem.zeros(W, M // W, padded_cols(N), dtype=self.out_dtype)[:, :, :N]
                     if copy_kind == "reduce_rows" else None)
        self.fill = torch.zeros(n_rb, dtype=torch.int32, device=self.device) if copy_kind == "gather_a" else None
        self._engine = make_engine(self.on_gpu, cfg.timeout_s) if copy_kind else None
        self.errors = torch.zeros(1, dtype=torch.int32, device=self.device)
        self.gemm_trace: torch.Tensor | None = None
        self.comm_trace: torch.Tensor | None = None

        # GEMM variants by program count: the mode's, and the one timed alone (--gemm_sms programs).
        self._gemms: dict[int, StreamKGemm] = {}
        T, G = cfg.total_sms, cfg.gemm_sms
        self.gemm_programs = {"bulk_sync": T, "two_streams": G, "fused": G, "fused_sequential": T,
                              "copy_engine": T}[cfg.mode]
        # SMs the communication holds (copy_engine: none; its two one-program protocol kernels last microseconds)
        self.comm_programs = {"bulk_sync": T, "two_streams": T - G, "fused": T - G, "fused_sequential": 0,
                              "copy_engine": 0}[cfg.mode]
        self.main_gemm = self._gemm(self.gemm_programs)
        # GEMM programs join the communication when done with their tiles (GPU only: in the interpreter
        # programs run one after another, so an early program would wait on a later one's tile).
        self.join = (cfg.gemm_joins_comm and not INTERPRETED and cfg.mode in ("fused", "two_streams")
                     and not alg.gathers_a)
        self.comm_stream = (torch.cuda.Stream(self.device) if self.on_gpu and cfg.mode in ("two_streams", "copy_engine")
                            else None)
        if self.comm_stream is not None:
            self._fork = torch.cuda.Event()
            self._join = torch.cuda.Event()
            self._cur_handle: int | None = None
        self._steps: dict[tuple, _Step] = {}
        self._last: tuple[Any, Any, str, _Step] | None = None
        self._preloaded: set[str] = set()
        self._staging: dict[str, torch.Tensor] = {}  # copies of user inputs whose rows are not aligned
        self.broken: str | None = None
        # Every rank's control block is zeroed before any peer's first step may write into it.
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
        shmem.barrier()

    @classmethod
    def create(cls, shmem: Iris, algorithm: str, m: int, n: int, k: int, datatype: str = "bf16",
               mode: str = AUTO, **options: Any) -> OverlapOp:
        """An op with the defaults for this device; `options` set OverlapConfig fields."""
        return cls(OverlapConfig(algorithm, m, n, k, datatype, mode, **options), shmem)

    @staticmethod
    def heap_bytes(algorithm: str, m: int, n: int, k: int, datatype: str = "bf16", world_size: int = 1,
                   **options: Any) -> int:
        """Bytes of symmetric heap the op needs on each rank (size the heap with at least this)."""
        return heap_bytes(OverlapConfig(algorithm, m, n, k, datatype, **options), world_size)

    # ---- calling ----------------------------------------------------------------------------------

    def __call__(self, a: torch.Tensor | None = None, b: torch.Tensor | None = None) -> torch.Tensor:
        """Queue one step on the current stream; returns C (the op's buffer). Collective: every rank calls it."""
        self._run(self._step_for("step", self._in_place(a, "a"), self._in_place(b, "b")))
        return self.c

    def _in_place(self, t: torch.Tensor | None, name: str) -> torch.Tensor | None:
        """`t` itself when the kernels can read it as it is; else its copy in a padded staging buffer of the
        op (made at the first such call; op.a / op.b are left as they are)."""
        if t is None or (isinstance(t, torch.Tensor) and aligned_rows(t)):
            return t
        self._check_input(name, t)
        staged = self._staging.get(name)
        if staged is None:
            staged = padded_zeros(t.shape[0], t.shape[1], self.dtype, self.device)
            self._staging[name] = staged
        staged.copy_(t)
        return staged

    def step(self, timer: Any = None, *, traced: bool = False) -> None:
        """One step on the op's own input buffers; with `timer` (harness.timing.StepTimer) each kernel
        group is bracketed by a named span (the isolated benchmark's per-kernel times)."""
        self._run(self._step_for("traced" if traced else "step", None, None), timer)

    def gemm_alone(self, timer: Any = None) -> None:
        """The GEMM on --gemm_sms programs with nothing else running (a step of its own)."""
        self._run(self._step_for("gemm_alone", None, None), timer)

    def comm_alone(self, timer: Any = None) -> None:
        """The communication on the other programs, every tile taken as ready (a step of its own)."""
        self._run(self._step_for("comm_alone", None, None), timer)

    def prepare(self, *, traced: bool = False) -> None:
        """Bind the step's launches on the op's own buffers (and preload two_streams' kernels) now, not at the
        first call. Collective: every rank calls it."""
        self._step_for("traced" if traced else "step", None, None)

    def _run(self, step: _Step, timer: Any = None) -> None:
        if self.broken is not None:
            raise RuntimeError(f"OverlapOp is unusable: {self.broken}; call reset() on every rank")
        if timer is not None:
            self._run_timed(step, timer)
            return
        if step.replay and self._replay(step):
            return
        self._queue(step)

    def _replay(self, step: _Step) -> bool:
        """Launch the step as one graph replay on the current stream (captured at its STEP_GRAPH_AFTER-th
        call); False where it must be queued launch by launch (earlier calls, inside a caller's capture)."""
        if torch.cuda.is_current_stream_capturing():
            return False
        if step.graph is None:
            step.runs += 1
            if step.runs <= STEP_GRAPH_AFTER:
                return False
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._queue(step)
            step.graph = graph
        step.graph.replay()
        return True

    def _queue(self, step: _Step) -> None:
        """Queue the step's launches: the pre actions and main launches on the current stream, the side one on
        the communication stream between a fork and a join, then the post actions."""
        for action in step.pre:
            action()
        if step.side is None:
            for _, group in step.main:
                for launch in group:
                    launch()
            for action in step.post:
                action()
            return
        # torch.cuda.Event's record/wait without their Python wrappers (this is the per-step host path).
        cur, comm = self._current_stream(), self.comm_stream
        event = torch._C._CudaEventBase
        event.record(self._fork, cur)
        event.wait(self._fork, comm)
        if step.side_first:
            step.side(comm)
        for _, group in step.main:
            for launch in group:
                launch(cur)
        if not step.side_first:
            step.side(comm)
        event.record(self._join, comm)
        event.wait(self._join, cur)
        for action in step.post:
            action()

    def _current_stream(self) -> torch.cuda.Stream:
        """The current stream as a torch object, made again only when the current stream changes."""
        handle = torch._C._cuda_getCurrentRawStream(self.device.index)
        if handle != self._cur_handle:
            self._cur_stream = torch.cuda.current_stream(self.device)
            self._cur_handle = handle
        return self._cur_stream

    def _run_timed(self, step: _Step, timer: Any) -> None:
        if step.pre:
            with timer.span(step.pre_name):
                for action in step.pre:
                    action()
        if step.side is not None:
            cur = torch.cuda.current_stream(self.device)
            self.comm_stream.wait_stream(cur)  # type: ignore[union-attr]
            for name, group in step.main:
                with timer.span(name, cur):
                    for launch in group:
                        launch()
            with timer.span(step.side_name, self.comm_stream):
                step.side()
            cur.wait_stream(self.comm_stream)  # type: ignore[arg-type]
        else:
            for name, group in step.main:
                with timer.span(name):
                    for launch in group:
                        launch()
        if step.post:
            with timer.span(step.post_name):
                for action in step.post:
                    action()

    # ---- checks -----------------------------------------------------------------------------------

    def _check_inputs(self, a: torch.Tensor, b: torch.Tensor) -> None:
        self._check_input("a", a)
        self._check_input("b", b)

    def _check_input(self, name: str, t: Any) -> None:
        shape = (self.local_m, self.local_k) if name == "a" else (self.local_k, self.local_n)
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"OverlapOp: {name} must be a torch.Tensor; got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(f"OverlapOp: {name} must have shape {shape} (this rank's shard of "
                             f"{self.cfg.algorithm}); got {tuple(t.shape)}")
        if t.dtype != self.dtype:
            raise ValueError(f"OverlapOp: {name} must be {self.dtype}; got {t.dtype}")
        if t.device != self.device:
            raise ValueError(f"OverlapOp: {name} must be on {self.device}; got {t.device}")

    def check_errors(self) -> None:
        """Raise if a wait of any step so far gave up (synchronises); the op is then unusable until reset()."""
        code = int(self.errors.item())
        if code:
            self.errors.zero_()
            self.broken = f"rank {self.rank}: {decode_error(code)} (a wait gave up after ~{self.cfg.timeout_s:g} s)"
            raise RuntimeError(self.broken)

    def reset(self) -> None:
        """Start the step protocol afresh after a failed step (every rank together; synchronises)."""
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        extra = [self.a_ready] if self.a_ready is not None else []
        for t in (self.ctrl, self.ready, self.errors, *extra, *(g.locks for g in self._gemms.values())):
            t.zero_()
        if self.counts is not None:
            self.counts.copy_(self._counts_init)
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        self.broken = None

    # ---- building the launches of a step ----------------------------------------------------------

    def _gemm(self, programs: int) -> StreamKGemm:
        if programs not in self._gemms:
            cfg, kc = self.cfg, self.cfg.kernel
            assert kc is not None
            plan = plan_streamk(cfg.m, self.local_n, self.local_k, kc.BLK_M, kc.BLK_N, kc.BLK_K, programs,
                                gsize_m=kc.gsize_m, two_tiles=bool(cfg.two_tiles), schedule=cfg.schedule,
                                sk_first=cfg.sk_first, sk_rounds=cfg.sk_rounds or 1)
            self._gemms[programs] = StreamKGemm(plan, cfg.datatype, kc, device=self.device, timeout_s=cfg.timeout_s)
        return self._gemms[programs]

    def _traces(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.gemm_trace is None:
            self.gemm_trace = torch.zeros(self.tiles, 3, dtype=torch.int64, device=self.device)
            self.comm_trace = torch.zeros(self.tiles, 5, dtype=torch.int64, device=self.device)
        assert self.comm_trace is not None
        return self.gemm_trace, self.comm_trace

    def _comm_fields(self, claim: bool, traced: bool, wait_ready: bool) -> dict[str, Any]:
        alg, cfg = self.alg, self.cfg
        dst = self.gemm_out if alg.split == "n" else self.c
        return {
            "DST": dst, "stride_dm": dst.stride(0), "stride_dn": dst.stride(1),
            "COMM_TRACE": self._traces()[1] if traced else None, "CTRL": self.ctrl,
            # Tickets follow the order the GEMM completes tiles in: its Stream-K tiles first with --sk_first.
            "claim_rotate": self.main_gemm.plan.dp_tiles if cfg.sk_first else 0,
            "TILE_FN": alg.tile_fn, "READY_SCOPE": "sys" if alg.ready_from_every_rank else "gpu",
            "READY_SOURCES": alg.ready_sources(self.world) if wait_ready else 0,
            "CTM": cfg.comm_tile_m, "CTN": cfg.comm_tile_n, "CLAIM_TILES": claim,
            "ZERO_C": alg.zeroes_c, "ANNOUNCE": alg.writes_peers and not alg.zeroes_c,
            "WAITS_ARRIVED": alg.writes_peers, "c_elems": self.heap_c.numel(), "GATHER_A": alg.gathers_a,
        }

    def _gather_fields(self, a: torch.Tensor) -> dict[str, Any]:
        """The all-gather's arguments (all_gather_gemm): this rank's rows `a`, the gathered A, its ready words."""
        ag = self.ag
        return {"A_LOCAL": a, "stride_lm": a.stride(0), "stride_lk": a.stride(1), "AG": ag,
                "stride_gm": ag.stride(0) if ag is not None else 0, "stride_gk": ag.stride(1) if ag is not None else 0,
                "A_READY": self.a_ready, "GATHER_RM": min(self.cfg.kernel.BLK_M, 32),
                "GATHER_KB": min(self.cfg.comm_tile_n, 128)}

    def _zero_programs(self, programs: int) -> int:
        if not self.alg.zeroes_c or programs == 0:
            return 0
        if self.heap_c.numel() >= 2**31:
            raise ValueError("in-kernel zeroing needs a C of fewer than 2**31 elements (padded rows included)")
        return 1 if INTERPRETED else programs

    def _gemm_launch(self, gemm: StreamKGemm, a: torch.Tensor, b: torch.Tensor, *, comm_programs: int = 0,
                     join: bool = False, claim: bool = False, step_programs: int, peer_sync: bool = True,
                     traced: bool = False, wait_a: bool = True, gemm_gathers: bool = False,
                     counts: bool = False) -> BoundLaunch:
        """The overlap kernel: GEMM programs, then `comm_programs` communication programs; with `join` the GEMM
        programs move tiles too once their GEMM work is done."""
        alg, seq = self.alg, self.sequential
        epilogue = alg.push_epilogue if seq and alg.push_epilogue is not None else alg.epilogue
        if counts:  # copy_engine: count finished tiles per row of tiles for the copy schedule
            epilogue = store_and_count
        gemm_a = self.ag if alg.gathers_a else a  # all_gather_gemm multiplies the gathered A
        args = gemm.launch_args(gemm_a, b, self.gemm_out, tile_flags=self.counts if counts else self.ready,
                                gemm_trace=self._traces()[0] if traced else None, epilogue=epilogue,
                                heap_bases=self.shmem.get_heap_bases(), cur_rank=self.rank, world_size=self.world)
        if seq and alg.zeroes_c:  # fused_sequential all_reduce / gemm_reduce_scatter: the epilogue adds into C
            args.update(C=self.c, stride_cm=self.c.stride(0), stride_cn=self.c.stride(1))
        del args["epoch"]  # the kernel reads the step's epoch from CTRL
        args["ERRORS"] = self.errors
        args.update(self._comm_fields(claim, traced, True))
        args.update(self._gather_fields(a), a_rows=max(1, self.local_m),
                    GATHER_A=alg.gathers_a and comm_programs > 0, GEMM_GATHERS=gemm_gathers,
                    GEMM_WAITS_A=alg.gathers_a and wait_a)
        comm = comm_programs > 0
        args.update(zero_programs=self._zero_programs(comm_programs), gemm_programs=gemm.plan.num_programs,
                    comm_programs=comm_programs, step_programs=step_programs,
                    ZERO_C=alg.zeroes_c and comm, WAITS_ARRIVED=alg.writes_peers and (comm or join),
                    COMM_AFTER_GEMM=join, GEMM_WAITS_ARRIVED=seq and alg.writes_peers and (comm_programs == 0)
                    and (gemm_gathers or not alg.gathers_a), PEER_SYNC=peer_sync,
                    GEMM_SCOPE="sys" if join or alg.gemm_writes_peers(seq, self.world) else "gpu")
        return BoundLaunch(overlap_kernel, gemm.plan.num_programs + comm_programs, args, gemm.launch_options())

    def _comm_launch(self, programs: int, *, claim: bool, step_programs: int, traced: bool = False,
                     wait_ready: bool = True, a: torch.Tensor | None = None) -> BoundLaunch:
        g, cfg = self.main_gemm, self.cfg
        src = self.gemm_out
        args = {"SRC": src, "M": cfg.m, "N": self.local_n, "stride_sm": src.stride(0), "stride_sn": src.stride(1),
                "READY": self.ready, "max_spins": g.max_spins, "ERRORS": self.errors, "CLOCK": g.clock,
                "zero_programs": self._zero_programs(programs), "step_programs": step_programs,
                "heap_bases": self.shmem.get_heap_bases(), "cur_rank": self.rank, "world_size": self.world,
                "BLK_M": g.plan.BLK_M, "BLK_N": g.plan.BLK_N, "GSIZE_M": g.plan.gsize_m, "TIMER": g.timer_kind,
                "PEER_SYNC": True}
        args.update(self._comm_fields(claim, traced, wait_ready))
        args.update(self._gather_fields(self.a if a is None else a), K=self.local_k)
        return BoundLaunch(comm_kernel, programs, args, {"num_warps": max(1, cfg.comm_threads // 32)})

    def _announce_launch(self) -> BoundLaunch:
        return BoundLaunch(announce_kernel, 1, {"CTRL": self.ctrl, "heap_bases": self.shmem.get_heap_bases(),
                                                "cur_rank": self.rank, "world_size": self.world}, {"num_warps": 1})

    def _build(self, kind: str, a: torch.Tensor, b: torch.Tensor) -> _Step:
        cfg, alg, mode = self.cfg, self.alg, self.mode
        T, G = cfg.total_sms, cfg.gemm_sms
        assert T is not None and G is not None
        traced = kind == "traced"
        step = _Step()
        if kind == "gemm_alone":
            g = self._gemm(G)
            step.main = [("gemm_alone", [self._gemm_launch(g, a, b, step_programs=G, peer_sync=False,
                                                           wait_a=False)])]
            return step
        if kind == "comm_alone" and mode == "copy_engine":  # the copies and the protocol, nothing waited for
            step.pre = [self._ce_start_launch()]
            ops = schedule_ops(alg.copy_schedule, self, a, self._ce_finish_launch(1), wait=False)
            step.main = [("comm_alone", [CopySchedule(ops, self._engine)])]
            return step
        if kind == "comm_alone":
            step.main = [("comm_alone", [self._comm_launch(T - G, claim=False, step_programs=T - G,
                                                           wait_ready=False, a=a)])]
            return step
        main = self.main_gemm
        if mode == "copy_engine":
            return self._build_copy(step, a, b, traced)
        if alg.gathers_a:
            return self._build_gather(step, a, b, traced)
        if mode == "bulk_sync":
            step.main = [("gemm", [self._gemm_launch(main, a, b, step_programs=2 * T, traced=traced)]),
                         ("comm", [self._comm_launch(T, claim=False, step_programs=2 * T, traced=traced)])]
        elif mode == "two_streams":
            gemm = self._gemm_launch(main, a, b, join=self.join, claim=self.join, step_programs=T, traced=traced)
            comm = self._comm_launch(T - G, claim=True, step_programs=T, traced=traced)
            if self.comm_stream is not None:
                step.main, step.side = [("gemm", [gemm])], comm
            else:  # no GPU: one kernel after the other (the interpreter has no streams)
                step.main = [("gemm", [gemm]), ("comm", [comm])]
        elif mode == "fused":
            step.main = [("fused", [self._gemm_launch(main, a, b, comm_programs=T - G, join=self.join, claim=True,
                                                      step_programs=T, traced=traced)])]
        else:  # fused_sequential
            if alg.zeroes_c:
                step.pre = [BoundLaunch(zero_and_announce_kernel, 1 if INTERPRETED else T,
                                        {"C": self.heap_c, "n_elems": self.heap_c.numel(), "CTRL": self.ctrl,
                                         "heap_bases": self.shmem.get_heap_bases(), "cur_rank": self.rank,
                                         "world_size": self.world}, {"num_warps": 4})]
            if alg.push_epilogue is not None:  # the epilogue moves every tile
                step.main = [("fused", [self._gemm_launch(main, a, b, step_programs=T, traced=traced)])]
            elif not INTERPRETED:  # one_shot: publish from the epilogue, then reduce after the GEMM work
                step.main = [("fused", [self._gemm_launch(main, a, b, join=True, claim=True, step_programs=T,
                                                          traced=traced)])]
            else:
                # The interpreter runs programs one after another: a program would wait forever for a tile of a
                # later one, so there the reduce phase is a second launch over as many programs.
                step.main = [("fused", [self._gemm_launch(main, a, b, step_programs=2 * T, traced=traced),
                                        self._comm_launch(T, claim=True, step_programs=2 * T, traced=traced)])]
        if self.wide_c:
            step.post = [self._compaction()]
        return step

    def _compaction(self) -> Any:
        """all_scatter's wide C: each rank's padded column block of the heap buffer -> the contiguous C."""
        M, W, n = self.cfg.m, self.world, self.local_n
        src, dst = self.heap_c.view(M, W, -1)[:, :, :n], self.c.view(M, W, n)
        return lambda: dst.copy_(src)

    def _build_gather(self, step: _Step, a: torch.Tensor, b: torch.Tensor, traced: bool) -> _Step:
        """all_gather_gemm's steps: the communication pushes A's rows and the GEMM waits on them, so the
        pushers run first wherever programs run in order (the interpreter; the preload of two_streams)."""
        cfg, mode, main = self.cfg, self.mode, self.main_gemm
        T, G = cfg.total_sms, cfg.gemm_sms
        assert T is not None and G is not None
        if mode == "bulk_sync":
            step.main = [("comm", [self._comm_launch(T, claim=False, step_programs=2 * T, traced=traced, a=a)]),
                         ("gemm", [self._gemm_launch(main, a, b, step_programs=2 * T, traced=traced)])]
        elif mode == "two_streams":
            gemm = self._gemm_launch(main, a, b, step_programs=T, traced=traced)
            comm = self._comm_launch(T - G, claim=False, step_programs=T, traced=traced, a=a)
            if self.comm_stream is not None:
                step.main, step.side, step.side_first = [("gemm", [gemm])], comm, True
            else:
                step.main = [("comm", [comm]), ("gemm", [gemm])]
        elif mode == "fused":  # one kernel: programs 0..T-G-1 push A's rows, the others compute
            step.main = [("fused", [self._gemm_launch(main, a, b, comm_programs=T - G, step_programs=T,
                                                      traced=traced)])]
        elif not INTERPRETED:  # fused_sequential: each GEMM program pushes its share of A's rows, then computes
            step.main = [("fused", [self._gemm_launch(main, a, b, step_programs=T, traced=traced,
                                                      gemm_gathers=True)])]
        else:  # in the interpreter a program would wait on rows a later program pushes: two launches
            step.main = [("fused", [self._comm_launch(T, claim=False, step_programs=2 * T, traced=traced, a=a),
                                    self._gemm_launch(main, a, b, step_programs=2 * T, traced=traced)])]
        return step

    def _ce_start_launch(self) -> BoundLaunch:
        fill = self.fill
        return BoundLaunch(ce_start_kernel, 1, {
            "CTRL": self.ctrl, "FILL": fill, "n_fill": fill.numel() if fill is not None else 0,
            "max_spins": self.main_gemm.max_spins, "ERRORS": self.errors, "heap_bases": self.shmem.get_heap_bases(),
            "cur_rank": self.rank, "world_size": self.world, "FILL_BLOCK": 128}, {"num_warps": 1})

    def _ce_finish_launch(self, step_programs: int) -> BoundLaunch:
        return BoundLaunch(ce_finish_kernel, 1, {
            "CTRL": self.ctrl, "step_programs": step_programs, "max_spins": self.main_gemm.max_spins,
            "ERRORS": self.errors, "heap_bases": self.shmem.get_heap_bases(), "cur_rank": self.rank,
            "world_size": self.world}, {"num_warps": 1})

    def _build_copy(self, step: _Step, a: torch.Tensor, b: torch.Tensor, traced: bool) -> _Step:
        """copy_engine: ce_start on the current stream; the GEMM on every SM, counting its tiles per row (or, for
        all_gather_gemm, waiting on A's rows); the copy schedule on the communication stream (overlap.copy_steps)."""
        alg, T = self.alg, self.cfg.total_sms
        assert T is not None and alg.copy_schedule is not None
        counts = alg.copy_schedule != "gather_a"
        gemm = self._gemm_launch(self.main_gemm, a, b, step_programs=T + 1, traced=traced, counts=counts)
        schedule = CopySchedule(schedule_ops(alg.copy_schedule, self, a, self._ce_finish_launch(T + 1)),
                                self._engine)
        step.pre, step.pre_name, step.post_name = [self._ce_start_launch()], "start", "add"
        if self.comm_stream is not None:
            step.main, step.side, step.side_name = [("gemm", [gemm])], schedule, "copy"
            step.side_first = alg.gathers_a  # queue A's copies before the GEMM that waits on them
        elif alg.gathers_a:  # no streams: A's rows first, then the GEMM that reads them
            step.main = [("copy", [schedule]), ("gemm", [gemm])]
        else:
            step.main = [("gemm", [gemm]), ("copy", [schedule])]
        if alg.copy_schedule == "reduce_rows":
            assert self.partial is not None and self.recv is not None
            step.post = [reduce_rows_post(self.c, self.partial, self.recv, self.rank, self.world)]
        elif self.wide_c:
            step.post = [self._compaction()]
        return step

    def _step_for(self, kind: str, a: torch.Tensor | None, b: torch.Tensor | None) -> _Step:
        a = self.a if a is None else a
        b = self.b if b is None else b
        last = self._last
        if last is not None and last[0] is a and last[1] is b and last[2] == kind:
            return last[3]
        self._check_inputs(a, b)
        key = (kind, a.data_ptr(), b.data_ptr(), a.stride(0), b.stride(0))
        step = self._steps.get(key)
        if step is None:
            step = self._build(kind, a, b)
            # two streams (two_streams, copy_engine): replayed from one graph after a few calls (STEP_GRAPH)
            step.replay = STEP_GRAPH and kind == "step" and step.side is not None
            self._steps[key] = step
            self._preload(kind, step)
        self._last = (a, b, kind, step)
        return step

    def _preload(self, kind: str, step: _Step) -> None:
        """Run a two_streams step's kernels once, one after the other on one stream (every rank together).

        CUDA loads a kernel lazily at its first launch, and that load may wait for the device to go
        idle. In two_streams the GEMM kernel waits for work of the communication stream (and the
        communication kernel for the GEMM's tiles), so a first launch there could deadlock (seen on
        2 x H200 as a hang). Run in sequence, each kernel finishes on its own: the arrival is announced
        first, the GEMM's joining programs move every tile, and the communication kernel finds none left
        (or moves all of them when GEMM programs do not join)."""
        if step.side is None or kind in self._preloaded:
            return
        if self.alg.writes_peers:
            self._announce_launch()()
        for launch in step.launches():
            launch()
        torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        self.check_errors()
        self._preloaded.add(kind)

    # ---- what the benchmark reads -----------------------------------------------------------------

    def bound_fast(self) -> bool:
        """Whether every launch of the last step went through the bound launcher (the low-host-cost path)."""
        return self._last is not None and all(x.fast for x in self._last[3].launches())

    def fast_refused(self) -> dict[str, str]:
        """Kernel name -> why the bound launcher was not used, for the last step's launches."""
        if self._last is None:
            return {}
        return {x.name: x.fast_refused for x in self._last[3].launches() if x.fast_refused}

    def compiled_kernels(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for step in self._steps.values():
            for launch in step.launches():
                if launch.compiled is not None:
                    out.setdefault(launch.name, launch.compiled)
        return out

    def info(self) -> dict[str, Any]:
        g = self.main_gemm
        return {"gemm_plan": g.plan.as_dict(), "gemm_config": g.config.as_dict(), "unused_options": g.unused_options,
                "tiles": self.tiles, "gemm_programs": self.gemm_programs, "comm_programs": self.comm_programs,
                "timer_kind": g.timer_kind}

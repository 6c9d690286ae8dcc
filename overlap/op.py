"""The overlapped GEMM as a library op: built once for a problem, then called like a matmul, step after step.

    from streamk_pgas import iris_ops
    from streamk_pgas.overlap import OverlapOp

    shmem = iris_ops.iris(OverlapOp.heap_bytes("all_reduce", 4096, 8192, 8192, "bf16", world_size))
    op = OverlapOp.create(shmem, "all_reduce", 4096, 8192, 8192, "bf16")   # every rank, same arguments
    a, b = op.a, op.b                      # this rank's shards (M x K/W and K/W x N here); or your own tensors
    c = op(a, b)                           # the whole C on every rank, queued on the current stream

Every rank builds the op with the same arguments and calls it the same number of times (it is a collective). A
call queues the step's kernels on the current stream and returns the op's C buffer (the same tensor every call,
overwritten by the next call: clone it to keep it). Stream semantics: when a rank's stream reaches the end of a
step, that rank's C is final, every peer's contribution included, and the next step may be queued at once, with
no host barrier; work queued on the stream between two steps may read or write C. A step can be captured in a
CUDA graph (`torch.cuda.graph`) after one eager call, and replayed.

A and B may be the op's own buffers (`op.a`, `op.b`: write your data into them, no copy is made) or any tensors of
the right shape, dtype and device; the launches for a pair of input buffers are bound once and reused while
buffers at the same addresses and row strides come back (the caller's tensors themselves are not kept: a dropped
activation's memory goes back to the allocator and the next one there reuses the step), so a step costs the host
one bound launch (or one graph replay). A tensor the GEMM cannot
read in place (stream_k.layout.aligned_rows: row-major, aligned rows and start) is copied into a padded staging
buffer of the op first (one device copy, queued on the current stream; op.a / op.b are not touched).

Shards, for W ranks and rank r: spec.sharding (each algorithm's family). What a step launches: overlap.modes (one
module per mode). With one rank there is nothing to communicate: every mode's step is the GEMM kernel alone on
every program, reading A and B in place and writing C (no zeroing, flags, waits or copies).

The op is built for a target (default: the heap's device, overlap.target); built for another one (e.g.
spec.KNOWN_TARGETS["mi300x"] on the CPU) it plans and binds its launches for that target, which `launches()`
lists (kernel, grid, argument values, options) without running anything; calling it is refused.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

import torch

from streamk_pgas.iris_ops import ErrorState, Iris
from streamk_pgas.overlap.algorithms import ALGORITHMS, AlgorithmRecord
from streamk_pgas.overlap.buffers import OpBuffers
from streamk_pgas.overlap.config import OverlapConfig, SlowModeWarning
from streamk_pgas.overlap.modes import MODE_STEPS, ModeSteps
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.resolution import heap_bytes, resolve_config
from streamk_pgas.overlap.step import KINDS, StepLaunches, StepRunner, step_graph_enabled
from streamk_pgas.overlap.target import device_target
from streamk_pgas.spec import AUTO, Target
from streamk_pgas.stream_k import StreamKGemm
from streamk_pgas.stream_k.dtypes import TORCH_DTYPES, output_dtype
from streamk_pgas.stream_k.gemm import BOUND_LAUNCHES
from streamk_pgas.stream_k.launch import BoundLaunch
from streamk_pgas.stream_k.layout import aligned_rows, buffer_key, padded_zeros, tma_rows
from streamk_pgas.stream_k.select import GemmChoice


class OverlapOp:
    """One distributed GEMM + communication problem, built once on a heap, called step after step."""

    def __init__(self, cfg: OverlapConfig, shmem: Iris, target: Target | None = None) -> None:
        self.shmem = shmem
        self.rank = shmem.get_rank()
        self.world = shmem.get_num_ranks()
        self.device = shmem.get_device()
        self.on_gpu = self.device.type == "cuda"
        here = device_target(self.device if self.on_gpu else None)
        self.target = target if target is not None else here
        self.runnable = self.target == here  # built for this process's device (else: listed, not run)
        self.cfg = resolve_config(cfg, self.target, self.world)
        cfg = self.cfg
        if (cfg.plan_info or {}).get("slow_mode") and self.runnable and self.rank == 0:  # predicted far behind
            warnings.warn(cfg.plan_info["slow_mode"], SlowModeWarning, stacklevel=2)
        assert cfg.kernel is not None and cfg.total_sms is not None and cfg.gemm_sms is not None
        self.algorithm: AlgorithmRecord = ALGORITHMS[cfg.algorithm]
        self.mode: ModeSteps = MODE_STEPS[cfg.mode]
        self.dtype = TORCH_DTYPES[cfg.datatype]
        self.out_dtype = output_dtype(cfg.datatype)
        self.buffers = OpBuffers.allocate(self.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, self.world, self.rank,
                                          cfg.kernel.BLK_M, cfg.kernel.BLK_N, self.mode.copies, shmem,
                                          self.device, self.dtype, self.out_dtype)
        self.parts = Parts(cfg, self.algorithm, self.buffers, self.target, self.rank, self.world,
                           shmem.get_heap_bases(), self.device)
        mode = self.mode.spec
        self.gemm_programs = mode.gemm_programs(cfg.total_sms, cfg.gemm_sms, self.world)
        # SMs the communication holds (none with one rank; copy_engine: none, its two one-program protocol
        # kernels last microseconds)
        self.comm_programs = mode.comm_programs(cfg.total_sms, cfg.gemm_sms, self.world)
        self.gemm: StreamKGemm = self.parts.gemm(self.gemm_programs)
        two_streams = self.on_gpu and self.runnable and self.world > 1 and self.mode.second_stream
        self.runner = StepRunner(self.device, two_streams)
        # the last BOUND_LAUNCHES steps by the buffers they read (address and row stride), and what a call on inputs
        # of a given buffer_key runs: no tensor of the caller's is kept (a dropped activation's memory goes back to
        # the allocator, and the next activation there finds its step)
        self._steps: OrderedDict[tuple, StepLaunches] = OrderedDict()
        self._calls: OrderedDict[tuple, tuple[StepLaunches, torch.Tensor | None, torch.Tensor | None]] = OrderedDict()
        self._preloaded: set[str] = set()
        self._staging: dict[str, torch.Tensor] = {}  # copies of user inputs the GEMM cannot read in place
        self.broken: str | None = None
        # Every rank's control block is zeroed before any peer's first step may write into it.
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
        shmem.barrier()

    @classmethod
    def create(cls, shmem: Iris, algorithm: str, m: int, n: int, k: int, datatype: str = "bf16",
               mode: str = AUTO, *, target: Target | None = None, **options: Any) -> OverlapOp:
        """An op with the defaults for its target (this device unless given); `options` set OverlapConfig fields."""
        return cls(OverlapConfig(algorithm, m, n, k, datatype, mode, **options), shmem, target)

    @staticmethod
    def heap_bytes(algorithm: str, m: int, n: int, k: int, datatype: str = "bf16", world_size: int = 1,
                   **options: Any) -> int:
        """Bytes of symmetric heap the op needs on each rank (size the heap with at least this)."""
        return heap_bytes(OverlapConfig(algorithm, m, n, k, datatype, **options), world_size)

    # ---- what a caller reads ------------------------------------------------------------------------------
    @property
    def a(self) -> torch.Tensor:
        """This rank's own A buffer (spec.sharding: its shard of A), rows padded."""
        return self.buffers.a

    @property
    def b(self) -> torch.Tensor:
        return self.buffers.b

    @property
    def c(self) -> torch.Tensor:
        """This rank's output (the same tensor every step)."""
        return self.buffers.c

    @property
    def gemm_choice(self) -> GemmChoice:
        """The GEMM of a step (stream_k.select's choice for this rank's problem on the step's GEMM programs):
        `StreamKGemm(op.gemm_choice.plan, dtype, op.gemm_choice.config)` runs the same GEMM alone."""
        return self.parts.choice(self.gemm_programs)

    # ---- calling ------------------------------------------------------------------------------------------
    def __call__(self, a: torch.Tensor | None = None, b: torch.Tensor | None = None) -> torch.Tensor:
        """Queue one step on the current stream; returns C (the op's buffer). Collective: every rank calls it."""
        if (a is None) != (b is None):  # one of the op's own buffers with a tensor of the caller's: a mistake
            raise ValueError(f"OverlapOp: {'b' if b is None else 'a'} is missing: give a and b, or neither (the op's "
                             "own op.a and op.b)")
        a = self.buffers.a if a is None else a
        b = self.buffers.b if b is None else b
        try:  # everything the checks and the step depend on (a non-tensor goes to the checks, which name it)
            key: tuple | None = (buffer_key(a), buffer_key(b))
        except AttributeError:
            key = None
        call = self._calls.get(key)
        if call is None:
            call = self._prepare_call(a, b)
            self._calls[key] = call
            if len(self._calls) > BOUND_LAUNCHES:
                self._calls.popitem(last=False)
        step, stage_a, stage_b = call
        if stage_a is not None:
            stage_a.copy_(a)
        if stage_b is not None:
            stage_b.copy_(b)
        self.run(step)
        if not step.released:  # bound now: its launches keep the inputs' addresses, not the caller's tensors
            step.released = True
            read = (a if stage_a is None else stage_a, b if stage_b is None else stage_b)
            for launch in step.kernels():
                launch.release(*read)
        return self.buffers.c

    def _prepare_call(self, a: Any, b: Any) -> tuple[StepLaunches, torch.Tensor | None, torch.Tensor | None]:
        """A call's step on inputs a and b (checked) and the staging buffers it copies them into first (None: read
        in place)."""
        stage_a, stage_b = self._staging_for(a, "a"), self._staging_for(b, "b")
        step = self.step_for("step", a if stage_a is None else stage_a, b if stage_b is None else stage_b)
        return step, stage_a, stage_b

    def _staging_for(self, t: Any, name: str) -> torch.Tensor | None:
        """None when the GEMM reads `t` as it is; else the op's padded staging buffer that a call copies it into
        (made at the first such call; op.a / op.b are left as they are)."""
        self._check_input(name, t)
        if self._in_place_rows(t):
            return None
        staged = self._staging.get(name)
        if staged is None:
            staged = padded_zeros(t.shape[0], t.shape[1], self.dtype, self.device)
            self._staging[name] = staged
        return staged

    def _in_place_rows(self, t: torch.Tensor) -> bool:
        """Whether the GEMM reads `t` where it is (stream_k.layout): with TMA, any 16-byte aligned rows; without,
        rows whose stride the kernel can vectorize."""
        kc = self.cfg.kernel
        assert kc is not None
        return tma_rows(t) if kc.tma else aligned_rows(t)

    def step_for(self, kind: str = "step", a: torch.Tensor | None = None,
                 b: torch.Tensor | None = None) -> StepLaunches:
        """The step of `kind` (overlap.step.KINDS) on inputs a and b (default: the op's own), its launches bound
        once per pair of input buffers. Collective the first time (a two_streams step is preloaded on every rank)."""
        a = self.buffers.a if a is None else a
        b = self.buffers.b if b is None else b
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
        self._check_input("a", a)
        self._check_input("b", b)
        key = (kind, a.data_ptr(), b.data_ptr(), a.stride(0), b.stride(0))
        step = self._steps.get(key)
        if step is None:
            step = self.mode.build(self.parts, kind, a, b)
            step.replay = step_graph_enabled() and kind == "step" and self.runner.comm_stream is not None
            self._steps[key] = step
            if len(self._steps) > BOUND_LAUNCHES:
                self._steps.popitem(last=False)
            self._preload(kind, step)
        else:
            self._steps.move_to_end(key)
        return step

    def run(self, step: StepLaunches) -> None:
        """Queue a step (from step_for) on the current stream."""
        self.check_usable()
        self.runner.run(step)

    def check_usable(self) -> None:
        """RuntimeError if a step may not be launched: a wait gave up (until reset()), or the op was built for
        another target."""
        if self.broken is not None:
            raise RuntimeError(f"OverlapOp is unusable: {self.broken}; call reset() on every rank")
        if not self.runnable:
            raise RuntimeError(f"OverlapOp was built for {self.target.name}, not this process's device "
                               f"({self.device}): its launches can be listed (launches()), not run")

    def prepare(self, kind: str = "step") -> None:
        """Bind the step's launches on the op's own buffers (and preload two_streams' kernels) now, not at the
        first call. Collective: every rank calls it."""
        self.step_for(kind)

    def launches(self, kind: str = "step", a: torch.Tensor | None = None, b: torch.Tensor | None = None
                 ) -> list[BoundLaunch]:
        """The Triton launches of a step of `kind` (kernel, grid `programs`, argument values `args`, `options`), in
        queue order: bound for inputs a and b (default: the op's own), never run (not collective)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
        a = self.buffers.a if a is None else a
        b = self.buffers.b if b is None else b
        self._check_input("a", a)
        self._check_input("b", b)
        return self.mode.build(self.parts, kind, a, b).kernels()

    def preload_launches(self) -> list[BoundLaunch]:
        """What a two-stream step's preload (below) launches before the step's own launches: the arrival announced,
        where the algorithm writes into the peers (none for other modes, or with one rank)."""
        if self.world > 1 and self.mode.second_stream and self.algorithm.writes_peers:
            return [self.parts.announce()]
        return []

    def _preload(self, kind: str, step: StepLaunches) -> None:
        """Run a two-stream step's kernels once, one after the other on one stream (every rank together).

        CUDA loads a kernel lazily at its first launch, and that load may wait for the device to go idle. In
        two_streams the GEMM kernel waits for work of the communication stream (and the communication kernel for
        the GEMM's tiles), so a first launch there could deadlock. Run in sequence, each kernel finishes on its
        own: the arrival is announced first, the GEMM's joining programs move every tile, and the communication
        kernel finds none left (or moves all of them when GEMM programs do not join)."""
        if step.side is None or self.runner.comm_stream is None or kind in self._preloaded:
            return
        for launch in [*self.preload_launches(), *step.launches()]:
            launch()
        torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        self.check_errors()
        self._preloaded.add(kind)

    # ---- checks and errors --------------------------------------------------------------------------------
    def _check_input(self, name: str, t: Any) -> None:
        bufs = self.buffers
        shape = tuple(bufs.a.shape if name == "a" else bufs.b.shape)
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"OverlapOp: {name} must be a torch.Tensor; got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(f"OverlapOp: {name} must have shape {shape} (this rank's shard of "
                             f"{self.cfg.algorithm}); got {tuple(t.shape)}")
        if t.dtype != self.dtype:
            raise ValueError(f"OverlapOp: {name} must be {self.dtype}; got {t.dtype}")
        if t.device != self.device:
            raise ValueError(f"OverlapOp: {name} must be on {self.device}; got {t.device}")

    @property
    def error_state(self) -> ErrorState:
        """The steps' collective error words (iris_ops.error_state): `peek()` between back-to-back steps."""
        return self.buffers.errors

    def check_errors(self) -> None:
        """Raise iris_ops.CollectiveError if a wait of any step so far gave up on any rank. Collective: every rank
        calls it, and every rank raises or none does (it drains this rank's device work and meets every rank,
        bounded by IRIS_OPS_TIMEOUT_S). The op is then unusable until reset()."""
        try:
            self.buffers.errors.check(self.shmem, timeout_s=self.cfg.timeout_s)
            for g in self.parts.gemms():  # with one rank the step is the GEMM alone, whose word is its own
                g.check_errors()
        except RuntimeError as exc:
            self.broken = str(exc)
            raise

    def reset(self) -> None:
        """Start the step protocol afresh after a failed step (every rank together; synchronises)."""
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        self.buffers.reset([t for g in self.parts.gemms() for t in (g.locks, g.errors)])
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
        self.shmem.barrier()
        self.broken = None

    def info(self) -> dict[str, Any]:
        """The GEMM's plan and config, the tiles and the program split of a step."""
        g = self.gemm
        return {"gemm_plan": g.plan.as_dict(), "gemm_config": g.config.as_dict(), "unused_options": g.unused_options,
                "tiles": self.buffers.tiles, "gemm_programs": self.gemm_programs,
                "comm_programs": self.comm_programs, "timer_kind": g.timer_kind, "target": self.target.name,
                "world_one": self.mode.world_one if self.world == 1 else None}
